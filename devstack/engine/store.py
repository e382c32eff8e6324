"""OPA's base-document store semantics on a persistent JSON tree. Pure functions.

Contract:

* A path is a tuple of keys, already URL-unescaped (``("kubernetes", "pods")``).
* Trees are never mutated: every write returns a new root that shares every
  untouched node with the old one (path copying). A caller may therefore keep
  an old root as a snapshot for free, and a failed multi-operation PATCH is
  discarded by simply not using its result.
* Errors are :class:`StoreError` with the HTTP status and body OPA 1.x sends
  (``v1/storage/inmem``, ``v1/server/writer``):

  - missing document / parent, bad array index → 404 ``resource_not_found``
    (``storage_not_found_error: …``);
  - PUT below a scalar or array (``MakeDir``) → 404 ``resource_conflict``
    (``storage_write_conflict_error: <path>``);
  - root not an object, root removal, ``-`` with remove/replace → 400
    ``invalid_parameter`` (``storage_invalid_patch_error: …``);
  - unknown patch op / bad patch path → 400 ``invalid_parameter``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import unquote

__all__ = [
    "MISSING", "Path", "StoreError", "apply_patch", "bad_request", "delete", "fmt_path", "lookup", "parse_patch",
    "parse_pointer", "parse_url_path", "put", "read_path",
]

Path = tuple[str, ...]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_INT = re.compile(r"^[+-]?\d+$")


@dataclass
class StoreError(Exception):
    """A store failure carrying OPA's HTTP status, error code and message."""

    status: int
    code: str
    message: str

    def __str__(self) -> str:
        return self.message


def fmt_path(path: Iterable[str]) -> str:
    return "/" + "/".join(path)


def _not_found(path: Path | None = None, hint: str = "document does not exist") -> StoreError:
    msg = f"{fmt_path(path)}: {hint}" if path is not None else hint
    return StoreError(404, "resource_not_found", f"storage_not_found_error: {msg}")


def _write_conflict(path: Path) -> StoreError:
    return StoreError(404, "resource_conflict", f"storage_write_conflict_error: {fmt_path(path)}")


def _invalid_patch(message: str) -> StoreError:
    return StoreError(400, "invalid_parameter", f"storage_invalid_patch_error: {message}")


def bad_request(message: str) -> StoreError:
    return StoreError(400, "invalid_parameter", message)


# -- paths ---------------------------------------------------------------------------------


def parse_url_path(raw: str) -> Path:
    """Segments of a raw (still escaped) URL path; ``%2F`` stays inside its segment."""
    return tuple(unquote(s, errors="strict") for s in raw.split("/") if s != "")


def parse_pointer(pointer: str) -> Path:
    """A PATCH op's path, relative to the URL path. OPA trims slashes, then unescapes
    ``~1`` → ``/`` and ``~0`` → ``~`` (and URL escapes) in each segment."""
    trimmed = pointer.strip("/")
    if not trimmed:
        return ()
    out = []
    for seg in trimmed.split("/"):
        try:
            seg = unquote(seg, errors="strict")
        except UnicodeDecodeError as exc:
            raise bad_request(f"bad patch path: {pointer}") from exc
        out.append(seg.replace("~1", "/").replace("~0", "~"))
    return tuple(out)


# -- reads -----------------------------------------------------------------------------------


def _index(node: list[Any], key: str, path: Path) -> int:
    if not _INT.match(key):
        raise _not_found(path, "array index must be integer")
    idx = int(key)
    if idx < 0 or idx >= len(node):
        raise _not_found(path, "array index out of range")
    return idx


def _walk(root: Any, path: Path, numbers_match_keys: bool) -> Any:
    """Follow ``path`` from ``root``; :data:`MISSING` when it leads nowhere."""
    node = root
    for key in path:
        if isinstance(node, dict):
            if not numbers_match_keys and _INT.match(key):
                return MISSING
            node = node.get(key, MISSING)
            if node is MISSING:
                return MISSING
        elif isinstance(node, list):
            if not _INT.match(key) or not 0 <= int(key) < len(node):
                return MISSING
            node = node[int(key)]
        else:
            return MISSING
    return node


