"""Annotation values as policies decide them, and the patches that apply them.

One canonical serialisation serves admission and remediation alike, so a value
written by one is read back as equal by the other and never flaps:

* a string is stored as it is;
* anything else (object, list, number, bool, null) as canonical JSON — keys
  sorted, no spaces, non-ASCII kept.

All functions here are pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "annotation_json_patch",
    "annotation_merge_patch",
    "annotations_to_change",
    "canonical_value",
    "escape_json_pointer",
]


# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False), without building
# an encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_value(value: Any) -> str:
    """The string an annotation holds for a policy-returned ``value``."""
    if isinstance(value, str):
        return value
    return _CANONICAL.encode(value)


def escape_json_pointer(token: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901): ``~``→``~0``, ``/``→``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def annotations_to_change(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, str]:
    """The desired annotations (canonicalised) whose value differs from ``current``.

    The policy's value wins; annotations the policy does not mention are kept.
    """
    current = current or {}
    out: dict[str, str] = {}
    for key, value in desired.items():
        want = canonical_value(value)
        if current.get(key) != want:
            out[key] = want
    return out


def annotation_json_patch(obj: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RFC 6902 operations that merge ``desired`` into ``obj``'s annotations.

    Empty when nothing changes. Creates ``/metadata`` and
    ``/metadata/annotations`` when absent (or null), ``replace``s existing keys
    and ``add``s new ones, in sorted key order.
    """
    metadata = obj.get("metadata")
    current = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    changes = annotations_to_change(current if isinstance(current, Mapping) else None, desired)
    if not changes:
        return []
    ops: list[dict[str, Any]] = []
    if not isinstance(metadata, Mapping):
        ops.append({"op": "add", "path": "/metadata", "value": {}})
    if not isinstance(current, Mapping):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(sorted(changes.items()))})
        return ops
    for key in sorted(changes):
        op = "replace" if key in current else "add"
        ops.append({"op": op, "path": "/metadata/annotations/" + escape_json_pointer(key), "value": changes[key]})
    return ops


def annotation_merge_patch(changes: Mapping[str, str]) -> dict[str, Any]:
    """RFC 7386 merge patch that sets ``changes`` on ``metadata.annotations`` only."""
    return {"metadata": {"annotations": dict(changes)}}
