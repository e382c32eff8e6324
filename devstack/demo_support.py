"""Helpers the demo's parts share (devstack/demo.py and its demo_*.py): the webhooks' flags,
reading OPA and asking whether a policy ConfigMap loaded."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from devstack.launch import ServerProcess
from fedplace.common.kube_client import kube_json

__all__ = ["ADMISSION_PATIENCE", "opa_get", "policy_ok"]

# The webhooks' patience with OPA: up to 4 s an attempt, 9 s a decision (the API servers call
# them with timeoutSeconds 10). The defaults (2 s, 5 s) suit a cluster; the demo's servers
# share one machine with whatever else runs on it.
ADMISSION_PATIENCE = ["--opa-timeout", "4", "--deadline", "9"]


async def opa_get(engine: ServerProcess, path: str) -> dict[str, Any]:
    """``GET path`` on the policy engine with its token: the JSON answer, ``{}`` unless 200."""
    async with aiohttp.ClientSession() as s:
        async with s.get(engine.url + path, headers={"Authorization": f"Bearer {engine.token}"}) as r:
            return await r.json() if r.status == 200 else {}


async def policy_ok(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Whether the sync wrote ``{"status": "ok"}`` on policy ConfigMap ``namespace/name``."""
    cm = await kube_json(api, "GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    status = ((cm.get("metadata") or {}).get("annotations") or {}).get("fedplace.io/policy-status")
    return bool(status) and json.loads(status).get("status") == "ok"
