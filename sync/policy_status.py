"""A policy ConfigMap's load status: the ``fedplace.io/policy-status`` annotation.

``{"status":"ok"}`` or ``{"status":"error","errors":[…]}`` (canonical JSON,
bounded by :func:`status_value`), written by :class:`StatusWriter` whenever it
changes and until the API server took it, with a Warning Event carrying the
full first error. The same state is a gauge: ``fedplace_sync_policy_modules``
counts each ConfigMap's modules loaded (``status="ok"``) and failing now
(``status="error"``), set on every status write and removed with the ConfigMap
(:func:`publish_modules`, :func:`forget_modules`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
from kubernetes_asyncio import client
from prometheus_client import Gauge

from fedplace.common.annotations import canonical_value
from fedplace.common.events import EventRecorder, involved_object
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.sync.policy_check import module_error

__all__ = ["MAX_STATUS_BYTES", "MODULES", "STATUS_ANNOTATION", "ConfigMapState", "StatusWriter",
           "first_error_text", "forget_modules", "publish_modules", "status_value"]

log = logging.getLogger(__name__)

STATUS_ANNOTATION = "fedplace.io/policy-status"
# The status annotation stays far below the API server's 256 KiB for all annotations together.
MAX_STATUS_BYTES = 32 * 1024
MAX_STATUS_ERRORS = 20
MAX_STATUS_MESSAGE = 300
_STATUS_KEYS = ("code", "message", "location", "conflicts_with")

# The label is policy_namespace, not namespace: Prometheus' Kubernetes discovery gives every
# scraped series the pod's own namespace as "namespace", which would rename ours.
MODULES = Gauge("fedplace_sync_policy_modules",
                "Modules of a policy ConfigMap by load status now: ok (loaded in their current version) or error "
                "(failing to load, refused, or in conflict: the fedplace.io/policy-status annotation lists them)",
                ["policy_namespace", "configmap", "status"])


def _short(text: Any, limit: int) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters; the full text is in the Event and the log)"


def _bounded(error: dict[str, Any], message_limit: int) -> dict[str, Any]:
    out = {k: error[k] for k in _STATUS_KEYS if k in error}
    out["message"] = _short(out.get("message", ""), message_limit)
    loc = out.get("location")
    if isinstance(loc, dict):
        out["location"] = {k: (_short(v, 300) if isinstance(v, str) else v) for k, v in loc.items()
                           if k in ("file", "row", "col")}
    return out


def status_value(errors: dict[str, list[dict[str, Any]]], warnings: list[dict[str, Any]] | None = None) -> str:
    """The ``fedplace.io/policy-status`` annotation for a ConfigMap whose failed modules are ``errors``.

    ``{"status":"ok"}`` or ``{"status":"error","errors":[…]}`` — OPA's errors
    (``code``/``message``/``location``), modules in id order, canonical JSON;
    ``warnings`` (possible conflicts) are added when there are any. Always at
    most :data:`MAX_STATUS_BYTES`: messages are cut at :data:`MAX_STATUS_MESSAGE`
    characters, at most :data:`MAX_STATUS_ERRORS` errors are listed (``"more"``
    counts the rest), codes and locations are kept.
    """
    all_errors = [e for mid in sorted(errors) for e in errors[mid]]
    doc: dict[str, Any] = {"status": "error" if all_errors else "ok"}
    for limit, count in ((MAX_STATUS_MESSAGE, MAX_STATUS_ERRORS), (80, MAX_STATUS_ERRORS), (0, 5)):
        if all_errors:
            doc["errors"] = [_bounded(e, limit) for e in all_errors[:count]]
            if len(all_errors) > count:
                doc["more"] = len(all_errors) - count
        if warnings:
            doc["warnings"] = [_bounded(w, limit) for w in warnings[:count]]
        value = canonical_value(doc)
        if len(value.encode()) <= MAX_STATUS_BYTES:
            return value
    return canonical_value({"status": doc["status"], "more": len(all_errors)})


def first_error_text(errors: dict[str, list[dict[str, Any]]]) -> str:
    first = next((e for mid in sorted(errors) for e in errors[mid]), {})
    loc = first.get("location") or {}
    where = ":".join(str(loc[k]) for k in ("file", "row", "col") if k in loc)
    return f"{first.get('code', '')} at {where}: {first.get('message', '')}"


@dataclass
class ConfigMapState:
    """What the sync knows of one policy ConfigMap: its modules and why any of them is not
    loaded (its status annotation says so)."""

    data_hash: str
    modules: dict[str, str]
    obj: dict[str, Any]
    errors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # OPA refused: retried
    refused: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # our checks: until the data changes
    conflicts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # found by evaluation
    warnings: list[dict[str, Any]] = field(default_factory=list)
    binary_keys: tuple[str, ...] = ()
    status_pending: bool = False  # the last status write did not reach the API server

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))

    def all_errors(self, namespace: str) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for source in (self.refused, self.errors, self.conflicts):
            for mid, errs in source.items():
                out.setdefault(mid, []).extend(errs)
        for key in self.binary_keys:
            out[f"{namespace}/{self.name}/{key}"] = [module_error(
                "fedplace_binary_data", f"binaryData key {key!r} is not loaded: policy modules are text, "
                "in the ConfigMap's data", f"{namespace}/{self.name}/{key}")]
        return out

    def loaded(self) -> dict[str, str]:
        """The modules OPA holds in their current version."""
        return {mid: raw for mid, raw in self.modules.items() if mid not in self.errors and mid not in self.refused}


def publish_modules(namespace: str, state: ConfigMapState) -> None:
    """Set ``fedplace_sync_policy_modules`` of one ConfigMap from its state (what its status
    annotation says: a module with an error counts once, whatever the number of its errors)."""
    failing = state.all_errors(namespace)
    name = state.name
    MODULES.labels(namespace, name, "error").set(len(failing))
    MODULES.labels(namespace, name, "ok").set(sum(1 for mid in state.modules if mid not in failing))


def forget_modules(namespace: str, name: str) -> None:
    """Remove the gauge's series of a ConfigMap that is gone."""
    for status in ("ok", "error"):
        try:
            MODULES.remove(namespace, name, status)
        except KeyError:
            pass


