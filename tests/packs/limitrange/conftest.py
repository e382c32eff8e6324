"""Fixtures of the LimitRange pack's tests: the pack under each evaluator, the real
webhook in process, OPA (the devstack engine, or FEDPLACE_TEST_OPA_URL) holding
the pack, the API server.

* ``evaluator`` — the pack under each :data:`tests.packs.limitrange.harness.EVALUATORS`
  (one test per evaluator): OPA 1.20's own evaluator in process, or the ``opa``
  fixture's server over HTTP (its modules PUT first).

* :func:`pack_configmaps` — the ConfigMaps deploy/ ships, from
  deploy/scripts/sync-policy-configmap.py (``fedplace-lib``, ``fedplace-limitrange``, …).
* ``webhook`` — :class:`Stack`: the pack's modules PUT into OPA (as the sync
  would, dependency order), one ConfigMap in a fresh policy namespace (so the
  webhook fails closed, as with policies), and ``fedplace-admission`` started
  in process on a free port (plain HTTP). LimitRanges go straight into OPA's
  data with :meth:`Stack.put_limitranges`; :meth:`Stack.review` POSTs an
  AdmissionReview to ``/mutate``.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import jsonpatch
import pytest
from kubernetes_asyncio import client

from devstack.shipped import shipped_policy_configmaps
from fedplace.admission.config import config_from_mapping
from fedplace.admission.lifecycle import Webhook
from fedplace.common.kube_client import kube_json
from fedplace.common.opa_client import OpaClient, OpaSettings
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.loaded import write_loaded_record
from tests.fixtures.opa import OpaServer
from tests.packs.limitrange.harness import EVALUATORS, PACK_MODULES, Evaluator, InProcess, Server

ROOT = Path(__file__).resolve().parents[3]
POLICY_PREFIX = "fedplace-test-limitrange"

# kind -> (group, version, resource) as the API server names them in an AdmissionReview
KINDS = {
    "Pod": ("", "v1", "pods"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
}


def pack_configmaps() -> dict[str, dict[str, str]]:
    """{ConfigMap name: {key: Rego}} exactly as deploy/base/policies/policies.yaml ships them."""
    return shipped_policy_configmaps()


def dependency_order(modules: dict[str, str]) -> list[str]:
    """Module ids in an order OPA accepts one PUT at a time: a module calling
    another package's functions after it (quantity before ranger)."""
    order = ["lib/generated/replicated_root.rego", "lib/podspec.rego", "limitrange/quantity.rego"]
    return [m for m in order if m in modules] + sorted(m for m in modules if m not in order)


def review(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    group, version, resource = KINDS.get(obj.get("kind", ""), ("", "v1", "configmaps"))
    meta = obj.get("metadata") or {}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": group, "version": version, "kind": obj.get("kind", "")},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": meta.get("name", ""), "namespace": meta.get("namespace", ""), "operation": operation,
        "userInfo": {"username": "tester"}, "object": obj, "oldObject": obj if operation == "UPDATE" else None,
        "dryRun": False}}


def apply_response(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it after the webhook's answer (which must allow it)."""
    assert response["allowed"] is True, response
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


@dataclass
class Stack:
    webhook: Webhook
    opa: Any
    opa_client: OpaClient
    session: aiohttp.ClientSession
    policy_namespace: str

    async def put_limitranges(self, namespace: str, limitranges: list[dict[str, Any]]) -> None:
        """Replicate LimitRanges into OPA as opa-kube-sync does (data.kubernetes.limitranges.<ns>.<name>)."""
        await self.opa_client.put_data(["kubernetes", "limitranges", namespace],
                                       {r["metadata"]["name"]: r for r in limitranges})

    async def review(self, obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
        doc = review(obj, operation)
        async with self.session.post(self.webhook.url + "/mutate", json=doc) as resp:
            assert resp.status == 200, await resp.text()
            body = await resp.json()
        assert body["response"]["uid"] == doc["request"]["uid"]
        return body["response"]


async def load_modules(opa_client: OpaClient, modules: dict[str, str], prefix: str = POLICY_PREFIX) -> None:
    for mid in dependency_order(modules):
        await opa_client.put_policy(f"{prefix}/{mid}", modules[mid])


def pack_modules() -> dict[str, str]:
    return {n: (ROOT / "policies" / n).read_text() for n in PACK_MODULES}


@pytest.fixture(params=EVALUATORS)
async def evaluator(request: pytest.FixtureRequest, opa: OpaServer) -> AsyncIterator[Evaluator]:
    if request.param == "in-process":
        yield InProcess()
        return
    async with aiohttp.ClientSession() as session:
        server = Server(opa, session)
        await server.load()
        try:
            yield server
        finally:
            if opa.external:
                await server.unload()


@pytest.fixture
async def webhook(opa: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces) -> AsyncIterator[Stack]:
    policy_ns = await kube_namespaces.create("lr-policy")
    await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fedplace-limitrange"}, "data": {}})
    opa_client = OpaClient(OpaSettings(url=opa.url, token=opa.token))
    await load_modules(opa_client, pack_modules())
    await write_loaded_record(opa_client, policy_ns, ["fedplace-limitrange"])  # as opa-kube-sync would
    hook = Webhook(config_from_mapping({
        "listen": "127.0.0.1:0", "policy_namespace": policy_ns,
        "opa": {"url": opa.url, "timeout": 5.0, **({"token": opa.token} if opa.token else {})},
        "deadline": 10.0, "retry": {"initial": 0.02, "max": 0.2, "jitter": 0.02},
    }), api=kube_api)
    await hook.start()
    session = aiohttp.ClientSession()
    try:
        await hook.wait_synced()
        yield Stack(hook, opa, opa_client, session, policy_ns)
    finally:
        await session.close()
        await hook.stop()
        if getattr(opa, "external", False):
            for mid in reversed(dependency_order(pack_modules())):
                await opa_client.delete_policy(f"{POLICY_PREFIX}/{mid}")
            await opa_client.delete_data(["kubernetes", "limitranges"])
        await opa_client.close()


__all__ = ["KINDS", "Stack", "apply_response", "dependency_order", "load_modules", "pack_configmaps",
           "pack_modules", "review"]
