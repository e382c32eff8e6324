"""opa-kube-sync against OPA and the API server (devstack or real), over HTTP.

The sync runs in-process (SyncApp); every scenario ends by comparing
OPA's data with the API server's state, object by object. Faults are injected
by the proxies in front of the servers (``opa_proxy``, ``kube_proxy``:
tests/fixtures/proxy.py), which the sync then talks through; restarts are real
(``opa_process``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import aiohttp
import pytest

from devstack.federation import CLUSTER_CRD
from fedplace.common.cluster_index import cluster_index
from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from fedplace.common.opa_client import OpaRequestError
from fedplace.common.subject_index import subject_index
from fedplace.sync import loaded, replicated_root
from fedplace.sync.app import SyncApp
from fedplace.sync.config import parse_args
from fedplace.sync.policy_status import STATUS_ANNOTATION
from fedplace.sync.replicate import LAST_APPLIED, layout
from tests.fixtures.kube import ScratchNamespaces
from tests.metrics import metric, metric_total

ROOT = Path(__file__).resolve().parents[2]
CM = Resource("", "v1", "configmaps", True)
RS = Resource("apps", "v1", "replicasets", True)
CLUSTERS = Resource("federation.fedplace.io", "v1beta1", "clusters", False)
CRB = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)
RB = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True)
POLICY_NS = "kube-federation-scheduling-policy"
NS = "apps"


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


async def policies_mirrored(api, opa, namespace: str | None = None) -> bool:
    """OPA's modules under ``<namespace>/`` (POLICY_NS by default) equal the ConfigMaps' data keys, source for source."""
    namespace = namespace or POLICY_NS
    try:
        doc = await kube_json(api, "GET", CM.collection_path(namespace))
    except KubeApiError as exc:
        if exc.status != 404:
            raise
        doc = {"items": []}
    want = {f"{namespace}/{cm['metadata']['name']}/{k}": v for cm in doc["items"] for k, v in (cm.get("data") or {}).items()}
    _, body = await opa.request("GET", "/v1/policies")
    got = {p["id"]: p["raw"] for p in body["result"] if p["id"].startswith(namespace + "/")}
    return got == want


async def assert_in_sync(api, opa, *resources: Resource, policies: bool = False, timeout: float = 10.0) -> None:
    """The end of every scenario: OPA holds exactly the API server's state, object by object
    (and, with ``policies``, module by module)."""

    async def check() -> bool:
        for res in resources:
            if not await mirrored(api, opa, res):
                return False
        return not policies or await policies_mirrored(api, opa)

    await eventually(check, timeout, "OPA to hold the API server's state")


async def generated_root_module(opa) -> str | None:
    """The source of the module the sync generates for its replicated data root, if loaded."""
    status, body = await opa.request("GET", "/v1/policies/" + replicated_root.POLICY_ID)
    return body["result"]["raw"] if status == 200 else None


def configmap_module_ids(body: dict[str, Any]) -> list[str]:
    """The ids in a ``GET /v1/policies`` answer, sorted, bar the sync's generated modules."""
    return sorted(p["id"] for p in body["result"] if p["id"] not in (replicated_root.POLICY_ID, loaded.POLICY_ID))


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




@pytest.fixture(autouse=True)
def fresh_namespaces(kube_namespaces: ScratchNamespaces, monkeypatch: pytest.MonkeyPatch) -> None:
    """NS and POLICY_NS (REMEDIATE's too) name fresh namespaces in every test: a real
    API server still has the previous test's, Terminating (tests/fixtures/kube.py)."""
    old = POLICY_NS
    kube_namespaces.rebind(monkeypatch, globals(), NS="apps", POLICY_NS="policy")
    monkeypatch.setitem(globals(), "REMEDIATE", tuple(POLICY_NS if a == old else a for a in REMEDIATE))


@pytest.fixture
async def world(kube, kube_api, opa):
    await create_ns(kube_api, NS)
    await create_ns(kube_api, POLICY_NS)
    for i in range(3):
        await kube_json(kube_api, "POST", RS.collection_path(NS), body=rs_body(f"rs{i}"))
    return kube_api


@pytest.fixture
async def start_sync(kube, opa) -> AsyncIterator[Callable[..., Awaitable[SyncApp]]]:
    """``start(*flags, opa=…, kube=…)``: a started sync, talking to the test's OPA and API
    server unless told others (e.g. the fault-injecting proxies); stopped after the test."""
    services: list[SyncApp] = []
    test_opa, test_kube = opa, kube

    async def start(*extra: str, wait_ready: bool = True, opa: Any = None, kube: Any = None) -> SyncApp:
        opa, kube = opa or test_opa, kube or test_kube
        argv = ["--opa-url", opa.url + "/v1", "--kubeconfig", str(kube.kubeconfig), "--listen", "127.0.0.1:0",
                "--opa-check-interval", "0.2", "--replicate", "apps/v1/replicasets", *extra]
        svc = SyncApp(parse_args(argv))
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


async def _watching(kube) -> bool:
    return (await kube.state())["watchers"] >= 1


# -- replication ------------------------------------------------------------------------


