"""End to end: Deployments, ConfigMaps and Secrets placed through the
federation's cluster selector, through the API server's webhook dispatch.

Everything is the real thing on the devstack (or the servers of
FEDPLACE_TEST_OPA_URL / FEDPLACE_TEST_KUBECONFIG): the API server calls the
TLS webhook registered for a scratch namespace; opa-kube-sync in process
replicates Deployments, ConfigMaps and Secrets and loads the ConfigMaps deploy/
ships (``fedplace-lib``, ``fedplace-federation``, ``fedplace-rules-eu-pci``: the
example rule set, on by default) from a scratch policy namespace; the Clusters go straight into OPA's data (what the sync replicates
from the Cluster CRD in production, tested in tests/sync), each labelled
``fedplace.io/cluster-name`` but one.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually, policy_loaded, rules, webhook_stack
from tests.packs.limitrange.conftest import pack_configmaps

SELECTOR = "federation.alpha.kubernetes.io/cluster-selector"
SOURCE = "fedplace.io/cluster-selector-source"
NAME_LABEL = "fedplace.io/cluster-name"
EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"


def cluster(name: str, region: str, pci: str, named: bool = True) -> dict[str, Any]:
    labels = {"pci-compliance-level": pci, **({NAME_LABEL: name} if named else {})}
    return {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "labels": labels}, "status": {"region": region}}


CLUSTERS = {
    "gce-europe-west1": cluster("gce-europe-west1", "europe-west1", "2"),
    "aws-eu-central-1": cluster("aws-eu-central-1", "eu-central-1", "3"),
    "gce-us-central1": cluster("gce-us-central1", "us-central1", "3"),
    "aws-eu-west-1": cluster("aws-eu-west-1", "eu-west-1", "3", named=False),  # not selectable
}


async def _true(value: bool) -> bool:
    return value


@pytest.fixture
async def system(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                 tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """The sync, the TLS webhook registered with the API server, the placement policies loaded."""
    policy_ns = await kube_namespaces.create("fk-e2e-policy")
    app_ns = await kube_namespaces.create("fk-e2e-shop")
    configmaps = pack_configmaps()
    async with webhook_stack(
            opa, kube, kube_api, tmp_path, name=f"fedplace-selector-{app_ns}", policy_ns=policy_ns,
            sync_flags=["--replicate", "apps/v1/deployments", "--replicate", "v1/configmaps",
                        "--replicate", "v1/secrets", "--replicate-ignore-namespaces", policy_ns],
            webhook_rules=rules(("apps", ["deployments"]), ("", ["configmaps", "secrets"])),
            namespaces=[app_ns]) as stack:
        for cm in ("fedplace-lib", "fedplace-federation", "fedplace-rules-eu-pci"):
            await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm}, "data": configmaps[cm]})
            await eventually(lambda cm=cm: policy_loaded(kube_api, policy_ns, cm), what=f"{cm} to load")
        await eventually(lambda: _true(stack.sync.is_ready()), what="the sync to be ready")
        status, body = await opa.request("PUT", "/v1/data/kubernetes/clusters", json_body=CLUSTERS)
        assert status == 204, body
        yield {"api": kube_api, "opa": opa, "ns": app_ns}


def deployment(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "annotations": annotations},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}


def names_in(annotations: dict[str, str]) -> list[str]:
    """The cluster names the selector's name-label requirement lists."""
    reqs = json.loads(annotations[SELECTOR])
    (named,) = [r for r in reqs if r["key"] == NAME_LABEL]
    assert named["operator"] == "In"
    return named["values"]


async def test_a_deployment_is_placed_through_the_cluster_selector(system: dict[str, Any]):
    api, ns = system["api"], system["ns"]
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    created = await kube_json(api, "POST", path, body=deployment("web", {EU: "true", PCI: "2"}))
    ann = created["metadata"]["annotations"]
    # Canonical JSON (sorted keys, no spaces): what the remediator compares with.
    assert ann[SELECTOR] == json.dumps([{"key": NAME_LABEL, "operator": "In",
                                         "values": ["aws-eu-central-1", "gce-europe-west1"]}], separators=(",", ":"))
    assert ann[SOURCE] == "policy"
    assert ann[EU] == "true" and ann[PCI] == "2"

    # The developer's own requirements on other labels are kept, and names narrow the choice.
    mine = json.dumps([{"key": "pci-compliance-level", "operator": "Gt", "values": ["2"]},
                       {"key": NAME_LABEL, "operator": "In", "values": ["gce-us-central1", "aws-eu-central-1"]}])
    narrowed = await kube_json(api, "POST", path, body=deployment("narrow", {PCI: "3", SELECTOR: mine}))
    reqs = json.loads(narrowed["metadata"]["annotations"][SELECTOR])
    assert reqs[0] == {"key": "pci-compliance-level", "operator": "Gt", "values": ["2"]}
    assert names_in(narrowed["metadata"]["annotations"]) == ["aws-eu-central-1", "gce-us-central1"]
    assert narrowed["metadata"]["annotations"][SOURCE] == "developer"

    # An update keeps the decision stable (the policy's own selector read back).
    created["spec"]["replicas"] = 2
    updated = await kube_json(api, "PUT", f"{path}/web", body=created)
    assert updated["metadata"]["annotations"][SELECTOR] == ann[SELECTOR]

    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", path, body=deployment("bad", {PCI: "1", SELECTOR: '[{"key": "a", "operator": "In"}]'}))
    assert denied.value.status == 403
    assert 'requirement 1 (key "a"): operator In needs at least one value' in denied.value.message
    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", path, body=deployment("us", {EU: "true", SELECTOR: json.dumps(
            [{"key": NAME_LABEL, "operator": "In", "values": ["gce-us-central1"]}])}))
    assert denied.value.status == 403
    assert "admits none of the clusters the placement policy allows" in denied.value.message


