"""A federation in OPA, as opa-kube-sync leaves it, for the ``fedplace`` commands.

``federation`` (function): the OPA of the ``opa`` fixture (the devstack engine,
or FEDPLACE_TEST_OPA_URL) holding every shipped policy ConfigMap of
deploy/base/policies/policies.yaml under the ids the sync gives them, the
replicated-root module, and ``data.kubernetes``: four clusters and a few
ReplicaSets in the namespace ``NS``, each carrying the annotations admission
gave it (asked of OPA, merged as the webhook merges them).

``karmada`` (function): the same OPA and shipped policies, plus the settings
module ``control_plane := "karmada"`` (with IngressClass among the template
kinds), and ``data.kubernetes`` as opa-kube-sync leaves it on karmada-apiserver:
three Karmada Clusters (region in spec.region), Deployment templates and an
IngressClass, and their ResourceBindings / ClusterResourceBinding as the
webhook left them (the decision's annotations merged, then its patch applied).
"""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from fedplace.common.annotations import canonical_value
from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.sync import replicated_root
from tests.policies.suite import put_in_dependency_order

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy/base/policies/policies.yaml"
POLICY_NS = "kube-federation-scheduling-policy"
EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
PREFS = "federation.kubernetes.io/replica-set-preferences"
NS = "insight-shop"

CLUSTERS = {
    "gce-europe-west1": ("europe-west1", "2"),
    "aws-eu-central-1": ("eu-central-1", "3"),
    "azure-westeurope": ("westeurope", "1"),
    "gce-us-central1": ("us-central1", "3"),
}
WORKLOADS = {
    "web-eu": {EU: "true"},
    "payments": {EU: "true", PCI: "2"},
    "ledger": {PCI: "3"},
    "blog": {},
}


EXCLUDED = "fedplace.io/excluded-clusters"
WHY = "fedplace.io/placement"
SETTINGS_ID = f"{POLICY_NS}/fedplace-settings/settings.rego"
KARMADA_SETTINGS = """package io.k8s.federation.placement.settings

control_plane := "karmada"

karmada_templates := {"Deployment": "deployments", "IngressClass": "ingressclasses"}
"""
KARMADA_CLUSTERS = {"eu-1": ("eu-west-1", "3"), "eu-2": ("europe-west4", "1"), "us-1": ("us-east-1", "3")}
# Template name -> its placement annotations (allowed clusters); each has a ResourceBinding <name>-deployment.
TEMPLATES = {
    "web": {EU: "true"},  # eu-1, eu-2
    "vault": {EU: "true", PCI: "2"},  # eu-1
    "ledger": {PCI: "3"},  # eu-1, us-1
    "blog": {},  # anywhere
}


def cluster(name: str, region: str, pci: str) -> dict[str, Any]:
    return {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci}}, "status": {"region": region}}


def rs(name: str, annotations: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations),
                         "labels": {"app": name}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def karmada_cluster(name: str, region: str, pci: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci}},
            "spec": {"region": region, "provider": "aws", "syncMode": "Push"}}


def template(name: str, annotations: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": dict(annotations)},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def resource_binding(name: str, placement: dict[str, Any] | None = None, namespace: str = NS) -> dict[str, Any]:
    """The ResourceBinding Karmada's detector writes for the Deployment ``name`` (its placement
    ``{}`` when the policy has none, as the detector writes it)."""
    spec: dict[str, Any] = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace,
                                         "name": name, "uid": f"uid-{name}"}, "replicas": 2,
                            "placement": placement if placement is not None else {}}
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-deployment", "namespace": namespace}, "spec": spec}


def shipped_modules() -> dict[str, str]:
    """Every module of the shipped policy ConfigMaps, under the ids opa-kube-sync loads them with."""
    out = {replicated_root.POLICY_ID: replicated_root.render()}
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            meta = doc["metadata"]
            for key, source in doc["data"].items():
                out[f"{meta.get('namespace', POLICY_NS)}/{meta['name']}/{key}"] = source
    return out


