"""Structured logging: one JSON object per line on stderr.

Fields passed with ``extra={...}`` become top-level keys. Keys that look like
credentials (token, password, secret, authorization) are replaced by
``"[redacted]"`` so no secret is ever logged by accident.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Mapping

import orjson

__all__ = ["JsonFormatter", "configure_logging"]

_STANDARD = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime", "taskName"}
_SECRET_WORDS = ("token", "password", "secret", "authorization")
_SECRET_KEYS: dict[str, bool] = {}  # extra field name -> redact? (the names are the code's, a small set)


def _secret(key: str) -> bool:
    found = _SECRET_KEYS.get(key)
    if found is None:
        found = any(w in key.lower() for w in _SECRET_WORDS)
        if len(_SECRET_KEYS) < 4096:
            _SECRET_KEYS[key] = found
    return found


class JsonFormatter(logging.Formatter):
    """A log line costs the webhook's request path little: the timestamp's seconds are
    formatted once per second, field names are checked for credentials once, and the line
    is serialised by ``orjson`` (the standard library's ``json`` for anything it refuses or
    would write as non-ASCII, so every line stays ASCII as before)."""

    def __init__(self, component: str, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.component = component
        self.fields = dict(fields or {})  # on every line, after the standard keys
        self._second = -1
        self._stamp = ""

    def _ts(self, created: float, msecs: float) -> str:
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._stamp}.{int(msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": self._ts(record.created, record.msecs),
            "level": record.levelname.lower(),
            "component": self.component,
            "logger": record.name,
            "msg": record.getMessage(),
            **self.fields,
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD or key[:1] == "_":
                continue
            doc[key] = "[redacted]" if _secret(key) else value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        try:
            line = orjson.dumps(doc, default=str).decode()
            if line.isascii():
                return line
        except TypeError:  # orjson.JSONEncodeError: e.g. a non-string key, an integer beyond 64 bits
            pass
        return json.dumps(doc, default=str, separators=(",", ":"))


def configure_logging(component: str, level: str = "info", fields: Mapping[str, Any] | None = None) -> None:
    """Send every log record to stderr as JSON lines at ``level`` (``fields`` on every line)."""
    # The lines carry none of what these collect per record (caller's file and line, thread,
    # process), so skip collecting it (logging's documented optimisations).
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component, fields))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log is noisy and duplicates our own request metrics.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
