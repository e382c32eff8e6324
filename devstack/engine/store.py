"""OPA's base-document store semantics on a plain JSON tree. Pure functions.

Paths are lists of keys (already URL-unescaped). Errors are
:class:`StoreError` carrying the HTTP status and OPA's error code, so the
server maps them onto responses without knowing the rules:

* PUT creates missing parents (``mkdir -p``); a non-object on the way → 404.
* DELETE of a missing document → 404.
* PATCH applies RFC 6902 ``add`` / ``remove`` / ``replace`` relative to the
  path; the parent must exist, ``remove``/``replace`` targets must exist
  (404); ``-`` appends to an array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["StoreError", "delete_path", "get_path", "patch_path", "put_path", "parse_pointer"]

_MISSING = object()


@dataclass
class StoreError(Exception):
    status: int
    code: str
    message: str

    def __str__(self) -> str:
        return self.message


def _not_found(path: list[str]) -> StoreError:
    return StoreError(404, "resource_not_found", f"storage_not_found_error: {'/' + '/'.join(path)}: document does not exist")


def _step(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return node.get(key, _MISSING)
    if isinstance(node, list):
        if key.isdigit() and int(key) < len(node):
            return node[int(key)]
    return _MISSING


def get_path(root: dict[str, Any], path: list[str]) -> tuple[bool, Any]:
    """(found, value) of the document at ``path``."""
    node: Any = root
    for key in path:
        node = _step(node, key)
        if node is _MISSING:
            return False, None
    return True, node


def put_path(root: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """Write ``value`` at ``path``; returns the (possibly new) root."""
    if not path:
        if not isinstance(value, dict):
            raise StoreError(400, "invalid_parameter", "root document must be an object")
        return value
    node: Any = root
    for i, key in enumerate(path[:-1]):
        nxt = _step(node, key)
        if nxt is _MISSING:
            if not isinstance(node, dict):
                raise _not_found(path[: i + 1])
            nxt = node[key] = {}
        elif not isinstance(nxt, (dict, list)):
            raise _not_found(path[: i + 2])
        node = nxt
    last = path[-1]
    if isinstance(node, dict):
        node[last] = value
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    else:
        raise _not_found(path)
    return root


def delete_path(root: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """Remove the document at ``path`` (404 when missing); returns the root."""
    if not path:
        return {}
    found, parent = get_path(root, path[:-1])
    last = path[-1]
    if found and isinstance(parent, dict) and last in parent:
        del parent[last]
        return root
    if found and isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        del parent[int(last)]
        return root
    raise _not_found(path)


def parse_pointer(pointer: str) -> list[str]:
    """RFC 6901 pointer → keys (``~1`` → ``/``, ``~0`` → ``~``)."""
    if pointer in ("", "/"):
        return []
    if not pointer.startswith("/"):
        raise StoreError(400, "invalid_parameter", f"invalid patch path {pointer!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def patch_path(root: dict[str, Any], base: list[str], ops: Any) -> dict[str, Any]:
    """Apply JSON-patch ``ops`` relative to ``base``; all or nothing is the caller's copy's job."""
    if not isinstance(ops, list):
        raise StoreError(400, "invalid_parameter", "patch body must be a JSON array of operations")
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise StoreError(400, "invalid_parameter", "each patch operation needs op and path")
        kind = op["op"]
        path = base + parse_pointer(str(op["path"]))
        if kind == "add":
            if "value" not in op:
                raise StoreError(400, "invalid_parameter", "add needs a value")
            if not path:
                root = put_path(root, [], op["value"])
                continue
            found, parent = get_path(root, path[:-1])
            if not found or not isinstance(parent, (dict, list)):
                raise _not_found(path[:-1])
            last = path[-1]
            if isinstance(parent, dict):
                parent[last] = op["value"]
            elif last == "-":
                parent.append(op["value"])
            elif last.isdigit() and int(last) <= len(parent):
                parent.insert(int(last), op["value"])
            else:
                raise _not_found(path)
        elif kind == "remove":
            root = delete_path(root, path)
        elif kind == "replace":
            if "value" not in op:
                raise StoreError(400, "invalid_parameter", "replace needs a value")
            found, _ = get_path(root, path)
            if not found:
                raise _not_found(path)
            root = put_path(root, path, op["value"])
        else:
            raise StoreError(400, "invalid_parameter", f"unsupported patch operation {kind!r}")
    return root
