"""Configuration parsing shared by the components: typed getters that name the field at fault.

Every component validates its file (YAML or JSON) the same way: unknown keys
are errors, each value is checked for its type and range, and a failure
raises :class:`ConfigError` naming the setting (``opa.timeout: -1.0: must be > 0``).
The ``opa`` and ``retry`` sections have one format everywhere
(:func:`opa_section`, :func:`retry_section`)::

    opa:
      url: https://opa:8181                  # server root, …/v1, or a full decision URL
      decision_path: /v1/data/…             # default: the component's
      token_file: /var/run/secrets/opa/token # or token: … (not both)
      ca_file: /tls/opa-ca.crt
      timeout: 2                             # seconds, per attempt
    retry: {initial: 0.05, max: 1.0, jitter: 0.05}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit, urlunsplit

import yaml

from fedplace.common.retry import Backoff

if TYPE_CHECKING:
    from fedplace.common.opa_client import OpaSettings

__all__ = [
    "ConfigError",
    "OpaEndpoint",
    "integer",
    "number",
    "only",
    "opa_section",
    "read_config_file",
    "readable",
    "retry_section",
    "section",
    "split_opa_url",
    "string",
]

E = TypeVar("E", bound="OpaEndpoint")

OPA_KEYS = ("url", "decision_path", "token", "token_file", "ca_file", "timeout")


class ConfigError(ValueError):
    """Invalid configuration; ``field`` names the setting at fault."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class OpaEndpoint:
    """Where and how to ask OPA for one decision document."""

    url: str = "http://127.0.0.1:8181"
    decision_path: str = "/v1/data"
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    ca_file: str | None = None
    timeout: float = 2.0

    @property
    def decision_url(self) -> str:
        return self.url.rstrip("/") + self.decision_path

    @property
    def query_path(self) -> str:
        """The document path under ``/v1/data/`` (``io/k8s/federation/admission``)."""
        return self.decision_path[len("/v1/data/"):].strip("/")

    def settings(self) -> "OpaSettings":
        """Client settings for :class:`fedplace.common.opa_client.OpaClient`."""
        # not at import: the plugin manager's script never needs aiohttp
        from fedplace.common.opa_client import OpaSettings

        return OpaSettings(url=self.url, token=self.token, token_file=self.token_file, ca_file=self.ca_file,
                           timeout=self.timeout)


