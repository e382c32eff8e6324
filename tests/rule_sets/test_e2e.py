"""The shipped rule sets off by default (tenancy, residency, hardware), switched on as their
components ship them, through the API server's webhook dispatch.

opa-kube-sync in process replicates ReplicaSets and the Namespaces (``--replicate-cluster
v1/namespaces``, as deploy/base) and loads the base's placement ConfigMaps plus the rule
sets' ConfigMaps (each read from its generated component, deploy/components/placement-rules-<set>)
from a scratch policy namespace; the TLS webhook is registered for the test's namespaces. The
Clusters go straight into OPA's data (as tests/federation_kinds does). Against the devstack, or
the real OPA and kube-apiserver (FEDPLACE_TEST_OPA_URL / FEDPLACE_TEST_KUBECONFIG).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from devstack.shipped import shipped_policy_configmaps
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually, rules, webhook_stack
from tests.rule_sets.helpers import component_configmap, load

PREFS = "federation.kubernetes.io/replica-set-preferences"
COUNTRIES = "residency.fedplace.io/countries"
HARDWARE = "hardware.fedplace.io/cluster-labels"
BASE = ("fedplace-lib", "fedplace-federation", "fedplace-rules-eu-pci")
SETS = ("tenancy", "residency", "hardware")


def cluster(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "labels": labels}, "status": {"region": "europe-west1"}}


@pytest.fixture
async def system(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                 tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    policy_ns = await kube_namespaces.create("rs-e2e-policy")
    tenant_ns = await kube_namespaces.create("rs-e2e-acme", labels={"fedplace.io/tenant": "acme"})
    open_ns = await kube_namespaces.create("rs-e2e-open")
    uid = tenant_ns.rsplit("-", 1)[-1]
    clusters = {f"{name}-{uid}": cluster(f"{name}-{uid}", labels) for name, labels in {
        "de-acme": {"fedplace.io/country": "DE", "tenants.fedplace.io/acme": "true", "gpu": "a100"},
        "fr-acme": {"fedplace.io/country": "FR", "tenants.fedplace.io/acme": "true"},
        "de-other": {"fedplace.io/country": "DE", "gpu": "a100"},
        "us-acme": {"fedplace.io/country": "US", "tenants.fedplace.io/acme": "true", "gpu": "a100"},
    }.items()}
    shipped = shipped_policy_configmaps()
    async with webhook_stack(
            opa, kube, kube_api, tmp_path, name=f"fedplace-rule-sets-{uid}", policy_ns=policy_ns,
            sync_flags=["--replicate", "apps/v1/replicasets", "--replicate-cluster", "v1/namespaces",
                        "--replicate-ignore-namespaces", policy_ns],
            webhook_rules=rules(("apps", ["replicasets"])), namespaces=[tenant_ns, open_ns]) as stack:
        configmaps = {name: shipped[name] for name in BASE}
        for rule_set in SETS:
            cm = component_configmap(rule_set)
            configmaps[cm["metadata"]["name"]] = cm["data"]
        await load(kube_api, stack, policy_ns, configmaps)
        status, body = await opa.request("PUT", "/v1/data/kubernetes/clusters", json_body=clusters)
        assert status == 204, body
        yield {"api": kube_api, "opa": opa, "tenant_ns": tenant_ns, "open_ns": open_ns, "uid": uid}


def replicaset(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "annotations": annotations},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}


def placed(obj: dict[str, Any], uid: str) -> set[str]:
    """The clusters of the preferences the webhook wrote, without the test's suffix."""
    return {name.removesuffix(f"-{uid}") for name in json.loads(obj["metadata"]["annotations"][PREFS])["clusters"]}


async def replicated_annotation(opa: Any, namespace: str, key: str, value: str | None) -> bool:
    status, body = await opa.request("GET", f"/v1/data/kubernetes/namespaces/{namespace}")
    got = ((body.get("result") or {}).get("metadata", {}).get("annotations") or {}).get(key) if status == 200 else None
    return got == value


