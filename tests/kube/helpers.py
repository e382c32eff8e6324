"""Shared helpers for the Kubernetes API conformance tests."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import ssl
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import trustme
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from devstack.scratch import unique_name
from tests.fixtures.kube import KubeServer


def unique(prefix: str = "t") -> str:
    return unique_name(prefix)


def singular_names(kube: KubeServer, singular: str) -> set[str]:
    """What discovery may send as a resource's ``singularName``: kube-apiserver
    before 1.27 sends "" for built-in types; the devstack always the singular."""
    return {singular, ""} if kube.external else {singular}


async def raw(api: client.ApiClient, method: str, path: str, query: list[tuple[str, Any]] | None = None,
              body: Any = None, content_type: str = "application/json") -> tuple[int, Any, bytes]:
    """A request over the ApiClient's own session, host and auth; returns (status, json-or-None, raw bytes)."""
    headers = {"Accept": "application/json", "Content-Type": content_type}
    for auth in (await api.configuration.auth_settings()).values():
        headers[auth["key"]] = auth["value"]
    data = body if isinstance(body, (str, bytes)) or body is None else json.dumps(body)
    session = api.rest_client.pool_manager
    async with session.request(method, api.configuration.host + path, params=query or [], headers=headers,
                               data=data) as resp:
        payload = await resp.read()
        status = resp.status
    try:
        doc = json.loads(payload) if payload else None
    except ValueError:
        doc = None
    return status, doc, payload


def assert_status(doc: Any, code: int, reason: str) -> None:
    """A complete Status document, as kube-apiserver sends it."""
    assert isinstance(doc, dict), doc
    assert doc["kind"] == "Status" and doc["apiVersion"] == "v1", doc
    assert doc["status"] == "Failure", doc
    assert doc["code"] == code, doc
    assert doc["reason"] == reason, doc
    assert isinstance(doc["message"], str) and doc["message"], doc
    assert "metadata" in doc


def status_of(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


def crd_body(group: str, plural: str, kind: str, scope: str = "Namespaced",
             versions: tuple[str, ...] = ("v1",), status: bool = False) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    vs = []
    for i, v in enumerate(versions):
        entry: dict[str, Any] = {"name": v, "served": True, "storage": i == 0, "schema": schema}
        if status:
            entry["subresources"] = {"status": {}}
        vs.append(entry)
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": kind + "List"},
                 "versions": vs},
    }


@dataclass
class WebhookTLS:
    """A CA and a serving certificate for the in-test webhook."""

    names: tuple[str, ...] = ("127.0.0.1", "localhost")
    ca: trustme.CA = field(default_factory=trustme.CA)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*self.names).configure_cert(ctx)
        return ctx

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()


Review = dict[str, Any]
Responder = Callable[[Review], Awaitable[dict[str, Any]]]


@dataclass
class WebhookServer:
    """A test webhook: the reviews it received, the registration probes apart
    (``register_webhook``'s, which may still arrive after it returned)."""

    url: str
    port: int
    reviews: list[Review]
    probes: list[Review]


@asynccontextmanager
async def webhook_server(tls: WebhookTLS, respond: Responder) -> AsyncIterator[WebhookServer]:
    """An HTTPS admission webhook on 127.0.0.1 whose answer ``respond(review)`` builds."""
    reviews: list[Review] = []
    probes: list[Review] = []

    async def handle(request: web.Request) -> web.Response:
        review = await request.json()
        probe = str(review.get("request", {}).get("name", "")).startswith(PROBE_PREFIX)
        (probes if probe else reviews).append(review)
        response = await respond(review)
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": review["request"]["uid"], **response}})

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.server_context())
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield WebhookServer(f"https://127.0.0.1:{port}", port, reviews, probes)
    finally:
        await runner.cleanup()


PROBE_PREFIX = "webhook-probe-"


async def register_webhook(api: client.ApiClient, body: dict[str, Any], hook: WebhookServer, namespace: str,
                           timeout: float = 15.0) -> None:
    """Create the MutatingWebhookConfiguration ``body`` and wait until the API server calls it.

    A real kube-apiserver loads webhook configurations asynchronously, so the test probes: a
    dry-run ConfigMap ``webhook-probe-<n>`` in ``namespace`` until ``hook`` receives it or the
    answer names one of the configuration's webhooks (one that cannot be reached, say). The
    probes' reviews go to ``hook.probes``, never ``hook.reviews``: a slow webhook may receive
    one after the API server gave up on it."""
    await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(body)
    names = [h["name"] for h in body["webhooks"]]
    deadline = asyncio.get_running_loop().time() + timeout
    for n in itertools.count():
        probe = f"{PROBE_PREFIX}{n}"
        status, doc, _ = await raw(api, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                   query=[("dryRun", "All")], body={"metadata": {"name": probe}})
        message = (doc or {}).get("message", "") if status >= 400 else ""
        reached = any(r["request"].get("name") == probe for r in hook.probes)
        if reached or any(f'"{name}"' in message for name in names):
            break
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"webhook configuration {body['metadata']['name']} not in effect after {timeout}s")
        await asyncio.sleep(0.1)


def b64_patch(ops: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(ops).encode()).decode()


def mwc_body(name: str, hook_name: str, client_config: dict[str, Any], *, failure_policy: str = "Fail",
             timeout: int = 10, rules: list[dict[str, Any]] | None = None,
             namespace_selector: dict[str, Any] | None = None,
             object_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": hook_name,
        "clientConfig": client_config,
        "rules": rules or [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                            "resources": ["configmaps"]}],
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": timeout,
    }
    if namespace_selector is not None:
        hook["namespaceSelector"] = namespace_selector
    if object_selector is not None:
        hook["objectSelector"] = object_selector
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": [hook]}


async def collect(stream: Any, until: Callable[[list[dict[str, Any]]], bool] | None = None,
                  limit: float = 10.0) -> list[dict[str, Any]]:
    """Events from a watch stream until the stream ends or ``until(events)`` holds."""
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async for ev in stream:
            events.append(ev)
            if until is not None and until(events):
                break

    await asyncio.wait_for(run(), limit)
    return events
