"""Scratch objects on any Kubernetes API server: fresh names, explicit clean-up.

For the test fixtures and the benchmarks, which run against the devstack API
server or a real one. A real kube-apiserver without kube-controller-manager
never finishes deleting a namespace: it stays ``Terminating`` with everything
in it, and creating it again answers ``409 AlreadyExists``. So code that must
work there names its namespaces ``<prefix>-<random>``, deletes their contents
itself (as the namespace controller would), and never waits for a namespace to
go. CRDs are different: kube-apiserver itself finalizes them (their objects go
with them), so :func:`delete_crd` does wait.

Nor does a bare API server have the service-account controller, which gives
every namespace its ``default`` ServiceAccount: kube-apiserver's ServiceAccount
admission plugin refuses a Pod whose service account does not exist (403), on
the devstack as on a real server. :func:`create_namespace` creates the
namespace and that ServiceAccount, as the controller would.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["CRDS_PATH", "create_namespace", "delete_crd", "delete_namespace", "empty_namespace",
           "ensure_default_service_account", "install_crd", "namespaced_collections", "unique_name"]

CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def unique_name(prefix: str) -> str:
    """``<prefix>-<8 hex digits>``: a name no earlier test or run used."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def ensure_default_service_account(api: client.ApiClient, namespace: str) -> None:
    """Create the ``default`` ServiceAccount of ``namespace`` unless it exists (the
    service-account controller's job, which a bare API server does not do)."""
    try:
        await kube_json(api, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    except KubeApiError as exc:
        if exc.status != 409:
            raise


async def create_namespace(api: client.ApiClient, name: str, labels: dict[str, str] | None = None, *,
                           exist_ok: bool = False) -> None:
    """Create namespace ``name`` (``exist_ok``: a 409 is fine) and its ``default`` ServiceAccount."""
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    try:
        await kube_json(api, "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    except KubeApiError as exc:
        if not (exist_ok and exc.status == 409):
            raise
    await ensure_default_service_account(api, name)


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
            for prefix, doc in zip(prefixes, docs, strict=True) for r in doc.get("resources") or []
            if r.get("namespaced") and "/" not in r["name"] and "deletecollection" in (r.get("verbs") or [])]


async def empty_namespace(api: client.ApiClient, namespace: str, timeout: float = 300.0) -> None:
    """Delete every object in ``namespace``, one collection DELETE per resource type — in the
    background: a Job's default (orphaning its pods) would wait for the garbage collector,
    which a bare API server does not run, and keep it for good."""
    async def delete(template: str) -> None:
        try:
            await kube_json(api, "DELETE", template.format(namespace=namespace), timeout=timeout,
                            query=[("propagationPolicy", "Background")])
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