async def test_initial_replication_and_changes(world, opa, start_sync):
    api = world
    svc = await start_sync()
    assert await mirrored(api, opa, RS)
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("new"))
    await kube_json(api, "PATCH", RS.object_path("rs0", NS), body={"spec": {"replicas": 5}},
                    content_type="application/merge-patch+json")
    await kube_json(api, "DELETE", RS.object_path("rs1", NS))
    await assert_in_sync(api, opa, RS)
    got = await opa_data(opa, "kubernetes", "replicasets", NS)
    assert sorted(got) == ["new", "rs0", "rs2"] and got["rs0"]["spec"]["replicas"] == 5
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{svc.port}/metrics") as r:
            text = await r.text()
    for line in ('fedplace_sync_objects{resource="apps/v1/replicasets"} 3.0',
                 'fedplace_sync_relists_total{resource="apps/v1/replicasets"}',
                 'fedplace_sync_replication_lag_seconds_count{resource="apps/v1/replicasets"}',
                 'fedplace_sync_events_applied_total{resource="apps/v1/replicasets",type="DELETED"}'):
        assert line in text, line


async def test_ignored_namespaces_are_not_replicated(world, opa, start_sync, kube_namespaces):
    api = world
    skipped = kube_namespaces.reserve("skipped")
    await create_ns(api, skipped)
    await kube_json(api, "POST", RS.collection_path(skipped), body={**rs_body("hidden"),
                                                                   "metadata": {"name": "hidden", "namespace": skipped}})
    svc = await start_sync("--replicate-ignore-namespaces", f"{skipped},other")
    await kube_json(api, "POST", RS.collection_path(skipped), body={**rs_body("hidden2"),
                                                                   "metadata": {"name": "hidden2", "namespace": skipped}})
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("seen"))

    async def only_apps() -> bool:
        got = await opa_data(opa, "kubernetes", "replicasets") or {}
        want = await api_view(api, RS)
        del want[skipped]
        return got == want

    await eventually(only_apps, what="only the non-ignored namespace replicated")
    # excluded by the API server (a field selector), not filtered after listing: never even cached
    cached = svc.replicators["replicasets"].informer.objects
    assert f"{NS}/seen" in cached and not [key for key in cached if key.startswith(skipped + "/")]


async def test_noise_is_stripped_before_the_informer_caches_it(world, opa, start_sync):
    api = world
    noisy = rs_body("applied", {LAST_APPLIED: json.dumps(rs_body("applied")), "keep": "me"})
    await kube_json(api, "POST", RS.collection_path(NS), body=noisy)
    svc = await start_sync()
    cache = svc.replicators["replicasets"].informer.objects
    assert cache[f"{NS}/applied"]["metadata"]["annotations"] == {"keep": "me"}  # listed
    await kube_json(api, "PATCH", RS.object_path("applied", NS), body={"metadata": {"labels": {"v": "2"}}},
                    content_type="application/merge-patch+json")
    await assert_in_sync(api, opa, RS)  # what OPA got equals the API server's objects, stripped
    assert cache[f"{NS}/applied"]["metadata"]["labels"] == {"v": "2"}
    assert cache[f"{NS}/applied"]["metadata"]["annotations"] == {"keep": "me"}  # watched


async def test_a_burst_of_changes_is_written_as_json_patches(world, opa, opa_proxy, start_sync, kube_namespaces):
    """Changes piling up while OPA is slow go out as JSON Patches of the collection;
    one a patch cannot carry (an object of a namespace OPA has not seen yet) makes
    that batch go object by object. OPA ends equal to the API server either way."""
    api = world
    await start_sync(opa=opa_proxy)
    fresh = kube_namespaces.reserve("burst")
    await create_ns(api, fresh)
    await opa_proxy.clear_faults()  # also resets the per-request counts read below
    await opa_proxy.set_faults({"latency": 1.0})  # each write takes a second: the burst piles up behind the first
    changes = [kube_json(api, "POST", RS.collection_path(NS), body=rs_body(f"burst{i}")) for i in range(20)]
    changes.append(kube_json(api, "POST", RS.collection_path(fresh),
                             body={**rs_body("first"), "metadata": {"name": "first", "namespace": fresh}}))
    changes.append(kube_json(api, "DELETE", RS.object_path("rs1", NS)))
    await asyncio.gather(*changes)
    await opa_proxy.set_faults({"latency": 0})
    await assert_in_sync(api, opa, RS, timeout=30)
    faults = await opa_proxy.faults()
    assert "PATCH /v1/data/kubernetes/replicasets" in faults["max_in_flight"], faults["max_in_flight"]
    assert f"PUT /v1/data/kubernetes/replicasets/{fresh}/first" in faults["max_in_flight"]


async def test_a_collection_opa_holds_is_replaced_at_once(world, opa, opa_proxy, start_sync):
    """OPA already holds the collection (the sync restarted, OPA did not): one PUT replaces it,
    so what is gone from the API server goes from OPA in the same write, never namespace by
    namespace or object by object (a reader would see a mix of old and new)."""
    api = world
    status, _ = await opa.request("PUT", "/v1/data/kubernetes/replicasets", json_body={
        "stale-namespace": {"old": rs_body("old")}, NS: {"ghost": rs_body("ghost"), "rs0": rs_body("outdated")}})
    assert status == 204
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/kubernetes/replicasets/", "method": "PUT", "status": 503,
                                         "count": -1}})  # a namespace's (or an object's) own PUT would never land
    svc = await start_sync(opa=opa_proxy)
    await assert_in_sync(api, opa, RS)
    assert svc.is_ready()
    assert not [k for k in (await opa_proxy.faults())["max_in_flight"]
                if k.startswith("PUT /v1/data/kubernetes/replicasets/")]


