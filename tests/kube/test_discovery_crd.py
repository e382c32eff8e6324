"""Discovery documents, CRDs (served versions, scope, removal), CustomObjectsApi and DynamicClient."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException
from kubernetes_asyncio.dynamic import DynamicClient

from tests.fixtures.kube import KubeServer

from .helpers import assert_status, collect, crd_body, raw, singular_names, status_of


async def test_version_and_core_discovery(kube: KubeServer, kube_api: client.ApiClient) -> None:
    info = await client.VersionApi(kube_api).get_code()
    assert info.major and info.git_version.startswith("v1.")
    status, doc, _ = await raw(kube_api, "GET", "/api")
    assert status == 200 and doc["kind"] == "APIVersions" and "v1" in doc["versions"]
    status, doc, _ = await raw(kube_api, "GET", "/api/v1")
    assert doc["kind"] == "APIResourceList" and doc["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in doc["resources"]}
    for name, kind, namespaced in [("namespaces", "Namespace", False), ("configmaps", "ConfigMap", True),
                                   ("secrets", "Secret", True), ("events", "Event", True),
                                   ("serviceaccounts", "ServiceAccount", True)]:
        r = by_name[name]
        assert r["kind"] == kind and r["namespaced"] is namespaced
        assert {"get", "list", "watch", "create", "update", "patch", "delete"} <= set(r["verbs"])
    assert "cm" in by_name["configmaps"]["shortNames"]
    assert by_name["configmaps"]["singularName"] in singular_names(kube, "configmap")


async def test_group_discovery(kube_api: client.ApiClient) -> None:
    groups = await client.ApisApi(kube_api).get_api_versions()
    names = {g.name: g for g in groups.groups}
    for g in ("apps", "coordination.k8s.io", "events.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io"):
        assert g in names
        assert names[g].preferred_version.group_version == f"{g}/v1"
    status, doc, _ = await raw(kube_api, "GET", "/apis/apps/v1")
    kinds = {r["name"]: r["kind"] for r in doc["resources"]}
    assert kinds["deployments"] == "Deployment" and kinds["replicasets"] == "ReplicaSet"
    assert "deployments/status" in kinds
    status, doc, _ = await raw(kube_api, "GET", "/apis/apps")
    assert doc["kind"] == "APIGroup" and doc["name"] == "apps"
    # A group nobody serves is not an API path at all: Go's mux answers in plain text …
    for path in ("/apis/nonexistent.example.com", "/apis/nonexistent.example.com/v1",
                 "/apis/nonexistent.example.com/v1/things"):
        status, doc, body = await raw(kube_api, "GET", path)
        assert (status, body) == (404, b"404 page not found\n"), (path, status, body)
    # … while an unknown version or resource of a served group is a Status.
    for path in ("/apis/apps/v9", "/api/v2", "/apis/apps/v1/nothings"):
        status, doc, _ = await raw(kube_api, "GET", path)
        assert status == 404, path
        assert_status(doc, 404, "NotFound")


async def _create_crd(kube_api: client.ApiClient, body: dict) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    await ext.create_custom_resource_definition(body)
    for _ in range(100):  # a real server establishes asynchronously
        crd = await ext.read_custom_resource_definition(body["metadata"]["name"])
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        if conds.get("Established") == "True":
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("CRD never became Established")


async def _delete_crd(kube_api: client.ApiClient, name: str) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    try:
        await ext.delete_custom_resource_definition(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    for _ in range(100):
        try:
            await ext.read_custom_resource_definition(name)
        except ApiException:
            return
        await asyncio.sleep(0.1)


async def _group_in_discovery(kube_api: client.ApiClient, group: str, versions: set[str]) -> client.V1APIGroup | None:
    """The group's entry in the /apis list once it lists exactly ``versions`` (``set()``: once it is gone).

    A real server registers and removes each version of a CRD in the group list
    asynchronously, after the CRD is Established or deleted; fails the test if
    the list never settles within 10 seconds."""
    for _ in range(100):
        groups = {g.name: g for g in (await client.ApisApi(kube_api).get_api_versions()).groups}
        entry = groups.get(group)
        if {v.version for v in (entry.versions if entry else [])} == versions:
            return entry
        await asyncio.sleep(0.1)
    pytest.fail(f"the /apis list never showed {group} with versions {sorted(versions)}")


def _group() -> str:
    return f"t{uuid.uuid4().hex[:8]}.fedplace.io"


async def test_crd_lifecycle_namespaced(kube: KubeServer, kube_api: client.ApiClient, kube_namespace: str) -> None:
    group = _group()
    body = crd_body(group, "clusters", "Cluster", versions=("v1", "v1beta1"))
    await _create_crd(kube_api, body)
    co = client.CustomObjectsApi(kube_api)
    try:
        status, doc, _ = await raw(kube_api, "GET", f"/apis/{group}/v1")
        assert status == 200
        res = {r["name"]: r for r in doc["resources"]}["clusters"]
        assert res["kind"] == "Cluster" and res["namespaced"] is True
        assert res["singularName"] in singular_names(kube, "cluster")
        entry = await _group_in_discovery(kube_api, group, {"v1", "v1beta1"})
        assert entry.preferred_version.version == "v1"

        created = await co.create_namespaced_custom_object(group, "v1", kube_namespace, "clusters", {
            "apiVersion": f"{group}/v1", "kind": "Cluster", "metadata": {"name": "c1", "labels": {"r": "eu"}},
            "spec": {"region": "eu"}})
        assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
        # every served version answers, with its own apiVersion
        beta = await co.get_namespaced_custom_object(group, "v1beta1", kube_namespace, "clusters", "c1")
        assert beta["apiVersion"] == f"{group}/v1beta1" and beta["spec"] == {"region": "eu"}
        listed = await co.list_namespaced_custom_object(group, "v1", kube_namespace, "clusters", label_selector="r=eu")
        assert listed["kind"] == "ClusterList"
        assert [i["metadata"]["name"] for i in listed["items"]] == ["c1"]
        assert listed["items"][0]["apiVersion"] == f"{group}/v1" and listed["items"][0]["kind"] == "Cluster"
        patched = await co.patch_namespaced_custom_object(
            group, "v1", kube_namespace, "clusters", "c1", {"spec": {"region": "us"}},
            _content_type="application/merge-patch+json")
        assert patched["spec"]["region"] == "us" and patched["metadata"]["generation"] == 2
        # strategic merge patch is for built-in types only
        status, doc, _ = await raw(kube_api, "PATCH", f"/apis/{group}/v1/namespaces/{kube_namespace}/clusters/c1",
                                   body={"spec": {}}, content_type="application/strategic-merge-patch+json")
        assert status == 415
        assert_status(doc, 415, "UnsupportedMediaType")
    finally:
        await _delete_crd(kube_api, body["metadata"]["name"])
    # no longer served
    for _ in range(100):
        status, doc, _ = await raw(kube_api, "GET", f"/apis/{group}/v1/namespaces/{kube_namespace}/clusters")
        if status == 404:
            break
        await asyncio.sleep(0.1)
    assert status == 404
    assert await _group_in_discovery(kube_api, group, set()) is None


async def test_crd_cluster_scoped_and_objects_removed_with_it(kube_api: client.ApiClient) -> None:
    group = _group()
    body = crd_body(group, "policies", "Policy", scope="Cluster")
    await _create_crd(kube_api, body)
    co = client.CustomObjectsApi(kube_api)
    try:
        await co.create_cluster_custom_object(group, "v1", "policies", {
            "apiVersion": f"{group}/v1", "kind": "Policy", "metadata": {"name": "p1"}, "spec": {"x": 1}})
        got = await co.get_cluster_custom_object(group, "v1", "policies", "p1")
        assert got["spec"] == {"x": 1}
        status, doc, _ = await raw(kube_api, "GET", f"/apis/{group}/v1")
        assert {r["name"]: r for r in doc["resources"]}["policies"]["namespaced"] is False
    finally:
        await _delete_crd(kube_api, body["metadata"]["name"])
    # recreate: the old object is gone
    await _create_crd(kube_api, body)
    try:
        for _ in range(50):
            try:
                listed = await co.list_cluster_custom_object(group, "v1", "policies")
                break
            except ApiException:
                await asyncio.sleep(0.1)
        assert listed["items"] == []
    finally:
        await _delete_crd(kube_api, body["metadata"]["name"])


async def test_crd_validation(kube_api: client.ApiClient) -> None:
    group = _group()
    body = crd_body(group, "things", "Thing")
    body["metadata"]["name"] = f"wrong.{group}"
    ext = client.ApiextensionsV1Api(kube_api)
    with pytest.raises(ApiException) as info:
        await ext.create_custom_resource_definition(body)
    assert_status(status_of(info.value), 422, "Invalid")


async def test_crd_status_subresource_and_watch(kube_api: client.ApiClient, kube_namespace: str) -> None:
    group = _group()
    body = crd_body(group, "widgets", "Widget", status=True)
    await _create_crd(kube_api, body)
    co = client.CustomObjectsApi(kube_api)
    try:
        w = watch.Watch()
        task = asyncio.create_task(collect(
            w.stream(co.list_namespaced_custom_object, group, "v1", kube_namespace, "widgets", timeout_seconds=10),
            until=lambda evs: len([e for e in evs if e["type"] != "BOOKMARK"]) >= 2))
        await asyncio.sleep(0.2)
        await co.create_namespaced_custom_object(group, "v1", kube_namespace, "widgets", {
            "apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"a": 1},
            "status": {"ignored": True}})
        st = await co.patch_namespaced_custom_object_status(group, "v1", kube_namespace, "widgets", "w1",
                                                            {"status": {"ready": True}},
                                                            _content_type="application/merge-patch+json")
        assert st["status"] == {"ready": True} and st["metadata"]["generation"] == 1
        events = [e for e in await task if e["type"] != "BOOKMARK"]
        await w.close()
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]
        assert "status" not in events[0]["object"]  # create drops status when the subresource is on
        assert events[0]["object"]["kind"] == "Widget"
    finally:
        await _delete_crd(kube_api, body["metadata"]["name"])


async def test_dynamic_client(kube_api: client.ApiClient, kube_namespace: str) -> None:
    group = _group()
    body = crd_body(group, "placements", "Placement")
    await _create_crd(kube_api, body)
    try:
        cache = Path(tempfile.mkdtemp()) / "discovery.json"
        async with await DynamicClient(kube_api, cache_file=str(cache)) as dyn:
            cms = await dyn.resources.get(api_version="v1", kind="ConfigMap")
            await cms.create(body={"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "dyn", "labels": {"d": "1"}}, "data": {"a": "b"}},
                             namespace=kube_namespace)
            got = await cms.get(name="dyn", namespace=kube_namespace)
            assert got.data.a == "b"
            listed = await cms.get(namespace=kube_namespace, label_selector="d=1")
            assert [i.metadata.name for i in listed.items] == ["dyn"]
            patched = await cms.patch(name="dyn", namespace=kube_namespace, body={"data": {"c": "d"}})
            assert patched.data.c == "d" and patched.data.a == "b"

            rs = await dyn.resources.get(api_version="apps/v1", kind="ReplicaSet")
            assert rs.namespaced and rs.name == "replicasets"

            pl = await dyn.resources.get(api_version=f"{group}/v1", kind="Placement")
            await pl.create(body={"apiVersion": f"{group}/v1", "kind": "Placement", "metadata": {"name": "p"},
                                  "spec": {"clusters": ["a"]}}, namespace=kube_namespace)
            got = await pl.get(name="p", namespace=kube_namespace)
            assert got.spec.clusters == ["a"]
            patched = await pl.patch(name="p", namespace=kube_namespace, body={"spec": {"clusters": ["b"]}},
                                     content_type="application/merge-patch+json")
            assert patched.spec.clusters == ["b"]
            await pl.delete(name="p", namespace=kube_namespace)
            # DynamicClient does not raise for non-2xx (it reads raw responses): the Status comes back
            gone = await pl.get(name="p", namespace=kube_namespace)
            assert gone.kind == "Status" and gone.code == 404 and gone.reason == "NotFound"
            deleted = await cms.delete(namespace=kube_namespace, label_selector="d=1")
            assert deleted is not None
            left = await cms.get(namespace=kube_namespace, label_selector="d=1")
            assert left.items == []
    finally:
        await _delete_crd(kube_api, body["metadata"]["name"])
