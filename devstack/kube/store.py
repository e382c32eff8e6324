"""The object store: collections, the global resourceVersion, bounded event
history and watch fan-out.

Contracts
* One global, strictly increasing resourceVersion counter for every write;
  :meth:`Store.reset` empties the store but never lowers it.
* Stored objects are immutable dicts: a write replaces the :class:`Entry`, so
  readers may hold references without copying. Each entry keeps its JSON
  encoding without kind/apiVersion (``body``), so lists and watch events are
  produced by concatenating bytes, without re-encoding.
* Keys in a collection are kept sorted (``namespace/name``), giving list order
  and continue positions as etcd's key order would.
* History retains the last ``history`` events; ``compacted_rv`` is the newest
  RV no longer retained. A watch or continue token from an RV below it is 410.
* Watchers get events through their own unbounded asyncio queue; fan-out is
  synchronous inside the write, so the order of events is the order of writes.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator

from .resources import ResourceType
from .selectors import FieldSelector, LabelSelector, fields_match, labels_match, single_name
from .status import ApiError

Key = str  # "ns/name" for namespaced objects, "name" for cluster-scoped


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(slots=True)
class Entry:
    """One stored object version. ``obj`` carries kind/apiVersion, ``body`` does not."""

    obj: dict[str, Any]
    body: bytes

    @classmethod
    def of(cls, obj: dict[str, Any]) -> "Entry":
        rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        return cls(obj, dumps(rest))

    @property
    def rv(self) -> int:
        return int(self.obj["metadata"]["resourceVersion"])

    def full(self, kind: str, api_version: str) -> bytes:
        """The object's JSON with kind/apiVersion for the version it is served at."""
        head = b'{"kind":' + dumps(kind) + b',"apiVersion":' + dumps(api_version)
        return head + (b"," + self.body[1:] if len(self.body) > 2 else b"}")

    def served(self, rt: ResourceType) -> dict[str, Any]:
        """The object as a dict at ``rt``'s apiVersion (a shallow copy only when it differs)."""
        if self.obj.get("apiVersion") == rt.api_version:
            return self.obj
        return {**self.obj, "apiVersion": rt.api_version, "kind": rt.kind}


def key_of(namespace: str, name: str) -> Key:
    return f"{namespace}/{name}" if namespace else name


@dataclass(slots=True)
class Event:
    rv: int
    coll: tuple[str, str]
    type: str  # ADDED | MODIFIED | DELETED
    entry: Entry
    old: Entry | None


class Collection:
    """All objects of one (group, plural)."""

    def __init__(self, group: str, plural: str, namespaced: bool) -> None:
        self.group = group
        self.plural = plural
        self.namespaced = namespaced
        self.items: dict[Key, Entry] = {}
        self.keys: list[Key] = []

    def put(self, key: Key, entry: Entry) -> None:
        if key not in self.items:
            bisect.insort(self.keys, key)
        self.items[key] = entry

    def remove(self, key: Key) -> None:
        del self.items[key]
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            del self.keys[i]

    def scan(self, namespace: str | None, start_after: Key | None) -> Iterator[tuple[int, Key, Entry]]:
        """(position, key, entry) in key order within ``namespace`` (None: all), after ``start_after``."""
        keys = self.keys
        lo, hi = 0, len(keys)
        if namespace:
            prefix = namespace + "/"
            lo = bisect.bisect_left(keys, prefix)
            hi = bisect.bisect_left(keys, namespace + "0")  # "0" sorts right after "/"
        if start_after is not None:
            lo = max(lo, bisect.bisect_right(keys, start_after))
        for i in range(lo, hi):
            k = keys[i]
            yield i, k, self.items[k]

    def count(self, namespace: str | None) -> int:
        if not namespace:
            return len(self.keys)
        return bisect.bisect_left(self.keys, namespace + "0") - bisect.bisect_left(self.keys, namespace + "/")


