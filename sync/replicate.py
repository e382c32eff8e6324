"""Replication of one resource type into OPA's data (kube-mgmt's layout).

* namespaced: ``data.<root>.<plural>.<namespace>.<name>`` = the object
* cluster-scoped: ``data.<root>.<plural>.<name>`` = the object

:class:`ReplicationHandler` is an informer handler. A (re)list replaces the whole
collection with ONE PUT, so objects deleted while the watch was down
disappear. Watch events go into a pending map (latest state per object) that
a flusher drains: one PUT or DELETE when one object is pending, else one JSON
Patch of the collection carrying up to ``MAX_BATCH`` objects (a burst — the
echoes of a remediation pass, a bulk creation — costs OPA a few requests, not
one per object; OPA applies a patch atomically). A burst of changes to one
object during a slow write becomes one write. A relist discards pending
events (the list supersedes them) under the same lock the flusher writes
under, so an old event can never land after a newer list.

The RBAC binding types and the clusters also get an index beside the collection
(:mod:`fedplace.common.indexes`), rewritten from the informer's cache after each
write of the collection, before anything is told of it, and retried on its own
when it fails.

The informer of a type (:func:`informer_settings`) strips
noise as objects arrive, so its cache holds what OPA gets, and excludes
``--replicate-ignore-namespaces`` with a field selector
(:func:`namespace_field_selector`): the API server leaves them out of the watch;
the informer's list pages drop them on arrival (a paged list with a selector is
unreliable on some API servers: :mod:`fedplace.common.field_selector`). The handler's
own filter stays, for a server that ignores the selector.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable
from urllib.parse import quote

from kubernetes_asyncio import client
from prometheus_client import Counter, Gauge, Histogram

from fedplace.common import jsonsafe
from fedplace.common.indexes import index_of, index_path
from fedplace.common.informer import CompactObjects, CompactValues, Informer, InformerSettings
from fedplace.common.kube_client import Resource
from fedplace.common.opa_client import OpaClient, OpaRequestError, OpaUnavailable
from fedplace.common.secrets import LAST_APPLIED, without_secret_content
from fedplace.sync.signal import ChangeSignal

__all__ = ["LAST_APPLIED", "MAX_BATCH", "ReplicationHandler", "batch_ops", "collection_json", "informer_settings",
           "layout", "namespace_field_selector", "object_path", "strip"]

log = logging.getLogger(__name__)

MAX_BATCH = 256  # objects in one JSON Patch of a collection

OBJECTS = Gauge("fedplace_sync_objects", "Objects replicated into OPA, per resource", ["resource"])
EVENTS = Counter("fedplace_sync_events_applied_total", "Watch events written to OPA", ["resource", "type"])
FULL_PUSHES = Counter("fedplace_sync_full_pushes_total", "Whole-collection writes to OPA", ["resource"])
WRITE_ERRORS = Counter("fedplace_sync_write_errors_total", "Object writes OPA refused (not retried)", ["resource"])
RELISTS = Counter("fedplace_sync_relists_total", "Informer (re)lists pushed to OPA as one collection", ["resource"])
LAG = Histogram("fedplace_sync_replication_lag_seconds", "From receiving a watch event to its OPA write",
                ["resource"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
# Read at scrape time (ReplicationHandler.last_sync): the time of the scrape while OPA holds
# everything the informer has seen; once something waits to be written (a watch event, a failed
# collection write, a stale index) it stays at the moment that began until all of it is
# written. Before the initial list is in OPA: the handler's start.
LAST_SYNC = Gauge("fedplace_sync_last_sync_timestamp_seconds",
                  "Last time (Unix seconds) OPA held everything the informer had seen of this resource: the current "
                  "time while nothing waits to be written", ["resource"])
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


def informer_settings(resource: Resource, ignore: frozenset[str] = frozenset()) -> InformerSettings:
    """How the informer of a replicated type lists and watches: noise stripped on arrival,
    ``ignore``d namespaces excluded by the API server, the first list (start-up) from the API
    server's watch cache in one answer, as client-go's informers do (later ones paged from etcd)."""
    selector = namespace_field_selector(ignore) if resource.namespaced else None
    # Compact (JSON) cache, written to OPA as it is; not for a type with an index, which is
    # rewritten from the parsed cache after every write.
    return InformerSettings(field_selector=selector, transform=strip, compact=index_of(resource) is None,
                            first_list_from_cache=True)


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without noise: ``metadata.managedFields`` and kubectl's last-applied annotation.

    A core/v1 Secret also loses its content (``data``, ``stringData``): OPA
    holds its metadata and type only, never a secret value. This runs on every
    object on arrival (informer transform, layout, each write), so the content
    is never cached nor written. (kubectl's last-applied annotation, which
    would copy the content, is dropped from every object below.)
    """
    obj = without_secret_content(obj)
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


