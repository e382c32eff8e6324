"""Scratch objects on any Kubernetes API server: fresh names, explicit clean-up.

For the test fixtures and the benchmarks, which run against the devstack API
server or a real one. A real kube-apiserver without kube-controller-manager
never finishes deleting a namespace: it stays ``Terminating`` with everything
in it, and creating it again answers ``409 AlreadyExists``. So code that must
work there names its namespaces ``<prefix>-<random>``, deletes their contents
itself (as the namespace controller would), and never waits for a namespace to
go. CRDs are different: kube-apiserver itself finalizes them (their objects go
with them), so :func:`delete_crd` does wait.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kubernetes_asyncio import client

from common.kube_client import KubeApiError, kube_json

__all__ = ["CRDS_PATH", "delete_crd", "delete_namespace", "empty_namespace", "install_crd", "namespaced_collections",
           "unique_name"]

CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def unique_name(prefix: str) -> str:
    """``<prefix>-<8 hex digits>``: a name no earlier test or run used."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _discovery(api: client.ApiClient, path: str) -> dict[str, Any]:
    """A discovery document; ``{}`` when the group does not answer (e.g. an unavailable aggregated API)."""
    try:
        return await kube_json(api, "GET", path) or {}
    except KubeApiError:
        return {}


async def namespaced_collections(api: client.ApiClient) -> list[str]:
    """``/api/v1/namespaces/{namespace}/configmaps``-style templates of every namespaced
    resource type the server can delete by collection (from discovery, preferred versions)."""
    groups = (await _discovery(api, "/apis")).get("groups") or []
    prefixes = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]
    docs = await asyncio.gather(*(_discovery(api, p) for p in prefixes))
    return [f"{prefix}/namespaces/{{namespace}}/{r['name']}"
            for prefix, doc in zip(prefixes, docs) for r in doc.get("resources") or []
            if r.get("namespaced") and "/" not in r["name"] and "deletecollection" in (r.get("verbs") or [])]


async def empty_namespace(api: client.ApiClient, namespace: str, timeout: float = 300.0) -> None:
    """Delete every object in ``namespace``, one collection DELETE per resource type."""
    async def delete(template: str) -> None:
        try:
            await kube_json(api, "DELETE", template.format(namespace=namespace), timeout=timeout)
        except KubeApiError as exc:
            if exc.status not in (404, 405):
                raise

    await asyncio.gather(*(delete(t) for t in await namespaced_collections(api)))


async def delete_namespace(api: client.ApiClient, name: str, *, empty: bool = False) -> None:
    """Delete namespace ``name`` (after its contents when ``empty``); never waits for it to go.

    Already gone (404) or already being deleted (409) is fine."""
    if empty:
        await empty_namespace(api, name)
    try:
        await kube_json(api, "DELETE", f"/api/v1/namespaces/{name}")
    except KubeApiError as exc:
        if exc.status not in (404, 409):
            raise


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crd(api: client.ApiClient, body: dict[str, Any], timeout: float = 30.0) -> bool:
    """Create the CRD unless it exists, then wait until it is Established (a real
    server serves it asynchronously). True when this call created it."""
    try:
        await kube_json(api, "POST", CRDS_PATH, body=body)
        created = True
    except KubeApiError as exc:
        if exc.status != 409:
            raise
        created = False
    name = body["metadata"]["name"]
    deadline = time.monotonic() + timeout
    while not _established(await kube_json(api, "GET", f"{CRDS_PATH}/{name}")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} not Established after {timeout:g} s")
        await asyncio.sleep(0.1)
    return created


async def delete_crd(api: client.ApiClient, name: str, timeout: float = 60.0) -> None:
    """Delete a CRD and its objects; wait until it is gone, so that it can be created again."""
    deadline = time.monotonic() + timeout
    try:
        await kube_json(api, "DELETE", f"{CRDS_PATH}/{name}")
        while True:
            await kube_json(api, "GET", f"{CRDS_PATH}/{name}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} still there {timeout:g} s after its deletion")
            await asyncio.sleep(0.1)
    except KubeApiError as exc:
        if exc.status != 404:
            raise
