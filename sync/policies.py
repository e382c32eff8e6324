"""Policy ConfigMaps → OPA modules, with the load status written back.

Every ConfigMap in a policy namespace is policy; each data key is one module
with OPA id ``<namespace>/<configmap>/<key>``. Each
informer handler for one namespace (:class:`PolicyHandler`):

* a changed ConfigMap PUTs its modules; a removed key or a deleted ConfigMap
  DELETEs them; a relist also deletes modules under ``<namespace>/`` that no
  ConfigMap defines any more;
* the outcome is written back as the annotation ``fedplace.io/policy-status``
  (``{"status":"ok"}`` or ``{"status":"error","errors":[…OPA's errors…]}``,
  canonical JSON), only when it changes, with a Warning Event on failure;
* our own annotation writes come back as MODIFIED events: a ConfigMap whose
  data did not change is not reloaded, so there is no reload loop;
* modules that failed to compile are retried after every successful load and
  on a backoff timer (a module may depend on one that loads later);
* a module declaring ``package system`` or ``package system.*`` is refused
  unless allowed (``allow_system``): ``data.system`` configures OPA itself
  (``system.authz`` decides who may call OPA's API), and write access to a
  policy ConfigMap must not become control of OPA;
* OPA being unavailable raises, so the informer backs off and relists.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client
from prometheus_client import Counter

from common.annotations import canonical_value
from common.events import EventRecorder, involved_object
from common.kube_client import KubeApiError, kube_json
from common.opa_client import OpaClient, OpaCompileError, OpaRequestError, OpaUnavailable
from sync.signal import ChangeSignal

__all__ = ["STATUS_ANNOTATION", "PolicyHandler", "data_hash", "declared_package", "module_ids", "normalize_errors",
           "reserved_package_error", "status_value"]

log = logging.getLogger(__name__)

STATUS_ANNOTATION = "fedplace.io/policy-status"
LOAD_ERRORS = Counter("fedplace_sync_policy_load_errors_total", "Policy modules OPA refused to load")
LOADS = Counter("fedplace_sync_policy_loads_total", "Policy modules loaded into OPA")


def module_ids(namespace: str, name: str, data: dict[str, str] | None) -> dict[str, str]:
    """Module id → Rego source for one ConfigMap."""
    return {f"{namespace}/{name}/{key}": raw for key, raw in sorted((data or {}).items())}


def data_hash(data: dict[str, str] | None) -> str:
    """A digest of a ConfigMap's ``.data``: equal digests ⇒ nothing to reload."""
    return hashlib.sha256(json.dumps(data or {}, sort_keys=True).encode()).hexdigest()


_PACKAGE_LINE = re.compile(r"package\s+(\S+)")
_REF_PART = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[\s*"((?:[^"\\]|\\.)*)"\s*\]')


