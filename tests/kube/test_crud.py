"""Create / get / update / patch / delete through kubernetes_asyncio's typed APIs.

Written to pass against a real kube-apiserver too (FEDPLACE_TEST_KUBECONFIG).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import KubeServer, ScratchNamespaces

from .helpers import assert_status, raw, status_of, unique


def cm(name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data=data or {"k": "v"})


async def test_default_namespaces_exist(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    names = {ns.metadata.name for ns in (await core.list_namespace()).items}
    assert {"default", "kube-system"} <= names
    ns = await core.read_namespace("default")
    assert ns.status.phase == "Active"
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "default"


async def test_create_get_and_metadata(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map(kube_namespace, cm("a", labels={"app": "x"}))
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.creation_timestamp
    assert created.metadata.namespace == kube_namespace
    got = await core.read_namespaced_config_map("a", kube_namespace)
    assert got.data == {"k": "v"} and got.metadata.uid == created.metadata.uid
    assert got.metadata.resource_version == created.metadata.resource_version


async def test_create_conflicts_and_errors_are_status(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("dup"))
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_config_map(kube_namespace, cm("dup"))
    assert info.value.status == 409
    doc = status_of(info.value)
    assert_status(doc, 409, "AlreadyExists")
    assert doc["details"]["name"] == "dup" and doc["details"]["kind"] == "configmaps"
    with pytest.raises(ApiException) as info:
        await core.read_namespaced_config_map("nope", kube_namespace)
    assert_status(status_of(info.value), 404, "NotFound")
    assert status_of(info.value)["message"] == 'configmaps "nope" not found'


async def test_create_in_missing_namespace_is_404(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    ns = unique("missing")
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_config_map(ns, cm("a"))
    doc = status_of(info.value)
    assert_status(doc, 404, "NotFound")
    assert doc["details"]["kind"] == "namespaces" and doc["details"]["name"] == ns


async def test_namespace_mismatch_is_400(kube_api: client.ApiClient, kube_namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    status, doc, _ = await raw(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", body=body)
    assert status == 400
    assert_status(doc, 400, "BadRequest")


async def test_malformed_bodies_are_400_not_500(kube_api: client.ApiClient, kube_namespace: str) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    for body in ("{not json", "[1,2]", '{"metadata":{"name":"a","labels":{"x":1}}}'):
        status, doc, _ = await raw(kube_api, "POST", path, body=body)
        assert status == 400, (body, doc)
        assert_status(doc, 400, "BadRequest")
    status, doc, _ = await raw(kube_api, "POST", path, body={"metadata": {"name": "Bad_Name"}})
    assert status == 422
    assert_status(doc, 422, "Invalid")
    assert doc["details"]["causes"][0]["field"] == "metadata.name"


async def test_generate_name(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-"))
    a = await core.create_namespaced_config_map(kube_namespace, body)
    b = await core.create_namespaced_config_map(kube_namespace, body)
    assert a.metadata.name.startswith("gen-") and len(a.metadata.name) > 4
    assert a.metadata.name != b.metadata.name


async def test_update_conflict_and_unconditional(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    first = await core.create_namespaced_config_map(kube_namespace, cm("u"))
    first.data = {"k": "v2"}
    second = await core.replace_namespaced_config_map("u", kube_namespace, first)
    assert second.data == {"k": "v2"}
    assert second.metadata.resource_version != first.metadata.resource_version
    assert second.metadata.uid == first.metadata.uid
    first.data = {"k": "stale"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as info:
        await core.replace_namespaced_config_map("u", kube_namespace, first)
    doc = status_of(info.value)
    assert_status(doc, 409, "Conflict")
    assert "the object has been modified" in doc["message"]
    first.metadata.resource_version = None  # unconditional
    third = await core.replace_namespaced_config_map("u", kube_namespace, first)
    assert third.data == {"k": "stale"}


async def test_noop_update_keeps_resource_version(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map(kube_namespace, cm("same"))
    again = await core.replace_namespaced_config_map("same", kube_namespace, created)
    assert again.metadata.resource_version == created.metadata.resource_version


async def test_update_missing_is_404(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    with pytest.raises(ApiException) as info:
        await core.replace_namespaced_config_map("ghost", kube_namespace, cm("ghost"))
    assert info.value.status == 404


async def test_generation_bumps_on_spec_change_only(kube_api: client.ApiClient, kube_namespace: str) -> None:
    apps = client.AppsV1Api(kube_api)
    rs = client.V1ReplicaSet(
        metadata=client.V1ObjectMeta(name="rs1"),
        spec=client.V1ReplicaSetSpec(
            replicas=1, selector=client.V1LabelSelector(match_labels={"app": "rs1"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "rs1"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))))
    created = await apps.create_namespaced_replica_set(kube_namespace, rs)
    assert created.metadata.generation == 1
    labelled = await apps.patch_namespaced_replica_set("rs1", kube_namespace, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    scaled = await apps.patch_namespaced_replica_set("rs1", kube_namespace, {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2 and scaled.spec.replicas == 3


async def test_strategic_merge_patch_merges_metadata(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("p", data={"a": "1", "b": "2"}, labels={"keep": "1"}))
    # a dict body makes kubernetes_asyncio send application/strategic-merge-patch+json
    out = await core.patch_namespaced_config_map(
        "p", kube_namespace, {"metadata": {"labels": {"new": "2"}, "annotations": {"x/y": "z"}}, "data": {"a": None}})
    assert out.metadata.labels == {"keep": "1", "new": "2"}
    assert out.metadata.annotations == {"x/y": "z"}
    assert out.data == {"b": "2"}


async def test_merge_patch(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("m", labels={"a": "1", "b": "2"}))
    out = await core.patch_namespaced_config_map("m", kube_namespace, {"metadata": {"labels": {"a": None}}},
                                                 _content_type="application/merge-patch+json")
    assert out.metadata.labels == {"b": "2"}


async def test_json_patch_and_failed_test_is_422(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("j"))
    out = await core.patch_namespaced_config_map("j", kube_namespace, [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/fedplace.io~1x", "value": "1"},
    ])
    assert out.metadata.annotations == {"fedplace.io/x": "1"}
    with pytest.raises(ApiException) as info:
        await core.patch_namespaced_config_map("j", kube_namespace, [
            {"op": "test", "path": "/data/k", "value": "other"},
            {"op": "replace", "path": "/data/k", "value": "x"}])
    assert info.value.status == 422
    assert_status(status_of(info.value), 422, "Invalid")
    assert (await core.read_namespaced_config_map("j", kube_namespace)).data == {"k": "v"}


async def test_patch_with_stale_resource_version_conflicts(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map(kube_namespace, cm("rv"))
    await core.patch_namespaced_config_map("rv", kube_namespace, {"data": {"k": "2"}})
    with pytest.raises(ApiException) as info:
        await core.patch_namespaced_config_map(
            "rv", kube_namespace, {"metadata": {"resourceVersion": created.metadata.resource_version},
                                   "data": {"k": "3"}}, _content_type="application/merge-patch+json")
    assert_status(status_of(info.value), 409, "Conflict")


async def test_unsupported_patch_type_is_415(kube_api: client.ApiClient, kube_namespace: str) -> None:
    status, doc, _ = await raw(kube_api, "PATCH", f"/api/v1/namespaces/{kube_namespace}/configmaps/x",
                               body={"data": {}}, content_type="text/plain")
    assert status == 415
    assert_status(doc, 415, "UnsupportedMediaType")


async def test_delete_and_dry_run(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("dry"), dry_run="All")
    with pytest.raises(ApiException):
        await core.read_namespaced_config_map("dry", kube_namespace)
    await core.create_namespaced_config_map(kube_namespace, cm("d"))
    status, doc, _ = await raw(kube_api, "DELETE", f"/api/v1/namespaces/{kube_namespace}/configmaps/d")
    assert status == 200
    assert doc["kind"] in ("Status", "ConfigMap")
    with pytest.raises(ApiException) as info:
        await core.delete_namespaced_config_map("d", kube_namespace)
    assert_status(status_of(info.value), 404, "NotFound")


async def test_delete_precondition(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(kube_namespace, cm("pre"))
    with pytest.raises(ApiException) as info:
        await core.delete_namespaced_config_map(
            "pre", kube_namespace, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="nope")))
    assert_status(status_of(info.value), 409, "Conflict")
    assert (await core.read_namespaced_config_map("pre", kube_namespace)).metadata.name == "pre"


async def test_secrets_string_data(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    s = await core.create_namespaced_secret(kube_namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"pw": "hunter2"}))
    assert s.data == {"pw": "aHVudGVyMg=="} and s.type == "Opaque"
    assert s.string_data is None


async def test_serviceaccount_lease_and_events(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    sa = await core.create_namespaced_service_account(kube_namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="robot")))
    assert sa.metadata.name == "robot"
    coord = client.CoordinationV1Api(kube_api)
    lease = await coord.create_namespaced_lease(kube_namespace, client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"), spec=client.V1LeaseSpec(holder_identity="a",
                                                                             lease_duration_seconds=15)))
    lease.spec.holder_identity = "b"
    assert (await coord.replace_namespaced_lease("leader", kube_namespace, lease)).spec.holder_identity == "b"
    ev = await core.create_namespaced_event(kube_namespace, client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="ev-"), reason="Denied", message="no", type="Warning",
        involved_object=client.V1ObjectReference(kind="ConfigMap", name="x", namespace=kube_namespace,
                                                 api_version="v1"),
        source=client.V1EventSource(component="fedplace"), count=1))
    assert ev.reason == "Denied" and ev.involved_object.name == "x"
    listed = await core.list_namespaced_event(kube_namespace, field_selector="involvedObject.name=x")
    assert [e.metadata.name for e in listed.items] == [ev.metadata.name]
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_event(kube_namespace, client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="ev-"), reason="R", message="m",
            involved_object=client.V1ObjectReference(kind="ConfigMap", name="x", namespace="elsewhere")))
    assert info.value.status == 422


async def test_events_k8s_io_v1(kube_api: client.ApiClient, kube_namespace: str) -> None:
    import datetime as dt

    events = client.EventsV1Api(kube_api)
    now = dt.datetime.now(dt.timezone.utc)
    ev = await events.create_namespaced_event(kube_namespace, client.EventsV1Event(
        metadata=client.V1ObjectMeta(generate_name="e-"), event_time=now, reporting_controller="fedplace.io/x",
        reporting_instance="x-1", action="Admit", reason="Denied", note="policy said no", type="Warning",
        regarding=client.V1ObjectReference(kind="ConfigMap", name="x", namespace=kube_namespace)))
    assert ev.note == "policy said no"
    status, doc, _ = await raw(kube_api, "POST", f"/apis/events.k8s.io/v1/namespaces/{kube_namespace}/events",
                               body={"metadata": {"generateName": "e-"}, "note": "missing fields"})
    assert status == 422
    assert_status(doc, 422, "Invalid")


async def _wait_namespace_gone(kube: KubeServer, core: client.CoreV1Api, name: str, timeout: float = 60.0) -> None:
    """Poll until namespace ``name`` is gone; while it is not, it must be Terminating.

    Skips on an external server where, 10 s on, no namespace controller has
    touched it (no status conditions): only kube-controller-manager finalizes
    namespaces, and a bare kube-apiserver has none."""
    start = time.monotonic()
    while True:
        try:
            ns = await core.read_namespace(name)
        except ApiException as exc:
            assert exc.status == 404
            return
        assert ns.status.phase == "Terminating" and ns.metadata.deletion_timestamp
        elapsed = time.monotonic() - start
        if kube.external and elapsed > 10 and not ns.status.conditions:
            pytest.skip("namespace stays Terminating: no kube-controller-manager finalizes namespaces on this server")
        if elapsed > timeout:
            pytest.fail(f"namespace {name} still Terminating after {timeout:g} s")
        await asyncio.sleep(0.2)


async def test_deleting_a_namespace_removes_its_objects(kube: KubeServer, kube_api: client.ApiClient,
                                                        kube_namespaces: ScratchNamespaces) -> None:
    core = client.CoreV1Api(kube_api)
    ns = await kube_namespaces.create("gone")
    await core.create_namespaced_config_map(ns, cm("a"))
    await core.delete_namespace(ns)
    # Terminating (a real server finalizes asynchronously) or gone: no new content either way
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_config_map(ns, cm("b"))
    assert info.value.status in (403, 404), info.value
    await _wait_namespace_gone(kube, core, ns)
    left = await core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns}")
    assert left.items == []


async def test_status_subresource(kube_api: client.ApiClient, kube_namespace: str) -> None:
    apps = client.AppsV1Api(kube_api)
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="d"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "d"}),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels={"app": "d"}),
                                              spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]))))
    await apps.create_namespaced_deployment(kube_namespace, dep)
    out = await apps.patch_namespaced_deployment_status("d", kube_namespace, {"status": {"observedGeneration": 7}},
                                                        _content_type="application/merge-patch+json")
    assert out.status.observed_generation == 7
    # the main resource ignores status changes
    out = await apps.patch_namespaced_deployment("d", kube_namespace, {"status": {"observedGeneration": 9}},
                                                 _content_type="application/merge-patch+json")
    assert out.status.observed_generation == 7


async def test_finalizers_hold_a_deleted_object_until_an_update_removes_them(
        kube: Any, kube_api: client.ApiClient, kube_namespace: str) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    await kube_json(kube_api, "POST", path, body={"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": "held", "finalizers": ["fedplace.io/hold"]}})
    deleted = await kube_json(kube_api, "DELETE", f"{path}/held")
    assert deleted["kind"] == "ConfigMap" and deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    again = await kube_json(kube_api, "DELETE", f"{path}/held")
    assert again["metadata"]["deletionTimestamp"] == deleted["metadata"]["deletionTimestamp"]
    labelled = await kube_json(kube_api, "PATCH", f"{path}/held", body={"metadata": {"labels": {"a": "b"}}},
                               content_type="application/merge-patch+json")
    assert labelled["metadata"]["labels"] == {"a": "b"} and labelled["metadata"]["deletionTimestamp"]
    released = await kube_json(kube_api, "PATCH", f"{path}/held", body={"metadata": {"finalizers": None}},
                               content_type="application/merge-patch+json")
    assert released["metadata"]["deletionTimestamp"] and not released["metadata"].get("finalizers")
    with pytest.raises(KubeApiError) as gone:
        await kube_json(kube_api, "GET", f"{path}/held")
    assert gone.value.status == 404
