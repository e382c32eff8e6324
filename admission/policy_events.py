"""Events a decision asks the webhook to record on other objects (pure).

A placement decision may carry ``events``: a list of
``{"object": {"apiVersion", "kind", "name", "namespace"?, "uid"?}, "reason",
"message", "type"?}``. The webhook records each one (best effort, rate-limited,
not on dry-run requests) as it records its own ``PlacementDenied``: the Karmada
pack uses it to warn a template when no cluster is allowed for its binding,
which itself is never denied. Anything malformed is a policy error
(:class:`InvalidEvents`), handled like an invalid patch: fail closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fedplace.common.events import InvolvedObject

__all__ = ["EVENT_TYPES", "MAX_EVENTS", "InvalidEvents", "PolicyEvent", "parse_events"]

EVENT_TYPES = frozenset({"Normal", "Warning"})
MAX_EVENTS = 100
REASON = re.compile(r"^[A-Z][A-Za-z0-9]{0,127}$")


class InvalidEvents(ValueError):
    """The decision's ``events`` are not a list of well-formed events."""


@dataclass(frozen=True)
class PolicyEvent:
    involved: InvolvedObject
    type: str
    reason: str
    message: str


def _text(value: Any, where: str, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise InvalidEvents(f"{where} must be a{' non-empty' if required else ''} string, got {value!r:.60}")
    return value


def parse_events(value: Any) -> list[PolicyEvent]:
    """The validated events of a decision's ``events`` (None: none)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidEvents(f"events must be a list, got {type(value).__name__}")
    if len(value) > MAX_EVENTS:
        raise InvalidEvents(f"events has {len(value)} items (at most {MAX_EVENTS})")
    out: list[PolicyEvent] = []
    for i, item in enumerate(value):
        where = f"events[{i}]"
        if not isinstance(item, dict):
            raise InvalidEvents(f"{where} must be an object, got {type(item).__name__}")
        ref = item.get("object")
        if not isinstance(ref, dict):
            raise InvalidEvents(f"{where}.object must be an object naming the involved object")
        involved = InvolvedObject(
            api_version=_text(ref.get("apiVersion"), f"{where}.object.apiVersion", required=True),
            kind=_text(ref.get("kind"), f"{where}.object.kind", required=True),
            name=_text(ref.get("name"), f"{where}.object.name", required=True),
            namespace=_text(ref.get("namespace"), f"{where}.object.namespace", required=False),
            uid=_text(ref.get("uid"), f"{where}.object.uid", required=False),
        )
        reason = _text(item.get("reason"), f"{where}.reason", required=True)
        if not REASON.match(reason):
            raise InvalidEvents(f"{where}.reason must be UpperCamelCase (at most 128 characters), got {reason!r:.60}")
        etype = item.get("type", "Warning")
        if etype not in EVENT_TYPES:
            raise InvalidEvents(f"{where}.type must be Normal or Warning, got {etype!r:.60}")
        out.append(PolicyEvent(involved, etype, reason, _text(item.get("message"), f"{where}.message", required=True)))
    return out
