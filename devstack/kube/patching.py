"""Patch application, pure functions over JSON-like values.

* :func:`merge_patch` — RFC 7386 JSON merge patch.
* :func:`json_patch` — RFC 6902 via ``jsonpatch``; raises :class:`PatchDecodeError`
  for a malformed patch document (the server answers 400) and
  :class:`PatchApplyError` when an operation fails, e.g. a failed ``test`` or a
  missing parent (the server answers 422).
* :func:`strategic_merge_patch` — a SIMPLIFIED strategic merge patch: maps are
  merged recursively, ``null`` deletes a key, lists are replaced — except lists
  named in :data:`MERGE_KEYS` (containers by ``name``, ownerReferences by ``uid``,
  conditions by ``type``, …), whose map elements are merged by that key, and
  ``metadata.finalizers``, merged as a set. Directives (``$patch``,
  ``$setElementOrder/…``, ``$retainKeys``, ``$deleteFromPrimitiveList/…``) are
  dropped, except ``$patch: replace|delete`` on a map.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer


class PatchDecodeError(ValueError):
    """The patch document itself is malformed (400)."""


class PatchApplyError(ValueError):
    """The patch is well formed but cannot be applied (422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: returns a new value; neither input is modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: returns the patched copy."""
    if not isinstance(ops, list):
        raise PatchDecodeError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchDecodeError("unexpected kind of patch operation: missing 'op'")
        if op["op"] not in ("add", "remove", "replace", "move", "copy", "test"):
            raise PatchDecodeError(f"Unexpected kind: {op['op']}")
        if "path" not in op:
            raise PatchDecodeError(f"{op['op']} operation does not have a path")
    try:
        return jsonpatch.JsonPatch(ops).apply(copy.deepcopy(target))
    except jsonpatch.JsonPatchTestFailed as exc:
        raise PatchApplyError(f"testing value failed: {exc}") from exc
    except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as exc:
        raise PatchApplyError(str(exc)) from exc
    except jsonpatch.InvalidJsonPatch as exc:
        raise PatchDecodeError(str(exc)) from exc
    except (KeyError, IndexError, TypeError) as exc:
        raise PatchApplyError(f"unable to apply patch: {exc}") from exc


# list field name → merge key (the patchMergeKey of the built-in types that matter here)
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "conditions": "type",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
SET_LISTS = {"finalizers"}


def _merge_list(current: list, patch: list, key: str) -> list:
    if not all(isinstance(x, dict) and key in x for x in patch) or not all(isinstance(x, dict) for x in current):
        return _strip(patch)
    out = list(current)
    index = {x.get(key): i for i, x in enumerate(out)}
    for item in patch:
        directive = item.get("$patch")
        i = index.get(item[key])
        if directive == "delete":
            if i is not None:
                out[i] = None
            continue
        if i is None:
            index[item[key]] = len(out)
            out.append(_strip(item))
        else:
            out[i] = strategic_merge_patch(out[i], item)
    return [x for x in out if x is not None]


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Simplified SMP (see module docstring). Returns a new value."""
    if not isinstance(patch, dict):
        return _strip(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip(patch)
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and isinstance(result.get(key), list):
            if key in MERGE_KEYS:
                result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
            elif key in SET_LISTS and all(isinstance(v, str) for v in value):
                result[key] = list(dict.fromkeys([*result[key], *value]))
            else:
                result[key] = _strip(value)
        else:
            result[key] = _strip(value)
    return result
