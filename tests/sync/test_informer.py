"""common.informer against the API server (devstack or real), over HTTP.

A recording handler sees exactly what the sync's handlers see; every scenario
ends with the informer's cache (and the handler's view) equal to the API
server's collection. Faults (watch cuts, 410s, 5xx, empty streams) come from
the fault-injecting proxy in front of the server (``kube_proxy``,
tests/fixtures/proxy.py), never from patching the client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest

from devstack.federation import CLUSTER_CRD
from devstack.scratch import install_crd, unique_name
from fedplace.common.informer import CompactObjects, Informer, InformerSettings
from fedplace.common.kube_client import Resource, kube_json

CM = Resource("", "v1", "configmaps", True)
NAMESPACES = Resource("", "v1", "namespaces", False)
CLUSTERS = Resource("federation.fedplace.io", "v1beta1", "clusters", False)

FAST = InformerSettings(page_size=2, watch_timeout=30, backoff_initial=0.05, backoff_max=0.5)


class Recorder:
    """An informer handler keeping the view a handler would build: the last sync, then the events."""

    def __init__(self, fail_on: Callable[[str, dict[str, Any]], bool] | None = None) -> None:
        self.syncs: list[list[str]] = []
        self.events: list[tuple[str, str]] = []
        self.view: dict[str, dict[str, Any]] = {}
        self.fail_on = fail_on

    async def on_sync(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        assert resource_version
        self.view = {_key(o): o for o in objects}
        self.syncs.append(sorted(self.view))

    async def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        if self.fail_on is not None and self.fail_on(event_type, obj):
            self.fail_on = None  # fail once
            raise RuntimeError("handler failed")
        self.events.append((event_type, _key(obj)))
        if event_type == "DELETED":
            self.view.pop(_key(obj), None)
        else:
            self.view[_key(obj)] = obj


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def server_view(api: Any, namespace: str) -> dict[str, str]:
    doc = await kube_json(api, "GET", CM.collection_path(namespace))
    return {f"{namespace}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in doc["items"]}


async def in_sync(api: Any, informer: Informer, rec: Recorder, namespace: str) -> bool:
    """Cache and handler view both equal the server's collection, object by object (by resourceVersion)."""
    want = await server_view(api, namespace)
    cache = {k: o["metadata"]["resourceVersion"] for k, o in informer.objects.items()}
    view = {k: o["metadata"]["resourceVersion"] for k, o in rec.view.items()}
    return cache == want and view == want


async def create_cm(api: Any, namespace: str, name: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    return await kube_json(api, "POST", CM.collection_path(namespace), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
        "data": data or {"k": name}})


async def wait_watching(kube: Any) -> None:
    """Until the informer's watch through the proxy is open (``synced`` is set before
    the watch starts)."""
    async def watching() -> bool:
        return (await kube.state())["watchers"] >= 1

    await eventually(watching, what="the informer's watch to be open")


async def cut_watches(kube: Any, abort: bool = False) -> None:
    """End the informer's open watch stream (cleanly, or by dropping the connection)."""
    await wait_watching(kube)
    assert (await kube.close_watches(abort=abort))["closed"] >= 1


async def watch_taken(kube: Any) -> bool:
    """The injected watch fault was consumed (the informer is parked in it)."""
    state = await kube.admin("GET", "faults")
    return all(rule["count"] == 0 for rule in state["rules"])


@pytest.fixture
async def run_informer(kube_api) -> AsyncIterator[Callable[..., Awaitable[tuple[Informer, Recorder]]]]:
    tasks: list[asyncio.Task[None]] = []

    async def start(namespace: str | None, rec: Recorder | None = None, resource: Resource = CM,
                    settings: InformerSettings = FAST, api: Any = None) -> tuple[Informer, Recorder]:
        """An informer over ``api`` (the ``kube_api`` fixture's unless given: a proxy's)."""
        rec = rec or Recorder()
        inf = Informer(api or kube_api, resource, rec, namespace=namespace, settings=settings)
        tasks.append(asyncio.create_task(inf.run()))
        await asyncio.wait_for(inf.synced.wait(), 10)
        return inf, rec

    yield start
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_paginated_list_then_ordered_events(kube_api, kube_namespace, run_informer):
    api, ns = kube_api, kube_namespace
    for i in range(5):
        await create_cm(api, ns, f"c{i}")
    inf, rec = await run_informer(ns)
    assert rec.syncs == [[f"{ns}/c{i}" for i in range(5)]]  # five objects over three pages, one on_sync
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in inf.objects.values())
    await create_cm(api, ns, "c5")
    await kube_json(api, "PATCH", CM.object_path("c0", ns), body={"data": {"k": "changed"}},
                    content_type="application/merge-patch+json")
    await kube_json(api, "DELETE", CM.object_path("c1", ns))
    await eventually(lambda: len(rec.events) == 3, what="three events")
    assert rec.events == [("ADDED", f"{ns}/c5"), ("MODIFIED", f"{ns}/c0"), ("DELETED", f"{ns}/c1")]
    assert inf.objects[f"{ns}/c0"]["data"] == {"k": "changed"}
    assert await in_sync(api, inf, rec, ns)
    assert inf.stats.relists == 1


