"""Shared helpers of the Karmada stand-in tests."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from kubernetes_asyncio import client

from devstack.karmada import RESOURCE_BINDINGS
from devstack.karmada.standins import PP_PERMANENT_ID
from fedplace.common.kube_client import KubeApiError, Resource, kube_json

T = TypeVar("T")

DEPLOYMENTS_PATH = "/apis/apps/v1/namespaces/{ns}/deployments"

def deployment(name: str, replicas: int | None = 2, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta_labels = {"app": name, **(labels or {})}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": meta_labels},
            "spec": spec}


def policy(name: str, selectors: list[dict[str, Any]], placement: dict[str, Any] | None = None,
           kind: str = "PropagationPolicy", priority: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": selectors}
    if placement is not None:
        spec["placement"] = placement
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def binding(name: str, placement: dict[str, Any] | None = None, replicas: int | None = None,
            labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A ResourceBinding of Deployment ``name``, with a policy's permanent-id label (as the detector
    writes it: the scheduler ignores a binding without one) besides ``labels``."""
    labels = {PP_PERMANENT_ID: "test-policy-id", **(labels or {})}
    spec: dict[str, Any] = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}}
    if replicas is not None:
        spec["replicas"] = replicas
    if placement is not None:
        spec["placement"] = placement
    meta: dict[str, Any] = {"name": f"{name}-deployment", **({"labels": labels} if labels else {})}
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding", "metadata": meta, "spec": spec}


async def get_binding(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return await kube_json(api, "GET", RESOURCE_BINDINGS.object_path(name, ns))


async def wait_for(probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = 10.0) -> T:
    """Poll ``probe`` until it returns something other than None (or False); its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:g} s")
        await asyncio.sleep(0.05)


@dataclass
class ClusterScoped:
    """Cluster-scoped objects a test creates (Clusters, ClusterPropagationPolicies, ...), deleted
    after it: on a shared real server no namespace clean-up takes them away."""

    api: client.ApiClient
    paths: list[str] = field(default_factory=list)

    async def create(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        obj = await kube_json(self.api, "POST", resource.collection_path(), body=body)
        self.paths.append(resource.object_path(obj["metadata"]["name"]))
        return obj

    def delete_later(self, resource: Resource, name: str) -> None:
        """Delete ``name`` after the test too (an object something else created)."""
        self.paths.append(resource.object_path(name))

    async def cleanup(self) -> None:
        for path in reversed(self.paths):
            try:
                await kube_json(self.api, "DELETE", path)
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