async def test_the_namespace_decides_through_the_replicated_namespace(system: dict[str, Any]):
    api, opa, ns, uid = system["api"], system["opa"], system["tenant_ns"], system["uid"]
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets"
    # Tenancy alone: acme's clusters, whatever the workload says.
    web = await kube_json(api, "POST", path, body=replicaset("web", {}))
    assert placed(web, uid) == {"de-acme", "fr-acme", "us-acme"}

    # The namespace names countries: tenancy and residency intersect.
    await kube_json(api, "PATCH", f"/api/v1/namespaces/{ns}", body={"metadata": {"annotations": {COUNTRIES: "DE, FR"}}},
                    content_type="application/merge-patch+json")
    await eventually(lambda: replicated_annotation(opa, ns, COUNTRIES, "DE, FR"), what="the Namespace replicated")
    eu = await kube_json(api, "POST", path, body=replicaset("eu", {}))
    assert placed(eu, uid) == {"de-acme", "fr-acme"}

    # A workload narrows (and asks for hardware), never widens.
    narrow = await kube_json(api, "POST", path, body=replicaset("narrow", {COUNTRIES: "DE", HARDWARE: "gpu=a100"}))
    assert placed(narrow, uid) == {"de-acme"}
    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", path, body=replicaset("us", {COUNTRIES: "US"}))
    assert denied.value.status == 403
    assert "no cluster satisfies the placement policy" in denied.value.message
    assert "namespace allows countries DE, FR" in denied.value.message
    assert "workload allows countries US" in denied.value.message

    # Malformed requests are denied naming what is wrong.
    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", path, body=replicaset("odd", {COUNTRIES: "Germany"}))
    assert denied.value.status == 403 and "ISO 3166-1 alpha-2" in denied.value.message


async def test_a_namespace_without_a_tenant_is_not_restricted(system: dict[str, Any]):
    api, ns, uid = system["api"], system["open_ns"], system["uid"]
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets"
    gpu = await kube_json(api, "POST", path, body=replicaset("gpu", {HARDWARE: "gpu=a100"}))
    assert placed(gpu, uid) == {"de-acme", "de-other", "us-acme"}
    plain = await kube_json(api, "POST", path, body=replicaset("plain", {}))
    assert PREFS not in (plain["metadata"].get("annotations") or {}), "no rule asks anything of it"


# A rule set whose forbid calls to_number on a workload's annotation without guarding it.
SIZES = """package fedplace.rules.sizes

forbid contains {"cluster": name, "id": "size", "requires": "room for the workload", "value": size} if {
	some name, cluster in data.kubernetes.clusters
	size := to_number(object.get(cluster.metadata.labels, "size", "0"))
	size < to_number(input.metadata.annotations["example.com/size"])
}
"""


async def test_a_builtin_failing_in_a_rule_set_denies_and_is_reported_on_its_configmap(
        opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces, tmp_path: Path):
    """A rule set of the administrators' whose builtin fails on one workload's annotation: that
    workload is denied (never placed without the rule), naming the module and row, and a Warning
    ``PolicyEvaluationError`` on the rule set's ConfigMap names the workload; a workload the rule
    reads without failing is placed by it."""
    policy_ns = await kube_namespaces.create("rs-eval-policy")
    ns = await kube_namespaces.create("rs-eval")
    uid = ns.rsplit("-", 1)[-1]
    clusters = {f"{n}-{uid}": cluster(f"{n}-{uid}", {"size": size}) for n, size in (("big", "8"), ("small", "2"))}
    shipped = shipped_policy_configmaps()
    async with webhook_stack(
            opa, kube, kube_api, tmp_path, name=f"fedplace-rule-eval-{uid}", policy_ns=policy_ns,
            sync_flags=["--replicate", "apps/v1/replicasets", "--replicate-ignore-namespaces", policy_ns],
            webhook_rules=rules(("apps", ["replicasets"])), namespaces=[ns]) as stack:
        configmaps = {name: shipped[name] for name in BASE}
        configmaps["team-sizes"] = {"sizes.rego": SIZES}
        await load(kube_api, stack, policy_ns, configmaps)
        status, body = await opa.request("PUT", "/v1/data/kubernetes/clusters", json_body=clusters)
        assert status == 204, body
        path = f"/apis/apps/v1/namespaces/{ns}/replicasets"

        four = await kube_json(kube_api, "POST", path, body=replicaset("four", {"example.com/size": "4"}))
        assert placed(four, uid) == {"big"}
        with pytest.raises(KubeApiError) as denied:
            await kube_json(kube_api, "POST", path, body=replicaset("huge", {"example.com/size": "huge"}))
        message = denied.value.message
        assert denied.value.status == 403 and "failing closed" in message, message
        assert f"{policy_ns}/team-sizes/sizes.rego:6: eval_builtin_error: to_number" in message, message

        async def reported() -> list[dict[str, Any]]:
            doc = await kube_json(kube_api, "GET", f"/api/v1/namespaces/{policy_ns}/events")
            return [e for e in doc.get("items") or [] if e.get("reason") == "PolicyEvaluationError"
                    and e["involvedObject"].get("name") == "team-sizes"]
        await eventually(reported, what="a PolicyEvaluationError Event on the team-sizes ConfigMap")
        [event] = await reported()
        assert event["type"] == "Warning" and "huge" in event["message"], event