async def test_a_compact_cache_lists_page_by_page_and_reads_as_objects(kube_api, kube_namespace, run_informer):
    """``compact``: the cache keeps JSON, on_sync gets a view of it, reads give equal (new) dicts."""
    api, ns = kube_api, kube_namespace
    for i in range(5):
        await create_cm(api, ns, f"c{i}")
    settings = InformerSettings(page_size=2, watch_timeout=30, backoff_initial=0.05, backoff_max=0.5, compact=True)
    inf, rec = await run_informer(ns, settings=settings)
    assert isinstance(inf.objects, CompactObjects)
    assert rec.syncs == [[f"{ns}/c{i}" for i in range(5)]]  # one on_sync over three pages, from the view
    assert all(isinstance(raw, bytes) for _, raw in inf.objects.raw_items())
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in inf.objects.values())
    inf.objects[f"{ns}/c2"]["data"] = {"k": "scribbled"}  # a read is a copy: the cache is unchanged
    assert inf.objects[f"{ns}/c2"]["data"] != {"k": "scribbled"}
    await kube_json(api, "PATCH", CM.object_path("c0", ns), body={"data": {"k": "changed"}},
                    content_type="application/merge-patch+json")
    await kube_json(api, "DELETE", CM.object_path("c1", ns))
    await eventually(lambda: len(rec.events) == 2, what="two events")
    assert inf.objects[f"{ns}/c0"]["data"] == {"k": "changed"} and f"{ns}/c1" not in inf.objects
    assert await in_sync(api, inf, rec, ns)


# Data whose text looks like the end of a list item and the start of the next.
TRICKY = {"k": '}],{"metadata":{"name":"x"}}', "q": '"},{"metadata":'}


@pytest.mark.parametrize("compact", [False, True])
async def test_the_first_list_comes_whole_from_the_watch_cache(kube_api, kube_namespace, run_informer, caplog,
                                                                compact):
    """``first_list_from_cache``: the first list is one unpaged answer (resourceVersion=0), its
    items parsed as they arrive; the cache, the handler's view and the events are the same."""
    api, ns = kube_api, kube_namespace
    for i in range(5):
        await create_cm(api, ns, f"c{i}", TRICKY)
    caplog.set_level(logging.INFO, logger="fedplace.common.informer")
    settings = dataclasses.replace(FAST, first_list_from_cache=True, compact=compact)
    inf, rec = await run_informer(ns, settings=settings)
    assert rec.syncs == [[f"{ns}/c{i}" for i in range(5)]]  # one answer, though FAST pages by two
    listed = [r for r in caplog.records if r.getMessage() == "listed"]
    assert [(getattr(r, "from", None), r.pages) for r in listed] == [("watch cache", 1)]
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" and o["data"] == TRICKY
               for o in inf.objects.values())
    await create_cm(api, ns, "c5")
    await kube_json(api, "DELETE", CM.object_path("c1", ns))
    await eventually(lambda: len(rec.events) == 2, what="two events")
    assert await in_sync(api, inf, rec, ns)


async def test_a_custom_resource_list_from_the_watch_cache(kube_api, run_informer, caplog):
    """A custom resource's list answer has its keys sorted (``metadata`` after ``items``): its
    resourceVersion is read after the items, and the list needs no second try."""
    api = kube_api
    await install_crd(api, CLUSTER_CRD)
    names = [unique_name("inf-cl") for _ in range(3)]
    for name in names:
        await kube_json(api, "POST", CLUSTERS.collection_path(), body={
            "apiVersion": CLUSTERS.api_version, "kind": "Cluster", "metadata": {"name": name},
            "status": {"region": '"},{"apiVersion":'}})
    try:
        caplog.set_level(logging.INFO, logger="fedplace.common.informer")
        inf, rec = await run_informer(None, resource=CLUSTERS,
                                      settings=dataclasses.replace(FAST, first_list_from_cache=True, compact=True))
        assert {f"/{n}" for n in names} <= set(rec.view) and inf.stats.errors == 0, inf.stats.last_error
        assert inf.resource_version
        assert all(inf.objects[n]["kind"] == "Cluster" for n in names)
        listed = [r for r in caplog.records if r.getMessage() == "listed"]
        assert [getattr(r, "from", None) for r in listed] == ["watch cache"]
    finally:
        for name in names:
            await kube_json(api, "DELETE", CLUSTERS.object_path(name))