@dataclass(eq=False)
class Watcher:
    """One open watch stream. The server drains ``queue``; ``None`` ends it."""

    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    bookmarks: bool
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    closed: bool = False

    def matches(self, entry: Entry) -> bool:
        meta = entry.obj["metadata"]
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return labels_match(self.labels, meta.get("labels")) and fields_match(self.fields, entry.obj)

    def convert(self, ev: Event) -> tuple[str, Entry] | None:
        """The event this watcher sees (selector transitions become ADDED/DELETED), or None."""
        now = self.matches(ev.entry)
        if ev.type != "MODIFIED" or ev.old is None:
            return (ev.type, ev.entry) if now else None
        before = self.matches(ev.old)
        if now and before:
            return ("MODIFIED", ev.entry)
        if now:
            return ("ADDED", ev.entry)
        if before:
            old = dict(ev.old.obj)
            old["metadata"] = {**old["metadata"], "resourceVersion": str(ev.rv)}
            return ("DELETED", Entry.of(old))
        return None

    def send(self, item: Any) -> None:
        if not self.closed:
            self.queue.put_nowait(item)

    def close(self) -> None:
        if not self.closed:
            self.queue.put_nowait(None)
            self.closed = True


@dataclass
class Page:
    entries: list[Entry]
    rv: int
    continue_token: str
    remaining: int | None


