"""What the remediator tests set up in OPA and the API server, for any workload kind.

The remediator runs in-process; OPA holds the policies and a mirror of the
objects and clusters written through its data API, as opa-kube-sync writes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from fedplace.common.kube_client import Resource, kube_json
from fedplace.sync import replicated_root

ROOT = Path(__file__).resolve().parents[2]
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
# The placement-rules contract and the EU/PCI rule set: load them before the placement policy's
# other modules (which call the contract's functions).
RULES = ("policies/federation/contract.rego", "policies/rules-eu-pci/eu_pci.rego")


def workload(kind: str, name: str, namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    """An apps/v1 workload of one replica with a one-container pod template."""
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


async def load_policies(opa: Any, paths: Sequence[str]) -> None:
    """The root module the sync generates, then ``paths`` (under the project root), in order."""
    status, body = await opa.request("PUT", "/v1/policies/" + replicated_root.POLICY_ID, data=replicated_root.render())
    assert status == 200, body
    for path in paths:
        status, body = await opa.request("PUT", "/v1/policies/test/" + path, data=(ROOT / path).read_text())
        assert status == 200, body


async def mirror(api: Any, opa: Any, resource: Resource, kind: str, clusters: dict[str, Any]) -> None:
    """Put the API server's objects of ``resource`` and ``clusters`` into OPA, as the sync would."""
    doc = await kube_json(api, "GET", resource.collection_path())
    layout: dict[str, dict[str, Any]] = {}
    for item in doc["items"]:
        item.setdefault("kind", kind)  # list items omit it; the sync's informer restores it
        item.setdefault("apiVersion", resource.api_version)
        layout.setdefault(item["metadata"]["namespace"], {})[item["metadata"]["name"]] = item
    assert (await opa.request("PUT", f"/v1/data/kubernetes/{resource.plural}", json_body=layout))[0] == 204
    assert (await opa.request("PUT", "/v1/data/kubernetes/clusters", json_body=clusters))[0] == 204


async def annotations_of(api: Any, resource: Resource, namespace: str, name: str) -> dict[str, str]:
    obj = await kube_json(api, "GET", resource.object_path(name, namespace))
    return obj["metadata"].get("annotations") or {}


async def seed(api: Any, opa: Any, resource: Resource, kind: str, namespace: str, clusters: dict[str, Any]) -> None:
    """Namespace ``namespace`` with three workloads — ``pci2`` and ``pci1`` asking for those PCI
    levels, ``free`` asking nothing — and them and ``clusters`` mirrored into OPA."""
    await kube_json(api, "POST", "/api/v1/namespaces",
                    body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for name, asked in (("pci2", {PCI: "2"}), ("pci1", {PCI: "1"}), ("free", {"team": "web"})):
        await kube_json(api, "POST", resource.collection_path(namespace),
                        body=workload(kind, name, namespace, asked))
    await mirror(api, opa, resource, kind, clusters)
