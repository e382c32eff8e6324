"""Replication of one resource type into OPA's data (kube-mgmt's layout).

* namespaced: ``data.<root>.<plural>.<namespace>.<name>`` = the object
* cluster-scoped: ``data.<root>.<plural>.<name>`` = the object

:class:`Replicator` is an informer handler. A (re)list replaces the whole
collection with ONE PUT, so objects deleted while the watch was down
disappear. Watch events go into a pending map (latest state per object) that
a flusher drains, one PUT or DELETE per object: a burst of changes to one
object during a slow write becomes one write. A relist discards pending
events (the list supersedes them) under the same lock the flusher writes
under, so an old event can never land after a newer list.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from prometheus_client import Counter, Gauge, Histogram

from common.informer import Informer
from common.kube_client import Resource
from common.opa_client import OpaClient, OpaError, OpaUnavailable
from sync.changes import ChangeSignal

__all__ = ["Replicator", "layout", "strip"]

log = logging.getLogger(__name__)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

OBJECTS = Gauge("fedplace_sync_objects", "Objects replicated into OPA, per resource", ["resource"])
EVENTS = Counter("fedplace_sync_events_applied_total", "Watch events written to OPA", ["resource", "type"])
FULL_PUSHES = Counter("fedplace_sync_full_pushes_total", "Whole-collection writes to OPA", ["resource"])
LAG = Histogram("fedplace_sync_replication_lag_seconds", "From receiving a watch event to its OPA write",
                ["resource"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without noise: ``metadata.managedFields`` and kubectl's last-applied annotation."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or ("managedFields" not in meta and LAST_APPLIED not in (meta.get("annotations") or {})):
        return obj
    out = dict(obj)
    meta = dict(meta)
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    out["metadata"] = meta
    return out


def layout(resource: Resource, objects: Iterable[dict[str, Any]], ignore: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The collection document: ``{ns: {name: obj}}`` or ``{name: obj}``."""
    doc: dict[str, Any] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            continue
        if resource.namespaced:
            ns = meta.get("namespace") or ""
            if ns in ignore:
                continue
            doc.setdefault(ns, {})[name] = strip(obj)
        else:
            doc[name] = strip(obj)
    return doc


@dataclass
class _Pending:
    event_type: str
    obj: dict[str, Any]
    received: float


class Replicator:
    """Keeps ``data.<root>.<plural>`` equal to the informer's view of one resource type."""

    def __init__(self, resource: Resource, opa: OpaClient, root: str, signal: ChangeSignal,
                 ignore_namespaces: frozenset[str] = frozenset(),
                 on_opa_error: Callable[[], None] = lambda: None) -> None:
        self.resource = resource
        self.opa = opa
        self.root = root
        self.signal = signal
        self.ignore = ignore_namespaces
        self.on_opa_error = on_opa_error
        self.informer: Informer | None = None
        self.synced = asyncio.Event()
        self._pending: dict[str, _Pending] = {}
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._label = str(resource)

    @property
    def collection(self) -> list[str]:
        return [self.root, self.resource.plural]

    def _object_path(self, obj: dict[str, Any]) -> list[str]:
        meta = obj.get("metadata") or {}
        if self.resource.namespaced:
            return self.collection + [meta.get("namespace") or "", meta["name"]]
        return self.collection + [meta["name"]]

    # -- informer handler ------------------------------------------------------

    async def on_sync(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        async with self._lock:
            self._pending.clear()
            await self._put_collection(objects)
        self.synced.set()
        self.signal.notify(f"data:{self.resource.plural}")

    async def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if not meta.get("name") or (self.resource.namespaced and meta.get("namespace") in self.ignore):
            return
        self._pending[self.resource.key(obj)] = _Pending(event_type, obj, time.monotonic())
        self._wake.set()

    # -- writes ------------------------------------------------------------------

    async def _put_collection(self, objects: Iterable[dict[str, Any]]) -> None:
        objects = list(objects)
        try:
            await self.opa.put_data(self.collection, layout(self.resource, objects, self.ignore))
        except OpaUnavailable:
            self.on_opa_error()
            raise
        FULL_PUSHES.labels(self._label).inc()
        OBJECTS.labels(self._label).set(len(objects))

    async def push_all(self) -> None:
        """Write the informer's whole cache again (after OPA lost its state)."""
        if self.informer is None or not self.informer.synced.is_set():
            return
        async with self._lock:
            await self._put_collection(self.informer.objects.values())
        self.signal.notify(f"data:{self.resource.plural}")

    async def run_flusher(self) -> None:
        """Drain pending events into OPA until cancelled; retries with backoff on OPA errors."""
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            wrote = False
            async with self._lock:
                while self._pending:
                    key, item = next(iter(self._pending.items()))
                    try:
                        await self._write(item)
                    except OpaError as exc:
                        failures += 1
                        if isinstance(exc, OpaUnavailable):
                            self.on_opa_error()
                        log.warning("replication write failed; will retry",
                                    extra={"resource": self._label, "object": key, "error": str(exc)})
                        break
                    failures = 0
                    wrote = True
                    if self._pending.get(key) is item:  # unchanged while we wrote it
                        del self._pending[key]
                    EVENTS.labels(self._label, item.event_type).inc()
                    LAG.labels(self._label).observe(time.monotonic() - item.received)
            if self.informer is not None:
                OBJECTS.labels(self._label).set(len(self.informer.objects))
            if wrote:
                self.signal.notify(f"data:{self.resource.plural}")
            if self._pending:
                await asyncio.sleep(min(10.0, 0.1 * 2 ** min(failures, 7)))
                self._wake.set()

    async def _write(self, item: _Pending) -> None:
        path = self._object_path(item.obj)
        if item.event_type == "DELETED":
            await self.opa.delete_data(path, missing_ok=True)
        else:
            await self.opa.put_data(path, strip(copy.copy(item.obj)))
