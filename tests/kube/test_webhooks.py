"""Mutating admission webhook dispatch: an in-test HTTPS webhook (trustme CA) on 127.0.0.1,
registered through the API with its caBundle — on the devstack and on a real kube-apiserver
running on this machine (which loads the configuration asynchronously: ``register_webhook``
waits until it is in effect)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from devstack.kube.server import Server, ServerConfig
from devstack.kube.webhooks import ServiceResolver

from .helpers import WebhookTLS, assert_status, b64_patch, mwc_body, register_webhook, status_of, unique, webhook_server


async def annotate(review: dict[str, Any]) -> dict[str, Any]:
    obj = review["request"]["object"]
    ops = []
    if not (obj.get("metadata") or {}).get("annotations"):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.append({"op": "add", "path": "/metadata/annotations/fedplace.io~1mutated", "value": review["request"]["operation"]})
    return {"allowed": True, "patchType": "JSONPatch", "patch": b64_patch(ops)}


async def register(api: client.ApiClient, body: dict[str, Any]) -> None:
    """Create without waiting (for the in-process devstack server, which applies it at once)."""
    await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(body)


def cm(name: str, labels: dict[str, str] | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data={"k": "v"})


async def test_mutating_webhook_patches_create_and_update(kube, kube_api: client.ApiClient,
                                                          kube_namespace: str) -> None:
    tls = WebhookTLS()
    async with webhook_server(tls, annotate) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "annotate.fedplace.io",
                                                  {"url": hook.url + "/mutate", "caBundle": tls.ca_bundle}),
                               hook, kube_namespace)
        core = client.CoreV1Api(kube_api)
        created = await core.create_namespaced_config_map(kube_namespace, cm("a"))
        assert created.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
        stored = await core.read_namespaced_config_map("a", kube_namespace)
        assert stored.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
        updated = await core.patch_namespaced_config_map("a", kube_namespace, {"data": {"k": "2"}})
        assert updated.metadata.annotations == {"fedplace.io/mutated": "UPDATE"}
        # secrets are not in the rules
        s = await core.create_namespaced_secret(kube_namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="s")))
        assert not s.metadata.annotations
    req = hook.reviews[0]
    assert hook.reviews[0]["apiVersion"] == "admission.k8s.io/v1" and hook.reviews[0]["kind"] == "AdmissionReview"
    r = req["request"]
    assert r["uid"] and r["operation"] == "CREATE" and r["namespace"] == kube_namespace and r["name"] == "a"
    assert r["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert r["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert r["object"]["data"] == {"k": "v"} and r["oldObject"] is None and r["dryRun"] is False
    assert r["userInfo"]["username"]
    assert r["options"]["kind"] == "CreateOptions"
    upd = hook.reviews[1]["request"]
    assert upd["operation"] == "UPDATE" and upd["oldObject"]["data"] == {"k": "v"} and upd["object"]["data"] == {"k": "2"}
    assert len(hook.reviews) == 2


async def test_denial_is_answered_like_the_api_server(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    async def deny(review: dict[str, Any]) -> dict[str, Any]:
        return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "placement refused"}}

    tls = WebhookTLS()
    async with webhook_server(tls, deny) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "deny.fedplace.io",
                                                  {"url": hook.url, "caBundle": tls.ca_bundle}), hook, kube_namespace)
        core = client.CoreV1Api(kube_api)
        with pytest.raises(ApiException) as info:
            await core.create_namespaced_config_map(kube_namespace, cm("d"))
    doc = status_of(info.value)
    assert_status(doc, 403, "Forbidden")
    assert doc["message"] == 'admission webhook "deny.fedplace.io" denied the request: placement refused'
    with pytest.raises(ApiException) as info:
        await core.read_namespaced_config_map("d", kube_namespace)
    assert info.value.status == 404


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_timeout_and_failure_policy(kube, kube_api: client.ApiClient, kube_namespace: str, policy: str) -> None:
    async def slow(review: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(2.5)
        return await annotate(review)

    tls = WebhookTLS()
    async with webhook_server(tls, slow) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "slow.fedplace.io",
                                                  {"url": hook.url, "caBundle": tls.ca_bundle}, failure_policy=policy,
                                                  timeout=1), hook, kube_namespace)
        core = client.CoreV1Api(kube_api)
        loop = asyncio.get_running_loop()
        start = loop.time()
        if policy == "Fail":
            with pytest.raises(ApiException) as info:
                await core.create_namespaced_config_map(kube_namespace, cm("slow"))
            doc = status_of(info.value)
            assert_status(doc, 500, "InternalError")
            assert 'failed calling webhook "slow.fedplace.io"' in doc["message"]
        else:
            created = await core.create_namespaced_config_map(kube_namespace, cm("slow"))
            assert not created.metadata.annotations
        assert loop.time() - start < 2.0  # timeoutSeconds enforced (the webhook answers after 2.5 s)
        assert len(hook.reviews) == 1


async def test_untrusted_certificate_fails_closed(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    tls, other = WebhookTLS(), WebhookTLS()
    async with webhook_server(tls, annotate) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "tls.fedplace.io",
                                                  {"url": hook.url, "caBundle": other.ca_bundle}), hook, kube_namespace)
        with pytest.raises(ApiException) as info:
            await client.CoreV1Api(kube_api).create_namespaced_config_map(kube_namespace, cm("x"))
    assert_status(status_of(info.value), 500, "InternalError")
    assert hook.reviews == []


async def test_bad_response_uid_is_a_failure(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    async def wrong_uid(review: dict[str, Any]) -> dict[str, Any]:
        return {"allowed": True, "uid": "not-the-request-uid"}

    tls = WebhookTLS()
    async with webhook_server(tls, wrong_uid) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "uid.fedplace.io",
                                                  {"url": hook.url, "caBundle": tls.ca_bundle}), hook, kube_namespace)
        with pytest.raises(ApiException) as info:
            await client.CoreV1Api(kube_api).create_namespaced_config_map(kube_namespace, cm("u"))
    doc = status_of(info.value)
    assert_status(doc, 500, "InternalError")
    assert "expected response.uid" in doc["message"]
    assert len(hook.reviews) == 1


async def test_namespace_and_object_selectors(kube, kube_api: client.ApiClient, kube_namespaces) -> None:
    core = client.CoreV1Api(kube_api)
    on = await kube_namespaces.create("on", labels={"hook": unique("on")})
    off = await kube_namespaces.create("off")
    selected = (await core.read_namespace(on)).metadata.labels["hook"]
    tls = WebhookTLS()
    async with webhook_server(tls, annotate) as hook:
        await register_webhook(kube_api, mwc_body(
            unique("mwc"), "sel.fedplace.io", {"url": hook.url, "caBundle": tls.ca_bundle},
            namespace_selector={"matchLabels": {"hook": selected}},
            object_selector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}), hook, on)
        a = await core.create_namespaced_config_map(on, cm("a"))
        b = await core.create_namespaced_config_map(off, cm("b"))
        c = await core.create_namespaced_config_map(on, cm("c", labels={"skip": "1"}))
    assert a.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
    assert not b.metadata.annotations and not c.metadata.annotations
    assert [r["request"]["name"] for r in hook.reviews] == ["a"]


async def test_rules_with_wildcards_and_scope(kube, kube_api: client.ApiClient, kube_namespaces) -> None:
    """Every resource of every group, namespaced scope only: a Secret is admitted through the
    webhook, a Namespace (cluster-scoped) is not — though the namespaceSelector (there to keep
    the rest of a shared server out) matches both."""
    label = {"wild": unique("w")}
    ns_name = await kube_namespaces.create("wild", labels=label)
    tls = WebhookTLS()
    async with webhook_server(tls, annotate) as hook:
        await register_webhook(kube_api, mwc_body(
            unique("mwc"), "wild.fedplace.io", {"url": hook.url, "caBundle": tls.ca_bundle},
            rules=[{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                    "scope": "Namespaced"}],
            namespace_selector={"matchLabels": label}), hook, ns_name)
        core = client.CoreV1Api(kube_api)
        s = await core.create_namespaced_secret(ns_name, client.V1Secret(metadata=client.V1ObjectMeta(name="s")))
        ns = await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
            name=kube_namespaces.reserve("ns"), labels=label)))
    assert s.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
    assert not ns.metadata.annotations  # cluster-scoped: outside the rule's scope


async def test_dry_run_reaches_the_webhook_and_persists_nothing(kube, kube_api: client.ApiClient,
                                                                kube_namespace: str) -> None:
    tls = WebhookTLS()
    async with webhook_server(tls, annotate) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "dry.fedplace.io",
                                                  {"url": hook.url, "caBundle": tls.ca_bundle}), hook, kube_namespace)
        core = client.CoreV1Api(kube_api)
        out = await core.create_namespaced_config_map(kube_namespace, cm("dry"), dry_run="All")
    assert out.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
    assert hook.reviews[0]["request"]["dryRun"] is True
    with pytest.raises(ApiException):
        await core.read_namespaced_config_map("dry", kube_namespace)


async def test_service_client_config_with_service_address() -> None:
    """clientConfig.service resolved through --service-address; TLS name is <svc>.<ns>.svc."""
    tls = WebhookTLS(names=("hook.fedplace.svc",))
    async with webhook_server(tls, annotate) as hook:
        resolver = ServiceResolver.parse([f"hook.fedplace=127.0.0.1:{hook.port}"])
        server = TestServer(Server(ServerConfig(service_resolver=resolver)).app())
        await server.start_server()
        try:
            cfg = client.Configuration(host=str(server.make_url("")).rstrip("/"))
            async with client.ApiClient(cfg) as api:
                await register(api, mwc_body("svc", "svc.fedplace.io", {
                    "service": {"namespace": "fedplace", "name": "hook", "port": 443, "path": "/mutate"},
                    "caBundle": tls.ca_bundle}))
                created = await client.CoreV1Api(api).create_namespaced_config_map("default", cm("viasvc"))
                assert created.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
                # an unmapped service fails (failurePolicy Fail)
                await register(api, mwc_body("svc2", "nosvc.fedplace.io", {
                    "service": {"namespace": "elsewhere", "name": "nohook"}, "caBundle": tls.ca_bundle}))
                with pytest.raises(ApiException) as info:
                    await client.CoreV1Api(api).create_namespaced_config_map("default", cm("viasvc2"))
                assert info.value.status == 500
        finally:
            await server.close()
    assert len(hook.reviews) == 2  # viasvc, then viasvc2 reached the first webhook before failing


async def test_generate_name_is_empty_in_the_review(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    tls = WebhookTLS()
    async with webhook_server(tls, annotate) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "gen.fedplace.io",
                                                  {"url": hook.url, "caBundle": tls.ca_bundle}), hook, kube_namespace)
        out = await client.CoreV1Api(kube_api).create_namespaced_config_map(
            kube_namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="g-")))
    assert out.metadata.name.startswith("g-") and out.metadata.annotations == {"fedplace.io/mutated": "CREATE"}
    req = hook.reviews[0]["request"]
    assert "name" not in req and "name" not in req["object"]["metadata"]  # empty: left out
    assert req["object"]["metadata"]["generateName"] == "g-"
