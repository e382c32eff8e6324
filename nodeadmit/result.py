"""The AdmitResult a plugin answers with, and the reasons the manager uses when a plugin fails.

Wire form (shell stdout, socket answer; the gRPC message has the same fields)::

    {"admit": true}
    {"admit": false, "reason": "HostNetworkForbidden", "message": "pod uses the host network"}

* ``admit`` is required and must be a boolean.
* ``reason`` is required when ``admit`` is false: a short token without
  whitespace (by convention CamelCase), at most :data:`MAX_REASON` characters.
  It becomes the Pod status ``reason`` and the Event reason, so tools (a
  descheduler, an alert) can match on it.
* ``message`` is optional free text.
* Other keys are ignored (room for later versions).

Anything else — not JSON, not an object, ``admit`` missing or not a boolean, a
rejection without a reason — is an :class:`InvalidResult`, and the manager
rejects the pod for it (fail closed).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AdmitResult",
    "InvalidResult",
    "MAX_REASON",
    "REASON_FAILED",
    "REASON_INVALID_RESULT",
    "REASON_MISSING",
    "REASON_NOT_EXECUTABLE",
    "REASON_TIMEOUT",
    "REASON_UNREACHABLE",
    "decode_result",
    "validate_result",
]

MAX_REASON = 128
_REASON = re.compile(r"^\S+$")

# Reasons of a rejection the manager decides itself because a plugin gave no
# valid answer (the message names the plugin and says what happened).
REASON_MISSING = "AdmissionPluginMissing"            # no binary / no socket file
REASON_NOT_EXECUTABLE = "AdmissionPluginNotExecutable"  # binary present, cannot be executed
REASON_TIMEOUT = "AdmissionPluginTimeout"            # no answer within the plugin's timeout
REASON_FAILED = "AdmissionPluginFailed"              # crashed: non-zero exit, signal, RPC error, reset
REASON_UNREACHABLE = "AdmissionPluginUnreachable"    # socket / port not accepting connections
REASON_INVALID_RESULT = "AdmissionPluginInvalidResult"  # garbage, incomplete or oversized answer


class InvalidResult(ValueError):
    """A plugin's answer is not a valid AdmitResult."""


@dataclass(frozen=True)
class AdmitResult:
    """One plugin's verdict on one pod (KEP-2823's ``AdmitResult``)."""

    admit: bool
    reason: str = ""
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"admit": self.admit}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def reject(cls, reason: str, message: str) -> "AdmitResult":
        return cls(False, reason, message)


def validate_result(doc: Any) -> AdmitResult:
    """An :class:`AdmitResult` from a decoded answer; raises :class:`InvalidResult`."""
    if not isinstance(doc, dict):
        raise InvalidResult(f"the answer is a JSON {type(doc).__name__}, not an object")
    if "admit" not in doc:
        raise InvalidResult("incomplete result: no \"admit\"")
    admit = doc["admit"]
    if not isinstance(admit, bool):
        raise InvalidResult(f"\"admit\" must be true or false, got {json.dumps(admit)[:40]}")
    reason = doc.get("reason", "")
    message = doc.get("message", "")
    if reason is None:
        reason = ""
    if message is None:
        message = ""
    if not isinstance(reason, str):
        raise InvalidResult("\"reason\" must be a string")
    if not isinstance(message, str):
        raise InvalidResult("\"message\" must be a string")
    if not admit and not reason:
        raise InvalidResult("incomplete result: a rejection without a \"reason\"")
    if reason and (len(reason) > MAX_REASON or not _REASON.match(reason)):
        raise InvalidResult(f"\"reason\" must be one word of at most {MAX_REASON} characters, got {reason[:40]!r}")
    return AdmitResult(admit, reason, message)


def decode_result(raw: bytes) -> AdmitResult:
    """Parse a plugin's answer (UTF-8 JSON); raises :class:`InvalidResult`."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        raise InvalidResult("no answer (empty output)")
    try:
        doc = json.loads(text)
    except ValueError:
        raise InvalidResult(f"not JSON: {_excerpt(text)}") from None
    return validate_result(doc)


def _excerpt(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")