def declared_package(raw: str) -> tuple[list[str], int] | None:
    """The package a Rego module declares (path without ``data``) and its line number;
    None when the first statement is not a package (OPA reports that itself)."""
    for lineno, line in enumerate(raw.splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        m = _PACKAGE_LINE.match(text)
        if m is None:
            return None
        ref, parts, pos = m.group(1), [], 0
        while pos < len(ref):
            part = _REF_PART.match(ref, pos)
            if part is None or part.end() == pos:
                break
            try:
                parts.append(part.group(1) if part.group(1) is not None else json.loads(f'"{part.group(2)}"'))
            except ValueError:  # a bad escape: OPA's parser reports it
                break
            pos = part.end()
        if parts and parts[0] == "data":
            parts = parts[1:]
        return parts, lineno
    return None


def reserved_package_error(module_id: str, raw: str) -> dict[str, Any] | None:
    """An OPA-style error when ``raw`` declares ``package system`` or ``system.*``, else None."""
    declared = declared_package(raw)
    if declared is None or not declared[0] or declared[0][0] != "system":
        return None
    parts, row = declared
    return {"code": "fedplace_reserved_package",
            "message": f"package {'.'.join(parts)} is reserved: data.system configures OPA itself "
                       "(system.authz decides who may call its API); not loaded from a policy ConfigMap "
                       "(opa-kube-sync --allow-system-packages)",
            "location": {"file": module_id, "row": row, "col": 1}}


def normalize_errors(module_id: str, errors: list[Any]) -> list[dict[str, Any]]:
    """OPA's errors for one module, each with ``code``, ``message`` and ``location`` (``file`` at least)."""
    out: list[dict[str, Any]] = []
    for e in errors or [{}]:
        e = dict(e) if isinstance(e, dict) else {"message": str(e)}
        e.setdefault("code", "invalid_parameter")
        e.setdefault("message", "OPA refused the module")
        if not isinstance(e.get("location"), dict):
            e["location"] = {"file": module_id}
        out.append(e)
    return out


def status_value(errors: dict[str, list[dict[str, Any]]]) -> str:
    """The ``fedplace.io/policy-status`` annotation for a ConfigMap whose failed modules are ``errors``.

    ``{"status":"ok"}`` or ``{"status":"error","errors":[…]}`` — OPA's errors
    (``code``/``message``/``location``), modules in id order, canonical JSON.
    """
    if not errors:
        return canonical_value({"status": "ok"})
    return canonical_value({"status": "error", "errors": [e for mid in sorted(errors) for e in errors[mid]]})


@dataclass
class _ConfigMapState:
    data_hash: str
    modules: dict[str, str]
    obj: dict[str, Any]
    errors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class PolicyHandler:
    """Keeps OPA's modules ``<namespace>/…`` equal to the ConfigMaps of one namespace."""

    def __init__(self, namespace: str, opa: OpaClient, api: client.ApiClient, signal: ChangeSignal,
                 events: EventRecorder | None = None, allow_system: bool = False) -> None:
        self.namespace = namespace
        self.allow_system = allow_system
        self.opa = opa
        self.api = api
        self.signal = signal
        self.events = events
        self.configmaps: dict[str, _ConfigMapState] = {}
        self.loaded = asyncio.Event()
        self._lock = asyncio.Lock()
        self._retry = asyncio.Event()  # set: repair soon
        self._dirty: dict[str, dict[str, Any]] = {}  # ConfigMaps whose load OPA did not answer
        self._orphans: set[str] = set()  # module ids to delete that are still in OPA

    # -- informer handler ------------------------------------------------------

    async def on_sync(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        async with self._lock:
            names = set()
            for cm in objects:
                names.add(cm["metadata"]["name"])
                await self._apply(cm, force=True)
            for gone in set(self.configmaps) - names:
                await self._drop(gone)
            wanted = {mid for st in self.configmaps.values() for mid in st.modules}
            for policy in await self.opa.list_policies():
                pid = str(policy.get("id", ""))
                if pid.startswith(self.namespace + "/") and pid not in wanted:
                    self._orphans.add(pid)
            self._dirty.clear()
            await self._delete_orphans()
            await self._retry_failed()
        self.loaded.set()
        self.signal.notify("policy")

    async def on_event(self, event_type: str, cm: dict[str, Any]) -> None:
        """Apply one change. OPA unavailable → remembered and repaired by :meth:`run_retries`
        (not raised: the informer would back off and relist everything)."""
        name = cm["metadata"]["name"]
        async with self._lock:
            try:
                if event_type == "DELETED":
                    self._dirty.pop(name, None)
                    await self._drop(name)
                else:
                    dirty = self._dirty.pop(name, None) is not None
                    try:
                        await self._apply(cm, force=dirty)
                    except OpaUnavailable:
                        self._dirty[name] = cm
                        raise
                await self._delete_orphans()
                await self._retry_failed()
            except OpaUnavailable as exc:
                log.warning("OPA unavailable while loading policy; will retry",
                            extra={"configmap": name, "error": str(exc)})
                self._retry.set()
                return
        self.signal.notify("policy")

    # -- loading -------------------------------------------------------------------

    async def _apply(self, cm: dict[str, Any], force: bool) -> None:
        name = cm["metadata"]["name"]
        data = cm.get("data") or {}
        digest = data_hash(data)
        old = self.configmaps.get(name)
        if old is not None and old.data_hash == digest and not force:
            old.obj = cm  # our own status write, or a label change: nothing to reload
            return
        modules = module_ids(self.namespace, name, data)
        state = _ConfigMapState(digest, modules, cm)
        self.configmaps[name] = state
        self._orphans |= set(old.modules if old else {}) - set(modules)
        self._orphans -= set(modules)
        await self._delete_orphans()
        for mid, raw in modules.items():
            if not force and old is not None and old.modules.get(mid) == raw and mid not in old.errors:
                continue
            await self._put(state, mid, raw)
        if old is not None and not force:
            for mid in set(old.errors) & set(modules):
                if old.modules.get(mid) == modules[mid] and mid not in state.errors:
                    state.errors[mid] = old.errors[mid]
        await self._write_status(state)

    async def _put(self, state: _ConfigMapState, mid: str, raw: str) -> bool:
        reserved = None if self.allow_system else reserved_package_error(mid, raw)
        if reserved is not None:
            if mid not in state.errors:
                LOAD_ERRORS.inc()
                log.warning("policy module refused: reserved package", extra={"policy_id": mid,
                                                                              "error": reserved["message"]})
            state.errors[mid] = [reserved]
            return False
        try:
            await self.opa.put_policy(mid, raw)
        except OpaCompileError as exc:
            state.errors[mid] = normalize_errors(mid, exc.errors)
            LOAD_ERRORS.inc()
            log.warning("policy failed to compile", extra={"policy_id": mid, "errors": exc.errors})
            return False
        except OpaRequestError as exc:
            state.errors[mid] = normalize_errors(mid, [{"code": exc.code or "invalid_parameter", "message": exc.message}])
            LOAD_ERRORS.inc()
            return False
        state.errors.pop(mid, None)
        LOADS.inc()
        return True

    async def _drop(self, name: str) -> None:
        state = self.configmaps.pop(name, None)
        if state is None:
            return
        self._orphans |= set(state.modules)
        await self._delete_orphans()

    async def _delete_orphans(self) -> None:
        """Delete modules no ConfigMap defines any more. OPA refusing one (another module
        imports it) keeps it for a later try; OPA unavailable raises."""
        for mid in sorted(self._orphans):
            try:
                await self.opa.delete_policy(mid, missing_ok=True)
            except OpaRequestError as exc:
                log.warning("OPA refused to delete a module; will retry",
                            extra={"policy_id": mid, "error": str(exc)})
                continue
            self._orphans.discard(mid)

    async def _retry_failed(self) -> None:
        """Retry every failed module until a round loads none of them."""
        progress = True
        while progress:
            progress = False
            for state in self.configmaps.values():
                for mid in list(state.errors):
                    if await self._put(state, mid, state.modules[mid]):
                        progress = True
                        await self._write_status(state)

    async def push_all(self) -> None:
        """Load every module again (after OPA lost its state)."""
        async with self._lock:
            self._orphans.clear()  # OPA holds nothing of ours any more
            self._dirty.clear()  # the states below already carry the latest data
            for state in self.configmaps.values():
                for mid, raw in state.modules.items():
                    await self._put(state, mid, raw)
            await self._retry_failed()
            for state in self.configmaps.values():
                await self._write_status(state)
        self.signal.notify("policy")

    async def run_retries(self, initial: float = 0.5, maximum: float = 30.0) -> None:
        """Until cancelled: repair loads OPA did not answer (backoff 50 ms → 1 s) and retry
        modules that failed to compile (backoff ``initial`` → ``maximum``)."""
        delay = initial
        repair_failures = 0
        while True:
            repairs = bool(self._dirty or self._orphans)
            timeout = min(1.0, 0.05 * 2 ** repair_failures) if repairs else delay
            try:
                await asyncio.wait_for(self._retry.wait(), timeout=timeout)
            except asyncio.TimeoutError:
                pass
            self._retry.clear()
            repairs = bool(self._dirty or self._orphans)
            if not (repairs or any(st.errors for st in self.configmaps.values())):
                delay, repair_failures = initial, 0
                continue
            try:
                async with self._lock:
                    for name, cm in list(self._dirty.items()):
                        await self._apply(cm, force=True)
                        del self._dirty[name]
                    await self._delete_orphans()
                    await self._retry_failed()
                repair_failures = 0
                self.signal.notify("policy")
            except OpaUnavailable:
                repair_failures = min(repair_failures + 1, 6)
            if not repairs:
                delay = min(maximum, delay * 2)

    # -- status ------------------------------------------------------------------------

    async def _write_status(self, state: _ConfigMapState) -> None:
        status = status_value(state.errors)
        meta = state.obj.get("metadata") or {}
        current = (meta.get("annotations") or {}).get(STATUS_ANNOTATION)
        if current == status:
            return
        name = meta["name"]
        try:
            updated = await kube_json(
                self.api, "PATCH", f"/api/v1/namespaces/{self.namespace}/configmaps/{name}",
                body={"metadata": {"annotations": {STATUS_ANNOTATION: status}}},
                content_type="application/merge-patch+json")
            state.obj = updated
        except KubeApiError as exc:
            log.warning("could not write policy status", extra={"configmap": name, "error": str(exc)})
            return
        if state.errors and self.events is not None:
            first = next(iter(state.errors.values()))[0]
            self.events.record(involved_object(state.obj), "Warning", "PolicyLoadFailed",
                               f"{len(state.errors)} module(s) failed to load: {first.get('message', '')}")