async def test_a_configmap_is_placed_and_an_unconstrained_one_untouched(system: dict[str, Any]):
    api, ns = system["api"], system["ns"]
    path = f"/api/v1/namespaces/{ns}/configmaps"
    placed = await kube_json(api, "POST", path, body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "annotations": {PCI: "3"}},
        "data": {"mode": "strict"}})
    assert names_in(placed["metadata"]["annotations"]) == ["aws-eu-central-1", "gce-us-central1"]
    plain = await kube_json(api, "POST", path, body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "annotations": {"team": "web"}},
        "data": {"k": "v"}})
    assert plain["metadata"]["annotations"] == {"team": "web"}
    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", path, body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nowhere", "annotations": {PCI: "4"}}})
    assert denied.value.status == 403
    assert "no cluster satisfies the placement policy (PCI compliance level >= 4)" \
        in denied.value.message


async def test_a_secret_is_placed_and_replicated_without_its_data(system: dict[str, Any]):
    api, ns, opa = system["api"], system["ns"], system["opa"]
    created = await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/secrets", body={
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "card-keys", "annotations": {EU: "true", PCI: "3"}},
        "data": {"key": base64.b64encode(b"s3cr3t-value").decode()}, "stringData": {"pin": "0000-secret"}})
    ann = created["metadata"]["annotations"]
    # aws-eu-west-1 meets EU + PCI 3 but carries no name label: not selectable.
    assert names_in(ann) == ["aws-eu-central-1"]
    assert ann[SOURCE] == "policy"

    async def replicated() -> dict[str, Any] | None:
        status, body = await opa.request("GET", f"/v1/data/kubernetes/secrets/{ns}/card-keys")
        return body.get("result") if status == 200 else None

    doc = await eventually(replicated, what="the Secret to reach OPA")
    assert "data" not in doc and "stringData" not in doc
    assert doc["type"] == "Opaque" and doc["metadata"]["annotations"][SELECTOR] == ann[SELECTOR]
    status, body = await opa.request("GET", "/v1/data/kubernetes/secrets")
    assert status == 200
    text = json.dumps(body)
    assert "s3cr3t" not in text and base64.b64encode(b"s3cr3t-value").decode() not in text and "0000-secret" not in text


async def test_explain_reads_selector_kinds_and_never_a_secrets_content(kube: Any, kube_api: client.ApiClient,
                                                                     kube_namespace: str, opa: Any):
    import argparse

    from fedplace.common.opa_client import OpaClient, OpaSettings
    from fedplace.insight.explain import add_arguments, explain, read_object

    await kube_json(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/secrets", body={
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "card-keys", "annotations": {PCI: "2"}}, "data": {"key": "czNjcjN0"}})
    await kube_json(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"k": "v"}})
    # What OPA is sent, seen from OPA's side: the content fields the input carries.
    status, body = await opa.put_policy("fedtest/probe", "package fedtest.probe\n\n"
                                        "seen contains k if {\n\tsome k in [\"data\", \"stringData\"]\n\tinput[k]\n}\n")
    assert status == 200, body
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    async with OpaClient(OpaSettings(url=opa.url, token=opa.token, timeout=30)) as client_:
        for ref, kind, seen in (("secret/card-keys", "Secret", []), ("cm/settings", "ConfigMap", ["data"])):
            args = parser.parse_args([ref, "-n", kube_namespace, "--kubeconfig", str(kube.kubeconfig)])
            obj = await read_object(args)
            assert obj["kind"] == kind and obj["apiVersion"] == "v1"
            doc = await explain(client_, obj, "fedtest/probe/seen", "fedtest/probe/seen")
            assert doc["decision"] == seen, (kind, doc)
            assert doc["object"]["name"] == ref.split("/")[1]