@dataclass
class Federation:
    opa: Any
    client: OpaClient
    tmp: Path

    def flags(self) -> list[str]:
        argv = ["--opa-url", self.opa.url]
        if self.opa.token:
            token = self.tmp / "opa.token"
            token.write_text(self.opa.token)
            argv += ["--opa-token-file", str(token)]
        return argv

    async def admitted(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with the annotations the decision gives it (the webhook's merge)."""
        decision = await self.client.query("io/k8s/federation/admission", obj) or {}
        assert not decision.get("errors"), decision
        for key, value in (decision.get("annotations") or {}).items():
            obj["metadata"].setdefault("annotations", {})[key] = canonical_value(value)
        return obj

    async def webhooked(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` as the webhook leaves it: the decision's annotations merged, then its patches."""
        decision = await self.client.query("io/k8s/federation/admission", obj) or {}
        assert not decision.get("errors"), decision
        for key, value in (decision.get("annotations") or {}).items():
            obj.setdefault("metadata", {}).setdefault("annotations", {})[key] = canonical_value(value)
        ops = [op for pack_ops in (decision.get("patches") or {}).values() for op in pack_ops]
        return jsonpatch.apply_patch(obj, ops) if ops else obj

    async def put_workloads(self, objects: list[dict[str, Any]]) -> None:
        await self.client.put_data(["kubernetes", "replicasets", NS],
                                   {o["metadata"]["name"]: o for o in objects})

    async def state(self) -> tuple[Any, Any]:
        """Every module (id, raw) and every replicated object: to prove nothing changed."""
        policies = sorted((p["id"], p["raw"]) for p in await self.client.list_policies())
        return policies, await self.client.get_data(["kubernetes"])


async def run_command(module: Any, argv: list[str]) -> tuple[int, str, str]:
    """One ``fedplace`` subcommand in process: (exit status, stdout, stderr)."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = await module.run(parser.parse_args(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
async def federation(opa: Any, tmp_path: Path) -> Any:
    client = OpaClient(OpaSettings(url=opa.url, token=opa.token, timeout=60))

    async def put(module_id: str, source: str) -> tuple[int, str]:
        status, body = await opa.put_policy(module_id, source)
        return status, json.dumps(body)

    await put_in_dependency_order(put, shipped_modules())
    await client.put_data(["kubernetes", "clusters"], {n: cluster(n, r, p) for n, (r, p) in CLUSTERS.items()})
    world = Federation(opa, client, tmp_path)
    await world.put_workloads([await world.admitted(rs(n, a)) for n, a in WORKLOADS.items()])
    yield world
    if getattr(opa, "external", False):
        await opa.reset_state()
    await client.close()


@pytest.fixture
async def karmada(opa: Any, tmp_path: Path) -> Any:
    """OPA as opa-kube-sync leaves it on karmada-apiserver (see the module docstring)."""
    client = OpaClient(OpaSettings(url=opa.url, token=opa.token, timeout=60))

    async def put(module_id: str, source: str) -> tuple[int, str]:
        status, body = await opa.put_policy(module_id, source)
        return status, json.dumps(body)

    await put_in_dependency_order(put, {**shipped_modules(), SETTINGS_ID: KARMADA_SETTINGS})
    await client.put_data(["kubernetes", "clusters"],
                          {n: karmada_cluster(n, r, p) for n, (r, p) in KARMADA_CLUSTERS.items()})
    await client.put_data(["kubernetes", "deployments", NS], {n: template(n, a) for n, a in TEMPLATES.items()})
    gate = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "gate", "annotations": {EU: "true", PCI: "3"}}}
    await client.put_data(["kubernetes", "ingressclasses"], {"gate": gate})
    world = Federation(opa, client, tmp_path)
    bindings = {}
    for name in TEMPLATES:
        b = await world.webhooked(resource_binding(name, {"clusterAffinity": {"exclude": ["zz-user"]}}))
        bindings[b["metadata"]["name"]] = b
    await client.put_data(["kubernetes", "resourcebindings", NS], bindings)
    crb = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
           "metadata": {"name": "gate-ingressclass"},
           "spec": {"resource": {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "name": "gate"},
                    "placement": {}}}
    await client.put_data(["kubernetes", "clusterresourcebindings"], {"gate-ingressclass": await world.webhooked(crb)})
    yield world
    if getattr(opa, "external", False):
        await opa.reset_state()
    await client.close()


# -- a small world, for the command line's own tests (tests/insight/test_cli*.py) -------------------------

SMALL_NS = "cli-shop"
SMALL_DECISION = """package io.k8s.federation.admission

tier(c) := object.get(c, ["metadata", "labels", "tier"], "")

gold contains name if {
	some name, c in data.kubernetes.clusters
	tier(c) == "gold"
}

annotations := {"federation.kubernetes.io/replica-set-preferences": {"clusters": {name: {"weight": 1} | some name in gold}}} if {
	input.kind == "ReplicaSet"
	object.get(input, ["metadata", "annotations", "needs"], "") == "gold"
}

errors contains "no gold cluster" if {
	object.get(input, ["metadata", "annotations", "needs"], "") == "gold"
	count(gold) == 0
}
"""
SMALL_EXPLAIN = """package io.k8s.federation.explain

import data.io.k8s.federation.admission

packs["gold"] := {
	"summary": sprintf("%d of %d clusters gold", [count(admission.gold), count(data.kubernetes.clusters)]),
	"requirements": [{"name": "tier", "required": "gold"}],
	"clusters": {name: {"eligible": name in admission.gold,
	                    "checks": [{"label": "tier", "value": admission.tier(c), "required": "gold",
	                                "ok": name in admission.gold}]} |
		some name, c in data.kubernetes.clusters},
}
"""


def small_rs(name: str, needs: str | None = "gold", namespace: str = SMALL_NS) -> dict[str, Any]:
    """A ReplicaSet of the small world; ``needs: gold`` asks for the gold clusters."""
    return rs(name, {"needs": needs} if needs else {}, namespace=namespace)


@pytest.fixture
async def small(opa: Any, tmp_path: Path) -> Any:
    """The ``opa`` fixture holding two tiny modules — a decision placing ReplicaSets that say
    ``needs: gold`` on the clusters labelled ``tier: gold`` (denied when there is none) and its
    explanation — and two clusters (one gold) and two ReplicaSets in ``SMALL_NS``: fast to load
    and to evaluate, for tests that run the command many times."""
    client = OpaClient(OpaSettings(url=opa.url, token=opa.token, timeout=60))
    for module_id, source in (("small/admission.rego", SMALL_DECISION), ("small/explain.rego", SMALL_EXPLAIN)):
        status, body = await opa.put_policy(module_id, source)
        assert status == 200, body
    gold = cluster("gold-1", "europe-west1", "2")
    gold["metadata"]["labels"]["tier"] = "gold"
    await client.put_data(["kubernetes"], {
        "clusters": {"gold-1": gold, "plain-1": cluster("plain-1", "us-central1", "1")},
        "replicasets": {SMALL_NS: {"web": small_rs("web"), "blog": small_rs("blog", None)}},
    })
    yield Federation(opa, client, tmp_path)
    if getattr(opa, "external", False):
        await opa.reset_state()
    await client.close()