async def test_a_broken_answer_from_the_watch_cache_falls_back_to_pages(kube_proxy, kube_proxy_api, kube_api,
                                                                        kube_namespace, run_informer):
    """An unpaged answer cut short is an error, never a short cache: the informer backs off
    and lists again, page by page."""
    api, ns, kube = kube_api, kube_namespace, kube_proxy
    for name in ("a", "b", "c"):
        await create_cm(api, ns, name)
    cut = '{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}}'
    await kube.set_faults({"fail": {"path": CM.collection_path(ns), "method": "GET", "status": 200, "count": 1,
                                    "body": cut}})
    settings = dataclasses.replace(FAST, first_list_from_cache=True)
    inf, rec = await run_informer(ns, api=kube_proxy_api, settings=settings)
    assert rec.syncs == [[f"{ns}/a", f"{ns}/b", f"{ns}/c"]]
    assert inf.stats.errors == 1 and "watch cache" in inf.stats.last_error, inf.stats.last_error
    assert await in_sync(api, inf, rec, ns)


async def test_a_field_selector_loses_nothing_over_pages(kube_api, kube_namespace, run_informer):
    """Every object the selector matches, though the excluded ones sit between them on every page.
    (A paged list with a selector loses matches on kube-apiserver 1.22 to 1.24.2: the informer
    pages without it and filters; its watch still carries the selector.)"""
    api, ns = kube_api, kube_namespace
    for i in range(12):
        await create_cm(api, ns, f"c{i:02d}")
    excluded = {f"c{i:02d}" for i in range(0, 12, 3)}
    selector = ",".join(f"metadata.name!={name}" for name in sorted(excluded))
    settings = InformerSettings(page_size=2, watch_timeout=30, field_selector=selector)
    inf, rec = await run_informer(ns, settings=settings)
    assert rec.syncs == [sorted(f"{ns}/c{i:02d}" for i in range(12) if f"c{i:02d}" not in excluded)]
    await create_cm(api, ns, "c99")
    await kube_json(api, "DELETE", CM.object_path("c00", ns))  # excluded: its deletion is not an event
    await kube_json(api, "DELETE", CM.object_path("c01", ns))
    await eventually(lambda: len(rec.events) == 2, what="two events")
    assert rec.events == [("ADDED", f"{ns}/c99"), ("DELETED", f"{ns}/c01")]
    assert sorted(inf.objects) == sorted(f"{ns}/{n}" for n in ("c02", "c04", "c05", "c07", "c08", "c10", "c11",
                                                               "c99"))


async def test_cluster_scoped_keys_by_name(kube_api, run_informer):
    inf, _ = await run_informer(None, resource=Resource("", "v1", "namespaces", False))
    assert "default" in inf.objects and all("/" not in k for k in inf.objects)


async def test_closed_watch_resumes_from_last_rv_without_relist(kube_proxy, kube_proxy_api, kube_api, kube_namespace,
                                                                run_informer):
    api, ns = kube_api, kube_namespace
    await create_cm(api, ns, "before")
    inf, rec = await run_informer(ns, api=kube_proxy_api)
    await cut_watches(kube_proxy)
    await create_cm(api, ns, "after")
    await kube_json(api, "DELETE", CM.object_path("before", ns))
    await eventually(lambda: in_sync(api, inf, rec, ns), what="changes after the cut")
    assert inf.stats.relists == 1 and inf.stats.watch_restarts >= 1
    assert rec.events == [("ADDED", f"{ns}/after"), ("DELETED", f"{ns}/before")]  # nothing replayed twice


