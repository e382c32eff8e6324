"""Kubernetes API access shared by every component.

* :func:`new_api_client` builds a kubernetes_asyncio ``ApiClient`` from a
  kubeconfig (flag, then ``$KUBECONFIG``) or, with neither, from the in-cluster
  service account.
* :class:`Resource` names a resource type (``[group/]version/plural``) and
  builds its URL paths, for built-in types and custom resources alike.
* :func:`kube_json` / :func:`kube_stream` make raw JSON calls through the
  ApiClient (its auth, TLS and connection pool), returning plain dicts: the
  generic code paths (replication, informers, patches) need no typed models.
  Non-2xx answers raise :class:`KubeApiError` carrying the ``Status`` fields.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

__all__ = ["KubeApiError", "Resource", "kube_json", "kube_stream", "new_api_client"]


async def new_api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """ApiClient from ``kubeconfig``, else ``$KUBECONFIG``, else in-cluster config."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        return await config.new_client_from_config(config_file=path, context=context)
    cfg = client.Configuration()
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(configuration=cfg)


class KubeApiError(Exception):
    """A non-2xx answer from the API server, with its ``Status`` fields."""

    def __init__(self, status: int, reason: str = "", message: str = "", body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body


@dataclass(frozen=True)
class Resource:
    """A resource type: API group ('' for core), version, plural, scope."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @classmethod
    def parse(cls, spec: str, namespaced: bool = True) -> "Resource":
        """Parse kube-mgmt's ``[group/]version/resource`` form (``v1/configmaps``,
        ``apps/v1/replicasets``, ``core.federation.k8s.io/v1alpha1/clusters``)."""
        parts = [p for p in spec.strip().split("/")]
        if len(parts) == 2 and all(parts):
            return cls("", parts[0], parts[1], namespaced)
        if len(parts) == 3 and all(parts[1:]):
            group = "" if parts[0] in ("", "core") else parts[0]
            return cls(group, parts[1], parts[2], namespaced)
        raise ValueError(f"resource {spec!r}: expected [group/]version/resource, e.g. apps/v1/replicasets")

    def __str__(self) -> str:
        return f"{self.group + '/' if self.group else ''}{self.version}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """List/watch/create path; ``namespace=None`` lists across all namespaces."""
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{namespace}/{self.plural}"
        return f"{self.prefix}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace)}/{name}"

    def key(self, obj: dict[str, Any]) -> str:
        """Cache key of an object: ``namespace/name`` or ``name``."""
        meta = obj.get("metadata") or {}
        if self.namespaced:
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        return str(meta.get("name", ""))


async def kube_stream(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: aiohttp.ClientTimeout | float | None = None,
) -> aiohttp.ClientResponse:
    """Send a request and return the open response (the caller releases it).

    Raises :class:`KubeApiError` for a non-2xx status (the response is released).
    """
    headers = {"Accept": "application/json", "Content-Type": content_type}
    resp = await api.call_api(
        path,
        method,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    if not 200 <= resp.status < 300:
        raw = await resp.read()
        resp.release()
        raise _api_error(resp.status, raw)
    return resp


async def kube_json(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: aiohttp.ClientTimeout | float | None = 30.0,
) -> Any:
    """Send a request and return its parsed JSON body (None when empty)."""
    resp = await kube_stream(api, method, path, query=query, body=body, content_type=content_type,
                             timeout=timeout)
    try:
        raw = await resp.read()
    finally:
        resp.release()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise KubeApiError(resp.status, "MalformedResponse", f"{method} {path}: body is not JSON") from exc


def _api_error(status: int, raw: bytes) -> KubeApiError:
    try:
        doc = json.loads(raw) if raw.strip() else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    return KubeApiError(status, str(doc.get("reason", "")), str(doc.get("message", raw[:200].decode(errors="replace"))), doc)
