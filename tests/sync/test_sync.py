"""opa-kube-sync against the devstack engine and API server, over HTTP.

The sync runs in-process (SyncService); every scenario ends by comparing
OPA's data with the API server's state, object by object.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from prometheus_client import REGISTRY

from common.kube_client import KubeApiError, Resource, kube_json
from sync.policy_loader import STATUS_ANNOTATION
from sync.replication import LAST_APPLIED, layout, strip
from sync.service import SyncService
from sync.settings import parse_settings

ROOT = Path(__file__).resolve().parents[2]
CM = Resource("", "v1", "configmaps", True)
RS = Resource("apps", "v1", "replicasets", True)
CLUSTERS = Resource("federation.fedplace.io", "v1beta1", "clusters", False)
POLICY_NS = "kube-federation-scheduling-policy"
NS = "apps"


# -- pure parts --------------------------------------------------------------------


def test_strip_removes_noise_only():
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [{}],
                                             "annotations": {LAST_APPLIED: "{}", "keep": "1"}}, "data": {"k": "v"}}
    out = strip(obj)
    assert out == {"kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"keep": "1"}}, "data": {"k": "v"}}
    assert obj["metadata"]["managedFields"] == [{}]  # the input is not modified


def test_layout_namespaced_cluster_scoped_and_ignored():
    objs = [{"metadata": {"name": "a", "namespace": "x"}}, {"metadata": {"name": "b", "namespace": "y"}}]
    assert layout(RS, objs, frozenset({"y"})) == {"x": {"a": objs[0]}}
    assert layout(CLUSTERS, [{"metadata": {"name": "c"}}]) == {"c": {"metadata": {"name": "c"}}}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--replicate", "replicasets"], "--replicate"),
        (["--listen", "nowhere"], "--listen"),
        (["--enable-data=maybe"], "--enable-data"),
        (["--remediate", "enforce", "--replicate", "v1/configmaps"], "--remediate-resource"),
        (["--replicate", "v1/configmaps", "--replicate-cluster", "x/v1/configmaps"], "more than once"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_settings(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_kube_mgmt_style_flags():
    s = parse_settings(["--opa-url", "http://opa:8181/v1", "--replicate", "apps/v1/replicasets",
                        "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters",
                        "--enable-policies=false", "--replicate-ignore-namespaces", "kube-system,opa"])
    assert [str(r) for r in s.resources] == ["apps/v1/replicasets", "federation.fedplace.io/v1beta1/clusters"]
    assert not s.enable_policies and s.enable_data
    assert s.ignore_namespaces == {"kube-system", "opa"}
    assert s.policy_namespaces == [POLICY_NS]


# -- helpers --------------------------------------------------------------------------


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "") -> float:
    start = time.monotonic()
    last: Exception | None = None
    while time.monotonic() - start < timeout:
        try:
            if await check():
                return time.monotonic() - start
        except (AssertionError, KubeApiError, aiohttp.ClientError) as exc:
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or check}: {last}")


async def opa_data(opa, *path: str) -> Any:
    _, body = await opa.request("GET", "/v1/data/" + "/".join(path))
    return (body or {}).get("result")


async def api_view(api, res: Resource) -> dict[str, Any]:
    """The API server's collection in the sync's layout (kind/apiVersion restored, noise stripped)."""
    doc = await kube_json(api, "GET", res.collection_path())
    kind = doc["kind"].removesuffix("List")
    items = [{**i, "kind": i.get("kind", kind), "apiVersion": i.get("apiVersion", res.api_version)}
             for i in doc["items"]]
    return layout(res, items)


async def mirrored(api, opa, res: Resource, root: str = "kubernetes") -> bool:
    """OPA's collection equals the API server's, object by object."""
    want = await api_view(api, res)
    got = await opa_data(opa, root, res.plural) or {}
    return got == want


async def policy_status(api, name: str) -> dict[str, Any] | None:
    cm = await kube_json(api, "GET", CM.object_path(name, POLICY_NS))
    raw = ((cm["metadata"].get("annotations")) or {}).get(STATUS_ANNOTATION)
    return json.loads(raw) if raw else None


def rs_body(name: str, annotations: dict[str, str] | None = None, replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


async def create_ns(api, name: str) -> None:
    await kube_json(api, "POST", "/api/v1/namespaces",
                    body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def put_configmap(api, name: str, data: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": POLICY_NS}, "data": data}
    try:
        await kube_json(api, "POST", CM.collection_path(POLICY_NS), body=body)
    except KubeApiError as exc:
        if exc.status != 409:
            raise
        await kube_json(api, "PATCH", CM.object_path(name, POLICY_NS), body={"data": data},
                        content_type="application/merge-patch+json")


CLUSTER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusters.federation.fedplace.io"},
    "spec": {"group": "federation.fedplace.io", "scope": "Cluster",
             "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


@pytest.fixture
async def world(kube, kube_api, opa):
    await create_ns(kube_api, NS)
    await create_ns(kube_api, POLICY_NS)
    for i in range(3):
        await kube_json(kube_api, "POST", RS.collection_path(NS), body=rs_body(f"rs{i}"))
    return kube_api


@pytest.fixture
async def start_sync(kube, opa) -> AsyncIterator[Callable[..., Awaitable[SyncService]]]:
    services: list[SyncService] = []

    async def start(*extra: str, wait_ready: bool = True) -> SyncService:
        argv = ["--opa-url", opa.url + "/v1", "--kubeconfig", str(kube.kubeconfig), "--listen", "127.0.0.1:0",
                "--opa-check-interval", "0.2", "--replicate", "apps/v1/replicasets", *extra]
        svc = SyncService(parse_settings(argv))
        services.append(svc)
        await svc.start()
        if wait_ready:
            await eventually(lambda: _true(svc.is_ready()), 15, "the sync to be ready")
        return svc

    yield start
    for svc in services:
        await svc.stop()


async def _true(value: bool) -> bool:
    return value


# -- replication ------------------------------------------------------------------------


async def test_initial_replication_and_changes(world, opa, start_sync):
    api = world
    svc = await start_sync()
    assert await mirrored(api, opa, RS)
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("new"))
    await kube_json(api, "PATCH", RS.object_path("rs0", NS), body={"spec": {"replicas": 5}},
                    content_type="application/merge-patch+json")
    await kube_json(api, "DELETE", RS.object_path("rs1", NS))
    await eventually(lambda: mirrored(api, opa, RS), what="OPA to mirror the changes")
    got = await opa_data(opa, "kubernetes", "replicasets", NS)
    assert sorted(got) == ["new", "rs0", "rs2"] and got["rs0"]["spec"]["replicas"] == 5
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{svc.port}/metrics") as r:
            text = await r.text()
    assert 'fedplace_sync_objects{resource="apps/v1/replicasets"} 3.0' in text


async def test_readiness_waits_for_the_initial_sync(world, opa, kube, start_sync):
    await opa.set_faults({"fail": {"path": "/v1/data/kubernetes", "method": "PUT", "status": 503, "count": 3}})
    svc = await start_sync(wait_ready=False)
    ok, reason = svc.ready()
    assert not ok and reason
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{svc.port}/readyz") as r:
            assert r.status == 503
    await eventually(lambda: _true(svc.is_ready()), 15, "ready after OPA recovers")
    assert await mirrored(world, opa, RS)


@pytest.mark.devstack_only
async def test_watch_closed_mid_stream(world, opa, kube, start_sync):
    api = world
    svc = await start_sync()
    await kube.close_watches()
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("after-cut"))
    await kube_json(api, "DELETE", RS.object_path("rs2", NS))
    await eventually(lambda: mirrored(api, opa, RS), what="OPA to mirror changes after the cut")
    assert svc.replicators["replicasets"].informer.stats.watch_restarts >= 1


@pytest.mark.devstack_only
async def test_410_after_compaction_drops_objects_deleted_in_the_gap(world, opa, kube, start_sync):
    api = world
    svc = await start_sync()
    informer = svc.replicators["replicasets"].informer
    relists = informer.stats.relists
    # Cut the watch and keep it from coming back while the gap opens.
    await kube.set_faults({"fail": {"path": RS.collection_path(), "method": "GET", "status": 503, "count": -1}})
    await kube.close_watches()
    await kube_json(api, "DELETE", RS.object_path("rs0", NS))
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("in-gap"))
    await kube.compact()
    await kube.clear_faults()
    await eventually(lambda: mirrored(api, opa, RS), 20, "OPA to drop the object deleted in the gap")
    assert "rs0" not in await opa_data(opa, "kubernetes", "replicasets", NS)
    assert informer.stats.relists > relists


@pytest.mark.devstack_only
async def test_opa_wiped_is_restored(world, opa, start_sync):
    api = world
    svc = await start_sync("--policy-namespace", POLICY_NS)
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 1\n"})
    await eventually(lambda: _eq(opa_data(opa, "fedtest", "a", "x"), 1), what="policy loaded")
    await opa.wipe()
    took = await eventually(lambda: mirrored(api, opa, RS), 5, "data restored after the wipe")
    await eventually(lambda: _eq(opa_data(opa, "fedtest", "a", "x"), 1), 5, "policies restored")
    assert svc.detector.resyncs >= 1
    assert took < 5


@pytest.mark.devstack_only
async def test_opa_process_restart_is_restored(kube, kube_api, opa_process):
    api = kube_api
    await create_ns(api, NS)
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("survivor"))
    svc = SyncService(parse_settings(["--opa-url", opa_process.url, "--kubeconfig", str(kube.kubeconfig),
                                      "--listen", "127.0.0.1:0", "--opa-check-interval", "0.2",
                                      "--replicate", "apps/v1/replicasets"]))
    await svc.start()
    try:
        await eventually(lambda: _true(svc.is_ready()), 15, "ready")
        opa_process.process.kill()
        await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("while-down"))
        opa_process.process.start()
        took = await eventually(lambda: mirrored(api, opa_process, RS), 10, "restored after the restart")
        assert took < 5
    finally:
        await svc.stop()


@pytest.mark.devstack_only
async def test_opa_500s_then_recovery(world, opa, start_sync):
    api = world
    await start_sync()
    await opa.set_faults({"fail": {"path": "/v1/data/kubernetes/replicasets", "status": 500, "count": 5}})
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("during-500s"))
    await kube_json(api, "DELETE", RS.object_path("rs1", NS))
    await eventually(lambda: mirrored(api, opa, RS), 15, "OPA to catch up after the 500s")


async def test_custom_resource_cluster_scoped(kube, kube_api, opa, start_sync):
    api = kube_api
    await kube_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CLUSTER_CRD)
    await eventually(lambda: _ok(kube_json(api, "GET", CLUSTERS.collection_path())), what="CRD served")
    for name, region in (("eu-1", "europe-west1"), ("us-1", "us-east1")):
        await kube_json(api, "POST", CLUSTERS.collection_path(), body={
            "apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": "2"}}, "status": {"region": region}})
    await start_sync("--replicate-cluster", "federation.fedplace.io/v1beta1/clusters")
    assert await mirrored(api, opa, CLUSTERS)
    got = await opa_data(opa, "kubernetes", "clusters")
    assert set(got) == {"eu-1", "us-1"} and got["eu-1"]["kind"] == "Cluster"
    await kube_json(api, "DELETE", CLUSTERS.object_path("us-1"))
    await eventually(lambda: mirrored(api, opa, CLUSTERS), what="cluster deletion replicated")


async def _eq(awaitable: Awaitable[Any], value: Any) -> bool:
    return (await awaitable) == value


async def _ok(awaitable: Awaitable[Any]) -> bool:
    await awaitable
    return True


# -- policies -------------------------------------------------------------------------------


async def test_compile_error_then_fixed(world, opa, start_sync):
    api = world
    events_before = 0
    await put_configmap(api, "placement", {"good.rego": "package fedtest.good\n\nx := 1\n",
                                           "bad.rego": "package fedtest.bad\n\nallow {\n"})
    await start_sync("--policy-namespace", POLICY_NS)
    await eventually(lambda: _status_is(api, "placement", "error"), what="error status")
    status = await policy_status(api, "placement")
    assert status["errors"] and status["errors"][0]["code"] == "rego_parse_error"
    assert status["errors"][0]["location"]["file"] == f"{POLICY_NS}/placement/bad.rego"
    assert await opa_data(opa, "fedtest", "good", "x") == 1  # the good module is loaded regardless

    async def warning_event() -> bool:
        evs = await kube_json(api, "GET", f"/api/v1/namespaces/{POLICY_NS}/events")
        return any(e["reason"] == "PolicyLoadFailed" and e["type"] == "Warning" for e in evs["items"]) > events_before

    await eventually(warning_event, what="a PolicyLoadFailed Warning Event")
    await put_configmap(api, "placement", {"good.rego": "package fedtest.good\n\nx := 1\n",
                                           "bad.rego": "package fedtest.bad\n\nallow if true\n"})
    await eventually(lambda: _status_is(api, "placement", "ok"), what="ok status")
    assert await opa_data(opa, "fedtest", "bad", "allow") is True


async def _status_is(api, name: str, value: str) -> bool:
    status = await policy_status(api, name)
    return status is not None and status["status"] == value


def loads() -> float:
    return REGISTRY.get_sample_value("fedplace_sync_policy_loads_total") or 0.0


async def test_status_write_does_not_reload(world, opa, start_sync):
    api = world
    before = loads()
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 1\n"})
    await start_sync("--policy-namespace", POLICY_NS)
    await eventually(lambda: _status_is(api, "p", "ok"), what="ok status")
    cm = await kube_json(api, "GET", CM.object_path("p", POLICY_NS))
    rv = cm["metadata"]["resourceVersion"]
    await asyncio.sleep(1.0)  # give a reload (loop) the time to show itself
    cm = await kube_json(api, "GET", CM.object_path("p", POLICY_NS))
    assert cm["metadata"]["resourceVersion"] == rv
    assert loads() - before == 1  # loaded once; our own status write did not reload it


async def test_key_removal_deletes_only_that_module(world, opa, start_sync):
    api = world
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 1\n", "b.rego": "package fedtest.b\n\ny := 2\n"})
    await start_sync("--policy-namespace", POLICY_NS)
    await eventually(lambda: _eq(opa_data(opa, "fedtest", "b", "y"), 2), what="both loaded")
    await kube_json(api, "PUT", CM.object_path("p", POLICY_NS), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "namespace": POLICY_NS},
        "data": {"a.rego": "package fedtest.a\n\nx := 1\n"}})

    async def only_a() -> bool:
        _, body = await opa.request("GET", "/v1/policies")
        return sorted(p["id"] for p in body["result"]) == [f"{POLICY_NS}/p/a.rego"]

    await eventually(only_a, what="b.rego removed from OPA")
    assert await opa_data(opa, "fedtest", "a", "x") == 1
    await kube_json(api, "DELETE", CM.object_path("p", POLICY_NS))

    async def none_left() -> bool:
        _, body = await opa.request("GET", "/v1/policies")
        return body["result"] == []

    await eventually(none_left, what="ConfigMap deletion removes its modules")


async def test_dependent_module_is_retried_until_ok(world, opa, start_sync):
    api = world
    await start_sync("--policy-namespace", POLICY_NS)
    await put_configmap(api, "user", {"u.rego": "package fedtest.user\n\nimport data.fedtest.lib\n\nfour := lib.double(2)\n"})
    await eventually(lambda: _status_is(api, "user", "error"), what="user fails without its library")
    await put_configmap(api, "lib", {"l.rego": "package fedtest.lib\n\ndouble(x) := x * 2\n"})
    await eventually(lambda: _status_is(api, "user", "ok"), what="user retried once the library loaded")
    assert await opa_data(opa, "fedtest", "user", "four") == 4


# -- remediation wiring ------------------------------------------------------------------------


async def test_remediation_enforced_through_the_sync(world, opa, start_sync):
    api = world
    policy = 'package io.k8s.federation.admission\n\nannotations["fedplace.io/owner"] := "platform" if input.kind == "ReplicaSet"\n'
    await put_configmap(api, "p", {"admission.rego": policy,
                                   "remediation.rego": (ROOT / "policies/lib/remediation.rego").read_text()})
    await start_sync("--policy-namespace", POLICY_NS, "--remediate", "enforce", "--remediate-debounce", "0.05",
                     "--remediate-max-fraction", "1", "--leader-election", "false")

    async def all_owned() -> bool:
        doc = await kube_json(api, "GET", RS.collection_path(NS))
        return all((i["metadata"].get("annotations") or {}).get("fedplace.io/owner") == "platform"
                   for i in doc["items"])

    await eventually(all_owned, 15, "every ReplicaSet annotated by the remediator")
    await eventually(lambda: mirrored(api, opa, RS), what="the patched objects replicated back")