class StatusWriter:
    """Writes the status annotation of the policy ConfigMaps of one namespace."""

    def __init__(self, namespace: str, api: client.ApiClient, events: EventRecorder | None,
                 on_pending: Callable[[], None]) -> None:
        self.namespace = namespace
        self.api = api
        self.events = events
        self.on_pending = on_pending

    async def write(self, state: ConfigMapState) -> None:
        """Write the status annotation when it changed; one the API server refuses as invalid is
        replaced by the shortest form; one it did not take marks the state ``status_pending`` and
        calls ``on_pending`` (the loader writes it again later). The gauge follows the state
        at once, whether or not the annotation changed or could be written."""
        publish_modules(self.namespace, state)
        errors = state.all_errors(self.namespace)
        status = status_value(errors, state.warnings)
        meta = state.obj.get("metadata") or {}
        current = (meta.get("annotations") or {}).get(STATUS_ANNOTATION)
        if current == status and not state.status_pending:
            return
        name = meta["name"]
        for value in (status, canonical_value({"status": "error" if errors else "ok",
                                               "more": sum(len(e) for e in errors.values())})):
            try:
                updated = await kube_json(
                    self.api, "PATCH", f"/api/v1/namespaces/{self.namespace}/configmaps/{name}",
                    body={"metadata": {"annotations": {STATUS_ANNOTATION: value}}},
                    content_type="application/merge-patch+json")
            except KubeApiError as exc:
                if exc.status == 404:  # deleted meanwhile: nothing to report on
                    state.status_pending = False
                    return
                log.warning("could not write policy status", extra={"configmap": name, "error": str(exc)})
                if exc.status in (400, 413, 422) and value == status:
                    continue  # refused as invalid: try the shortest form
                state.status_pending = True
                self.on_pending()
                return
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                log.warning("could not write policy status", extra={"configmap": name, "error": str(exc)})
                state.status_pending = True
                self.on_pending()
                return
            state.obj = updated if isinstance(updated, dict) else state.obj
            break
        state.status_pending = False
        if errors and self.events is not None:
            reason = "PolicyConflict" if state.conflicts and not (state.errors or state.refused) else "PolicyLoadFailed"
            count = len(errors)
            self.events.record(involved_object(state.obj), "Warning", reason,
                               f"{count} module(s) failed to load; first error: {first_error_text(errors)}")