def split_opa_url(url: str, field_name: str = "opa.url") -> tuple[str, str | None]:
    """Split an OPA URL into (server root, decision path or None).

    ``http://opa:8181``, ``http://opa:8181/v1`` → (root, None);
    ``http://opa:8181/v1/data/io/k8s/x`` → (root, ``/v1/data/io/k8s/x``).
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(field_name, "must be a non-empty URL")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ConfigError(field_name, f"{url!r}: scheme must be http or https")
    if not parts.hostname:
        raise ConfigError(field_name, f"{url!r}: no host")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise ConfigError(field_name, f"{url!r}: {exc}") from exc
    if parts.query or parts.fragment:
        raise ConfigError(field_name, f"{url!r}: no query or fragment allowed")
    path = parts.path.rstrip("/")
    decision: str | None = None
    idx = path.find("/v1/data/")
    if idx >= 0:
        decision = path[idx:]
        path = path[:idx]
    elif path.endswith("/v1"):
        path = path[: -len("/v1")]
    root = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    return root, decision


def number(section: Mapping[str, Any], key: str, name: str, default: float, *, positive: bool = True,
           maximum: float | None = None) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(name, f"{value!r}: must be a number")
    value = float(value)
    if positive and value <= 0:
        raise ConfigError(name, f"{value}: must be > 0")
    if value < 0:
        raise ConfigError(name, f"{value}: must be >= 0")
    if maximum is not None and value > maximum:
        raise ConfigError(name, f"{value}: must be <= {maximum:g}")
    return value


def integer(section: Mapping[str, Any], key: str, name: str, default: int | None, *, minimum: int = 0,
            maximum: int | None = None) -> int:
    """``section[key]`` (or ``default``) as an integer from ``minimum`` to ``maximum``; a bool,
    a float or a missing value without a default is a :class:`ConfigError` naming the range."""
    value = section.get(key, default)
    bounds = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
            maximum is not None and value > maximum):
        raise ConfigError(name, f"{value!r}: must be an integer {bounds}")
    return value


def string(section: Mapping[str, Any], key: str, name: str, default: str | None = None) -> str | None:
    value = section.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(name, f"must be a string, got {type(value).__name__}")
    return value or None


def section(doc: Mapping[str, Any], key: str, name: str | None = None) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(name or key, "must be a mapping")
    return dict(value)


def only(section: Mapping[str, Any], allowed: Sequence[str], prefix: str) -> None:
    for key in section:
        if key not in allowed:
            name = f"{prefix}.{key}" if prefix else str(key)
            raise ConfigError(name, f"unknown setting (expected one of: {', '.join(allowed)})")


def readable(path: str | None, name: str) -> str | None:
    if path is None:
        return None
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ConfigError(name, f"{path!r}: not a readable file")
    return path


def opa_section(doc: Mapping[str, Any], endpoint: type[E], *, default_decision_path: str,
                max_timeout: float | None = None) -> E:
    """The ``opa`` section of ``doc`` (see the module docstring), validated."""
    opa_doc = section(doc, "opa")
    only(opa_doc, OPA_KEYS, "opa")
    root, path_in_url = split_opa_url(opa_doc.get("url", endpoint.url))
    decision_path = string(opa_doc, "decision_path", "opa.decision_path")
    if decision_path and path_in_url and decision_path != path_in_url:
        raise ConfigError("opa.decision_path", f"conflicts with the path in opa.url ({path_in_url})")
    decision_path = decision_path or path_in_url or default_decision_path
    if not decision_path.startswith("/v1/data/") or len(decision_path.strip("/")) <= len("v1/data"):
        raise ConfigError("opa.decision_path", f"{decision_path!r}: must start with /v1/data/ and name a document")
    token = string(opa_doc, "token", "opa.token")
    token_file = readable(string(opa_doc, "token_file", "opa.token_file"), "opa.token_file")
    if token and token_file:
        raise ConfigError("opa.token", "set opa.token or opa.token_file, not both")
    return endpoint(
        url=root,
        decision_path="/" + decision_path.strip("/"),
        token=token,
        token_file=token_file,
        ca_file=readable(string(opa_doc, "ca_file", "opa.ca_file"), "opa.ca_file"),
        timeout=number(opa_doc, "timeout", "opa.timeout", endpoint.timeout, maximum=max_timeout),
    )


def retry_section(doc: Mapping[str, Any]) -> Backoff:
    """The ``retry`` section of ``doc``: exponential backoff with jitter."""
    retry_doc = section(doc, "retry")
    only(retry_doc, ("initial", "max", "jitter"), "retry")
    initial = number(retry_doc, "initial", "retry.initial", Backoff.initial)
    maximum = number(retry_doc, "max", "retry.max", Backoff.maximum)
    if maximum < initial:
        raise ConfigError("retry.max", f"{maximum} is below retry.initial ({initial})")
    jitter = number(retry_doc, "jitter", "retry.jitter", Backoff.jitter, positive=False)
    return Backoff(initial=initial, maximum=maximum, jitter=jitter)


def read_config_file(path: str, field_name: str = "--config") -> dict[str, Any]:
    """Parse a YAML or JSON file (JSON is YAML); empty file → {}."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(field_name, f"{path!r}: {exc.strerror or exc}") from exc
    try:
        doc = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        try:
            doc = json.loads(text)
        except ValueError:
            raise ConfigError(field_name, f"{path!r}: not valid YAML or JSON: {exc}") from exc
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(field_name, f"{path!r}: top level must be a mapping")
    return doc
