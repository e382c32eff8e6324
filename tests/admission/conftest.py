"""Fixtures for the webhook's integration tests: the webhook runs in-process on
a free port (real HTTP), against the devstack (or external) engine and API server."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from kubernetes_asyncio import client

from fedplace.admission.config import config_from_mapping
from fedplace.admission.lifecycle import Webhook
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.common.opa_client import OpaClient, OpaSettings
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.loaded import write_loaded_record

PACKAGE = "package io.k8s.federation.admission\n\n"

# The webhook serves on uvloop when it is installed (common/eventloop.py), on asyncio's loop
# otherwise: the tests that run it in this process run on both. (test_e2e and test_workers
# start the command itself, which picks its loop as deployed.)
IN_PROCESS_ON_BOTH_LOOPS = {"test_webhook.py", "test_hardening.py", "test_tls.py"}


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                  ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    if item.path.name not in IN_PROCESS_ON_BOTH_LOOPS:
        return {"asyncio": asyncio.new_event_loop}
    import uvloop

    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
POLICY_ID = "fedplace-tests/admission.rego"


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 5.0, what: str = "condition",
                     interval: float = 0.02) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval)


def replicaset(name: str = "nginx", namespace: str = "default", annotations: dict[str, str] | None = None,
               **meta: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"namespace": namespace, **meta}
    if name:
        md["name"] = name
    if annotations is not None:
        md["annotations"] = annotations
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": md,
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name or "x"}},
                 "template": {"metadata": {"labels": {"app": name or "x"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }


def review(obj: dict[str, Any] | None, operation: str = "CREATE", uid: str | None = None,
           dry_run: bool = False, namespace: str | None = None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata") or {}
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"},
            "resource": {"group": "apps", "version": "v1", "resource": "replicasets"},
            "name": meta.get("name", ""),
            "namespace": namespace if namespace is not None else meta.get("namespace", "default"),
            "operation": operation,
            "userInfo": {"username": "tester"},
            "object": obj if operation not in ("DELETE", "CONNECT") else None,
            "oldObject": obj if operation in ("DELETE", "UPDATE") else None,
            "dryRun": dry_run,
        },
    }


@dataclass
class Harness:
    """A started webhook plus the helpers tests need."""

    webhook: Webhook
    api: client.ApiClient
    opa_client: OpaClient
    session: aiohttp.ClientSession
    policy_namespace: str
    opa_url: str
    extra: list[Webhook] = field(default_factory=list)
    configmaps: set[str] = field(default_factory=set)  # policy ConfigMaps made by add_policy_configmap

    @property
    def url(self) -> str:
        return self.webhook.url

    async def post(self, doc: Any, *, raw: bytes | None = None, url: str | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """POST to the webhook's /mutate: (status, parsed answer)."""
        data = raw if raw is not None else json.dumps(doc).encode()
        async with self.session.post((url or self.url) + "/mutate", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})}) as resp:
            body = await resp.read()
            status = resp.status
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode(errors="replace")

    async def admit(self, obj: dict[str, Any], operation: str = "CREATE", *, webhook: Webhook | None = None,
                    **kw: Any) -> dict[str, Any]:
        doc = review(obj, operation, **kw)
        status, body = await self.post(doc, url=(webhook or self.webhook).url)
        assert status == 200, body
        assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
        assert body["response"]["uid"] == doc["request"]["uid"]
        return body["response"]

    async def put_policy(self, rego: str) -> None:
        """Load the test's admission module, with the record of a complete load the sync
        would write (tests/fixtures/loaded.py) naming every policy ConfigMap made so far."""
        await self.opa_client.put_policy(POLICY_ID, PACKAGE + rego)
        await self.mark_loaded()

    async def mark_loaded(self, client: OpaClient | None = None) -> None:
        """Write the record of a complete load naming :attr:`configmaps` (into ``client``'s OPA)."""
        await write_loaded_record(client or self.opa_client, self.policy_namespace, self.configmaps)

    async def add_policy_configmap(self, name: str = "placement", webhooks: list[Webhook] | None = None) -> None:
        """Create a ConfigMap in the policy namespace (named in the record of a complete load,
        as once the sync loaded it) and wait until the webhook(s) see it."""
        self.configmaps.add(name)
        await self.mark_loaded()
        await kube_json(self.api, "POST", f"/api/v1/namespaces/{self.policy_namespace}/configmaps", body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"placement.rego": PACKAGE + "errors := set()\n"}})
        for hook in webhooks or [self.webhook]:
            async def seen(h: Webhook = hook) -> bool:
                return bool(h.policies and h.policies.synced and h.policies.count() > 0)
            await eventually(seen, 5, "the informer to see the policy ConfigMap")

    async def start_webhook(self, api: client.ApiClient | None = None, **overrides: Any) -> Webhook:
        """Another webhook (e.g. OPA on a closed port), stopped at teardown."""
        hook = Webhook(make_config(self.opa_url, self.opa_client.settings.token, self.policy_namespace,
                                   **overrides), api=api or self.api)
        await hook.start()
        self.extra.append(hook)
        if api is None:
            await hook.wait_synced()
        return hook