async def test_410_relists_and_drops_objects_deleted_in_the_gap(kube_proxy, kube_proxy_api, kube_api, kube_namespace,
                                                                run_informer):
    api, ns, kube = kube_api, kube_namespace, kube_proxy
    for name in ("keep", "gone"):
        await create_cm(api, ns, name)
    inf, rec = await run_informer(ns, api=kube_proxy_api)
    # Park the informer's next watch in a slow, empty answer, so it resumes from its old RV later.
    await wait_watching(kube)
    await kube.set_faults({"fail": {"path": CM.collection_path(ns), "method": "GET", "status": 200, "body": "",
                                    "delay": 1.0, "count": 1}})
    await cut_watches(kube)
    await eventually(lambda: watch_taken(kube), what="the informer to re-watch into the fault")
    await kube_json(api, "DELETE", CM.object_path("gone", ns))
    await create_cm(api, ns, "new")
    await kube.compact()
    # Resuming from the old RV now gets an in-stream 410 → relist replaces the whole view.
    await eventually(lambda: inf.stats.relists >= 2, what="a relist after 410")
    await eventually(lambda: in_sync(api, inf, rec, ns), what="view equal to the server after the relist")
    assert rec.syncs[-1] == [f"{ns}/keep", f"{ns}/new"]
    assert ("DELETED", f"{ns}/gone") not in rec.events  # the deletion was only learned from the relist
    assert inf.stats.errors == 0  # 410 is the protocol, not a failure


async def test_http_410_on_a_watch_relists_without_an_error(kube_proxy, kube_proxy_api, kube_api, kube_namespace,
                                                            run_informer):
    """A watch refused with an HTTP 410 (not the in-stream ERROR event) is the same
    protocol: relist, no error counted."""
    api, ns, kube = kube_api, kube_namespace, kube_proxy
    await create_cm(api, ns, "a")
    inf, rec = await run_informer(ns, api=kube_proxy_api)
    await wait_watching(kube)
    await kube.set_faults({"gone": {"path": CM.collection_path(ns), "method": "GET", "http": True}})
    await cut_watches(kube)
    await eventually(lambda: inf.stats.relists >= 2, what="a relist after the HTTP 410")
    await create_cm(api, ns, "b")
    await eventually(lambda: in_sync(api, inf, rec, ns), what="watching again after the relist")
    assert (await kube.admin("GET", "faults"))["proxy_rules"][0]["count"] == 0
    assert inf.stats.errors == 0


async def test_a_watch_connection_dropped_mid_stream_relists(kube_proxy, kube_proxy_api, kube_api, kube_namespace,
                                                             run_informer):
    """A watch whose connection drops (not a clean end of the stream) is a failure: the
    informer relists, and what changed meanwhile reaches it."""
    api, ns, kube = kube_api, kube_namespace, kube_proxy
    await create_cm(api, ns, "a")
    inf, rec = await run_informer(ns, api=kube_proxy_api)
    await cut_watches(kube, abort=True)
    await kube_json(api, "DELETE", CM.object_path("a", ns))
    await create_cm(api, ns, "b")
    await eventually(lambda: in_sync(api, inf, rec, ns), what="the view equal to the server after the cut")
    assert inf.stats.relists >= 2 and inf.stats.errors >= 1
    assert "Payload" in inf.stats.last_error or "Connection" in inf.stats.last_error, inf.stats.last_error


async def test_server_errors_back_off_and_relist(kube_proxy, kube_proxy_api, kube_api, kube_namespace, run_informer):
    api, ns, kube = kube_api, kube_namespace, kube_proxy
    await create_cm(api, ns, "a")
    inf, rec = await run_informer(ns, api=kube_proxy_api)
    await wait_watching(kube)
    await kube.set_faults({"fail": {"path": CM.collection_path(ns), "method": "GET", "status": 500, "count": 4}})
    await cut_watches(kube)
    await create_cm(api, ns, "b")
    await eventually(lambda: watch_taken(kube), what="the informer to get every 500")
    await eventually(lambda: in_sync(api, inf, rec, ns), what="recovery after the 500s")
    assert inf.stats.errors >= 1 and inf.stats.relists >= 2
    assert "500" in inf.stats.last_error


async def test_handler_exception_relists(kube, kube_api, kube_namespace, run_informer):
    api, ns = kube_api, kube_namespace
    rec = Recorder(fail_on=lambda etype, obj: obj["metadata"]["name"] == "poison")
    inf, rec = await run_informer(ns, rec)
    await create_cm(api, ns, "poison")
    await eventually(lambda: inf.stats.relists >= 2, what="a relist after the handler failed")
    assert f"{ns}/poison" in rec.syncs[-1]
    await eventually(lambda: in_sync(api, inf, rec, ns), what="view equal to the server")
    assert "RuntimeError" in inf.stats.last_error


