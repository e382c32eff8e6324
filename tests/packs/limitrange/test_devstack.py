"""The API server serves core/v1 LimitRanges as kube-apiserver does (discovery,
CRUD, list, watch, the defaults it stores) — what opa-kube-sync needs to
replicate them. Runs against the devstack API server and a real one alike."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.packs.limitrange.reference import item, lr


async def test_discovery_lists_limitranges(kube_api: client.ApiClient):
    doc = await kube_json(kube_api, "GET", "/api/v1")
    entry = next(r for r in doc["resources"] if r["name"] == "limitranges")
    assert entry["kind"] == "LimitRange" and entry["namespaced"] is True
    assert entry["shortNames"] == ["limits"]
    assert {"create", "get", "list", "watch", "update", "patch", "delete"} <= set(entry["verbs"])


async def test_crud_list_and_watch(kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces):
    ns = await kube_namespaces.create("lr-devstack")
    path = f"/api/v1/namespaces/{ns}/limitranges"
    body = lr("limits", item("Container", max={"memory": "1Gi"}, min={"cpu": "10m"}), item("Pod", max={"cpu": "4"}))
    body["metadata"]["namespace"] = ns
    created = await kube_json(kube_api, "POST", path, body=body)
    assert created["kind"] == "LimitRange" and created["apiVersion"] == "v1" and created["metadata"]["resourceVersion"]
    # stored as SetDefaults_LimitRangeItem leaves it: a Container item's default from its max, its
    # defaultRequest from that default, then from its min; Pod items as sent
    assert created["spec"] == {"limits": [
        {"type": "Container", "max": {"memory": "1Gi"}, "min": {"cpu": "10m"}, "default": {"memory": "1Gi"},
         "defaultRequest": {"cpu": "10m", "memory": "1Gi"}},
        {"type": "Pod", "max": {"cpu": "4"}}]}
    assert (await kube_json(kube_api, "GET", f"{path}/limits"))["spec"] == created["spec"]
    everywhere = await kube_json(kube_api, "GET", "/api/v1/limitranges")
    assert (ns, "limits") in [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]]
    listed = await kube_json(kube_api, "GET", path)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["limits"]
    assert listed["kind"] == "LimitRangeList"

    events: list[dict[str, Any]] = []

    async def watch() -> None:
        rv = listed["metadata"]["resourceVersion"]
        resp = await kube_api.call_api(f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=5", "GET",
                                       auth_settings=["BearerToken"], _preload_content=False)
        async for line in resp.content:
            events.append(json.loads(line))
            if len(events) == 2:
                break
        resp.close()

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    await kube_json(kube_api, "PATCH", f"{path}/limits", body={"spec": {"limits": [item("Pod", max={"cpu": "2"})]}},
                    content_type="application/merge-patch+json")
    await kube_json(kube_api, "DELETE", f"{path}/limits")
    await asyncio.wait_for(watcher, 10)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert events[0]["object"]["spec"]["limits"] == [{"type": "Pod", "max": {"cpu": "2"}}]
    try:
        await kube_json(kube_api, "GET", f"{path}/limits")
        raise AssertionError("deleted LimitRange still there")
    except KubeApiError as exc:
        assert exc.status == 404