def encode_continue(rv: int, key: Key) -> str:
    doc = {"v": "meta.k8s.io/v1", "rv": rv, "start": key + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Key]:
    """(RV, last key) of a continue token; RV -1 is an inconsistent continuation (list the
    current state after the key), as handed out with a 410."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
        if doc.get("v") != "meta.k8s.io/v1":
            raise ValueError("unsupported version")
        rv, start = int(doc["rv"]), str(doc["start"])
        if not start.endswith("\x00"):
            raise ValueError("bad start key")
        return rv, start[:-1]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ApiError(400, f"invalid continue token: continue key is not valid: {exc}", "BadRequest") from exc


ETCD_MAX_REQUEST_BYTES = 1536 * 1024  # etcd's --max-request-bytes default; kube-apiserver stores the object in one request

EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


class Store:
    def __init__(self, history: int = 10000) -> None:
        self.rv = 0
        self.history_size = max(1, history)
        self.history: deque[Event] = deque()
        self.compacted_rv = 0
        self.collections: dict[tuple[str, str], Collection] = {}
        self.watchers: dict[tuple[str, str], set[Watcher]] = {}

    # ---- collections -------------------------------------------------
    def collection(self, rt: ResourceType) -> Collection:
        coll = self.collections.get(rt.collection_key)
        if coll is None:
            coll = self.collections[rt.collection_key] = Collection(rt.group, rt.plural, rt.namespaced)
        return coll

    def drop_collection(self, group: str, plural: str) -> list[Entry]:
        """Remove a collection (a deleted CRD): DELETED events for every object, watchers closed."""
        coll = self.collections.get((group, plural))
        removed: list[Entry] = []
        if coll is not None:
            for key in list(coll.keys):
                removed.append(self.delete(coll, key))
            del self.collections[(group, plural)]
        for w in self.watchers.pop((group, plural), set()):
            w.close()
        return removed

    # ---- reads -------------------------------------------------------
    def get(self, coll: Collection, key: Key) -> Entry | None:
        return coll.items.get(key)

    def list_page(self, coll: Collection, namespace: str | None, labels: LabelSelector, fields: FieldSelector,
                  limit: int = 0, cont: str | None = None) -> Page:
        """One page of a list in key order. ``limit`` 0 = everything."""
        list_rv, start_after = self.rv, None
        if cont:
            list_rv, start_after = decode_continue(cont)
            if list_rv == -1:
                list_rv = self.rv
            elif list_rv < self.compacted_rv:
                err = ApiError(410, EXPIRED_CONTINUE, "Expired")
                err.body["metadata"] = {"continue": encode_continue(-1, start_after)}
                raise err
        name = single_name(fields)
        if name is not None and (namespace or not coll.namespaced):
            entry = coll.items.get(key_of(namespace or "", name))
            items = [entry] if entry is not None and self._match(entry, labels, fields) else []
            return Page(items, list_rv, "", None)
        out: list[Entry] = []
        last_key: Key | None = None
        last_pos = -1
        more = False
        for pos, key, entry in coll.scan(namespace, start_after):
            if limit and len(out) >= limit:
                more = True
                break
            if self._match(entry, labels, fields):
                out.append(entry)
                last_key, last_pos = key, pos
        if more and last_key is not None:
            remaining = None
            if not labels and not fields:
                hi = len(coll.keys) if not namespace else bisect.bisect_left(coll.keys, namespace + "0")
                remaining = hi - last_pos - 1
            return Page(out, list_rv, encode_continue(list_rv, last_key), remaining)
        return Page(out, list_rv, "", None)

    @staticmethod
    def _match(entry: Entry, labels: LabelSelector, fields: FieldSelector) -> bool:
        if labels and not labels_match(labels, entry.obj["metadata"].get("labels")):
            return False
        return not fields or fields_match(fields, entry.obj)

    # ---- writes ------------------------------------------------------
    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, coll: Collection, key: Key, obj: dict[str, Any]) -> Entry:
        """Store ``obj`` (a fresh dict, now owned by the store) at a new RV; ADDED or MODIFIED.

        An object whose encoding exceeds etcd's request limit is refused as kube-apiserver relays
        etcd's refusal (500 without a reason); nothing changes then."""
        rv = self.rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        entry = Entry.of(obj)
        if len(entry.body) > ETCD_MAX_REQUEST_BYTES:
            err = ApiError(500, "etcdserver: request is too large")
            del err.body["reason"]
            raise err
        self.rv = rv
        old = coll.items.get(key)
        coll.put(key, entry)
        self._emit(Event(rv, (coll.group, coll.plural), "MODIFIED" if old else "ADDED", entry, old))
        return entry

    def delete(self, coll: Collection, key: Key) -> Entry:
        """Remove an object; the DELETED event carries its last state at the deletion RV."""
        old = coll.items[key]
        rv = self.next_rv()
        last = dict(old.obj)
        last["metadata"] = {**old.obj["metadata"], "resourceVersion": str(rv)}
        entry = Entry.of(last)
        coll.remove(key)
        self._emit(Event(rv, (coll.group, coll.plural), "DELETED", entry, None))
        return entry

    def _emit(self, ev: Event) -> None:
        self.history.append(ev)
        while len(self.history) > self.history_size:
            self.compacted_rv = self.history.popleft().rv
        for w in self.watchers.get(ev.coll, ()):
            seen = w.convert(ev)
            if seen is not None:
                w.send(seen)

    def compact(self, keep: int = 0) -> int:
        """Forget all but the last ``keep`` events; returns the new compacted RV."""
        while len(self.history) > max(0, keep):
            self.history.popleft()
        self.compacted_rv = self.history[0].rv - 1 if self.history else self.rv
        return self.compacted_rv

    # ---- watch -------------------------------------------------------
    def watch(self, w: Watcher, since: int | None) -> None:
        """Register ``w``. ``since`` None: synthetic ADDED for current objects first; else replay after ``since``.

        Raises ApiError(410) when ``since`` is older than the retained history.
        """
        coll = self.collection(w.rt)
        if since is None:
            for _, _, entry in coll.scan(w.namespace, None):
                if w.matches(entry):
                    w.send(("ADDED", entry))
        else:
            if since < self.compacted_rv:
                # the watch cache's wording; kinds without one are watched in etcd, which words it so
                raise ApiError(410, f"too old resource version: {since} ({self.compacted_rv})" if w.rt.watch_cache
                               else "The resourceVersion for the provided watch is too old.", "Expired")
            for ev in self._since(since):
                if ev.coll == w.rt.collection_key:
                    seen = w.convert(ev)
                    if seen is not None:
                        w.send(seen)
        self.watchers.setdefault(w.rt.collection_key, set()).add(w)

    def _since(self, rv: int) -> Iterator[Event]:
        hist = self.history
        if not hist or hist[-1].rv <= rv:
            return iter(())
        # history RVs are increasing: binary search on the deque via index
        lo, hi = 0, len(hist)
        while lo < hi:
            mid = (lo + hi) // 2
            if hist[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return (hist[i] for i in range(lo, len(hist)))

    def unwatch(self, w: Watcher) -> None:
        ws = self.watchers.get(w.rt.collection_key)
        if ws is not None:
            ws.discard(w)

    def close_watches(self) -> int:
        n = 0
        for ws in self.watchers.values():
            for w in ws:
                if not w.closed:
                    w.close()
                    n += 1
        self.watchers.clear()
        return n

    def clear(self) -> None:
        """Drop every object and the history (watchers are closed); the RV counter is kept."""
        self.close_watches()
        self.collections.clear()
        self.history.clear()
        self.compacted_rv = self.rv
