"""The remediator re-places Deployments (placed through the cluster selector)
after a cluster's PCI downgrade, as it does ReplicaSets
(tests/remediator/test_remediator.py): only the affected objects are patched,
the developer's own annotations are kept, and a second pass is idle.

The remediator runs in-process with an :class:`ApiObjectSource`; OPA holds the
placement policy (lib.rego, selector.rego, placement.rego), the remediation
library, and a mirror of the Deployments and clusters written through OPA's
data API (what opa-kube-sync does in production).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fedplace.common.kube_client import Resource, kube_json
from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.remediator.config import RemediatorSettings
from fedplace.remediator.remediator import ApiObjectSource, Remediator
from tests.fixtures.kube import ScratchNamespaces
from tests.remediator import workloads

SELECTOR = "federation.alpha.kubernetes.io/cluster-selector"
SOURCE = "fedplace.io/cluster-selector-source"
NAME_LABEL = "fedplace.io/cluster-name"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
DEPLOY = Resource("apps", "v1", "deployments", True)
NS = "shop"

CLUSTERS = {
    "eu-a": {"metadata": {"name": "eu-a", "labels": {"pci-compliance-level": "3", NAME_LABEL: "eu-a"}},
             "status": {"region": "europe-west1"}},
    "eu-b": {"metadata": {"name": "eu-b", "labels": {"pci-compliance-level": "1", NAME_LABEL: "eu-b"}},
             "status": {"region": "eu-west-1"}},
}


def deploy_body(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return workloads.workload("Deployment", name, NS, annotations)


async def load_policies(opa) -> None:
    await workloads.load_policies(opa, (*workloads.RULES, "policies/federation/lib.rego",
                                        "policies/federation/selector.rego", "policies/federation/placement.rego",
                                        "policies/lib/remediation.rego"))


async def mirror(api, opa, clusters: dict[str, Any]) -> None:
    """Put the API server's Deployments and ``clusters`` into OPA, as the sync would."""
    await workloads.mirror(api, opa, DEPLOY, "Deployment", clusters)


async def annotations_of(api, name: str) -> dict[str, str]:
    return await workloads.annotations_of(api, DEPLOY, NS, name)


def selected(annotations: dict[str, str]) -> list[str]:
    (named,) = [r for r in json.loads(annotations[SELECTOR]) if r["key"] == NAME_LABEL]
    return named["values"]


@pytest.fixture(autouse=True)
def fresh_namespace(kube_namespaces: ScratchNamespaces, monkeypatch: pytest.MonkeyPatch) -> None:
    kube_namespaces.rebind(monkeypatch, globals(), NS="shop")


@pytest.fixture
async def world(kube, kube_api, opa):
    """Namespace, policies, three Deployments (two constrained), mirrored into OPA."""
    await load_policies(opa)
    await workloads.seed(kube_api, opa, DEPLOY, "Deployment", NS, CLUSTERS)
    return kube_api


async def test_a_deployment_is_re_placed_after_a_pci_downgrade_and_others_are_not_patched(world, opa):
    api = world
    settings = RemediatorSettings(mode="enforce", resources=[DEPLOY], leader_election=False, debounce=0.0,
                                  max_fraction=1.0)
    client = OpaClient(OpaSettings(url=opa.url, token=opa.token))
    source = ApiObjectSource(api, [DEPLOY])
    rem = Remediator(settings, api, client, source, ready=lambda: True)
    try:
        await source.load()
        first = await rem.run_pass()
        assert first.patched == 2 and first.failed == 0
        assert selected(await annotations_of(api, "pci2")) == ["eu-a"]
        assert selected(await annotations_of(api, "pci1")) == ["eu-a", "eu-b"]
        assert (await annotations_of(api, "pci1"))[SOURCE] == "policy"
        assert await annotations_of(api, "free") == {"team": "web"}

        downgraded = json.loads(json.dumps(CLUSTERS))
        downgraded["eu-b"]["metadata"]["labels"]["pci-compliance-level"] = "0"
        await mirror(api, opa, downgraded)
        await source.load()
        pci2_before = await kube_json(api, "GET", DEPLOY.object_path("pci2", NS))
        second = await rem.run_pass()
        assert second.patched == 1 and second.in_sync == 1
        assert selected(await annotations_of(api, "pci1")) == ["eu-a"]
        pci2_after = await kube_json(api, "GET", DEPLOY.object_path("pci2", NS))
        assert pci2_after["metadata"]["resourceVersion"] == pci2_before["metadata"]["resourceVersion"]
        assert (await annotations_of(api, "pci1"))[PCI] == "1"  # the developer's own annotation kept
        assert (await annotations_of(api, "free")) == {"team": "web"}

        await mirror(api, opa, downgraded)
        await source.load()
        third = await rem.run_pass()
        assert third.patched == 0 and third.in_sync == 2
    finally:
        await client.close()