async def test_opa_token_file(kube, kube_api, opa_auth, tmp_path, start_sync):
    await create_ns(kube_api, NS)
    await kube_json(kube_api, "POST", RS.collection_path(NS), body=rs_body("secured"))
    token_file = tmp_path / "token"
    token_file.write_text(opa_auth.token + "\n")
    await start_sync("--opa-url", opa_auth.url, "--opa-token-file", str(token_file))
    await assert_in_sync(kube_api, opa_auth, RS)


async def test_readiness_waits_for_the_initial_sync(world, opa, opa_proxy, start_sync):
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/kubernetes", "method": "PUT", "status": 503, "count": 3}})
    svc = await start_sync(wait_ready=False, opa=opa_proxy)
    ok, reason = svc.ready()
    assert not ok and reason
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{svc.port}/readyz") as r:
            assert r.status == 503
    await eventually(lambda: _true(svc.is_ready()), 15, "ready after OPA recovers")
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{svc.port}/readyz") as r:
            assert r.status == 200
    await assert_in_sync(world, opa, RS)


async def test_watch_closed_mid_stream(world, opa, kube_proxy, start_sync):
    api, kube = world, kube_proxy
    svc = await start_sync(kube=kube)
    await eventually(lambda: _watching(kube), what="the replication watch to be open")  # else nothing to cut
    await kube.close_watches()
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("after-cut"))
    await kube_json(api, "DELETE", RS.object_path("rs2", NS))
    await assert_in_sync(api, opa, RS)
    assert svc.replicators["replicasets"].informer.stats.watch_restarts >= 1


async def test_410_after_compaction_drops_objects_deleted_in_the_gap(world, opa, kube_proxy, start_sync):
    api, kube = world, kube_proxy
    svc = await start_sync(kube=kube)
    informer = svc.replicators["replicasets"].informer
    relists = informer.stats.relists
    # Cut the watch and keep it from coming back while the gap opens.
    await kube.set_faults({"fail": {"path": RS.collection_path(), "method": "GET", "status": 503, "count": -1}})
    await kube.close_watches()
    await kube_json(api, "DELETE", RS.object_path("rs0", NS))
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("in-gap"))
    await kube.compact()
    await kube.clear_faults()
    await assert_in_sync(api, opa, RS, timeout=20)
    assert "rs0" not in await opa_data(opa, "kubernetes", "replicasets", NS)
    assert informer.stats.relists > relists


async def test_relist_while_opa_fails(world, opa, opa_proxy, kube_proxy, start_sync):
    """A relist whose collection PUT OPA refuses (503) is retried by the flusher, not dropped."""
    api, kube = world, kube_proxy
    svc = await start_sync(opa=opa_proxy, kube=kube)
    await kube.set_faults({"fail": {"path": RS.collection_path(), "method": "GET", "status": 503, "count": -1}})
    await kube.close_watches()
    await kube_json(api, "DELETE", RS.object_path("rs1", NS))
    await kube.compact()
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/kubernetes/replicasets", "method": "PUT", "status": 503,
                                         "count": 4}})
    await kube.clear_faults()
    await assert_in_sync(api, opa, RS, timeout=10)
    assert svc.is_ready()


async def test_policy_change_while_opa_fails_is_repaired(world, opa, opa_proxy, start_sync):
    api = world
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 1\n"})
    await start_sync("--policy-namespace", POLICY_NS, opa=opa_proxy)
    await eventually(lambda: _status_is(api, "p", "ok"), what="ok status")
    await opa_proxy.set_faults({"fail": {"path": "/v1/policies", "status": 503, "count": 6}})
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 2\n"})
    await eventually(lambda: _eq(opa_data(opa, "fedtest", "a", "x"), 2), 10, "the change loaded once OPA answers")
    assert (await policy_status(api, "p")) == {"status": "ok"}
    await assert_in_sync(api, opa, RS, policies=True)


async def test_opa_wiped_is_restored(world, opa, start_sync):
    """Every policy and document lost (an OPA restart, as the sync sees it: through the
    public API on a real OPA) is put back within seconds."""
    api = world
    await start_sync("--policy-namespace", POLICY_NS)
    # "a-user" imports "b-lib": on a re-push it loads first, fails, and must be retried.
    await put_configmap(api, "b-lib", {"l.rego": "package fedtest.lib\n\ndouble(x) := x * 2\n"})
    await put_configmap(api, "a-user", {"u.rego": "package fedtest.user\n\nimport data.fedtest.lib\n\nfour := lib.double(2)\n"})
    await eventually(lambda: _eq(opa_data(opa, "fedtest", "user", "four"), 4), what="policies loaded")
    resyncs = metric("fedplace_sync_opa_resyncs_total")
    await opa.wipe()
    start = time.monotonic()
    await assert_in_sync(api, opa, RS, policies=True, timeout=5)
    await eventually(lambda: _eq(opa_data(opa, "fedtest", "user", "four"), 4), 5, "policies restored")
    took = time.monotonic() - start
    print(f"state restored {took:.2f} s after the wipe")
    assert metric("fedplace_sync_opa_resyncs_total") - resyncs >= 1
    assert took < 5
    assert (await policy_status(api, "a-user")) == {"status": "ok"}
    assert await generated_root_module(opa) == replicated_root.render("kubernetes")


