"""What a mutating webhook sees of a Pod on CREATE and UPDATE, what a Pod update may
change, and how a webhook's warnings reach the client — on the devstack and on a real
kube-apiserver 1.24 (the behaviour measured there is what the devstack models)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json

from .helpers import WebhookTLS, mwc_body, register_webhook, unique, webhook_server

# configmaps for register_webhook's probes
POD_RULES = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
              "resources": ["pods", "configmaps"]}]
WARNINGS = ['one "quoted" \\ warning', "two"]


async def allow_with_warnings(review: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True, "warnings": WARNINGS}


async def request_with_headers(api: client.ApiClient, method: str, path: str, body: Any,
                               content_type: str = "application/json") -> tuple[int, Any, list[str]]:
    """(status, parsed body, the Warning headers) of one request over the ApiClient's session."""
    headers = {"Accept": "application/json", "Content-Type": content_type}
    for auth in (await api.configuration.auth_settings()).values():
        headers[auth["key"]] = auth["value"]
    async with api.rest_client.pool_manager.request(method, api.configuration.host + path, headers=headers,
                                                    data=json.dumps(body)) as resp:
        return resp.status, json.loads(await resp.read()), resp.headers.getall("Warning", [])


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


async def test_webhook_warnings_reach_the_client_and_forged_system_fields_reach_the_webhook(
        kube: Any, kube_api: client.ApiClient, kube_namespace: str) -> None:
    tls = WebhookTLS()
    async with webhook_server(tls, allow_with_warnings) as hook:
        await register_webhook(kube_api, mwc_body(unique("mwc"), "warn.fedplace.io",
                                                  {"url": hook.url + "/mutate", "caBundle": tls.ca_bundle},
                                                  rules=POD_RULES), hook, kube_namespace)
        path = f"/api/v1/namespaces/{kube_namespace}/pods"
        forged = {**pod("p"), "status": {"phase": "Running"}}
        status, created, warnings = await request_with_headers(kube_api, "POST", path, forged)
        assert status == 201, created
        assert warnings == ['299 - "one \\"quoted\\" \\\\ warning"', '299 - "two"']
        # the webhook saw the status as the client sent it: the API server resets it afterwards
        seen = hook.reviews[-1]["request"]
        assert seen["operation"] == "CREATE" and seen["oldObject"] is None
        assert seen["object"]["status"] == {"phase": "Running"}
        assert created["status"]["phase"] == "Pending"

        status, labelled, warnings = await request_with_headers(
            kube_api, "PATCH", f"{path}/p", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json")
        assert status == 200 and len(warnings) == 2
        seen = hook.reviews[-1]["request"]
        assert seen["operation"] == "UPDATE" and seen["oldObject"]["metadata"]["uid"] == created["metadata"]["uid"]
        assert seen["object"]["status"]["phase"] == "Pending" and seen["object"]["metadata"]["uid"]


async def test_a_pod_update_may_add_tolerations_and_change_nothing_else_of_scheduling(
        kube: Any, kube_api: client.ApiClient, kube_namespace: str) -> None:
    path = f"/api/v1/namespaces/{kube_namespace}/pods"
    name = unique("pod")
    created = await kube_json(kube_api, "POST", path, body=pod(name, tolerations=[{"key": "a", "operator": "Exists"}]))
    tolerations = created["spec"]["tolerations"]
    merge = "application/merge-patch+json"

    added = tolerations + [{"key": "x", "operator": "Exists", "effect": "NoSchedule"}]
    updated = await kube_json(kube_api, "PATCH", f"{path}/{name}", body={"spec": {"tolerations": added}},
                              content_type=merge)
    assert updated["spec"]["tolerations"] == added

    for body, field in [({"spec": {"nodeSelector": {"disk": "ssd"}}}, "spec"),
                        ({"spec": {"schedulerName": "other"}}, "spec"),
                        ({"spec": {"tolerations": [{"key": "y", "operator": "Exists"}]}}, "spec.tolerations")]:
        try:
            await kube_json(kube_api, "PATCH", f"{path}/{name}", body=body, content_type=merge)
        except KubeApiError as exc:
            assert exc.status == 422, exc
            assert exc.message.startswith(f'Pod "{name}" is invalid: {field}: Forbidden: '), exc.message
        else:
            raise AssertionError(f"the API server accepted {body}")
    # an image may change
    containers = [{**created["spec"]["containers"][0], "image": "nginx:2"}]
    changed = await kube_json(kube_api, "PATCH", f"{path}/{name}", body={"spec": {"containers": containers}},
                              content_type="application/strategic-merge-patch+json")
    assert changed["spec"]["containers"][0]["image"] == "nginx:2"
