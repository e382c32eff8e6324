"""Karmada-shaped test types and stand-ins, for fedplace's tests and demo (devstack only).

* ``crds.yaml`` beside this file: five test CRDs shaped like Karmada's (Cluster,
  PropagationPolicy, ClusterPropagationPolicy, ResourceBinding, ClusterResourceBinding);
  :func:`crds` loads them, :func:`install_crds` puts them on an API server.
* :mod:`devstack.karmada.standins`: stand-ins for Karmada's resource detector (policy →
  binding) and scheduler (binding → ``spec.clusters``).

The :class:`~fedplace.common.kube_client.Resource` constants name the five types.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from devstack.scratch import CRDS_PATH, install_crd
from fedplace.common.kube_client import KubeApiError, Resource, kube_json

__all__ = ["CLUSTERS", "CLUSTER_PROPAGATION_POLICIES", "CLUSTER_RESOURCE_BINDINGS", "CRDS_FILE", "DIGEST_ANNOTATION",
           "PROPAGATION_POLICIES", "RESOURCE_BINDINGS", "crds", "install_crds"]

CRDS_FILE = Path(__file__).resolve().with_name("crds.yaml")

CLUSTERS = Resource("cluster.karmada.io", "v1alpha1", "clusters", namespaced=False)
PROPAGATION_POLICIES = Resource("policy.karmada.io", "v1alpha1", "propagationpolicies")
CLUSTER_PROPAGATION_POLICIES = Resource("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", namespaced=False)
RESOURCE_BINDINGS = Resource("work.karmada.io", "v1alpha2", "resourcebindings")
CLUSTER_RESOURCE_BINDINGS = Resource("work.karmada.io", "v1alpha2", "clusterresourcebindings", namespaced=False)

# Set by install_crds on each CRD it writes: the digest of the document in crds.yaml.
DIGEST_ANNOTATION = "devstack.fedplace.io/crd-digest"


def crds() -> list[dict[str, Any]]:
    """The CRDs of ``crds.yaml``, in file order (Cluster, the two policies, the two bindings)."""
    return [doc for doc in yaml.safe_load_all(CRDS_FILE.read_text()) if doc]


def _digest(crd: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(crd, sort_keys=True).encode()).hexdigest()[:16]


async def install_crds(api: client.ApiClient, timeout: float = 30.0) -> list[str]:
    """Put the CRDs of ``crds.yaml`` on the server and wait until each is Established.

    A CRD that is missing is created; one whose :data:`DIGEST_ANNOTATION` differs from the
    file's (an older version of the file, or one written by someone else) is replaced; one
    that matches is left alone. CRDs are never deleted: other tests on a shared server may
    use them. Returns the names of the CRDs this call created or replaced.
    """
    written = []
    for crd in crds():
        name = crd["metadata"]["name"]
        digest = _digest(crd)
        body = {**crd, "metadata": {**crd["metadata"], "annotations": {DIGEST_ANNOTATION: digest}}}
        try:
            current = await kube_json(api, "GET", f"{CRDS_PATH}/{name}")
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            current = None
        if current is not None and (current["metadata"].get("annotations") or {}).get(DIGEST_ANNOTATION) != digest:
            rv = current["metadata"]["resourceVersion"]
            await kube_json(api, "PUT", f"{CRDS_PATH}/{name}",
                            body={**body, "metadata": {**body["metadata"], "resourceVersion": rv}})
            written.append(name)
        if await install_crd(api, body, timeout=timeout):
            written.append(name)
    return written