def lookup(root: Any, path: Path) -> Any:
    """The base document at ``path`` (storage semantics), or :data:`MISSING`."""
    return _walk(root, path, numbers_match_keys=True)


def read_path(root: Any, path: Path) -> Any:
    """The document at ``path`` as a ``GET /v1/data`` query sees it, or :data:`MISSING`.

    OPA turns integer-looking URL segments into number terms, so they index
    arrays but never match an object's (string) key.
    """
    return _walk(root, path, numbers_match_keys=False)


# -- writes ----------------------------------------------------------------------------------

ADD, REMOVE, REPLACE = "add", "remove", "replace"


def _write_at(node: Any, path: Path, i: int, op: str, value: Any) -> Any:
    key = path[i]
    last = i == len(path) - 1
    if isinstance(node, dict):
        if last:
            if op in (REMOVE, REPLACE) and key not in node:
                raise _not_found()
            new = dict(node)
            if op == REMOVE:
                del new[key]
            else:
                new[key] = value
            return new
        if key not in node:
            raise _not_found()
        new = dict(node)
        new[key] = _write_at(node[key], path, i + 1, op, value)
        return new
    if isinstance(node, list):
        if last:
            if key == "-" or key == str(len(node)):
                if op != ADD:
                    raise _invalid_patch(f"{fmt_path(path)}: invalid patch path")
                return [*node, value]
            pos = _index(node, key, path)
            if op == ADD:
                return [*node[:pos], value, *node[pos:]]
            if op == REMOVE:
                return [*node[:pos], *node[pos + 1:]]
            new_list = list(node)
            new_list[pos] = value
            return new_list
        pos = _index(node, key, path)
        new_list = list(node)
        new_list[pos] = _write_at(node[pos], path, i + 1, op, value)
        return new_list
    raise _not_found()


def write(root: dict[str, Any], op: str, path: Path, value: Any = None) -> dict[str, Any]:
    """One storage write (``add``/``remove``/``replace``) as OPA's in-memory store does it."""
    if not path:
        if op == REMOVE:
            raise _invalid_patch("root cannot be removed")
        if not isinstance(value, dict):
            raise _invalid_patch("root must be object")
        return value
    return _write_at(root, path, 0, op, value)


def _make_dir(root: dict[str, Any], path: Path) -> dict[str, Any]:
    if not path:
        return root
    node = lookup(root, path)
    if node is MISSING:
        root = _make_dir(root, path[:-1])
        return write(root, ADD, path, {})
    if isinstance(node, dict):
        return root
    raise _write_conflict(path)


def put(root: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """``PUT /v1/data/<path>``: create missing parents (``mkdir -p``), then add.

    As in OPA, an existing array element is *inserted before* (an ``add``).
    """
    if path and lookup(root, path) is MISSING:
        root = _make_dir(root, path[:-1])
    return write(root, ADD, path, value)


def delete(root: dict[str, Any], path: Path) -> dict[str, Any]:
    """``DELETE /v1/data/<path>``: 404 when missing, 400 for the root."""
    if path and lookup(root, path) is MISSING:
        raise _not_found(path)
    return write(root, REMOVE, path)


def parse_patch(ops: Any) -> list[tuple[str, Path, Any]]:
    """Validate a JSON-patch body: ``[(op, relative path, value)]``."""
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal patch: body must be an array of operations")
    out = []
    for raw in ops:
        if not isinstance(raw, dict):
            raise bad_request("json: cannot unmarshal patch: operation must be an object")
        op = raw.get("op")
        if op not in (ADD, REMOVE, REPLACE):
            raise bad_request(f"bad patch operation: {op if isinstance(op, str) else ''}")
        pointer = raw.get("path", "")
        if not isinstance(pointer, str):
            raise bad_request("json: cannot unmarshal patch: path must be a string")
        out.append((op, parse_pointer(pointer), raw.get("value")))
    return out


def apply_patch(root: dict[str, Any], base: Path, ops: Any) -> dict[str, Any]:
    """``PATCH /v1/data/<base>``: every op relative to ``base``, in order, all or nothing."""
    for op, rel, value in parse_patch(ops):
        root = write(root, op, base + rel, value)
    return root
