"""REST semantics: create, get, list, watch, update, patch, delete, deletecollection.

:class:`Api` owns the store, the resource registry and the webhook dispatcher;
:mod:`devstack.kube.server` routes HTTP requests to it. Every failure is raised
as :class:`~devstack.kube.status.ApiError` and rendered as a ``Status``.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import random
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from . import admission, crdschema, objects, patching
from .resources import BUILTIN, Registry, ResourceType, crd_types
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .status import ApiError, already_exists, bad_request, conflict, forbidden, not_found
from .store import Collection, Entry, Store, Watcher, dumps, key_of
from .webhooks import Attributes, Dispatcher

log = logging.getLogger("devstack.kube")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
NS = ("", "namespaces")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
MWC = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
SERVICE_ACCOUNTS = ("", "serviceaccounts")
LIMIT_RANGES = ("", "limitranges")
PRIORITY_CLASSES = ("scheduling.k8s.io", "priorityclasses")
# kube-apiserver's system PriorityClasses (scheduling.SystemPriorityClasses), always present.
SYSTEM_PRIORITY_CLASSES = (
    {"metadata": {"name": "system-node-critical"}, "value": 2000001000,
     "description": "Used for system critical pods that must not be moved from their current node."},
    {"metadata": {"name": "system-cluster-critical"}, "value": 2000000000,
     "description": "Used for system critical pods that must run in the cluster, but can be moved to another "
                    "node if necessary."},
)


def qbool(value: str | None) -> bool:
    """Kubernetes query booleans: absent, ``0`` and ``false`` (any case) are false; anything else true."""
    return value is not None and value != "0" and value.lower() != "false"


def qint(query: Any, name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f"invalid value for {name}: {raw!r}: must be an integer") from None


@dataclass
class Target:
    """What a resource URL names. ``namespace`` None: cluster scope or all namespaces."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str = ""


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise ApiError(400, f'dryRun: Unsupported value: "{v}": supported values: "All"', "BadRequest")
    return bool(values)


