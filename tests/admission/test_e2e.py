"""End to end: the API server calls the webhook over TLS; and the real command's lifecycle."""

from __future__ import annotations

import base64
import json
import signal
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import pytest
import trustme
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from fedplace.admission.lifecycle import Webhook
from fedplace.common.kube_client import KubeApiError, kube_json
from devstack.launch import ServerProcess
from tests.admission.conftest import Harness, replicaset, review
from tests.fixtures.kube import ScratchNamespaces

WEBHOOK_NAME = "placement.fedplace.io"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"

POLICY = """
errors contains "replicas above 10 are not placeable" if { input.spec.replicas > 10 }
annotations[k] := v if {
    some k, v in {"federation.kubernetes.io/replica-set-preferences": {"rebalance": true}}
}
"""


@pytest.fixture
async def tls_webhook(harness: Harness, tmp_path: Path) -> AsyncIterator[tuple[Webhook, trustme.CA]]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.cert_chain_pems[0].write_to_path(str(crt))
    cert.private_key_pem.write_to_path(str(key))
    hook = await harness.start_webhook(tls={"cert_file": str(crt), "private_key_file": str(key)})
    assert hook.url.startswith("https://")
    yield hook, ca


@pytest.fixture
async def registered(harness: Harness, tls_webhook: tuple[Webhook, trustme.CA]) -> AsyncIterator[str]:
    hook, ca = tls_webhook
    name = f"fedplace-{uuid.uuid4().hex[:8]}"
    await kube_json(harness.api, "POST", MWC_PATH, body={
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "clientConfig": {"url": hook.url + "/mutate", "caBundle": base64.b64encode(ca.cert_pem.bytes()).decode()},
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["replicasets"],
                       "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
            "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
            "admissionReviewVersions": ["v1"],
        }],
    })
    try:
        yield name
    finally:
        try:
            await kube_json(harness.api, "DELETE", f"{MWC_PATH}/{name}")
        except KubeApiError:
            pass


async def test_api_server_calls_the_webhook_over_tls(harness: Harness, registered: str,
                                                    kube_namespaces: ScratchNamespaces) -> None:
    h = harness
    await h.put_policy(POLICY)
    await h.add_policy_configmap(webhooks=h.extra)
    ns = await kube_namespaces.create("fedplace-e2e")
    apps = client.AppsV1Api(h.api)
    created = await apps.create_namespaced_replica_set(ns, replicaset(name="web", namespace=ns,
                                                                      annotations={"team": "a"}))
    ann = created.metadata.annotations
    assert ann["federation.kubernetes.io/replica-set-preferences"] == '{"rebalance":true}'
    assert ann["team"] == "a"

    big = replicaset(name="big", namespace=ns)
    big["spec"]["replicas"] = 50
    with pytest.raises(ApiException) as err:
        await apps.create_namespaced_replica_set(ns, big)
    assert err.value.status == 403
    status = json.loads(err.value.body)
    assert status["message"].startswith(f'admission webhook "{WEBHOOK_NAME}" denied the request: ')
    assert "replicas above 10 are not placeable" in status["message"]


async def test_the_command_serves_and_stops_on_sigterm_without_logging_the_token(
        opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces, tmp_path: Path) -> None:
    token = opa.token or f"not-a-real-token-{uuid.uuid4().hex}"
    token_file = tmp_path / "opa.token"
    token_file.write_text(token + "\n")
    policy_ns = await kube_namespaces.create("fedplace-policy")
    await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {}})
    proc = ServerProcess("admission", [
        "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}", "--kubeconfig", str(kube.kubeconfig),
        "--opa-url", opa.url, "--opa-token-file", str(token_file), "--policy-namespace", policy_ns,
        "--deadline", "1", "--log-level", "debug"], "/readyz", tmp_path)
    proc.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(proc.url + "/mutate", json=review(replicaset())) as resp:
                body = await resp.json()
        # A ConfigMap exists, no module defines the decision: fail closed.
        assert body["response"]["allowed"] is False
        assert "no policy decision" in body["response"]["status"]["message"]
    finally:
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGTERM)
        code = proc.proc.wait(15)
    assert code == 0
    log = proc.log_path.read_text()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "admission decision" and line.get("outcome") == "fail_closed" for line in lines)
    assert any(line.get("msg") == "admission webhook stopped" for line in lines)
    # as deployed: on uvloop (a dependency), with its own TLS transport (common/eventloop.py)
    assert [line.get("event_loop") for line in lines if line.get("msg") == "admission webhook listening"] == ["uvloop"]
    assert token not in log
