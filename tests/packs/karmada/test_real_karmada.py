"""The Karmada pack beside real Karmada: 5,000 member clusters, a binding with 4,999 excluded.

Runs only where real Karmada is up beside the real API server (``KARMADA_REAL_STATE``, set
by the real servers' ``karmada-up``, with FEDPLACE_TEST_OPA_URL / FEDPLACE_TEST_KUBECONFIG):
Karmada's own CRDs, webhook, detector and scheduler, no stand-ins. fedplace runs in process:
opa-kube-sync replicating Karmada Clusters, Deployments, ResourceBindings and
PropagationPolicies and remediating the bindings; the TLS webhook for templates, bindings and
PropagationPolicies; the policy ConfigMaps deploy/ ships plus ``control_plane := "karmada"``.

The Clusters carry the status Karmada's scheduler needs of a member (Ready, the template's
API enabled), written through the status subresource; no member API server is behind them.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES, RESOURCE_BINDINGS
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.insight.view import excluded_of
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually
from tests.packs.karmada.helpers import EU, EXCLUDED, PCI, WHY, deployment, fedplace_on_karmada

pytestmark = pytest.mark.karmada_real  # skipped unless real Karmada runs (tests/fixtures/karmada.py)

MEMBERS = 5000
# The API server's limit on all of an object's annotations together (256 KiB).
ANNOTATIONS_LIMIT = 256 * 1024
NOW = "2026-01-01T00:00:00Z"
STATUS = {"status": {
    "kubernetesVersion": "v1.24.0",
    "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "no member API server",
                    "lastTransitionTime": NOW},
                   {"type": "CompleteAPIEnablements", "status": "True", "reason": "CompleteAPIEnablements",
                    "message": "test list", "lastTransitionTime": NOW}],
    "apiEnablements": [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}],
}}


def member(name: str, region: str, pci: str, run: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci, "fedplace-test": run}},
            "spec": {"region": region, "syncMode": "Push", "apiEndpoint": f"https://{name}.invalid:6443"}}


async def create_members(api: client.ApiClient, specs: list[tuple[str, str, str]], run: str) -> None:
    """Each Cluster created, then made schedulable through its status subresource; 32 at a time."""
    gate = asyncio.Semaphore(32)

    async def one(name: str, region: str, pci: str) -> None:
        async with gate:
            await kube_json(api, "POST", CLUSTERS.collection_path(None), body=member(name, region, pci, run))
            await kube_json(api, "PATCH", CLUSTERS.object_path(name, None) + "/status",
                            content_type="application/merge-patch+json", body=STATUS)

    await asyncio.gather(*(one(*s) for s in specs))


@pytest.fixture
async def fleet(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """5,000 Clusters (one EU of PCI level 3, the rest US of level 1) and fedplace on them."""
    run = uuid.uuid4().hex[:6]
    eu, others = f"eu-{run}", [f"m{i:04d}-{run}" for i in range(1, MEMBERS)]
    policy_ns = await kube_namespaces.create("kr-policy")
    app_ns = await kube_namespaces.create("kr-shop")
    try:
        await create_members(kube_api, [(eu, "eu-west-1", "3")] + [(n, "us-east-1", "1") for n in others], run)
        async with fedplace_on_karmada(opa, kube, kube_api, tmp_path, policy_ns=policy_ns, app_ns=app_ns,
                                       ready_timeout=120):
            yield {"api": kube_api, "opa": opa, "ns": app_ns, "eu": eu, "others": others,
                   "names": [eu, *others]}
    finally:
        await delete_members(kube_api, run)


async def delete_members(api: client.ApiClient, run: str) -> None:
    """Delete the run's Clusters: a collection delete, again while the API server's request
    deadline (504) cuts it short."""
    selector = [("labelSelector", f"fedplace-test={run}")]
    for _ in range(20):
        try:
            await kube_json(api, "DELETE", CLUSTERS.collection_path(None), query=selector, timeout=120)
        except KubeApiError as exc:
            if exc.status != 504:
                raise
        left = await kube_json(api, "GET", CLUSTERS.collection_path(None), query=[*selector, ("limit", "1")])
        if not left["items"]:
            return
    raise AssertionError(f"Clusters of run {run} still there")


async def test_all_but_one_of_5000_clusters_excluded_scheduled_and_remediated(fleet: dict[str, Any]) -> None:
    api, opa, ns, eu, others = fleet["api"], fleet["opa"], fleet["ns"], fleet["eu"], fleet["others"]
    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                    body=deployment("pay", {EU: "true", PCI: "2"}))

    async def template_known() -> bool:
        status, body = await opa.request("GET", f"/v1/data/kubernetes/deployments/{ns}/pay")
        return status == 200 and "result" in (body or {})

    await eventually(template_known, what="the template replicated")
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body={
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "pay"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "pay"}],
                 "placement": {"clusterAffinity": {"exclude": ["zz-user"]},
                               "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}})

    async def scheduled(want: list[str]) -> dict[str, Any] | None:
        try:
            b = await kube_json(api, "GET", RESOURCE_BINDINGS.object_path("pay-deployment", ns))
        except KubeApiError:
            return None
        got = sorted(t["name"] for t in (b.get("spec") or {}).get("clusters") or [])
        return b if got == want else None

    # Karmada's detector writes the binding, fedplace narrows it in that write, Karmada's
    # scheduler puts it on the one allowed cluster.
    b = await eventually(lambda: scheduled([eu]), what="the binding scheduled by Karmada", timeout=120)
    # (Clusters of other runs may exist on a shared server: none of them is allowed.)
    exclude = b["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert exclude[0] == "zz-user" and set(others) <= set(exclude[1:]) and eu not in exclude
    ann = b["metadata"]["annotations"]
    assert json.loads(ann[EXCLUDED]) == {"allExcept": [eu]}
    assert ann[WHY].endswith(f" clusters, every one but {eu}"), ann[WHY]
    ours = sum(len(k) + len(v) for k, v in ann.items() if k.startswith("fedplace.io/"))
    assert ours < 1024, ours
    assert "policy.karmada.io/applied-placement" in ann, "the scheduler's copy of the placement"
    assert sum(len(k) + len(v) for k, v in ann.items()) < ANNOTATIONS_LIMIT

    # A US cluster becomes an EU one of PCI level 3: remediation re-narrows the binding and
    # Karmada's scheduler places the workload on both.
    moved = others[0]
    await kube_json(api, "PATCH", CLUSTERS.object_path(moved, None), content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"pci-compliance-level": "3"}}, "spec": {"region": "eu-central-1"}})
    b = await eventually(lambda: scheduled(sorted([eu, moved])), what="re-narrowed and rescheduled", timeout=120)
    exclude = b["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert moved not in exclude and set(others[1:]) <= set(exclude) and exclude[0] == "zz-user"
    assert excluded_of(b["metadata"]["annotations"][EXCLUDED], fleet["names"]) == sorted(others[1:])
