"""Auth, fault injection, reset, and the kubeconfig the server writes.

The devstack's own features run against a devstack server in either mode
(``devstack_kube``); the last tests concern any API server."""

from __future__ import annotations

import pytest
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.rest import ApiException

from .helpers import assert_status, raw, status_of


async def test_bearer_token_required(devstack_kube) -> None:
    kube = devstack_kube
    cfg = client.Configuration(host=kube.url)
    cfg.api_key = {"BearerToken": "wrong"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    async with client.ApiClient(cfg) as api:
        with pytest.raises(ApiException) as info:
            await client.CoreV1Api(api).list_namespace()
        assert_status(status_of(info.value), 401, "Unauthorized")
    async with client.ApiClient(client.Configuration(host=kube.url)) as api:
        with pytest.raises(ApiException) as info:
            await client.CoreV1Api(api).list_namespace()
        assert info.value.status == 401
        # /version stays public, as with anonymous public-info-viewer access
        assert (await client.VersionApi(api).get_code()).major


async def test_kubeconfig_is_usable(devstack_kube) -> None:
    kube = devstack_kube
    doc = yaml.safe_load(kube.kubeconfig.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == kube.url
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kube.kubeconfig), client_configuration=cfg, persist_config=False)
    async with client.ApiClient(cfg) as api:
        names = {n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items}
    assert "default" in names


async def test_injected_faults_are_status_objects(devstack_kube, devstack_kube_api: client.ApiClient) -> None:
    kube, kube_api = devstack_kube, devstack_kube_api
    await kube.set_faults({"fail": {"path": "/api/v1/namespaces/default/configmaps", "status": 429, "count": 2,
                                    "retry_after": 1}})
    core = client.CoreV1Api(kube_api)
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            await core.list_namespaced_config_map("default")
        assert info.value.status == 429
        assert info.value.headers["Retry-After"] == "1"
        assert_status(status_of(info.value), 429, "TooManyRequests")
    assert (await core.list_namespaced_config_map("default")).items == []
    await kube.set_faults({"fail": {"path": "/api/v1/namespaces", "status": 503, "count": -1}})
    status, doc, _ = await raw(kube_api, "GET", "/api/v1/namespaces")
    assert status == 503
    assert_status(doc, 503, "ServiceUnavailable")
    await kube.clear_faults()
    status, _, _ = await raw(kube_api, "GET", "/api/v1/namespaces")
    assert status == 200


async def test_reset_restores_initial_state_and_rv_keeps_growing(devstack_kube,
                                                                 devstack_kube_api: client.ApiClient) -> None:
    kube, kube_api = devstack_kube, devstack_kube_api
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="scratch")))
    await core.create_namespaced_config_map("scratch", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a")))
    await kube.set_faults({"latency": 0.01})
    before = int((await core.list_namespace()).metadata.resource_version)
    await kube.reset()
    names = {n.metadata.name for n in (await core.list_namespace()).items}
    assert "scratch" not in names and {"default", "kube-system"} <= names
    after = int((await core.list_namespace()).metadata.resource_version)
    assert after > before
    faults = await kube.admin("GET", "faults")
    assert faults["latency"] == 0 and faults["rules"] == []


async def test_unknown_paths_and_methods(kube_api: client.ApiClient) -> None:
    status, doc, _ = await raw(kube_api, "GET", "/api/v1/nonexistents")
    assert status == 404
    assert_status(doc, 404, "NotFound")
    status, doc, _ = await raw(kube_api, "PUT", "/api/v1/namespaces/default/configmaps", body={})
    assert status == 405
    assert_status(doc, 405, "MethodNotAllowed")


async def test_protected_namespaces_cannot_be_deleted(kube_api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as info:
        await client.CoreV1Api(kube_api).delete_namespace("default")
    assert_status(status_of(info.value), 403, "Forbidden")