def make_config(opa_url: str, token: str | None, policy_namespace: str, **overrides: Any):  # type: ignore[no-untyped-def]
    doc: dict[str, Any] = {
        "listen": "127.0.0.1:0",
        "policy_namespace": policy_namespace,
        "opa": {"url": opa_url, "timeout": 1.0, **({"token": token} if token else {})},
        "deadline": 2.0,
        "retry": {"initial": 0.02, "max": 0.2, "jitter": 0.02},
        "events": {"burst": 50, "refill_seconds": 1},
        "shutdown_timeout": 5,
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    return config_from_mapping(doc)


async def ensure_namespace(api: client.ApiClient, name: str) -> None:
    try:
        await kube_json(api, "POST", "/api/v1/namespaces",
                        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except KubeApiError as exc:
        if exc.status != 409:
            raise


@pytest.fixture
async def harness(opa: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces) -> AsyncIterator[Harness]:
    """A started webhook asking the session's OPA."""
    async with started_harness(opa, kube_api, kube_namespaces) as h:
        yield h


@pytest.fixture
async def proxied_harness(opa_proxy: Any, kube_api: client.ApiClient,
                          kube_namespaces: ScratchNamespaces) -> AsyncIterator[Harness]:
    """A started webhook asking the session's OPA through the fault-injecting proxy
    (tests/fixtures/proxy.py): ``h.opa_url`` is the proxy's, where faults are set."""
    async with started_harness(opa_proxy, kube_api, kube_namespaces) as h:
        try:
            yield h
        finally:
            await opa_proxy.clear_faults()  # the cleanup below goes through the proxy too


@asynccontextmanager
async def started_harness(opa: Any, kube_api: client.ApiClient,
                          kube_namespaces: ScratchNamespaces) -> AsyncIterator[Harness]:
    policy_ns = await kube_namespaces.create("fedplace-policy")
    await ensure_namespace(kube_api, "default")
    opa_client = OpaClient(OpaSettings(url=opa.url, token=opa.token))
    webhook = Webhook(make_config(opa.url, opa.token, policy_ns), api=kube_api)
    await webhook.start()
    session = aiohttp.ClientSession()
    h = Harness(webhook, kube_api, opa_client, session, policy_ns, opa.url)
    try:
        await webhook.wait_synced()
        yield h
    finally:
        for hook in h.extra:
            await hook.stop()
        await webhook.stop()
        await session.close()
        if getattr(opa, "external", False):
            try:
                await opa_client.delete_policy(POLICY_ID)
            except Exception:  # noqa: BLE001 - best-effort cleanup
                pass
        await opa_client.close()
