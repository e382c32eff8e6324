"""End to end: Karmada dependencies (propagateDeps) and stuck placements, through the API server.

On the devstack or the real servers (FEDPLACE_TEST_OPA_URL / FEDPLACE_TEST_KUBECONFIG),
as tests/packs/karmada/test_e2e.py, with ConfigMaps replicated too (the dependencies).
Karmada's detector is the stand-in, run one pass at a time; what Karmada's scheduler and
dependencies distributor write is written here the way they write it (spec.clusters, the
Scheduled condition through the status subresource; an attached binding without placement).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from devstack.karmada import PROPAGATION_POLICIES, RESOURCE_BINDINGS, install_crds
from devstack.karmada.standins import DEPLOYMENTS, Detector
from fedplace.common.kube_client import kube_json
from fedplace.insight import explain
from fedplace.insight.page import render, sync_view
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually
from tests.insight.conftest import run_command
from tests.metrics import metric
from tests.packs.karmada.helpers import (
    EU,
    PCI,
    WHY,
    app_reading_config,
    deployment,
    excluded,
    fedplace_on_karmada,
    replicated,
    three_clusters,
)

BINDINGS = "work.karmada.io/v1alpha2/resourcebindings"
DEPENDED_BY = "resourcebinding.karmada.io/depended-by-5dbb6dbb4"


@pytest.fixture
async def karmada(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                  tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """Three Karmada Clusters (EU PCI 3, EU PCI 1, US PCI 3), the webhook and opa-kube-sync
    replicating Clusters, Deployments, ConfigMaps and ResourceBindings, remediating bindings."""
    await install_crds(kube_api)
    policy_ns = await kube_namespaces.create("kds-policy")
    app_ns = await kube_namespaces.create("kds-shop")
    async with three_clusters(kube_api) as (names, _), \
            fedplace_on_karmada(opa, kube, kube_api, tmp_path, policy_ns=policy_ns, app_ns=app_ns,
                                replicate=["v1/configmaps"]) as stack:
        yield {"api": kube_api, "opa": opa, "ns": app_ns, "clusters": names, "sync": stack.sync, "tmp": tmp_path,
               "detector": Detector(kube_api, [DEPLOYMENTS], namespaces=[app_ns])}


async def binding(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return await kube_json(api, "GET", RESOURCE_BINDINGS.object_path(name, ns))


async def events(api: client.ApiClient, ns: str, kind: str, name: str, reason: str) -> int:
    """How many times Events of ``reason`` were recorded about ``kind`` ``name`` (counts summed)."""
    items = (await kube_json(api, "GET", f"/api/v1/namespaces/{ns}/events"))["items"]
    return sum(int(e.get("count") or 1) for e in items
               if e["involvedObject"].get("kind") == kind and e["involvedObject"].get("name") == name
               and e.get("reason") == reason)


def condition(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Scheduled", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


async def schedule(api: client.ApiClient, ns: str, name: str, clusters: list[str], cond: dict[str, Any]) -> None:
    """What Karmada's scheduler writes: spec.clusters (main resource), then the Scheduled condition
    (status subresource)."""
    path = RESOURCE_BINDINGS.object_path(name, ns)
    await kube_json(api, "PATCH", path, content_type="application/merge-patch+json",
                    body={"spec": {"clusters": [{"name": c, "replicas": 1} for c in clusters]}})
    await kube_json(api, "PATCH", path + "/status", content_type="application/merge-patch+json",
                    body={"status": {"conditions": [cond]}})


async def test_a_stuck_placement_is_reported_once_and_cleared(karmada: dict[str, Any]) -> None:
    api, opa, ns, c = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"]
    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("web", {EU: "true"}))
    await eventually(lambda: replicated(opa, f"deployments/{ns}/web"), what="the template replicated")
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body={
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "web"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                 "placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}]}}})
    await karmada["detector"].reconcile_once()
    b = await binding(api, ns, "web-deployment")
    assert c["us1"] in b["spec"]["placement"]["clusterAffinity"]["exclude"]

    # Before the scheduler tried: not stuck, although us1 is still scheduled.
    await kube_json(api, "PATCH", RESOURCE_BINDINGS.object_path("web-deployment", ns),
                    content_type="application/merge-patch+json",
                    body={"spec": {"clusters": [{"name": c["eu1"], "replicas": 1}, {"name": c["us1"], "replicas": 1}]}})
    await asyncio.sleep(1.0)
    assert metric("fedplace_remediation_stuck_objects", resource=BINDINGS) == 0

    # The scheduler failed to reschedule (the spread constraint needs two clusters) and kept us1.
    await schedule(api, ns, "web-deployment", [c["eu1"], c["us1"]],
                   condition("False", "SchedulerError", "0/3 clusters are available: spread constraint needs 2"))

    async def stuck_reported() -> bool:
        return (metric("fedplace_remediation_stuck_objects", resource=BINDINGS) == 1
                and await events(api, ns, "ResourceBinding", "web-deployment", "PlacementStuck") == 1
                and await events(api, ns, "Deployment", "web", "PlacementStuck") == 1)

    await eventually(stuck_reported, what="the stuck binding reported (gauge, Events on binding and template)")
    items = (await kube_json(api, "GET", f"/api/v1/namespaces/{ns}/events"))["items"]
    [event] = [e for e in items if e["reason"] == "PlacementStuck" and e["involvedObject"]["kind"] == "Deployment"]
    assert event["type"] == "Warning"
    assert f"Karmada's scheduler kept clusters the placement policy forbids: {c['us1']}" in event["message"]
    assert "SchedulerError: 0/3 clusters are available" in event["message"]

    # Once per change: further passes over the same stuck binding record nothing new.
    await kube_json(api, "PATCH", RESOURCE_BINDINGS.object_path("web-deployment", ns),
                    content_type="application/merge-patch+json", body={"metadata": {"labels": {"poke": "1"}}})
    karmada["sync"].remediator.trigger("test")
    await asyncio.sleep(1.5)
    assert await events(api, ns, "ResourceBinding", "web-deployment", "PlacementStuck") == 1
    assert await events(api, ns, "Deployment", "web", "PlacementStuck") == 1

    # fedplace explain says so, from the policy's explanation.
    f = karmada["tmp"] / "rb.json"
    f.write_text(json.dumps(await binding(api, ns, "web-deployment")))
    flags = ["--opa-url", opa.url]
    if opa.token:
        (karmada["tmp"] / "opa.token").write_text(opa.token)
        flags += ["--opa-token-file", str(karmada["tmp"] / "opa.token")]
    code, out, err = await run_command(explain, ["-f", str(f), *flags])
    assert code == 0, err
    assert f"  ! ResourceBinding {ns}/web-deployment: Karmada's scheduler kept clusters the placement policy " \
        f"forbids: {c['us1']};" in out

    # And for the template, from its replicated binding.
    f.write_text(json.dumps(await kube_json(api, "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")))
    code, out, err = await run_command(explain, ["-f", str(f), *flags])
    assert code == 0, err
    assert f"  ! ResourceBinding {ns}/web-deployment: Karmada's scheduler kept clusters" in out

    # The placement page lists it.
    page = render(sync_view(karmada["sync"], clusters="clusters", workloads=()))
    assert 'id="stuck"' in page and f"{ns}/web-deployment" in page

    # The scheduler succeeds (the constraint relaxed): no longer stuck.
    await schedule(api, ns, "web-deployment", [c["eu1"], c["eu2"]],
                   condition("True", "Success", "Binding has been scheduled successfully."))

    async def cleared() -> bool:
        return metric("fedplace_remediation_stuck_objects", resource=BINDINGS) == 0

    await eventually(cleared, what="the gauge back to 0")
    assert 'id="stuck"' not in render(sync_view(karmada["sync"], clusters="clusters", workloads=()))


async def test_dependencies_narrow_their_parent_and_attached_bindings_stay_as_karmada_wrote_them(
        karmada: dict[str, Any]) -> None:
    api, opa, ns, c = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"]
    await app_reading_config(api, opa, ns)
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body={
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "app"},
        "spec": {"propagateDeps": True,
                 "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"}]}})
    await karmada["detector"].reconcile_once()
    b = await binding(api, ns, "app-deployment")
    assert b["spec"]["propagateDeps"] is True
    assert {c["us1"], c["eu2"]} <= set(b["spec"]["placement"]["clusterAffinity"]["exclude"])
    assert c["eu1"] not in b["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert set(excluded(b, c)) == {c["us1"], c["eu2"]}
    why = b["metadata"]["annotations"][WHY]
    assert f"; with its dependencies (propagateDeps) also excluded: ConfigMap {ns}/cfg forbids " in why
    assert c["eu2"] in why.split("ConfigMap", 1)[1]

    # The attached binding the dependencies distributor writes: no placement, required by the parent.
    attached = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": "cfg-configmap", "labels": {DEPENDED_BY: "parent-id"}},
                "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": "cfg"},
                         "requiredBy": [{"namespace": ns, "name": "app-deployment",
                                         "clusters": [{"name": c["eu1"], "replicas": 1}]}]}}
    stored = await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=attached)
    assert "placement" not in stored["spec"]
    assert not any(k.startswith("fedplace.io/") for k in (stored["metadata"].get("annotations") or {}))
    rv = stored["metadata"]["resourceVersion"]

    # The dependency relaxes its requirement: remediation takes eu2's exclusion back from the
    # parent, and still never touches the attached binding.
    await kube_json(api, "PATCH", f"/api/v1/namespaces/{ns}/configmaps/cfg",
                    content_type="application/merge-patch+json", body={"metadata": {"annotations": {PCI: None}}})

    async def relaxed() -> dict[str, Any] | None:
        obj = await binding(api, ns, "app-deployment")
        return obj if c["eu2"] not in obj["spec"]["placement"]["clusterAffinity"]["exclude"] else None

    b = await eventually(relaxed, what="the dependency's exclusion taken back from the parent")
    assert c["us1"] in b["spec"]["placement"]["clusterAffinity"]["exclude"]
    await asyncio.sleep(0.5)
    assert (await binding(api, ns, "cfg-configmap"))["metadata"]["resourceVersion"] == rv