async def test_opa_process_restart_is_restored(kube, kube_api, opa_process):
    """A real restart (SIGKILL, then the same port): a real OPA with REAL_OPA_BIN."""
    api = kube_api
    await create_ns(api, NS)
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("survivor"))
    svc = SyncApp(parse_args(["--opa-url", opa_process.url, "--kubeconfig", str(kube.kubeconfig),
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
        await assert_in_sync(api, opa_process, RS)
    finally:
        await svc.stop()


async def test_opa_500s_then_recovery(world, opa, opa_proxy, start_sync):
    api = world
    await start_sync(opa=opa_proxy)
    await opa_proxy.set_faults({"fail": {"path": "/v1/data", "method": "PUT", "status": 500, "count": 5}})
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("during-500s"))
    await kube_json(api, "DELETE", RS.object_path("rs1", NS))
    await assert_in_sync(api, opa, RS, timeout=15)


async def test_opa_connections_cut_while_writing_then_recovery(world, opa, opa_proxy, start_sync):
    """Writes whose connection drops, before OPA saw them or after it applied them (the
    answer lost), are written again until OPA holds the API server's state."""
    api = world
    await start_sync(opa=opa_proxy)
    await opa_proxy.set_faults({"cut": {"path": "/v1/data/kubernetes", "count": 3}})
    await opa_proxy.set_faults({"cut": {"path": "/v1/data/kubernetes", "count": 3, "forward": True}})
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("during-cuts"))
    await kube_json(api, "DELETE", RS.object_path("rs1", NS))

    async def every_cut_made() -> bool:
        return all(r["count"] == 0 for r in (await opa_proxy.faults())["proxy_rules"])

    await eventually(every_cut_made, 15, "the writes to meet every cut")
    await kube_json(api, "POST", RS.collection_path(NS), body=rs_body("after-cuts"))
    await assert_in_sync(api, opa, RS, timeout=15)


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

    async def index_follows() -> bool:
        return await opa_data(opa, "kubernetes_index", "clusters") == cluster_index(await api_view(api, CLUSTERS))

    # Beside the mirror, the clusters by label value and region (common/cluster_index.py).
    await eventually(index_follows, what="the cluster index")
    assert await opa_data(opa, "kubernetes_index", "clusters", "regions") == {"europe-west1": {"eu-1": True},
                                                                             "us-east1": {"us-1": True}}
    await kube_json(api, "PATCH", CLUSTERS.object_path("eu-1"),
                    body={"metadata": {"labels": {"pci-compliance-level": "3"}}},
                    content_type="application/merge-patch+json")
    await eventually(lambda: _eq(opa_data(opa, "kubernetes_index", "clusters", "labels", "pci-compliance-level"),
                                 {"3": {"eu-1": True}, "2": {"us-1": True}}), what="a label change in the index")
    await kube_json(api, "DELETE", CLUSTERS.object_path("us-1"))
    await assert_in_sync(api, opa, CLUSTERS)
    await eventually(index_follows, what="the deleted cluster out of the index")


def rbac_binding(name: str, subjects: list[dict[str, str]], namespace: str | None = None) -> dict[str, Any]:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": subjects}


async def index_follows(api, opa, res: Resource) -> bool:
    """OPA's subject index of ``res`` is the index of the API server's bindings."""
    return (await opa_data(opa, "kubernetes_index", res.plural) or {}) == subject_index(res, await api_view(api, res))


async def test_rbac_bindings_get_a_subject_index_that_follows_them(world, opa, start_sync):
    """Beside the mirrored RBAC bindings, the sync keeps them by subject name
    (data.kubernetes_index), through creates, subject changes, deletes and an OPA wipe."""
    api = world
    crb = f"fp-index-{NS}"
    who = {"kind": "ServiceAccount", "name": f"sa-{NS}", "namespace": NS}
    await kube_json(api, "POST", CRB.collection_path(), body=rbac_binding(crb, [who]))
    try:
        await kube_json(api, "POST", RB.collection_path(NS), body=rbac_binding("rb", [
            {"kind": "Group", "name": f"system:serviceaccounts:{NS}", "apiGroup": "rbac.authorization.k8s.io"}], NS))
        await start_sync("--replicate-cluster", "rbac.authorization.k8s.io/v1/clusterrolebindings",
                         "--replicate", "rbac.authorization.k8s.io/v1/rolebindings")
        await assert_in_sync(api, opa, CRB, RB)
        await eventually(lambda: index_follows(api, opa, CRB), what="the ClusterRoleBinding index")
        await eventually(lambda: index_follows(api, opa, RB), what="the RoleBinding index")
        by_name = await opa_data(opa, "kubernetes_index", "clusterrolebindings", f"sa-{NS}")
        assert by_name == {crb: True}
        assert await opa_data(opa, "kubernetes_index", "rolebindings", NS) == {f"system:serviceaccounts:{NS}": {"rb": True}}

        user = {"kind": "User", "name": f"user-{NS}", "apiGroup": "rbac.authorization.k8s.io"}
        await kube_json(api, "PATCH", CRB.object_path(crb), body={"subjects": [user]},
                        content_type="application/merge-patch+json")
        await eventually(lambda: _eq(opa_data(opa, "kubernetes_index", "clusterrolebindings", f"user-{NS}"),
                                     {crb: True}), what="the new subject in the index")
        assert await opa_data(opa, "kubernetes_index", "clusterrolebindings", f"sa-{NS}") is None
        await kube_json(api, "DELETE", RB.object_path("rb", NS))
        await eventually(lambda: index_follows(api, opa, RB), what="the deleted RoleBinding out of the index")

        await opa.wipe()
        await eventually(lambda: index_follows(api, opa, CRB), what="the index restored after a wipe")
    finally:
        await kube_json(api, "DELETE", CRB.object_path(crb))


async def test_a_subject_index_write_that_fails_is_retried_on_its_own(world, opa, opa_proxy, start_sync, caplog):
    """OPA refusing the index writes — at the initial sync (403s: an authorization policy
    that does not know the index yet) and while the bindings change (500s): the collection
    is written as usual, and the index is written again until it matches."""
    api = world
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/kubernetes_index", "method": "PUT", "status": 403,
                                         "count": 2}})
    await start_sync("--replicate-cluster", "rbac.authorization.k8s.io/v1/clusterrolebindings", opa=opa_proxy)
    await assert_in_sync(api, opa, CRB)
    await eventually(lambda: index_follows(api, opa, CRB), what="the index")
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/kubernetes_index", "method": "PUT", "status": 500,
                                         "count": 4}})
    crb = f"fp-index-retry-{NS}"
    await kube_json(api, "POST", CRB.collection_path(), body=rbac_binding(crb, [{"kind": "User", "name": f"u-{NS}"}]))
    try:
        await assert_in_sync(api, opa, CRB, timeout=15)
        await eventually(lambda: index_follows(api, opa, CRB), 15, "the index after the 500s")
        refused = [r for r in caplog.records if r.getMessage() == "index write failed; will retry"]
        assert len(refused) == 6  # every refusal was met, and retried past
        assert await opa_data(opa, "kubernetes_index", "clusterrolebindings", f"u-{NS}") == {crb: True}
    finally:
        await kube_json(api, "DELETE", CRB.object_path(crb))


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
    await assert_in_sync(api, opa, RS, policies=True)


