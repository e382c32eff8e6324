"""The JSONPatch a decision puts on the admitted object — pure functions.

The merge step of the federation plugin (``merge.go``): the policy's
``annotations`` become RFC 6902 operations through
:func:`fedplace.common.annotations.annotation_json_patch` (the one function shared with
the remediator, so values never flap), then the policy's own ``patch``
operations, then each pack's ``patches[<pack>]`` in pack-name order, all
validated, are appended. The combined patch is proven to apply to the object
with the ``jsonpatch`` library before it is returned (unless it is only the
annotation merge, which applies and changes the object by construction).

Packs compose without knowing each other: each contributes its operations
under its own key of ``patches`` (a partial object rule in Rego), so two packs
never define the same complete rule, and the order is deterministic. A pack
must write operations that apply to the object as admitted (it cannot see
the others' operations): it patches fields no other pack owns.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import jsonpatch
import jsonpointer

from fedplace.common.annotations import annotation_json_patch

__all__ = ["ALLOWED_OPS", "ALLOWED_ROOTS", "InvalidPatch", "build_patch", "pack_patches", "validate_policy_patch"]

ALLOWED_OPS = ("add", "replace", "remove", "test")
ALLOWED_ROOTS = ("metadata", "spec")
MAX_OPS = 1000


class InvalidPatch(ValueError):
    """The policy's decision cannot be turned into a patch that applies."""


def _check_pointer(path: Any, where: str) -> list[str]:
    if not isinstance(path, str):
        raise InvalidPatch(f"{where}: path must be a string")
    if not path.startswith("/"):
        raise InvalidPatch(f"{where}: path {path!r} must start with '/'")
    try:
        parts = jsonpointer.JsonPointer(path).parts
    except jsonpointer.JsonPointerException as exc:
        raise InvalidPatch(f"{where}: path {path!r} is not a valid JSON pointer: {exc}") from exc
    if not parts or parts[0] not in ALLOWED_ROOTS:
        raise InvalidPatch(f"{where}: path {path!r} is outside /metadata and /spec")
    return parts


def validate_policy_patch(ops: Any, name: str = "patch") -> list[dict[str, Any]]:
    """Check the policy's ``patch``: a list of well-formed add/replace/remove/test
    operations under ``/metadata`` or ``/spec``. Returns a clean copy; errors
    name the operation as ``<name>[i]``.

    Replacing or removing ``/metadata`` or ``/spec`` as a whole, and changing
    ``/metadata/name``, ``namespace``, ``uid``, ``resourceVersion`` or
    ``generateName`` are refused: the API server owns those.
    """
    if not isinstance(ops, list):
        raise InvalidPatch(f"{name} must be a list of operations, got {type(ops).__name__}")
    if len(ops) > MAX_OPS:
        raise InvalidPatch(f"{name} has {len(ops)} operations (at most {MAX_OPS})")
    clean: list[dict[str, Any]] = []
    for i, op in enumerate(ops):
        where = f"{name}[{i}]"
        if not isinstance(op, dict):
            raise InvalidPatch(f"{where}: operation must be an object")
        name = op.get("op")
        if name not in ALLOWED_OPS:
            raise InvalidPatch(f"{where}: op {name!r} not allowed (only {', '.join(ALLOWED_OPS)})")
        allowed_keys = {"op", "path"} | ({"value"} if name in ("add", "replace", "test") else set())
        extra = set(op) - allowed_keys
        if extra:
            raise InvalidPatch(f"{where}: unexpected member(s) {', '.join(sorted(extra))} for {name}")
        parts = _check_pointer(op.get("path"), where)
        if len(parts) == 1 and name != "test":
            raise InvalidPatch(f"{where}: {name} of /{parts[0]} as a whole is not allowed")
        if (parts[0] == "metadata" and len(parts) == 2 and name != "test"
                and parts[1] in ("name", "namespace", "uid", "resourceVersion", "generateName")):
            raise InvalidPatch(f"{where}: {name} of /metadata/{parts[1]} is not allowed")
        if name in ("add", "replace", "test") and "value" not in op:
            raise InvalidPatch(f"{where}: {name} needs a value")
        try:
            clean.append(copy.deepcopy(op))
        except RecursionError as exc:
            raise InvalidPatch(f"{where}: value nested too deeply") from exc
    return clean


def pack_patches(patches: Any) -> list[dict[str, Any]]:
    """The validated operations of ``patches`` ({pack: [op…]}), pack by pack in name order."""
    if not isinstance(patches, dict):
        raise InvalidPatch(f"patches must be an object of pack name -> operations, got {type(patches).__name__}")
    out: list[dict[str, Any]] = []
    for pack in sorted(patches):
        out += validate_policy_patch(patches[pack], f"patches[{pack!r}]")
    if len(out) > MAX_OPS:
        raise InvalidPatch(f"patches have {len(out)} operations in all (at most {MAX_OPS})")
    return out


def build_patch(obj: Mapping[str, Any], annotations: Mapping[str, Any] | None,
                policy_patch: Any = None, patches: Any = None) -> list[dict[str, Any]]:
    """One RFC 6902 patch: the annotation merge, the policy's ``patch``, then each
    pack's ``patches`` in pack-name order, every operation validated.

    Empty when nothing changes. Raises :class:`InvalidPatch` when an operation
    is malformed or the combined patch does not apply to ``obj`` (e.g. a
    failing ``test``, a missing parent).
    """
    ops = annotation_json_patch(obj, annotations or {}) if annotations else []
    extra = validate_policy_patch(policy_patch) if policy_patch is not None else []
    extra += pack_patches(patches) if patches is not None else []
    if not extra:
        # Only the annotation merge: by construction it applies (it creates what is missing) and
        # changes the object (it holds only values that differ), so proving it on a deep copy of
        # the object, the costliest step of a decision, would prove nothing.
        return ops
    combined = ops + extra
    try:
        patched = jsonpatch.JsonPatch(combined).apply(obj, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError,
            IndexError, ValueError) as exc:
        raise InvalidPatch(f"patch does not apply to the object: {exc}") from exc
    except RecursionError as exc:  # a value nested beyond what copying it allows
        raise InvalidPatch("patch or object nested too deeply to apply") from exc
    if patched == obj:
        # Nothing changes (e.g. only tests, or the values are already set).
        return []
    for root in ALLOWED_ROOTS:
        if root in patched and not isinstance(patched[root], dict):
            raise InvalidPatch(f"patch leaves /{root} not an object")
    return combined