def collection_json(resource: Resource, objects: CompactObjects, ignore: frozenset[str] = frozenset(),
                    chunk_bytes: int = 1 << 20) -> tuple[list[str], Iterable[bytes]]:
    """The collection document of ``layout`` as JSON text, made of the compact JSON the cache
    holds (nothing parsed or encoded again): (the keys it holds, its text in pieces of about
    ``chunk_bytes``, produced as iterated). Only the pieces being sent exist at a time."""
    keys: list[str] = []
    groups: dict[str, list[tuple[str, bytes]]] = {}
    for key, raw in objects.raw_items():
        if resource.namespaced:
            ns, _, name = key.partition("/")
            if ns in ignore:
                continue
        else:
            ns, name = "", key
        if not name:
            continue
        keys.append(key)
        groups.setdefault(ns, []).append((name, raw))

    def pieces() -> Iterable[bytes]:
        out: list[bytes] = [b"{"]
        size = 0
        for g, (ns, members) in enumerate(groups.items()):
            if resource.namespaced:
                out += [b"," if g else b"", jsonsafe.dumps(ns), b":{"]
            for i, (name, raw) in enumerate(members):
                out += [b"," if i or (g and not resource.namespaced) else b"", jsonsafe.dumps(name), b":", raw]
                size += len(raw)
                if size >= chunk_bytes:
                    yield b"".join(out)
                    out, size = [], 0
            if resource.namespaced:
                out.append(b"}")
        out.append(b"}")
        yield b"".join(out)

    return keys, pieces()


def namespace_field_selector(ignore: Iterable[str]) -> str | None:
    """``metadata.namespace!=a,metadata.namespace!=b`` (sorted), or None when nothing is ignored."""
    return ",".join(f"metadata.namespace!={ns}" for ns in sorted(set(ignore))) or None


def object_path(resource: Resource, root: str, obj: dict[str, Any]) -> list[str]:
    """OPA data path of one object: ``[root, plural, ns, name]`` or ``[root, plural, name]``."""
    meta = obj.get("metadata") or {}
    if resource.namespaced:
        return [root, resource.plural, meta.get("namespace") or "", meta["name"]]
    return [root, resource.plural, meta["name"]]


def _pointer(segments: Iterable[str]) -> str:
    """A JSON Pointer as OPA's PATCH reads it: each segment URL-escaped, then ``~``/``/`` escaped."""
    return "".join("/" + quote(s.replace("~", "~0").replace("/", "~1"), safe="~") for s in segments)


