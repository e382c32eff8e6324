"""A rule set reading the template's Namespace decides Karmada's bindings: the tenancy component's
ConfigMap loaded beside the base's and the Karmada pack (``control_plane := "karmada"``),
Namespaces replicated as deploy/base does. The binding of a template in a tenant's namespace
excludes the clusters not labelled for the tenant, and the scheduler places it on the tenant's
clusters only. Karmada's stand-ins on the devstack, or real Karmada (KARMADA_REAL_STATE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from devstack.karmada import PROPAGATION_POLICIES
from devstack.shipped import shipped_policy_configmaps
from fedplace.common.kube_client import kube_json
from tests.fixtures.karmada import Karmada
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import Stack, eventually, webhook_stack
from tests.karmada.helpers import policy
from tests.packs.karmada.helpers import SETTINGS, SYNC_FLAGS, WEBHOOK_RULES, deployment, excluded, replicated
from tests.rule_sets.helpers import component_configmap, load

pytestmark = pytest.mark.karmada  # whichever Karmada the session has (also in make test-karmada-real)

TENANT = "fedplace.io/tenant"
MERGE = "application/merge-patch+json"


async def tenant_replicated(opa: Any, namespace: str, tenant: str) -> bool:
    status, body = await opa.request("GET", f"/v1/data/kubernetes/namespaces/{namespace}/metadata/labels")
    return status == 200 and (body.get("result") or {}).get(TENANT) == tenant


@pytest.fixture
async def stack(karmada: Karmada, opa: Any, kube: Any, kube_namespaces: ScratchNamespaces,
                tmp_path: Path) -> AsyncIterator[Stack]:
    api: client.ApiClient = karmada.api
    policy_ns = await kube_namespaces.create("rs-karmada-policy")
    shipped = shipped_policy_configmaps()
    configmaps = {name: shipped[name] for name in ("fedplace-lib", "fedplace-federation", "fedplace-rules-eu-pci",
                                                   "fedplace-karmada")}
    configmaps["fedplace-settings"] = {"settings.rego": SETTINGS}
    tenancy = component_configmap("tenancy")
    configmaps[tenancy["metadata"]["name"]] = tenancy["data"]
    async with webhook_stack(opa, kube, api, tmp_path, name=f"fedplace-rule-sets-{karmada.namespace}",
                             policy_ns=policy_ns, webhook_rules=WEBHOOK_RULES, namespaces=[karmada.namespace],
                             sync_flags=[*SYNC_FLAGS, "--replicate-cluster", "v1/namespaces",
                                         "--replicate-ignore-namespaces", policy_ns]) as s:
        await load(api, s, policy_ns, configmaps)
        yield s


async def test_a_tenants_template_is_bound_to_its_clusters(karmada: Karmada, opa: Any, stack: Stack) -> None:
    api, ns = karmada.api, karmada.namespace
    await karmada.add_cluster("acme1", region="eu-west-1", labels={"tenants.fedplace.io/acme": "true"})
    await karmada.add_cluster("acme2", region="us-east-1", labels={"tenants.fedplace.io/acme": "true"})
    other = await karmada.add_cluster("other", region="eu-west-1", labels={"tenants.fedplace.io/globex": "true"})
    await kube_json(api, "PATCH", f"/api/v1/namespaces/{ns}", content_type=MERGE,
                    body={"metadata": {"labels": {TENANT: "acme"}}})
    for name in karmada.clusters.values():
        await eventually(lambda name=name: replicated(opa, f"clusters/{name}"), what=f"Cluster {name} replicated")
    await eventually(lambda: tenant_replicated(opa, ns, "acme"), what="the Namespace's tenant replicated")

    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("web", {}, replicas=4))
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
        "web", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
        placement={"clusterAffinity": {"labelSelector": karmada.run_selector},
                   "replicaScheduling": {"replicaSchedulingType": "Divided",
                                         "replicaDivisionPreference": "Weighted"}}))
    binding = await karmada.scheduled("web", lambda b: bool(karmada.roles(b)), timeout=30.0)
    assert set(karmada.roles(binding)) <= {"acme1", "acme2"}, karmada.roles(binding)
    assert sum(karmada.roles(binding).values()) == 4
    assert excluded(binding, karmada.clusters) == [other]
    assert "clusters of tenant acme" in binding["metadata"]["annotations"]["fedplace.io/placement"]
    assert other in json.dumps(binding["spec"]["placement"])
