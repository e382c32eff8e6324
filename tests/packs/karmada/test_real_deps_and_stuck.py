"""Dependencies and stuck placements against real Karmada (karmada-io/karmada f8fdd02).

Runs where real Karmada runs beside the real servers (``KARMADA_REAL_STATE`` set by the
real servers' ``karmada-up``, with the API server of FEDPLACE_TEST_KUBECONFIG; its default
controllers suffice: the dependencies distributor runs with the detector, feature gate
PropagateDeps on by default); skipped elsewhere. Karmada's own CRDs must be installed (not
the devstack's). fedplace's sync and webhook run in process, as in test_e2e.py.

* propagateDeps: Karmada's dependencies distributor creates the ConfigMap's attached binding
  following the Deployment's clusters; fedplace leaves it without placement, and the
  Deployment's binding excludes what the ConfigMap's requirements forbid, so the binding
  controller writes the ConfigMap's Work only where both may go.
* A stuck placement: a spread constraint (exactly two clusters) the narrowed placement
  cannot meet; Karmada's scheduler keeps its old result and fedplace reports it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually
from tests.metrics import metric
from tests.packs.karmada.helpers import (
    EU,
    PCI,
    app_reading_config,
    deployment,
    fedplace_on_karmada,
    replicated,
    three_clusters,
)
from tests.packs.karmada.test_deps_and_stuck import BINDINGS, binding, events

pytestmark = pytest.mark.karmada_real  # skipped unless real Karmada runs (tests/fixtures/karmada.py)

API_ENABLEMENTS = [
    {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"},
                                         {"name": "secrets", "kind": "Secret"}]},
    {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def member(api: client.ApiClient, name: str, region: str, pci: str, run: str) -> None:
    """A Cluster Karmada's scheduler takes (Ready, the kinds enabled, a resource summary), and
    the execution namespace the binding controller writes its Works into."""
    await kube_json(api, "POST", CLUSTERS.collection_path(None), body={
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name, "labels": {"pci-compliance-level": pci, "fedplace-test": run}},
        "spec": {"region": region, "syncMode": "Push", "apiEndpoint": f"https://{name}.invalid:6443"}})
    await kube_json(api, "PATCH", CLUSTERS.object_path(name, None) + "/status",
                    content_type="application/merge-patch+json", body={"status": {
                        "kubernetesVersion": "v1.24.0",
                        "conditions": [
                            {"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "test",
                             "lastTransitionTime": now()},
                            {"type": "CompleteAPIEnablements", "status": "True", "reason": "Complete",
                             "message": "test", "lastTransitionTime": now()}],
                        "apiEnablements": API_ENABLEMENTS,
                        "nodeSummary": {"totalNum": 3, "readyNum": 3},
                        "resourceSummary": {"allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "10000"},
                                            "allocated": {"cpu": "0", "memory": "0", "pods": "0"}}}})
    try:
        await kube_json(api, "POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"karmada-es-{name}"}})
    except KubeApiError as exc:
        if exc.status != 409:
            raise


@pytest.fixture
async def karmada(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                  tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    policy_ns = await kube_namespaces.create("kr-policy")
    app_ns = await kube_namespaces.create("kr-shop")
    async with three_clusters(kube_api, create=member) as (names, suffix), \
            fedplace_on_karmada(opa, kube, kube_api, tmp_path, policy_ns=policy_ns, app_ns=app_ns,
                                replicate=["v1/configmaps"]):
        yield {"api": kube_api, "opa": opa, "ns": app_ns, "clusters": names, "run": suffix}


def policy(name: str, run: str, **spec: Any) -> dict[str, Any]:
    placement = {"clusterAffinity": {"labelSelector": {"matchLabels": {"fedplace-test": run}}},
                 "replicaScheduling": {"replicaSchedulingType": "Duplicated"}, **spec.pop("placement", {})}
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
                     "placement": placement, **spec}}


def scheduled(obj: dict[str, Any]) -> set[str]:
    return {t["name"] for t in (obj.get("spec") or {}).get("clusters") or []}


async def works_of(api: client.ApiClient, cluster: str, kind: str, name: str) -> int:
    """Works in ``cluster``'s execution namespace carrying ``kind`` ``name``."""
    items = (await kube_json(api, "GET", f"/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-{cluster}/works"))
    return sum(1 for w in items["items"] for m in (w.get("spec") or {}).get("workload", {}).get("manifests", [])
               if m.get("kind") == kind and (m.get("metadata") or {}).get("name") == name)