def batch_ops(resource: Resource, events: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """JSON Patch operations, relative to the collection document, applying watch
    ``events`` ((type, object)): ``add`` (creates or replaces) the stripped object,
    ``remove`` it when DELETED. OPA refuses the whole patch (404) when a namespace
    is not in the collection yet or a removed object is not there."""
    ops: list[dict[str, Any]] = []
    for event_type, obj in events:
        meta = obj.get("metadata") or {}
        where = [meta.get("namespace") or "", meta["name"]] if resource.namespaced else [meta["name"]]
        if event_type == "DELETED":
            ops.append({"op": "remove", "path": _pointer(where)})
        else:
            ops.append({"op": "add", "path": _pointer(where), "value": strip(copy.copy(obj))})
    return ops


def retryable(exc: BaseException) -> bool:
    """Worth retrying the same write: OPA unavailable, or refusing our credentials (token rotation)."""
    return isinstance(exc, OpaUnavailable) or (isinstance(exc, OpaRequestError) and exc.status in (401, 403))


@dataclass
class _Pending:
    event_type: str
    obj: dict[str, Any]
    received: float


class ReplicationHandler:
    """Keeps ``data.<root>.<plural>`` equal to the informer's view of one resource type."""

    def __init__(self, resource: Resource, api: client.ApiClient, opa: OpaClient, root: str, signal: ChangeSignal,
                 ignore_namespaces: frozenset[str] = frozenset(),
                 on_opa_error: Callable[[], None] = lambda: None,
                 on_written: Callable[[str, list[dict[str, Any]] | None], None] = lambda plural, objs: None) -> None:
        """The handler and its :attr:`informer` (list/watch of ``resource`` on ``api``, not
        started: run ``informer.run()``). ``on_written(plural, objects)`` is called after each
        batch of writes has reached OPA (with the signal): ``objects`` are the states written
        (deleted ones included), or None when the whole collection was written."""
        self.resource = resource
        self.opa = opa
        self.root = root
        self.signal = signal
        self.ignore = ignore_namespaces
        self.on_opa_error = on_opa_error
        self.on_written = on_written
        self.informer = Informer(api, resource, self, settings=informer_settings(resource, ignore_namespaces))
        self.synced = asyncio.Event()
        self._pending: dict[str, _Pending] = {}
        self._full_pending = False  # the whole collection still has to be written
        self._index = index_of(resource)  # RBAC bindings, clusters: an index beside the collection
        self._index_stale = False  # the index still has to be written
        self._present: set[str] = set()  # keys of the objects OPA holds (for the gauge)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._label = str(resource)
        self._behind_since: float | None = time.time()  # wall clock; None while OPA holds everything
        # Every series of this resource exists from the start (at 0), so rate() and the dashboard
        # have data before the first event; the last-sync gauge is read from this handler.
        OBJECTS.labels(self._label)
        for event_type in EVENT_TYPES:
            EVENTS.labels(self._label, event_type)
        for counter in (FULL_PUSHES, WRITE_ERRORS, RELISTS, LAG):
            counter.labels(self._label)
        LAST_SYNC.labels(self._label).set_function(self.last_sync)

    @property
    def collection(self) -> list[str]:
        return [self.root, self.resource.plural]

    def last_sync(self) -> float:
        """``fedplace_sync_last_sync_timestamp_seconds``: now while OPA holds everything this
        handler has been given, else when it stopped doing so."""
        return time.time() if self._behind_since is None else self._behind_since

    def _track_sync(self) -> None:
        """Note whether anything waits to be written (for :meth:`last_sync`)."""
        if self.synced.is_set() and not (self._pending or self._full_pending or self._index_stale):
            self._behind_since = None
        elif self._behind_since is None:
            self._behind_since = time.time()

    # -- informer handler ------------------------------------------------------

    async def on_sync(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """Replace the collection with ONE PUT. OPA unavailable → the flusher retries the
        whole collection (from the informer's cache) with its short backoff, instead of
        raising into the informer (whose backoff and relist would be slower)."""
        RELISTS.labels(self._label).inc()
        async with self._lock:
            self._pending.clear()
            try:
                await self._put_collection(objects)
            except Exception as exc:  # noqa: BLE001 - sorted below
                if not retryable(exc):
                    raise
                log.warning("collection write failed; will retry",
                            extra={"resource": self._label, "error": str(exc)})
                self._full_pending = True
                self._track_sync()
                self._wake.set()
                return
            self._full_pending = False
        self.synced.set()
        self._track_sync()
        self._notify(None)

    def _notify(self, objects: list[dict[str, Any]] | None) -> None:
        self.signal.notify(f"data:{self.resource.plural}")
        self.on_written(self.resource.plural, objects)

    async def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if not meta.get("name") or (self.resource.namespaced and meta.get("namespace") in self.ignore):
            return
        key = self.resource.key(obj)
        self._pending[key] = _Pending(event_type, obj, time.monotonic())
        self._track_sync()
        self._wake.set()

    # -- writes ------------------------------------------------------------------

    async def _put_collection(self, objects: Iterable[dict[str, Any]]) -> None:
        """Replace the collection with ``objects`` (one PUT). A compact cache's view
        (:class:`CompactValues`) is written from its JSON, streamed: no document built."""
        started = time.monotonic()
        doc: dict[str, Any] | None = None
        try:
            if isinstance(objects, CompactValues):
                keys, chunks = collection_json(self.resource, objects.objects, self.ignore)
                await self.opa.put_data_json(self.collection, chunks)
                present = set(keys)
            else:
                doc = layout(self.resource, list(objects), self.ignore)
                await self.opa.put_data(self.collection, doc)
                if self.resource.namespaced:
                    present = {f"{ns}/{name}" for ns, names in doc.items() for name in names}
                else:
                    present = set(doc)
        except OpaUnavailable:
            self.on_opa_error()
            raise
        log.info("collection written", extra={"resource": self._label, "objects": len(present),
                                               "seconds": round(time.monotonic() - started, 3)})
        FULL_PUSHES.labels(self._label).inc()
        if self._index is not None:
            await self._refresh_index(doc)
        self._present = present
        OBJECTS.labels(self._label).set(len(self._present))

    async def _refresh_index(self, collection: dict[str, Any] | None = None) -> None:
        """Write the index (:mod:`fedplace.common.indexes`) of the ``collection`` document
        just written, or of the informer's cache. Never raises: a failure leaves the index stale
        for the flusher to retry, and never holds up the collection's own writes."""
        if self._index is None:
            return
        if collection is None:
            collection = layout(self.resource, self.informer.objects.values(), self.ignore)
        self._index_stale = True
        try:
            await self.opa.put_data(index_path(self.root, self.resource), self._index(collection))
        except Exception as exc:  # noqa: BLE001 - retried by the flusher, whatever it is
            if isinstance(exc, OpaUnavailable):
                self.on_opa_error()
            log.warning("index write failed; will retry", extra={"resource": self._label, "error": str(exc)})
            self._wake.set()
            return
        self._index_stale = False

    async def push_all(self) -> None:
        """Write the informer's whole cache again (after OPA lost its state)."""
        if not self.informer.synced.is_set():
            return
        async with self._lock:
            await self._put_collection(self.informer.objects.values())
            self._full_pending = False
        self.synced.set()
        self._track_sync()
        self._notify(None)

    async def run_flusher(self) -> None:
        """Drain pending events into OPA until cancelled; retries with backoff on OPA errors."""
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            whole = False  # the whole collection was written
            written: list[dict[str, Any]] = []
            async with self._lock:
                if self._full_pending:
                    try:
                        await self._put_collection(self.informer.objects.values())
                        self._full_pending = False
                        self._pending.clear()  # the cache already holds every pending change
                        self.synced.set()
                        whole = True
                        failures = 0
                    except Exception as exc:  # noqa: BLE001 - retried below, whatever it is
                        failures += 1
                        log.warning("collection write failed; will retry",
                                    extra={"resource": self._label, "error": str(exc)})
                while self._pending and not self._full_pending:
                    batch = self._take_batch()
                    if not await self._flush(batch, written):
                        failures += 1
                        break
                    failures = 0
                if self._index is not None and not self._full_pending and (written or self._index_stale):
                    await self._refresh_index()
                    if self._index_stale:
                        failures += 1
            OBJECTS.labels(self._label).set(len(self._present))
            self._track_sync()
            if whole or written:
                self._notify(None if whole else written)
            if self._pending or self._full_pending or self._index_stale:
                # Capped low: once OPA answers again, pending changes land within ~1 s.
                await asyncio.sleep(min(1.0, 0.05 * 2 ** min(failures - 1, 5)) * random.uniform(0.8, 1.2))
                self._wake.set()

    def _take_batch(self) -> list[tuple[str, _Pending]]:
        """Up to ``MAX_BATCH`` pending changes, oldest first (they stay pending until written)."""
        return list(itertools.islice(self._pending.items(), MAX_BATCH))

    async def _flush(self, batch: list[tuple[str, _Pending]], written: list[dict[str, Any]]) -> bool:
        """Write ``batch``: one JSON Patch, or object by object when it holds one change or
        OPA refuses the patch as a whole. A change OPA refuses for good is dropped (logged,
        counted). False when OPA could not be written to (retry later)."""
        if len(batch) > 1:
            try:
                await self._write_batch([item for _, item in batch])
            except Exception as exc:  # noqa: BLE001 - sorted below
                if retryable(exc):
                    self._write_failed(exc, f"{len(batch)} objects")
                    return False
                # refused as a whole (a new namespace, a deleted object OPA lacks): one by one
            else:
                for key, item in batch:
                    self._written(key, item, written)
                return True
        for key, item in batch:
            if self._pending.get(key) is not item:
                continue  # superseded meanwhile: the newer state comes next
            try:
                await self._write(item)
            except Exception as exc:  # noqa: BLE001 - sorted below
                if retryable(exc):
                    self._write_failed(exc, key)
                    return False
                log.error("OPA refused a replication write; dropping the event",
                          extra={"resource": self._label, "object": key, "error": repr(exc)})
                WRITE_ERRORS.labels(self._label).inc()
                if self._pending.get(key) is item:
                    del self._pending[key]
                continue
            self._written(key, item, written)
        return True

    def _write_failed(self, exc: BaseException, what: str) -> None:
        if isinstance(exc, OpaUnavailable):
            self.on_opa_error()
        log.warning("replication write failed; will retry",
                    extra={"resource": self._label, "object": what, "error": str(exc)})

    def _written(self, key: str, item: _Pending, written: list[dict[str, Any]]) -> None:
        """Bookkeeping once ``item`` has reached OPA."""
        written.append(item.obj)
        if item.event_type == "DELETED":
            self._present.discard(key)
        else:
            self._present.add(key)
        if self._pending.get(key) is item:  # unchanged while we wrote it
            del self._pending[key]
        EVENTS.labels(self._label, item.event_type).inc()
        LAG.labels(self._label).observe(time.monotonic() - item.received)

    async def _write_batch(self, items: list[_Pending]) -> None:
        """One JSON Patch of the collection for every item (atomic in OPA)."""
        await self.opa.patch_data(self.collection, batch_ops(self.resource, ((i.event_type, i.obj) for i in items)))

    async def _write(self, item: _Pending) -> None:
        path = object_path(self.resource, self.root, item.obj)
        if item.event_type == "DELETED":
            await self.opa.delete_data(path, missing_ok=True)
        else:
            await self.opa.put_data(path, strip(copy.copy(item.obj)))