async def _status_is(api, name: str, value: str) -> bool:
    status = await policy_status(api, name)
    return status is not None and status["status"] == value


def loads() -> float:
    return metric("fedplace_sync_policy_loads_total")


async def test_system_package_refused_others_loaded(world, opa, start_sync):
    """A policy ConfigMap must not reconfigure OPA itself (data.system, e.g. system.authz)."""
    api = world
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 1\n",
                                   "authz.rego": "package system.authz\n\nallow := true\n"})
    await start_sync("--policy-namespace", POLICY_NS)
    await eventually(lambda: _status_is(api, "p", "error"), what="the system module refused")
    status = await policy_status(api, "p")
    assert [e["code"] for e in status["errors"]] == ["fedplace_reserved_package"]
    assert status["errors"][0]["location"]["file"] == f"{POLICY_NS}/p/authz.rego"
    _, body = await opa.request("GET", "/v1/policies")
    assert configmap_module_ids(body) == [f"{POLICY_NS}/p/a.rego"]
    assert await opa_data(opa, "fedtest", "a", "x") == 1

    await put_configmap(api, "p", {"authz.rego": "package fedtest.authz\n\nallow := true\n"})
    await eventually(lambda: _status_is(api, "p", "ok"), what="the fixed module loaded")


async def test_system_package_loaded_when_allowed(world, opa, start_sync):
    api = world
    await put_configmap(api, "p", {"log.rego": "package system.log\n\nmask contains \"/input/password\"\n"})
    await start_sync("--policy-namespace", POLICY_NS, "--allow-system-packages")
    await eventually(lambda: _status_is(api, "p", "ok"), what="the system module loaded when allowed")
    _, body = await opa.request("GET", "/v1/policies")
    assert configmap_module_ids(body) == [f"{POLICY_NS}/p/log.rego"]


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
    await assert_in_sync(api, opa, RS, policies=True)


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
        return configmap_module_ids(body) == [f"{POLICY_NS}/p/a.rego"]

    await eventually(only_a, what="b.rego removed from OPA")
    assert await opa_data(opa, "fedtest", "a", "x") == 1
    await kube_json(api, "DELETE", CM.object_path("p", POLICY_NS))

    async def none_left() -> bool:
        _, body = await opa.request("GET", "/v1/policies")
        return configmap_module_ids(body) == []

    await eventually(none_left, what="ConfigMap deletion removes its modules")
    await assert_in_sync(api, opa, RS, policies=True)


