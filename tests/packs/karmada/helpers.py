"""fedplace on Karmada, as tests/packs/karmada and tests/karmada_real run it: opa-kube-sync and the
webhook (tests/fixtures/stack.py) with the flags and registrations deploy/ gives them for Karmada,
the policy ConfigMaps deploy/ ships plus the settings module ``control_plane := "karmada"``."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from kubernetes_asyncio import client

from devstack.karmada import CLUSTERS
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.insight.view import excluded_of
from tests.fixtures.stack import Stack, eventually, policy_loaded, webhook_stack
from tests.packs.limitrange.conftest import pack_configmaps

EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
EXCLUDED = "fedplace.io/excluded-clusters"
WHY = "fedplace.io/placement"
ADDED = "fedplace.io/exclusions-added"
SETTINGS = "package io.k8s.federation.placement.settings\n\ncontrol_plane := \"karmada\"\n"

SYNC_FLAGS = ["--replicate", "apps/v1/deployments",
              "--replicate", "work.karmada.io/v1alpha2/resourcebindings",
              "--replicate", "policy.karmada.io/v1alpha1/propagationpolicies",
              "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters",
              "--remediate", "enforce", "--remediate-debounce", "0.05",
              "--remediate-max-fraction", "1", "--leader-election", "false",
              # Templates remediated too, as deploy/ does: a template change is then a targeted
              # pass (the template and its binding), not a full one.
              "--remediate-resource", "apps/v1/deployments",
              "--remediate-resource", "work.karmada.io/v1alpha2/resourcebindings"]


def rule(group: str, version: str, plurals: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": [version], "resources": plurals,
            "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}


WEBHOOK_RULES = [rule("apps", "v1", ["deployments"]),
                 rule("work.karmada.io", "v1alpha2", ["resourcebindings"]),
                 rule("policy.karmada.io", "v1alpha1", ["propagationpolicies"])]


def deployment(name: str, annotations: dict[str, str], replicas: int = 2) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def cluster(name: str, region: str, pci: str, run: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci, "fedplace-test": run}},
            "spec": {"region": region, "provider": "aws", "syncMode": "Push"}}


# The three Karmada Clusters the end-to-end tests place on: role, region, PCI level.
THREE_CLUSTERS = (("eu1", "eu-west-1", "3"), ("eu2", "europe-west4", "1"), ("us1", "us-east-1", "3"))

Create = Callable[[client.ApiClient, str, str, str, str], Awaitable[Any]]


async def post_cluster(api: client.ApiClient, name: str, region: str, pci: str, run: str) -> None:
    await kube_json(api, "POST", CLUSTERS.collection_path(None), body=cluster(name, region, pci, run))


@asynccontextmanager
async def three_clusters(api: client.ApiClient, create: Create = post_cluster) -> AsyncIterator[tuple[dict[str, str], str]]:
    """The Clusters of :data:`THREE_CLUSTERS`, each named ``<role>-<run>`` and made by
    ``create(api, name, region, pci, run)``; deleted on exit. Yields (role -> name, run)."""
    run = uuid.uuid4().hex[:6]
    names = {role: f"{role}-{run}" for role, _, _ in THREE_CLUSTERS}
    created: list[str] = []
    try:
        for role, region, pci in THREE_CLUSTERS:
            await create(api, names[role], region, pci, run)
            created.append(names[role])
        yield names, run
    finally:
        for name in created:
            try:
                await kube_json(api, "DELETE", CLUSTERS.object_path(name, None))
            except KubeApiError:
                pass


def excluded(obj: dict[str, Any], clusters: dict[str, str]) -> list[str]:
    """The test's clusters a binding's fedplace.io/excluded-clusters names (either form)."""
    names = excluded_of(obj["metadata"]["annotations"][EXCLUDED], clusters.values())
    assert names is not None, obj["metadata"]["annotations"][EXCLUDED]
    return names


async def _true(value: bool) -> bool:
    return value


@asynccontextmanager
async def fedplace_on_karmada(opa: Any, kube: Any, api: client.ApiClient, tmp_path: Path, *, policy_ns: str,
                              app_ns: str, replicate: Sequence[str] = (),
                              ready_timeout: float = 20.0) -> AsyncIterator[Stack]:
    """opa-kube-sync (replicating Clusters, Deployments, ResourceBindings, PropagationPolicies and
    ``replicate``'s group/version/plurals, remediating the templates and bindings, ``policy_ns``
    its policy namespace) and the TLS webhook registered for templates, bindings and
    PropagationPolicies of ``app_ns``; the policy ConfigMaps created in ``policy_ns`` when missing
    (kept when there: a restarted stack loads what is there), each loaded, and the sync ready
    within ``ready_timeout`` seconds. Everything stopped and unregistered on exit."""
    extra = [arg for r in replicate if f"--replicate {r}" not in " ".join(SYNC_FLAGS) for arg in ("--replicate", r)]
    async with webhook_stack(opa, kube, api, tmp_path, name=f"fedplace-karmada-{app_ns}", policy_ns=policy_ns,
                             sync_flags=[*SYNC_FLAGS, *extra, "--replicate-ignore-namespaces", policy_ns],
                             webhook_rules=WEBHOOK_RULES, namespaces=[app_ns]) as stack:
        configmaps = pack_configmaps()
        for cm, data in (("fedplace-lib", configmaps["fedplace-lib"]),
                         ("fedplace-federation", configmaps["fedplace-federation"]),
                         ("fedplace-rules-eu-pci", configmaps["fedplace-rules-eu-pci"]),
                         ("fedplace-karmada", configmaps["fedplace-karmada"]),
                         ("fedplace-settings", {"settings.rego": SETTINGS})):
            try:
                await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm}, "data": data})
            except KubeApiError as exc:
                if exc.status != 409:
                    raise
            await eventually(lambda cm=cm: policy_loaded(api, policy_ns, cm), what=f"{cm} to load")
        await eventually(lambda: _true(stack.sync.is_ready()), what="the sync to be ready", timeout=ready_timeout)
        yield stack


async def replicated(opa: Any, path: str) -> bool:
    """Whether ``data.kubernetes`` at ``path`` (``plural/namespace/name``) is in OPA."""
    status, body = await opa.request("GET", f"/v1/data/kubernetes/{path}")
    return status == 200 and "result" in (body or {})


async def app_reading_config(api: Any, opa: Any, ns: str) -> None:
    """The ConfigMap ``cfg`` requiring PCI >= 3 and the Deployment ``app`` requiring the EU that
    reads it (``envFrom``), both in ``ns`` and replicated into OPA."""
    await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "annotations": {PCI: "3"}},
        "data": {"k": "v"}})
    app = deployment("app", {EU: "true"})
    app["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cfg"}}]
    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=app)
    await eventually(lambda: replicated(opa, f"configmaps/{ns}/cfg"), what="the ConfigMap replicated")
    await eventually(lambda: replicated(opa, f"deployments/{ns}/app"), what="the template replicated")