class Api:
    def __init__(self, history: int = 10000, dispatcher: Dispatcher | None = None,
                 bookmark_interval: float = 5.0) -> None:
        self.store = Store(history)
        self.registry = Registry()
        self.dispatcher = dispatcher or Dispatcher()
        self.bookmark_interval = bookmark_interval
        self.reset()

    # ---- lifecycle -----------------------------------------------------
    def reset(self) -> None:
        """Initial state: built-in types, default namespaces, the system PriorityClasses, no CRDs,
        no webhooks; watches closed."""
        self.store.clear()
        self.registry = Registry()
        for rt in BUILTIN:
            self.registry.add(rt)
        for name in DEFAULT_NAMESPACES:
            self._seed(NS, {"metadata": {"name": name}})
        for body in SYSTEM_PRIORITY_CLASSES:
            self._seed(PRIORITY_CLASSES, body)

    def _seed(self, key: tuple[str, str], body: dict[str, Any]) -> None:
        """Store a built-in object as kube-apiserver creates it at start-up (no admission)."""
        rt = next(t for t in BUILTIN if t.collection_key == key)
        obj = objects.prepare_create(rt, body, "")
        objects.finish_create(rt, obj)
        objects.finalize_create(rt, obj)
        self.store.put(self.store.collection(rt), obj["metadata"]["name"], obj)

    # ---- what the built-in admission plugins read (admission.Lookup) -----
    def _items(self, key: tuple[str, str], namespace: str | None = None) -> list[dict[str, Any]]:
        coll = self.store.collections.get(key)
        if coll is None:
            return []
        return [entry.obj for _, _, entry in coll.scan(namespace, None)]

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        coll = self.store.collections.get(SERVICE_ACCOUNTS)
        entry = coll.items.get(key_of(namespace, name)) if coll else None
        return entry.obj if entry else None

    def limit_ranges(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(LIMIT_RANGES, namespace)

    def priority_classes(self) -> list[dict[str, Any]]:
        return self._items(PRIORITY_CLASSES)

    def rt(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.registry.get(group, version, plural)

    def namespace_labels(self, ns: str) -> dict[str, str] | None:
        coll = self.store.collections.get(NS)
        entry = coll.items.get(ns) if coll else None
        return (entry.obj["metadata"].get("labels") or {}) if entry else None

    def _require_namespace(self, ns: str) -> None:
        coll = self.store.collections.get(NS)
        if coll is None or ns not in coll.items:
            raise not_found("", "namespaces", ns)

    def _webhook_configs(self) -> list[dict[str, Any]]:
        coll = self.store.collections.get(MWC)
        return [e.obj for e in coll.items.values()] if coll else []

    async def _admit(self, a: Attributes) -> dict[str, Any] | None:
        """Admission as kube-apiserver runs it: the built-in mutating plugins, the mutating
        webhooks (each patch decoded and defaulted again; the built-in plugins run again after a
        webhook changed the object), the built-in validating plugins."""
        obj = admission.mutate(a, self)
        configs = self._webhook_configs()
        if configs:
            a = dataclasses.replace(a, obj=obj)
            obj = await self.dispatcher.admit(a, configs, self.namespace_labels,
                                              lambda o: objects.decode_defaults(a.rt, o),
                                              lambda o: admission.mutate(dataclasses.replace(a, obj=o), self))
        admission.validate(dataclasses.replace(a, obj=obj), self)
        return obj

    # ---- helpers -------------------------------------------------------
    def _coll(self, t: Target) -> Collection:
        return self.store.collection(t.rt)

    @staticmethod
    def _obj_response(t: Target, entry_or_obj: Entry | dict[str, Any], status: int = 200) -> web.Response:
        if isinstance(entry_or_obj, Entry):
            body = entry_or_obj.full(t.rt.kind, t.rt.api_version)
        else:
            body = dumps({**entry_or_obj, "kind": t.rt.kind, "apiVersion": t.rt.api_version})
        return web.Response(status=status, body=body, content_type="application/json")

    def _key(self, t: Target, name: str) -> str:
        return key_of(t.namespace or "", name) if t.rt.namespaced else name

    def _get(self, t: Target) -> Entry:
        assert t.name is not None
        entry = self.store.get(self._coll(t), self._key(t, t.name))
        if entry is None:
            raise not_found(t.rt.group, t.rt.plural, t.name)
        return entry

    def _after_write(self, t: Target, old: Entry | None, new: Entry | None) -> None:
        """Side effects of writing CRDs: (re)register or stop serving their resources."""
        if t.rt.collection_key != CRDS:
            return
        if old is not None:
            spec = old.obj["spec"]
            self.registry.remove_collection(spec["group"], spec["names"]["plural"])
        if new is not None:
            for rt in crd_types(new.obj):
                self.registry.add(rt)
            if old is not None and old.obj["spec"]["versions"] != new.obj["spec"]["versions"]:
                self._redecode(new.obj)
        elif old is not None:
            spec = old.obj["spec"]
            self.store.drop_collection(spec["group"], spec["names"]["plural"])

    def _redecode(self, crd: dict[str, Any]) -> None:
        """kube-apiserver decodes what it reads from etcd against the CRD's current schema (pruned,
        defaulted): after a schema change, the stored objects read as the new schema makes them
        (same resourceVersion, no watch event)."""
        spec = crd["spec"]
        coll = self.store.collections.get((spec["group"], spec["names"]["plural"]))
        if coll is None:
            return
        storage = next((v["name"] for v in spec["versions"] if v.get("storage")), None)
        for key, entry in list(coll.items.items()):
            version = str(entry.obj.get("apiVersion", "")).rpartition("/")[2]
            schema = crdschema.version_schema(crd, version) or crdschema.version_schema(crd, storage or "")
            if schema is None:
                continue
            obj = copy.deepcopy(entry.obj)
            crdschema.storage_form(obj, schema)
            if obj != entry.obj:
                coll.items[key] = Entry.of(obj)

    # ---- reads ---------------------------------------------------------
    async def get(self, request: web.Request, t: Target) -> web.Response:
        return self._obj_response(t, self._get(t))

    def _selectors(self, request: web.Request, t: Target) -> tuple[Any, Any]:
        try:
            labels = parse_label_selector(request.query.get("labelSelector"))
            fields = parse_field_selector(request.query.get("fieldSelector"), t.rt.field_selectors)
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        return labels, fields

    async def list(self, request: web.Request, t: Target) -> web.StreamResponse:
        if qbool(request.query.get("watch")):
            return await self.watch(request, t)
        labels, fields = self._selectors(request, t)
        limit = qint(request.query, "limit") or 0
        if limit < 0:
            limit = 0
        page = self.store.list_page(self._coll(t), t.namespace, labels, fields, limit,
                                    request.query.get("continue") or None)
        meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
        if page.continue_token:
            meta["continue"] = page.continue_token
            if page.remaining is not None:
                meta["remainingItemCount"] = page.remaining
        if t.rt.custom:
            items = [e.full(t.rt.kind, t.rt.api_version) for e in page.entries]
        else:
            items = [e.body for e in page.entries]
        body = (b'{"kind":' + dumps(t.rt.list_kind) + b',"apiVersion":' + dumps(t.rt.api_version)
                + b',"metadata":' + dumps(meta) + b',"items":[' + b",".join(items) + b"]}")
        return web.Response(body=body, content_type="application/json")

    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        labels, fields = self._selectors(request, t)
        raw_rv = request.query.get("resourceVersion") or ""
        since: int | None = None
        if raw_rv not in ("", "0"):
            try:
                since = int(raw_rv)
                if since < 0:
                    raise ValueError
            except ValueError:
                raise bad_request(f'resourceVersion: Invalid value: "{raw_rv}": must be a non-negative integer') from None
        timeout = qint(request.query, "timeoutSeconds")
        if timeout is None or timeout <= 0:
            timeout = random.randint(1800, 3600)
        bookmarks = qbool(request.query.get("allowWatchBookmarks"))
        initial_end = qbool(request.query.get("sendInitialEvents")) and since is None and bookmarks
        w = Watcher(t.rt, t.namespace, labels, fields, bookmarks)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                       "Cache-Control": "no-cache, private"})
        resp.enable_chunked_encoding()
        kind, api_version = t.rt.kind, t.rt.api_version
        try:
            self.store.watch(w, since)
        except ApiError as exc:
            await resp.prepare(request)
            await resp.write(dumps({"type": "ERROR", "object": exc.body}) + b"\n")
            await resp.write_eof()
            return resp
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval

        def bookmark(annotate: bool = False) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
            if annotate:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return dumps({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version, "metadata": meta}}) + b"\n"

        try:
            if initial_end:
                # the synthetic ADDED events are already queued; the marker follows them
                pending = []
                while not w.queue.empty():
                    pending.append(w.queue.get_nowait())
                for item in pending:
                    if item is None:
                        return resp
                    await resp.write(self._event_line(item, kind, api_version))
                await resp.write(bookmark(True))
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                try:
                    item = await asyncio.wait_for(w.queue.get(), timeout=wait)
                except (TimeoutError, asyncio.TimeoutError):
                    if bookmarks and loop.time() >= next_bookmark:
                        # Due: send it if nothing is queued (events carry newer RVs anyway), and
                        # always move the deadline on — else wait stays 0, wait_for(get, 0) cancels
                        # the get before it runs, and a queued event stalls the stream for good.
                        if w.queue.empty():
                            await resp.write(bookmark())
                        next_bookmark = loop.time() + self.bookmark_interval
                    continue
                if item is None:
                    return resp
                chunk = [self._event_line(item, kind, api_version)]
                while not w.queue.empty() and len(chunk) < 256:
                    nxt = w.queue.get_nowait()
                    if nxt is None:
                        await resp.write(b"".join(chunk))
                        return resp
                    chunk.append(self._event_line(nxt, kind, api_version))
                await resp.write(b"".join(chunk))
            # timeout: flush what is queued, then a last bookmark
            while not w.queue.empty():
                item = w.queue.get_nowait()
                if item is None:
                    return resp
                await resp.write(self._event_line(item, kind, api_version))
            if bookmarks:
                await resp.write(bookmark())
            return resp
        except ConnectionResetError:  # the client went away: a normal end for a watch
            return resp
        finally:
            self.store.unwatch(w)
            w.closed = True

    @staticmethod
    def _event_line(item: tuple[str, Entry], kind: str, api_version: str) -> bytes:
        etype, entry = item
        return b'{"type":"' + etype.encode() + b'","object":' + entry.full(kind, api_version) + b"}\n"

    # ---- create --------------------------------------------------------
    async def create(self, request: web.Request, t: Target) -> web.Response:
        if t.rt.namespaced and t.namespace is None:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        body = objects.decode_object(await request.read(), t.rt)
        dry = _dry_run(request)
        return await self._create(t, body, dry, {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})

    async def _create(self, t: Target, body: dict[str, Any], dry: bool, options: dict[str, Any],
                      status: int = 201) -> web.Response:
        obj = objects.prepare_create(t.rt, body, t.namespace or "")
        if t.rt.namespaced:
            self._require_namespace(t.namespace or "")
        coll = self._coll(t)
        if t.rt.collection_key == CRDS:
            self._check_crd_conflict(obj, None)
        a = Attributes(t.rt, "CREATE", obj["metadata"].get("name") or "", t.namespace or "", obj, None, dry,
                       options=options)
        admitted = await self._admit(a)
        assert admitted is not None
        obj = admitted
        for _ in range(8):  # generated names may collide: retry like the storage layer
            name = objects.finish_create(t.rt, obj)
            key = self._key(t, name)
            if coll.items.get(key) is None:
                break
            if not body["metadata"].get("generateName") or body["metadata"].get("name"):
                raise already_exists(t.rt.group, t.rt.plural, name)
            obj["metadata"]["name"] = ""
        else:
            raise already_exists(t.rt.group, t.rt.plural, name)
        objects.finalize_create(t.rt, obj)
        if t.rt.namespaced:
            self._require_namespace(t.namespace or "")
        if dry:
            return self._obj_response(t, obj, status)
        entry = self.store.put(coll, key, obj)
        self._after_write(t, None, entry)
        return self._obj_response(t, entry, status)

    def _check_crd_conflict(self, crd: dict[str, Any], old: Entry | None) -> None:
        spec = crd["spec"]
        group, plural = spec["group"], spec["names"]["plural"]
        for rt in self.registry.kinds_for(group, plural):
            if not rt.custom:
                raise objects.invalid("CustomResourceDefinition", "apiextensions.k8s.io", crd["metadata"]["name"],
                                      [("spec.names.plural", f'Invalid value: "{plural}": conflicts with a built-in resource')])

    # ---- update / patch ----------------------------------------------------
    async def update(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        body = objects.decode_object(await request.read(), t.rt)
        dry = _dry_run(request)
        meta = body["metadata"]
        if meta.get("name") and meta["name"] != t.name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({t.name})")
        if t.rt.namespaced and meta.get("namespace") and meta["namespace"] != t.namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        entry = self.store.get(self._coll(t), self._key(t, t.name))
        if entry is None:
            if t.rt.allow_create_on_update and not t.sub:
                meta["name"] = t.name
                return await self._create(t, body, dry, {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
            raise not_found(t.rt.group, t.rt.plural, t.name)
        return await self._replace(t, entry, body, dry)

    async def _replace(self, t: Target, entry: Entry, body: dict[str, Any], dry: bool) -> web.Response:
        assert t.name is not None
        want_rv = body["metadata"].get("resourceVersion") or ""
        if want_rv and want_rv != entry.obj["metadata"]["resourceVersion"]:
            raise conflict(t.rt.group, t.rt.plural, t.name)
        old_obj = entry.served(t.rt)
        new = objects.prepare_update(t.rt, old_obj, body, t.sub)
        if t.rt.collection_key == CRDS:
            self._check_crd_conflict(new, entry)
        a = Attributes(t.rt, "UPDATE", t.name, t.namespace or "", new, old_obj, dry, t.sub,
                       {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"})
        new = await self._admit(a)
        assert new is not None
        objects.finalize_update(t.rt, old_obj, new, t.sub)
        coll = self._coll(t)
        key = self._key(t, t.name)
        current = coll.items.get(key)
        if current is None:
            raise not_found(t.rt.group, t.rt.plural, t.name)
        if current is not entry:
            raise conflict(t.rt.group, t.rt.plural, t.name)
        if objects.unchanged(old_obj, new):
            return self._obj_response(t, entry)
        if dry:
            return self._obj_response(t, new)
        stored = self.store.put(coll, key, new)
        self._after_write(t, entry, stored)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") and not t.sub:
            self.store.delete(coll, key)  # its last finalizer removed: the deletion completes
            self._after_write(t, stored, None)
        return self._obj_response(t, stored)

    async def patch(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        allowed = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH] + ([] if t.rt.custom else [STRATEGIC_PATCH])
        if ctype not in allowed:
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                           + ", ".join(allowed), "UnsupportedMediaType")
        raw = await request.read()
        dry = _dry_run(request)
        entry = self.store.get(self._coll(t), self._key(t, t.name))
        if ctype == APPLY_PATCH:
            return await self._apply(request, t, entry, raw, dry)
        patch = objects.decode_json(raw)
        if entry is None:
            raise not_found(t.rt.group, t.rt.plural, t.name)
        base = copy.deepcopy(entry.served(t.rt))
        try:
            if ctype == JSON_PATCH:
                patched = patching.json_patch(base, patch)
            elif not isinstance(patch, dict):
                raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
            elif ctype == MERGE_PATCH:
                patched = patching.merge_patch(base, patch)
            else:
                patched = patching.strategic_merge_patch(base, patch)
        except patching.PatchDecodeError as exc:
            raise bad_request(str(exc)) from None
        except patching.PatchApplyError:
            raise ApiError(422, "the server rejected our request due to an error in our request", "Invalid", {}) from None
        if not isinstance(patched, dict):
            raise bad_request("the patch produced a value that is not an object")
        return await self._patched(t, entry, patched, dry)

    async def _patched(self, t: Target, entry: Entry, patched: dict[str, Any], dry: bool) -> web.Response:
        objects.check_type(patched, t.rt)
        meta = patched["metadata"]
        if meta.get("name") != t.name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({t.name})")
        if t.rt.namespaced and meta.get("namespace") != t.namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        return await self._replace(t, entry, patched, dry)

    async def _apply(self, request: web.Request, t: Target, entry: Entry | None, raw: bytes, dry: bool) -> web.Response:
        """Server-side apply, simplified: no field ownership; SMP/merge onto the live object, or create."""
        if not request.query.get("fieldManager"):
            raise objects.invalid("PatchOptions", "meta.k8s.io", "",
                                  [("fieldManager", "Required value: is required for apply patch")])
        try:
            doc = yaml.safe_load(raw.decode() or "{}")
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise bad_request(f"error decoding YAML: {exc}") from None
        if not isinstance(doc, dict):
            raise bad_request("apply patch must be an object")
        objects.check_type(doc, t.rt)
        if entry is None:
            doc["metadata"]["name"] = t.name
            return await self._create(t, doc, dry, {"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"})
        base = copy.deepcopy(entry.served(t.rt))
        merge = patching.merge_patch if t.rt.custom else patching.strategic_merge_patch
        patched = merge(base, doc)
        return await self._patched(t, entry, patched, dry)

    # ---- delete -----------------------------------------------------------
    async def delete(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        raw = await request.read()
        options = objects.decode_json(raw) if raw.strip() else {}
        if not isinstance(options, dict):
            raise bad_request("DeleteOptions must be an object")
        dry = _dry_run(request) or bool(options.get("dryRun"))
        entry = self._get(t)
        pre = options.get("preconditions") or {}
        meta = entry.obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise ApiError(409, f'Operation cannot be fulfilled on {t.rt.plural} "{t.name}": Precondition failed: '
                           f"UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}", "Conflict",
                           {"name": t.name, "kind": t.rt.plural})
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise ApiError(409, f'Operation cannot be fulfilled on {t.rt.plural} "{t.name}": Precondition failed: '
                           f"ResourceVersion in precondition: {pre['resourceVersion']}, ResourceVersion in object meta: "
                           f"{meta['resourceVersion']}", "Conflict", {"name": t.name, "kind": t.rt.plural})
        if t.rt.collection_key == NS and t.name in PROTECTED_NAMESPACES:
            raise ApiError(403, f'namespaces "{t.name}" is forbidden: this namespace may not be deleted', "Forbidden",
                           {"name": t.name, "kind": "namespaces"})
        await self._admit(Attributes(t.rt, "DELETE", t.name, t.namespace or "", None, entry.served(t.rt), dry,
                                     options={"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}))
        self._check_deletable(t, t.name)
        if dry:
            return self._delete_response(t, entry)
        last = self._remove(t, t.name)
        return self._delete_response(t, last)

    @staticmethod
    def _check_deletable(t: Target, name: str) -> None:
        if t.rt.collection_key == PRIORITY_CLASSES and any(pc["metadata"]["name"] == name
                                                          for pc in SYSTEM_PRIORITY_CLASSES):
            raise forbidden(t.rt.group, t.rt.plural, name, "this is a system priority class and cannot be deleted")

    def _remove(self, t: Target, name: str) -> Entry:
        coll = self._coll(t)
        key = self._key(t, name)
        if key not in coll.items:
            raise not_found(t.rt.group, t.rt.plural, name)
        if t.rt.collection_key == NS:
            for other in list(self.store.collections.values()):
                if other.namespaced:
                    for _, k, _ in list(other.scan(name, None)):
                        self.store.delete(other, k)
        old = coll.items[key]
        if t.rt.collection_key != NS and old.obj["metadata"].get("finalizers"):
            return self._mark_deleted(t, old)
        last = self.store.delete(coll, key)
        self._after_write(t, old, None)
        if t.rt.collection_key == NS:
            obj = copy.deepcopy(last.obj)
            obj["metadata"]["deletionTimestamp"] = objects.now()
            obj["status"] = {"phase": "Terminating"}
            return Entry.of(obj)
        return last

    def _mark_deleted(self, t: Target, entry: Entry) -> Entry:
        """A delete of an object with finalizers: it stays, with ``deletionTimestamp`` (and
        ``deletionGracePeriodSeconds: 0``; the generation bumped where there is one) until an
        update empties its finalizers. A repeated delete changes nothing."""
        meta = entry.obj["metadata"]
        if meta.get("deletionTimestamp"):
            return entry
        obj = copy.deepcopy(entry.obj)
        obj["metadata"].update(deletionTimestamp=objects.now(), deletionGracePeriodSeconds=0)
        if t.rt.has_generation and "generation" in meta:
            obj["metadata"]["generation"] = int(meta["generation"]) + 1
        return self.store.put(self._coll(t), self._key(t, meta["name"]), obj)

    def _delete_response(self, t: Target, entry: Entry) -> web.Response:
        if entry.obj["metadata"].get("deletionTimestamp") and t.rt.collection_key != NS:
            return self._obj_response(t, entry)  # held by its finalizers: the object, 200
        if t.rt.return_deleted_object or t.rt.custom or t.rt.collection_key == CRDS:
            return self._obj_response(t, entry)
        details: dict[str, Any] = {"name": entry.obj["metadata"]["name"]}
        if t.rt.group:
            details["group"] = t.rt.group
        details["kind"] = t.rt.plural
        details["uid"] = entry.obj["metadata"].get("uid", "")
        return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "details": details})

    async def delete_collection(self, request: web.Request, t: Target) -> web.Response:
        if t.rt.namespaced and t.namespace is None:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        labels, fields = self._selectors(request, t)
        dry = _dry_run(request)
        page = self.store.list_page(self._coll(t), t.namespace, labels, fields)
        removed = []
        for entry in page.entries:
            name = entry.obj["metadata"]["name"]
            if t.rt.collection_key == NS and name in PROTECTED_NAMESPACES:
                continue
            if t.rt.collection_key == PRIORITY_CLASSES and any(pc["metadata"]["name"] == name
                                                              for pc in SYSTEM_PRIORITY_CLASSES):
                continue  # kube-apiserver's bootstrap puts them back at once
            await self._admit(Attributes(t.rt, "DELETE", name, t.namespace or "", None, entry.served(t.rt), dry,
                                         options={"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}))
            if dry:
                removed.append(entry)
                continue
            try:
                removed.append(self._remove(t, name))
            except ApiError:
                continue
        items = [e.full(t.rt.kind, t.rt.api_version) for e in removed]
        body = (b'{"kind":' + dumps(t.rt.list_kind) + b',"apiVersion":' + dumps(t.rt.api_version)
                + b',"metadata":' + dumps({"resourceVersion": str(self.store.rv)}) + b',"items":['
                + b",".join(items) + b"]}")
        return web.Response(body=body, content_type="application/json")