async def test_dependent_module_is_retried_until_ok(world, opa, start_sync):
    api = world
    await start_sync("--policy-namespace", POLICY_NS)
    await put_configmap(api, "user", {"u.rego": "package fedtest.user\n\nimport data.fedtest.lib\n\nfour := lib.double(2)\n"})
    await eventually(lambda: _status_is(api, "user", "error"), what="user fails without its library")
    await put_configmap(api, "lib", {"l.rego": "package fedtest.lib\n\ndouble(x) := x * 2\n"})
    await eventually(lambda: _status_is(api, "user", "ok"), what="user retried once the library loaded")
    assert await opa_data(opa, "fedtest", "user", "four") == 4
    await assert_in_sync(api, opa, RS, policies=True)


# -- remediation wiring ------------------------------------------------------------------------


# The sync flags of every remediation test: enforce, fast, one replica, no guard.
REMEDIATE = ("--policy-namespace", POLICY_NS, "--remediate", "enforce", "--remediate-debounce", "0.05",
             "--remediate-max-fraction", "1", "--leader-election", "false")


# Remediation evaluates the placement decision (what the admission decision's placement part is).
def owner_policy(owner: str, kind: str = "ReplicaSet") -> str:
    return f'package io.k8s.federation.placement.decision\n\nannotations["fedplace.io/owner"] := "{owner}" if input.kind == "{kind}"\n'


async def put_remediated_policy(api, admission_rego: str) -> None:
    """The ConfigMap "p": a placement policy and the shipped remediation library."""
    await put_configmap(api, "p", {"admission.rego": admission_rego,
                                   "remediation.rego": (ROOT / "policies/lib/remediation.rego").read_text()})


def every_rs_annotated(api, key: str, value: str) -> Callable[[], Awaitable[bool]]:
    """A check for :func:`eventually`: every ReplicaSet of NS carries ``key: value``."""
    async def check() -> bool:
        doc = await kube_json(api, "GET", RS.collection_path(NS))
        return all((i["metadata"].get("annotations") or {}).get(key) == value for i in doc["items"])
    return check


async def test_remediation_enforced_through_the_sync_and_after_a_policy_edit(world, opa, start_sync):
    api = world
    await put_remediated_policy(api, owner_policy("platform"))
    await start_sync(*REMEDIATE)
    await eventually(every_rs_annotated(api, "fedplace.io/owner", "platform"), 15, "every ReplicaSet annotated by the remediator")
    await assert_in_sync(api, opa, RS, policies=True)

    patches = metric("fedplace_remediation_patches_total", mode="enforce")
    await put_configmap(api, "p", {"admission.rego": owner_policy("platform-v2")})
    await eventually(every_rs_annotated(api, "fedplace.io/owner", "platform-v2"), 15, "the policy edit remediated")
    assert metric("fedplace_remediation_patches_total", mode="enforce") - patches == 3

    async def events_recorded() -> bool:
        evs = await kube_json(api, "GET", f"/api/v1/namespaces/{NS}/events")
        return {e["involvedObject"]["name"] for e in evs["items"] if e["reason"] == "PlacementRemediated"
                and "fedplace.io/owner: 'platform' -> 'platform-v2'" in e["message"]} == {"rs0", "rs1", "rs2"}

    await eventually(events_recorded, 10, "a PlacementRemediated Event (old -> new) on every ReplicaSet")


async def test_remediation_reads_another_replicate_path(world, opa, start_sync):
    """--replicate-path names where objects are replicated; the generated root module
    points the (unchanged) remediation library there, and OPA's compiler accepts both."""
    api = world
    await put_remediated_policy(api, owner_policy("elsewhere"))
    await start_sync(*REMEDIATE, "--replicate-path", "mirror-root")
    await eventually(every_rs_annotated(api, "fedplace.io/owner", "elsewhere"), 15,
                     "every ReplicaSet remediated from data.mirror-root")
    assert await generated_root_module(opa) == replicated_root.render("mirror-root")
    assert await mirrored(api, opa, RS, root="mirror-root")
    assert await opa_data(opa, "kubernetes") is None
    assert await policy_status(api, "p") == {"status": "ok"}


