"""The federation Cluster custom resource, as the demo, benchmarks and tests create it.

The same type is shipped for real control planes in deploy/ (with a
structural schema); here the schema preserves unknown fields.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTER_CRD", "CLUSTERS_PATH", "cluster"]

CLUSTERS_PATH = "/apis/federation.fedplace.io/v1beta1/clusters"

CLUSTER_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusters.federation.fedplace.io"},
    "spec": {
        "group": "federation.fedplace.io",
        "scope": "Cluster",
        "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
        "versions": [{
            "name": "v1beta1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}


def cluster(name: str, region: str, pci_level: str) -> dict[str, Any]:
    """A Cluster in ``region`` labelled with its PCI compliance level."""
    return {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci_level}},
            "spec": {"serverAddress": f"https://{name}.example.invalid"},
            "status": {"region": region}}
