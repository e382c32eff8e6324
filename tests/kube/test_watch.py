"""Watch semantics through kubernetes_asyncio's watch.Watch().stream and on the wire."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException

from devstack.scratch import create_namespace
from fedplace.common.kube_client import kube_json

from .helpers import collect, raw, unique


def cm(name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data=data)


async def test_watch_from_zero_sends_existing_then_changes(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("pre", data={"k": "1"}))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_config_map, kube_namespace, resource_version="0", timeout_seconds=10)
    events: list[dict] = []

    async def consume() -> None:
        async for ev in stream:
            if ev["type"] == "BOOKMARK":
                continue
            events.append(ev)
            if ev["type"] == "DELETED":
                break

    task = asyncio.create_task(consume())
    for _ in range(100):
        if events:
            break
        await asyncio.sleep(0.02)
    await core.patch_namespaced_config_map("pre", kube_namespace, {"data": {"k": "2"}})
    await core.create_namespaced_config_map(kube_namespace, cm("new"))
    await core.delete_namespaced_config_map("pre", kube_namespace)
    await asyncio.wait_for(task, 10)
    await w.close()
    kinds = [(e["type"], e["object"].metadata.name) for e in events]
    assert kinds == [("ADDED", "pre"), ("MODIFIED", "pre"), ("ADDED", "new"), ("DELETED", "pre")]
    assert isinstance(events[0]["object"], client.V1ConfigMap)
    deleted = events[-1]["object"]
    assert deleted.data == {"k": "2"}  # DELETED carries the last state
    assert int(deleted.metadata.resource_version) > int(events[1]["object"].metadata.resource_version)


async def test_watch_from_exact_rv_sends_only_later_changes(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("before"))
    rv = (await core.list_namespaced_config_map(kube_namespace)).metadata.resource_version
    await core.create_namespaced_config_map(kube_namespace, cm("after"))
    w = watch.Watch()
    events = await collect(w.stream(core.list_namespaced_config_map, kube_namespace, resource_version=rv,
                                    timeout_seconds=5),
                           until=lambda evs: any(e["type"] == "ADDED" for e in evs))
    await w.close()
    added = [e["object"].metadata.name for e in events if e["type"] == "ADDED"]
    assert added == ["after"]


async def test_timeout_seconds_ends_stream_cleanly(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    w = watch.Watch()
    start = time.monotonic()
    events = await collect(w.stream(core.list_namespaced_config_map, kube_namespace, timeout_seconds=1), limit=10)
    await w.close()
    elapsed = time.monotonic() - start
    assert 0.8 <= elapsed < 5
    assert all(e["type"] == "BOOKMARK" for e in events)


async def test_watch_with_label_selector_transitions(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("x", labels={"sel": "no"}))
    rv = (await core.list_namespaced_config_map(kube_namespace)).metadata.resource_version
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_config_map, kube_namespace, label_selector="sel=yes",
                      resource_version=rv, timeout_seconds=10)
    task = asyncio.create_task(collect(stream, until=lambda evs: len([e for e in evs if e["type"] != "BOOKMARK"]) >= 2))
    await core.patch_namespaced_config_map("x", kube_namespace, {"metadata": {"labels": {"sel": "yes"}}})
    await core.patch_namespaced_config_map("x", kube_namespace, {"metadata": {"labels": {"sel": "no"}}})
    events = [e for e in await task if e["type"] != "BOOKMARK"]
    await w.close()
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


async def test_watch_all_namespaces_and_cluster_scoped(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    rv = (await core.list_namespace()).metadata.resource_version
    w = watch.Watch()
    task = asyncio.create_task(collect(
        w.stream(core.list_namespace, resource_version=rv, timeout_seconds=10,
                 field_selector=f"metadata.name={kube_namespace}-b"),
        until=lambda evs: any(e["type"] == "ADDED" for e in evs)))
    await asyncio.sleep(0.1)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=f"{kube_namespace}-b")))
    try:
        events = await task
        assert [e["object"].metadata.name for e in events if e["type"] == "ADDED"] == [f"{kube_namespace}-b"]
    finally:
        await w.close()
        await core.delete_namespace(f"{kube_namespace}-b")


async def test_wire_format_and_boolean_parsing(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("w"))
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    for value in ("1", "true", "True"):
        status, _, body = await raw(kube_api, "GET", path, query=[("watch", value), ("timeoutSeconds", "1")])
        assert status == 200
        lines = [line for line in body.split(b"\n") if line]
        first = json.loads(lines[0])
        assert first["type"] == "ADDED" and first["object"]["kind"] == "ConfigMap"
        assert first["object"]["apiVersion"] == "v1"
        assert b": " not in lines[0] and b", " not in lines[0]  # compact JSON
    for value in ("false", "FALSE", "0"):
        status, doc, _ = await raw(kube_api, "GET", path, query=[("watch", value)])
        assert status == 200 and doc["kind"] == "ConfigMapList"


async def test_bookmarks_are_sent_and_parsed(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("b"))
    status, _, body = await raw(kube_api, "GET", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                                query=[("watch", "1"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", "2"),
                                       ("resourceVersion", "0")])
    events = [json.loads(line) for line in body.split(b"\n") if line]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    for bm in bookmarks:
        assert bm["object"]["kind"] == "ConfigMap" and bm["object"]["apiVersion"] == "v1"
        assert set(bm["object"]["metadata"]) <= {"resourceVersion", "annotations"}
        assert bm["object"]["metadata"]["resourceVersion"]
    assert events[0]["type"] == "ADDED"


async def _events_in(api: client.ApiClient, ns: str, *names: str) -> None:
    for name in names:
        await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/events", body={
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "namespace": ns},
            "reason": "Tested", "message": name, "type": "Normal", "source": {"component": "fedplace-tests"}})


async def test_too_old_resource_version_is_in_stream_410(kube, kube_api: client.ApiClient,
                                                         kube_namespace: str) -> None:
    """Events are watched in storage (kube-apiserver keeps no watch cache for them): once the
    storage is compacted, an older RV is HTTP 200 and then one ERROR event, a 410 Status."""
    core = client.CoreV1Api(kube_api)
    old_rv = (await core.list_namespaced_event(kube_namespace)).metadata.resource_version
    await _events_in(kube_api, kube_namespace, "e0", "e1", "e2")
    await kube.compact()
    status, _, body = await raw(kube_api, "GET", f"/api/v1/namespaces/{kube_namespace}/events",
                                query=[("watch", "1"), ("resourceVersion", old_rv), ("timeoutSeconds", "5")])
    assert status == 200
    lines = [json.loads(line) for line in body.split(b"\n") if line]
    assert lines == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "The resourceVersion for the provided watch is too old.", "reason": "Expired", "code": 410}}]
    w = watch.Watch()
    with pytest.raises(ApiException) as info:
        await collect(w.stream(core.list_namespaced_event, kube_namespace, resource_version=old_rv,
                               timeout_seconds=5))
    assert info.value.status == 410


# ---- the devstack's own watch features (its flags and admin calls), on a devstack server ----

async def _devstack_namespace(api: client.ApiClient) -> str:
    ns = unique("watch")
    await create_namespace(api, ns)
    return ns


async def test_periodic_and_final_bookmarks(devstack_kube_api: client.ApiClient) -> None:
    """--bookmark-interval (the fixture's: 1 s) while idle, and one when timeoutSeconds ends the stream."""
    core = client.CoreV1Api(devstack_kube_api)
    ns = await _devstack_namespace(devstack_kube_api)
    w = watch.Watch()
    events = await collect(w.stream(core.list_namespaced_config_map, ns, timeout_seconds=3,
                                    allow_watch_bookmarks=True), limit=10)
    await w.close()
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2  # every second (fixture) and one at the end
    assert w.resource_version == bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"]


async def test_close_watches_ends_streams(devstack_kube, devstack_kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(devstack_kube_api)
    ns = await _devstack_namespace(devstack_kube_api)
    w = watch.Watch()
    task = asyncio.create_task(collect(w.stream(core.list_namespaced_config_map, ns,
                                                timeout_seconds=30), limit=20))
    for _ in range(100):
        if (await devstack_kube.state())["watchers"]:
            break
        await asyncio.sleep(0.02)
    start = time.monotonic()
    closed = await devstack_kube.close_watches()
    assert closed["closed"] >= 1
    await asyncio.wait_for(task, 5)
    await w.close()
    assert time.monotonic() - start < 2


async def test_history_window_keeps_recent_rvs_watchable(devstack_kube, devstack_kube_api: client.ApiClient) -> None:
    """--history / compact(keep): RVs inside the window replay; older ones are 410 in the watch
    cache's wording (ConfigMaps are watched through kube-apiserver's cache)."""
    core = client.CoreV1Api(devstack_kube_api)
    ns = await _devstack_namespace(devstack_kube_api)
    before = (await core.list_namespaced_config_map(ns)).metadata.resource_version
    await core.create_namespaced_config_map(ns, cm("a"))
    rv = (await core.list_namespaced_config_map(ns)).metadata.resource_version
    await core.create_namespaced_config_map(ns, cm("b"))
    compacted = (await devstack_kube.compact(keep=1))["compactedResourceVersion"]  # only b's creation is kept
    w = watch.Watch()
    events = await collect(w.stream(core.list_namespaced_config_map, ns, resource_version=rv,
                                    timeout_seconds=2),
                           until=lambda evs: any(e["type"] == "ADDED" for e in evs))
    await w.close()
    assert [e["object"].metadata.name for e in events if e["type"] == "ADDED"] == ["b"]
    status, _, body = await raw(devstack_kube_api, "GET", f"/api/v1/namespaces/{ns}/configmaps",
                                query=[("watch", "1"), ("resourceVersion", before), ("timeoutSeconds", "2")])
    [line] = [json.loads(line) for line in body.split(b"\n") if line]
    assert line["object"]["code"] == 410
    assert line["object"]["message"] == f"too old resource version: {before} ({compacted})"