async def test_cluster_scoped_custom_resource_remediated(kube, kube_api, opa, start_sync):
    """A cluster-scoped custom resource: remediated through a merge patch (the only
    patch type custom resources accept besides JSON patch)."""
    api = kube_api
    await create_ns(api, POLICY_NS)
    await kube_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CLUSTER_CRD)
    await eventually(lambda: _ok(kube_json(api, "GET", CLUSTERS.collection_path())), what="CRD served")
    for name in ("eu-1", "us-1"):
        await kube_json(api, "POST", CLUSTERS.collection_path(), body={
            "apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "annotations": {"keep": "me"}}, "status": {"region": "europe-west1"}})
    await put_remediated_policy(api, owner_policy("fleet", kind="Cluster"))
    await start_sync(*REMEDIATE, "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters",
                     "--remediate-resource-cluster", "federation.fedplace.io/v1beta1/clusters")

    async def annotated() -> bool:
        doc = await kube_json(api, "GET", CLUSTERS.collection_path())
        return all(i["metadata"].get("annotations") == {"keep": "me", "fedplace.io/owner": "fleet"}
                   for i in doc["items"])

    await eventually(annotated, 15, "both clusters annotated, their other annotations kept")


async def test_echo_of_own_patches_triggers_no_pass_a_foreign_edit_a_targeted_one(world, opa, start_sync):
    """The watch echoes every remediation patch back; replicating those echoes must
    not start another (idle) pass. Anybody else's edit of a remediated object
    starts a pass over that object only."""
    api = world
    await put_remediated_policy(api, owner_policy("platform"))
    svc = await start_sync(*REMEDIATE)
    rem = svc.remediator
    assert rem is not None
    names = [i["metadata"]["name"] for i in (await kube_json(api, "GET", RS.collection_path(NS)))["items"]]

    async def owned_in_opa() -> bool:
        objs = await opa_data(opa, "kubernetes", "replicasets", NS) or {}
        return all((objs.get(n, {}).get("metadata", {}).get("annotations") or {}).get("fedplace.io/owner")
                   == "platform" for n in names)

    await eventually(owned_in_opa, 15, "the remediator's patches replicated back into OPA")
    assert rem.last_result is not None and rem.last_result.patched == len(names)
    passes = metric_total("fedplace_remediation_passes_total")
    await asyncio.sleep(0.5)  # ten debounce periods: an echo-triggered pass would have run
    assert metric_total("fedplace_remediation_passes_total") == passes, "the echo of our own patches started a pass"

    await kube_json(api, "PATCH", RS.object_path(names[0], NS), body={"metadata": {"annotations": {"fedplace.io/owner": "me"}}},
                    content_type="application/merge-patch+json")

    targeted = metric("fedplace_remediation_passes_total", outcome="ok", scope="targeted")
    full = metric("fedplace_remediation_passes_total", outcome="ok", scope="full")
    await eventually(every_rs_annotated(api, "fedplace.io/owner", "platform"), 15, "a foreign edit remediated")

    async def pass_counted() -> bool:
        return metric("fedplace_remediation_passes_total", outcome="ok", scope="targeted") > targeted

    await eventually(pass_counted, 5, "the targeted pass counted")
    assert metric("fedplace_remediation_passes_total", outcome="ok", scope="full") == full
    assert rem.last_result.patched == 1 and rem.last_result.in_sync == 0  # the others were not evaluated


async def test_echoes_of_a_pass_reach_opa_during_it_and_start_nothing(world, opa, start_sync):
    """While a pass runs (here one object per query), the echoes of its own patches are
    replicated into OPA like any change, and recognised as echoes: no further pass, and
    nothing patched twice."""
    api = world
    await put_remediated_policy(api, owner_policy("platform"))
    svc = await start_sync(*REMEDIATE, "--remediate-chunk", "1", "--remediate-max-chunk", "1", wait_ready=False)
    rem = svc.remediator
    assert rem is not None
    seen_in_opa: list[bool] = []
    query = rem.query_notifications

    async def checking(objects=None):
        if objects and objects[0][2] == "rs2":  # rs0 and rs1 are patched by now (or being patched)
            async def echo_in_opa() -> bool:
                rs0 = await opa_data(opa, "kubernetes", "replicasets", NS, "rs0")
                return "fedplace.io/owner" in (rs0["metadata"].get("annotations") or {})

            await eventually(echo_in_opa, 10, "the echo of rs0's patch in OPA, the pass still running")
            seen_in_opa.append(True)
        return await query(objects)

    rem.query_notifications = checking
    await eventually(every_rs_annotated(api, "fedplace.io/owner", "platform"), 20, "every ReplicaSet annotated")
    assert seen_in_opa == [True]
    await assert_in_sync(api, opa, RS)
    passes = metric_total("fedplace_remediation_passes_total")
    patched = rem.last_result.patched if rem.last_result else None
    await asyncio.sleep(0.5)
    assert metric_total("fedplace_remediation_passes_total") == passes, "the echoes started a pass"
    assert rem.last_result is not None and rem.last_result.patched == patched


async def test_change_to_other_replicated_data_starts_a_full_pass(world, opa, start_sync):
    """Decisions may read any replicated data: a new cluster re-evaluates every ReplicaSet."""
    api = world
    await kube_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CLUSTER_CRD)
    await eventually(lambda: _ok(kube_json(api, "GET", CLUSTERS.collection_path())), what="CRD served")

    async def add_cluster(name: str) -> None:
        await kube_json(api, "POST", CLUSTERS.collection_path(), body={
            "apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster", "metadata": {"name": name}})

    await add_cluster("c1")
    policy = ('package io.k8s.federation.placement.decision\n\nannotations["fedplace.io/clusters"] := '
              'sprintf("%d", [count(data.kubernetes.clusters)]) if input.kind == "ReplicaSet"\n')
    await put_remediated_policy(api, policy)
    await start_sync(*REMEDIATE, "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters")
    await eventually(every_rs_annotated(api, "fedplace.io/clusters", "1"), 15, "every ReplicaSet sees one cluster")
    await add_cluster("c2")
    await eventually(every_rs_annotated(api, "fedplace.io/clusters", "2"), 15, "every ReplicaSet re-evaluated after a cluster was added")


async def test_kube_root_ca_configmap_is_not_loaded(world, opa, start_sync):
    """kube-root-ca.crt, published into every namespace, is not policy: no module, no status."""
    api = world
    await put_configmap(api, "kube-root-ca.crt", {"ca.crt": "-----BEGIN CERTIFICATE-----\n"})
    await put_configmap(api, "p", {"a.rego": "package fedtest.a\n\nx := 1\n"})
    await start_sync("--policy-namespace", POLICY_NS)
    await eventually(lambda: _status_is(api, "p", "ok"), what="the real policy loaded")
    _, body = await opa.request("GET", "/v1/policies")
    assert configmap_module_ids(body) == [f"{POLICY_NS}/p/a.rego"]
    assert await policy_status(api, "kube-root-ca.crt") is None


SLIM_PROBE = """
import asyncio, sys
from fedplace.common import kube_slim
assert kube_slim.install()
import kubernetes_asyncio.client as client
from fedplace.common.kube_client import kube_json, new_api_client

async def main():
    api = await new_api_client(sys.argv[1])
    try:
        doc = await kube_json(api, "GET", "/api/v1/namespaces", query=[("limit", "1")])
        print(doc["kind"], hasattr(client, "CoreV1Api"), hasattr(client, "V1Pod"))
    finally:
        await api.close()

asyncio.run(main())
"""


def test_slim_kubernetes_client_talks_raw_json_without_generated_classes(kube):
    """What ``python -m fedplace.sync`` loads (common/kube_slim.py): kubeconfig loading and raw
    JSON calls work; the generated API and model classes are not there."""
    proc = subprocess.run([sys.executable, "-c", SLIM_PROBE, str(kube.kubeconfig)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["NamespaceList", "False", "False"]


# -- the record of a complete load ---------------------------------------------------------


async def loaded_record(opa) -> Any:
    return await opa_data(opa, "fedplace_sync", "loaded")


async def test_the_record_names_every_configmap_loaded_or_broken_and_follows_changes(world, opa, start_sync):
    """Written once everything is loaded, a broken ConfigMap included; a new ConfigMap is
    named before its status says loaded, a deleted one taken out; the admission decision
    carries the record through the generated module."""
    api = world
    await put_configmap(api, "good", {"a.rego": "package io.k8s.federation.admission\n\nerrors := set()\n"})
    await put_configmap(api, "broken", {"b.rego": "package fedtest.broken\n\nx := \n"})
    svc = await start_sync("--policy-namespace", POLICY_NS)
    assert await loaded_record(opa) == {"configmaps": {POLICY_NS: ["broken", "good"]}, "resources": ["replicasets"]}
    assert (await policy_status(api, "broken"))["status"] == "error"
    _, body = await opa.request("GET", "/v1/policies/" + loaded.POLICY_ID)
    assert body["result"]["raw"] == loaded.render("io.k8s.federation.admission")
    status, decision = await opa.query("io/k8s/federation/admission", {"kind": "ReplicaSet"})
    assert status == 200 and decision["result"] == {"errors": [], loaded.LOADED_KEY: await loaded_record(opa)}

    await put_configmap(api, "later", {"c.rego": "package fedtest.later\n\ny := 1\n"})
    await eventually(lambda: _status_is(api, "later", "ok"), what="later loaded")
    assert (await loaded_record(opa))["configmaps"][POLICY_NS] == ["broken", "good", "later"]
    await kube_json(api, "DELETE", CM.object_path("broken", POLICY_NS))

    async def broken_gone() -> bool:
        return (await loaded_record(opa))["configmaps"][POLICY_NS] == ["good", "later"]
    await eventually(broken_gone, what="the deleted ConfigMap out of the record")
    assert svc.record is not None and svc.record.written == await loaded_record(opa)


async def test_the_record_is_gone_while_opa_reloads_and_written_after(world, opa, start_sync):
    """OPA loses its state: no record until the sync has pushed everything again; the
    sentinel written before the re-push withdraws any record."""
    api = world
    await put_configmap(api, "good", {"a.rego": "package fedtest.good\n\nx := 1\n"})
    svc = await start_sync("--policy-namespace", POLICY_NS)
    full = await loaded_record(opa)
    assert full == {"configmaps": {POLICY_NS: ["good"]}, "resources": ["replicasets"]}
    resyncs = metric("fedplace_sync_opa_resyncs_total")
    await opa.wipe()
    assert await loaded_record(opa) is None
    await eventually(lambda: _eq(loaded_record(opa), full), 5, "the record written again")
    # By then everything is back: the modules and the replicated data.
    assert await opa_data(opa, "fedtest", "good", "x") == 1
    await assert_in_sync(api, opa, RS, policies=True, timeout=1)
    assert metric("fedplace_sync_opa_resyncs_total") - resyncs >= 1

    # Written under the sentinel only: into an OPA that lost it, the write is refused.
    assert svc.record is not None
    await opa.request("DELETE", "/v1/data/fedplace_sync")
    with pytest.raises(OpaRequestError) as refused:
        await svc.record.publish(complete=True)
    assert refused.value.status == 404
    assert await opa_data(opa, "fedplace_sync") is None
    await eventually(lambda: _eq(loaded_record(opa), full), 5, "the record written again after the sentinel loss")


async def test_no_record_without_an_admission_package(world, opa, start_sync):
    api = world
    await put_configmap(api, "good", {"a.rego": "package fedtest.good\n\nx := 1\n"})
    svc = await start_sync("--policy-namespace", POLICY_NS, "--admission-package", "")
    assert svc.record is None and await loaded_record(opa) is None
    _, body = await opa.request("GET", "/v1/policies")
    assert loaded.POLICY_ID not in {p["id"] for p in body["result"]}