async def test_bookmarks_advance_the_resource_version(kube_api, kube_namespace, run_informer):
    """A BOOKMARK carries the server's newer RV to an informer that saw no event.

    When they come: the devstack fixture's server sends one every second; a real
    kube-apiserver 1.24 (its watch cache) about 2 s before the watch's
    ``timeoutSeconds`` runs out and then every minute (measured: a 3 s watch got it
    at 1.4 s, a 10 s one at 8.1 s, a 130 s one at 59 s), and only with an RV newer
    than the watch's own — which, for a watch that starts before a change it does not
    see, already counts that change (the watch cache replays it, filtered out): such a
    watch gets no bookmark until the type changes again. So the watches here last 3 s
    and the change elsewhere goes on (one update every half second) until the RV moved."""
    api, ns = kube_api, kube_namespace
    settings = InformerSettings(page_size=2, watch_timeout=3, backoff_initial=0.05, backoff_max=0.5)
    inf, rec = await run_informer(ns, settings=settings)
    before = inf.resource_version
    other = await create_cm(api, "default", f"elsewhere-{ns}")  # a change this informer does not see
    path = CM.object_path(other["metadata"]["name"], "default")

    async def keep_changing() -> None:
        for i in itertools.count():
            await asyncio.sleep(0.5)
            await kube_json(api, "PATCH", path, body={"data": {"k": str(i)}},
                            content_type="application/merge-patch+json")

    changing = asyncio.create_task(keep_changing())
    try:
        # at least the change's RV: later changes (and a real API server's own writes: its
        # leases, the `kubernetes` Endpoints) move it further by the time a bookmark is sent
        try:
            await eventually(lambda: int(inf.resource_version) >= int(other["metadata"]["resourceVersion"]), 30,
                             "a bookmark to advance the RV")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: RV {before} -> {inf.resource_version}, change at "
                                 f"{other['metadata']['resourceVersion']}; informer {inf.stats}") from None
        assert inf.resource_version != before and rec.events == []
    finally:
        changing.cancel()
        await asyncio.gather(changing, return_exceptions=True)
        await kube_json(api, "DELETE", path)


async def test_streams_ending_at_once_do_not_spin(kube_proxy, kube_proxy_api, kube_api, kube_namespace, run_informer):
    api, ns, kube = kube_api, kube_namespace, kube_proxy
    inf, rec = await run_informer(ns, api=kube_proxy_api)
    # Every watch answered at once with an empty, clean body (a proxy dropping streams).
    await wait_watching(kube)
    await kube.set_faults({"fail": {"path": CM.collection_path(ns), "method": "GET", "status": 200, "body": "",
                                    "count": 1000}})
    await cut_watches(kube)
    await asyncio.sleep(1.0)  # measuring a rate: the window is the measurement, not a wait for a state
    used = 1000 - (await kube.admin("GET", "faults"))["rules"][0]["count"]
    assert 1 <= used <= 15, f"{used} watch requests in 1 s"
    assert inf.stats.relists == 1  # an empty stream is not an error: resume, do not relist
    await kube.clear_faults()
    await create_cm(api, ns, "late")
    await eventually(lambda: in_sync(api, inf, rec, ns), 10, "watching again once streams work")



async def test_busy_stream_across_bookmarks_loses_nothing(kube_api, kube_namespace, run_informer):
    """Four writers patching as fast as they can for 2.5 s, across the server's 1 s bookmarks:
    every change arrives, in order per object.

    (Regression: a bookmark falling due while an event was queued stalled the stream for good.)"""
    api, ns = kube_api, kube_namespace
    names = [f"hot{w}" for w in range(4)]
    for name in names:
        await create_cm(api, ns, name, {"n": "0"})
    inf, rec = await run_informer(ns)
    written: dict[str, int] = {}

    async def writer(name: str) -> None:
        n, stop = 0, time.monotonic() + 2.5
        while time.monotonic() < stop:
            n += 1
            await kube_json(api, "PATCH", CM.object_path(name, ns), body={"data": {"n": str(n)}},
                            content_type="application/merge-patch+json")
        written[name] = n

    await asyncio.gather(*(writer(name) for name in names))
    await eventually(lambda: all(inf.objects[f"{ns}/{n}"]["data"]["n"] == str(written[n]) for n in names), 5,
                     "the last change of every object")
    for name in names:
        assert rec.events.count(("MODIFIED", f"{ns}/{name}")) == written[name]
    assert inf.stats.relists == 1 and inf.stats.errors == 0
