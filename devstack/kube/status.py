"""Kubernetes ``Status`` documents and the exception that carries them.

Every error the server answers is a complete ``Status`` (kind, apiVersion,
metadata, status, message, reason, code; details where kube-apiserver has
them), built by the helpers below with the real server's wording.
"""

from __future__ import annotations

from typing import Any

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(code: int, message: str, reason: str | None = None,
                details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failure ``Status`` with every field clients rely on."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown" if code >= 400 else ""),
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


class ApiError(Exception):
    """Raised anywhere in request handling; the server answers ``self.body``."""

    def __init__(self, code: int, message: str, reason: str | None = None,
                 details: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_body(code, message, reason, details)
        self.headers = headers or {}


def qualified(group: str, plural: str) -> str:
    """``configmaps`` or ``deployments.apps``: how the server names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def _details(group: str, plural: str, name: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if group:
        d["group"] = group
    d["kind"] = plural
    return d


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(404, f'{qualified(group, plural)} "{name}" not found', "NotFound", _details(group, plural, name))


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(409, f'{qualified(group, plural)} "{name}" already exists', "AlreadyExists",
                    _details(group, plural, name))


def conflict(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        "Conflict", _details(group, plural, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, "BadRequest")


_CAUSE_REASONS = (("Required value", "FieldValueRequired"), ("Too long", "FieldValueTooLong"),
                  ("Forbidden", "FieldValueForbidden"), ("Unsupported value", "FieldValueNotSupported"),
                  ("Duplicate value", "FieldValueDuplicate"), ("Too many", "FieldValueTooMany"))


def _cause_reason(message: str) -> str:
    return next((reason for prefix, reason in _CAUSE_REASONS if message.startswith(prefix)), "FieldValueInvalid")


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]] | list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are (field, message) pairs, as field.ErrorList renders them
    (the field ``[]`` is the whole object), or (field, message, reason) where the message does not
    tell the reason (FieldValueTypeInvalid reads "Invalid value"). The message names the kind
    qualified by its group."""
    msgs = [f"{c[0]}: {c[1]}" for c in causes]
    text = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": c[2] if len(c) > 2 else _cause_reason(c[1]), "message": c[1], "field": c[0]}
                         for c in causes]
    qualified_kind = f"{kind}.{group}" if group else kind
    return ApiError(422, f'{qualified_kind} "{name}" is invalid: {text}', "Invalid", details)


def forbidden(group: str, plural: str, name: str, message: str) -> ApiError:
    """403 Forbidden, as an admission plugin or the storage refuses: ``pods "x" is forbidden: …``."""
    return ApiError(403, f'{qualified(group, plural)} "{name}" is forbidden: {message}', "Forbidden",
                    _details(group, plural, name))


def internal(message: str) -> ApiError:
    return ApiError(500, f"Internal error occurred: {message}", "InternalError",
                    {"causes": [{"message": message}]})


NOT_FOUND_PATH = ApiError(404, "the server could not find the requested resource", "NotFound", {})


class PageNotFound(Exception):
    """A path no API group serves: Go's mux answers it in plain text, not with a Status."""

    TEXT = "404 page not found\n"
