"""AdmissionReview (admission.k8s.io/v1) in and out — pure functions.

:func:`parse_review` validates the body the API server POSTs and returns an
:class:`AdmissionRequest`, or raises :class:`BadReview` (HTTP 400) saying what
is wrong. :func:`review_response` builds the answer: same apiVersion and kind,
``response.uid`` = ``request.uid``, ``patchType: JSONPatch`` only together
with a patch, as the API server requires.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from fedplace.common.jsonsafe import DEFAULT_MAX_DEPTH, JsonRejected, dumps, loads_bounded

__all__ = ["AdmissionRequest", "BadReview", "SUPPORTED_API_VERSIONS", "parse_review", "review_response"]

SUPPORTED_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class BadReview(ValueError):
    """The request body is not a usable AdmissionReview; ``status`` is the HTTP code."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` the webhook uses."""

    api_version: str
    uid: str
    operation: str
    kind: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    user: str = ""

    @property
    def kind_name(self) -> str:
        return str(self.kind.get("kind", "")) or str((self.object or {}).get("kind", ""))

    def describe(self) -> str:
        """``ReplicaSet default/nginx`` for logs and messages."""
        meta = (self.object or {}).get("metadata") or {}
        name = self.name or meta.get("name") or meta.get("generateName") or ""
        where = f"{self.namespace}/{name}" if self.namespace else str(name)
        return f"{self.kind_name} {where}".strip()


def parse_review(body: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> AdmissionRequest:
    """Parse and validate an AdmissionReview request body (nesting bounded by ``max_depth``
    before parsing; NaN/Infinity refused: see :mod:`fedplace.common.jsonsafe`)."""
    if not body.strip():
        raise BadReview("empty body: expected an AdmissionReview JSON document")
    try:
        doc = loads_bounded(body, max_depth)
    except JsonRejected as exc:
        raise BadReview(f"body is not acceptable JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    api_version = doc.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        raise BadReview(f"apiVersion must be admission.k8s.io/v1, got {api_version!r}")
    if doc.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be AdmissionReview, got {doc.get('kind')!r}")
    req = doc.get("request")
    if not isinstance(req, dict):
        raise BadReview("request is missing or not an object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or empty")
    operation = req.get("operation")
    if operation not in OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(OPERATIONS)}, got {operation!r}")
    obj = req.get("object")
    old = req.get("oldObject")
    if obj is not None and not isinstance(obj, dict):
        raise BadReview("request.object must be an object or null")
    if old is not None and not isinstance(old, dict):
        raise BadReview("request.oldObject must be an object or null")
    if operation in ("CREATE", "UPDATE") and obj is None:
        raise BadReview(f"request.object is required for {operation}")
    if obj is not None and "metadata" in obj and obj["metadata"] is not None and not isinstance(obj["metadata"], dict):
        raise BadReview("request.object.metadata must be an object")
    kind = req.get("kind") if isinstance(req.get("kind"), dict) else {}
    resource = req.get("resource") if isinstance(req.get("resource"), dict) else {}
    for key in ("name", "namespace", "subResource"):
        if req.get(key) is not None and not isinstance(req.get(key), str):
            raise BadReview(f"request.{key} must be a string")
    dry_run = req.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise BadReview("request.dryRun must be a boolean")
    user_info = req.get("userInfo") if isinstance(req.get("userInfo"), dict) else {}
    return AdmissionRequest(
        api_version=str(api_version),
        uid=uid,
        operation=str(operation),
        kind=dict(kind),
        resource=dict(resource),
        sub_resource=req.get("subResource") or "",
        name=req.get("name") or "",
        namespace=req.get("namespace") or "",
        object=obj,
        old_object=old,
        dry_run=bool(dry_run),
        user=str(user_info.get("username", "")),
    )


def review_response(
    request: AdmissionRequest,
    *,
    allowed: bool,
    patch: list[dict[str, Any]] | None = None,
    code: int = 403,
    message: str = "",
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The AdmissionReview answering ``request``."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": allowed}
    if allowed and patch:
        raw = dumps(patch)
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(raw).decode("ascii")
    if not allowed:
        response["status"] = {
            "code": code,
            "reason": "Forbidden" if code == 403 else "InternalError",
            "message": message,
        }
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}