async def test_a_dependency_lands_only_where_its_requirements_allow(karmada: dict[str, Any]) -> None:
    api, opa, ns, c, run = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"], karmada["run"]
    await app_reading_config(api, opa, ns)
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy("app", run, propagateDeps=True))

    async def placed() -> dict[str, Any] | None:
        try:
            obj = await binding(api, ns, "app-deployment")
        except KubeApiError:
            return None
        return obj if scheduled(obj) else None

    b = await eventually(placed, what="Karmada's scheduler to place the Deployment", timeout=30)
    assert scheduled(b) == {c["eu1"]}, b["spec"]
    assert {c["eu2"], c["us1"]} <= set(b["spec"]["placement"]["clusterAffinity"]["exclude"])

    async def attached() -> dict[str, Any] | None:
        try:
            obj = await binding(api, ns, "cfg-configmap")
        except KubeApiError:
            return None
        return obj if obj["spec"].get("requiredBy") else None

    a = await eventually(attached, what="the dependencies distributor's attached binding", timeout=30)
    assert "placement" not in a["spec"]
    assert not any(k.startswith("fedplace.io/") for k in (a["metadata"].get("annotations") or {}))
    assert any(k.startswith("resourcebinding.karmada.io/depended-by-") for k in a["metadata"]["labels"])
    assert {t["name"] for r in a["spec"]["requiredBy"] for t in r.get("clusters") or []} == {c["eu1"]}

    async def propagated() -> bool:
        return await works_of(api, c["eu1"], "ConfigMap", "cfg") == 1

    await eventually(propagated, what="the ConfigMap's Work for eu1", timeout=30)
    assert await works_of(api, c["eu2"], "ConfigMap", "cfg") == 0
    assert await works_of(api, c["us1"], "ConfigMap", "cfg") == 0


async def test_a_placement_the_scheduler_keeps_is_reported_stuck(karmada: dict[str, Any]) -> None:
    api, opa, ns, c, run = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"], karmada["run"]
    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("spread", {}))
    await eventually(lambda: replicated(opa, f"deployments/{ns}/spread"), what="the template replicated")
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
        "spread", run, placement={"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}]}))

    async def on_two() -> dict[str, Any] | None:
        try:
            obj = await binding(api, ns, "spread-deployment")
        except KubeApiError:
            return None
        return obj if len(scheduled(obj)) == 2 else None

    before = scheduled(await eventually(on_two, what="the Deployment on two clusters", timeout=30))

    # The template now needs the EU and PCI 3: only eu1 is allowed, two clusters are required.
    await kube_json(api, "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/spread",
                    content_type="application/merge-patch+json",
                    body={"metadata": {"annotations": {EU: "true", PCI: "3"}}})

    async def stuck() -> dict[str, Any] | None:
        obj = await binding(api, ns, "spread-deployment")
        exclude = set(obj["spec"]["placement"]["clusterAffinity"].get("exclude") or [])
        failed = any(x["type"] == "Scheduled" and x["status"] == "False"
                     for x in (obj.get("status") or {}).get("conditions") or [])
        return obj if {c["eu2"], c["us1"]} <= exclude and failed else None

    b = await eventually(stuck, what="the narrowed binding the scheduler could not reschedule", timeout=30)
    assert scheduled(b) == before  # the scheduler kept its old result
    kept = before - {c["eu1"]}
    assert kept

    async def reported() -> bool:
        return (metric("fedplace_remediation_stuck_objects", resource=BINDINGS) >= 1
                and await events(api, ns, "ResourceBinding", "spread-deployment", "PlacementStuck") == 1
                and await events(api, ns, "Deployment", "spread", "PlacementStuck") == 1)

    await eventually(reported, what="the stuck binding reported", timeout=30)
    items = (await kube_json(api, "GET", f"/api/v1/namespaces/{ns}/events"))["items"]
    [event] = [e for e in items if e["reason"] == "PlacementStuck" and e["involvedObject"]["kind"] == "Deployment"]
    for name in kept:
        assert name in event["message"]
