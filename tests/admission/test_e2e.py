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

from devstack.launch import ServerProcess
from fedplace.admission.lifecycle import Webhook
from fedplace.common.kube_client import KubeApiError, kube_json, kube_stream
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


RATCHET_POLICY = """
cfg := object.get(data.fedplace_tests, "ratchet", {})

errors contains sprintf("label %s is not allowed", [k]) if {
    some k, _ in input.metadata.labels
    object.get(cfg, ["forbidden_labels", k], false)
}

errors contains sprintf("finalizer %s must stay", [f]) if {
    some f in object.get(cfg, "kept_finalizers", [])
    not f in object.get(input.metadata, "finalizers", [])
}
"""
HOLD = "fedplace.io/hold"


async def _counter(h: Harness, reason: str) -> float:
    """fedplace_admission_update_errors_not_enforced_total{reason} from the webhook's /metrics."""
    async with h.session.get(h.url + "/metrics") as resp:
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith(f'fedplace_admission_update_errors_not_enforced_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    raise AssertionError(f"no series for reason {reason}")


async def _patch(h: Harness, path: str, body: dict[str, Any]) -> tuple[int, Any, list[str]]:
    """(status, body, Warning headers) of a merge patch sent to the API server."""
    resp = None
    try:
        resp = await kube_stream(h.api, "PATCH", path, body=body, content_type="application/merge-patch+json")
        return resp.status, json.loads(await resp.read()), resp.headers.getall("Warning", [])
    except KubeApiError as exc:
        return exc.status, exc.message, []
    finally:
        if resp is not None:
            resp.release()


async def test_an_update_is_denied_only_for_the_errors_it_introduces(
        harness: Harness, registered: str, kube_namespaces: ScratchNamespaces) -> None:
    """A ReplicaSet admitted under one policy, then made to break a stricter one by a data
    change: a label-only update is admitted with a warning naming what it already broke,
    an update adding a violation is denied naming only that one, and an object being
    deleted may lose its finalizer even though the policy requires it."""
    h = harness
    await h.put_policy(RATCHET_POLICY)
    await h.opa_client.put_data(["fedplace_tests", "ratchet"], {"forbidden_labels": {}, "kept_finalizers": []})
    await h.add_policy_configmap(webhooks=[h.webhook, *h.extra])
    ns = await kube_namespaces.create("fedplace-ratchet")
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets"
    rs = replicaset(name="web", namespace=ns)
    rs["metadata"].update(labels={"team": "a"}, finalizers=[HOLD])
    await kube_json(h.api, "POST", path, body=rs)
    try:
        await h.opa_client.put_data(["fedplace_tests", "ratchet"],
                                    {"forbidden_labels": {"team": True, "env": True}, "kept_finalizers": [HOLD]})
        preexisting = await _counter(h, "preexisting_errors")

        status, body, warnings = await _patch(h, f"{path}/web", {"metadata": {"labels": {"tier": "web"}}})
        assert status == 200, body
        assert body["metadata"]["labels"] == {"team": "a", "tier": "web"}
        assert warnings == ['299 - "placement policy error not introduced by this update: label team is not allowed"']
        assert await _counter(h, "preexisting_errors") == preexisting + 1

        status, message, _ = await _patch(h, f"{path}/web", {"metadata": {"labels": {"env": "prod"}}})
        assert status == 403
        assert message == (f'admission webhook "{WEBHOOK_NAME}" denied the request: '
                           "denied by policy: label env is not allowed")

        status, message, _ = await _patch(h, f"{path}/web", {"metadata": {"finalizers": None}})
        assert status == 403 and message.endswith(f"denied by policy: finalizer {HOLD} must stay")

        await kube_json(h.api, "DELETE", f"{path}/web")  # held by the finalizer: deletionTimestamp set
        held = await kube_json(h.api, "GET", f"{path}/web")
        assert held["metadata"]["deletionTimestamp"]
        deleting = await _counter(h, "being_deleted")
        status, body, warnings = await _patch(h, f"{path}/web", {"metadata": {"finalizers": None}})
        assert status == 200, body
        assert f'299 - "placement policy error not enforced on an object being deleted: finalizer {HOLD} must stay"' \
            in warnings
        assert await _counter(h, "being_deleted") == deleting + 1
        with pytest.raises(KubeApiError) as gone:
            await kube_json(h.api, "GET", f"{path}/web")
        assert gone.value.status == 404
    finally:
        await h.opa_client.delete_data(["fedplace_tests", "ratchet"])
        try:  # what a failed assertion left held
            await _patch(h, f"{path}/web", {"metadata": {"finalizers": None}})
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
