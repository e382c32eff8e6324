"""The webhook over real HTTP, against the policy engine and the API server.

No client is patched and no OPA result is faked: policies are PUT to the engine,
policy ConfigMaps created through the API server, failures injected by the
fault-injecting proxy in front of OPA (``proxied_harness``, tests/fixtures/proxy.py),
the same on the devstack and on real servers.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import aiohttp
import jsonpatch
import pytest
from kubernetes_asyncio import client
from prometheus_client import REGISTRY

from devstack.launch import free_port
from fedplace.common.kube_client import kube_json
from tests.admission.conftest import Harness, eventually, replicaset, review
from tests.fixtures.loaded import write_loaded_record
from tests.metrics import metric

PREFS = "federation.kubernetes.io/replica-set-preferences"

ALLOW_WITH_ANNOTATION = """
annotations := {"fedplace.io/placed": "yes"} if { input.kind == "ReplicaSet" }
"""


class Delta:
    """Metric deltas across a block: ``d = Delta(); …; d("name", outcome="x")``."""

    def __init__(self) -> None:
        self.before = {(s.name, tuple(sorted(s.labels.items()))): s.value
                       for m in REGISTRY.collect() if m.name.startswith("fedplace_admission")
                       for s in m.samples}

    def __call__(self, name: str, **labels: str) -> float:
        return metric(name, **labels) - self.before.get((name, tuple(sorted(labels.items()))), 0.0)


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def patched_object(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.JsonPatch(ops).apply(obj, in_place=False)


async def inject(h: Harness, spec: dict[str, Any]) -> None:
    """Set a fault on the proxy in front of OPA (``proxied_harness``)."""
    async with h.session.post(h.opa_url + "/_devstack/faults", json=spec) as resp:
        assert resp.status == 200, await resp.text()


async def clear_faults(h: Harness) -> None:
    async with h.session.delete(h.opa_url + "/_devstack/faults") as resp:
        assert resp.status == 200


async def events_for(h: Harness, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    doc = await kube_json(h.api, "GET", f"/api/v1/namespaces/{namespace}/events")
    return [e for e in doc.get("items") or []
            if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name]


# -- fail open / fail closed from the ConfigMap informer ------------------------------------


async def test_fail_open_without_policies_then_closed_when_a_policy_appears(harness: Harness) -> None:
    """No policy ConfigMaps → allowed without asking OPA (which is not even listening);
    one ConfigMap appears → the same webhook fails closed; it goes → open again."""
    h = harness
    hook = await h.start_webhook(opa={"url": closed_url()}, deadline=0.5)
    d = Delta()
    resp = await h.admit(replicaset(), webhook=hook)
    assert resp == {"uid": resp["uid"], "allowed": True}
    assert d("fedplace_admission_fail_open_total") == 1
    assert d("fedplace_admission_requests_total", outcome="fail_open") == 1
    assert d("fedplace_admission_opa_attempts_total") == 0

    await h.add_policy_configmap(webhooks=[hook])
    d = Delta()
    started = time.monotonic()
    resp = await h.admit(replicaset(), webhook=hook)
    elapsed = time.monotonic() - started
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert "failing closed" in resp["status"]["message"]
    assert "Connect" in resp["status"]["message"]  # names the cause (connection refused)
    assert "patch" not in resp
    assert d("fedplace_admission_fail_closed_total", cause="unavailable") == 1
    assert d("fedplace_admission_opa_retries_total") >= 1  # connection errors are retried…
    assert elapsed < hook.config.deadline + 0.5  # …inside the deadline

    await kube_json(h.api, "DELETE", f"/api/v1/namespaces/{h.policy_namespace}/configmaps/placement")

    async def open_again() -> bool:
        return (await h.admit(replicaset(), webhook=hook))["allowed"]
    await eventually(open_again, 5, "fail open after the policy ConfigMap is deleted")


async def test_kube_root_ca_configmap_is_not_a_policy(harness: Harness) -> None:
    """Kubernetes publishes kube-root-ca.crt into every namespace: it must not
    switch the webhook to fail closed."""
    h = harness
    await kube_json(h.api, "POST", f"/api/v1/namespaces/{h.policy_namespace}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"}})
    hook = await h.start_webhook(opa={"url": closed_url()}, deadline=0.5)
    assert hook.policies is not None and hook.policies.synced and hook.policies.count() == 0
    resp = await h.admit(replicaset(), webhook=hook)
    assert resp["allowed"] is True and "patch" not in resp
    await h.add_policy_configmap(webhooks=[hook])
    assert hook.policies.count() == 1
    assert (await h.admit(replicaset(), webhook=hook))["allowed"] is False


async def test_not_synced_informer_counts_as_policies_exist(harness: Harness) -> None:
    """API server unreachable: the informer never syncs, /readyz is 503 and the
    webhook fails closed rather than open."""
    h = harness
    cfg = client.Configuration(host=closed_url())
    unreachable = client.ApiClient(configuration=cfg)
    try:
        hook = await h.start_webhook(api=unreachable, opa={"url": closed_url()}, deadline=0.5)
        async with h.session.get(hook.url + "/readyz") as r:
            assert r.status == 503 and "not synced" in await r.text()
        async with h.session.get(hook.url + "/healthz") as r:
            assert r.status == 200
        resp = await h.admit(replicaset(), webhook=hook)
        assert resp["allowed"] is False and "failing closed" in resp["status"]["message"]
    finally:
        await unreachable.close()


async def test_delete_and_connect_are_not_checked(harness: Harness) -> None:
    h = harness
    hook = await h.start_webhook(opa={"url": closed_url()})
    await h.add_policy_configmap(webhooks=[hook])
    d = Delta()
    for op in ("DELETE", "CONNECT"):
        resp = await h.admit(replicaset(), op, webhook=hook)
        assert resp == {"uid": resp["uid"], "allowed": True}
    assert d("fedplace_admission_opa_attempts_total") == 0


# -- decisions from real policies --------------------------------------------------------


async def test_annotations_merge_precedence_escaping_and_canonical_json(harness: Harness) -> None:
    h = harness
    await h.put_policy("""
annotations := {
    "federation.kubernetes.io/replica-set-preferences": {
        "rebalance": true, "clusters": {"gce-europe-west2": {"weight": 1}, "gce-europe-west1": {"weight": 2}}},
    "team": "platform",
    "odd~key/with-slash": "v",
    "replicas-seen": input.spec.replicas,
} if { input.kind == "ReplicaSet" }
""")
    await h.add_policy_configmap()
    obj = replicaset(annotations={"team": "developer", "keep": "me"})
    d = Delta()
    resp = await h.admit(obj)
    ann = patched_object(obj, resp)["metadata"]["annotations"]
    assert ann == {
        PREFS: '{"clusters":{"gce-europe-west1":{"weight":2},"gce-europe-west2":{"weight":1}},"rebalance":true}',
        "team": "platform",  # the policy wins
        "keep": "me",  # others are kept
        "odd~key/with-slash": "v",
        "replicas-seen": "2",
    }
    ops = json.loads(base64.b64decode(resp["patch"]))
    assert {"op": "add", "path": "/metadata/annotations/odd~0key~1with-slash", "value": "v"} in ops
    assert d("fedplace_admission_requests_total", outcome="patched") == 1

    # Already as the policy wants (canonical JSON): no patch at all.
    again = await h.admit(dict(obj, metadata={**obj["metadata"], "annotations": ann}))
    assert again == {"uid": again["uid"], "allowed": True}

    # No annotations map yet: it is created.
    bare = replicaset(name="bare")
    assert patched_object(bare, await h.admit(bare))["metadata"]["annotations"]["team"] == "platform"


SEES_SECRET_CONTENT = """
errors contains "OPA saw the Secret's data" if input.data
errors contains "OPA saw the Secret's stringData" if input.stringData
errors contains "OPA saw kubectl's last-applied copy" if {
    input.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
}
annotations := {"seen-type": input.type, "seen-team": input.metadata.annotations.team} if input.kind == "Secret"
"""


async def test_a_secrets_content_never_reaches_opa(harness: Harness) -> None:
    """OPA decides on a Secret's metadata and type only (common/secrets.py): the policy above
    would deny had it seen any of the content; the patch still applies to the whole object."""
    h = harness
    await h.put_policy(SEES_SECRET_CONTENT)
    await h.add_policy_configmap()
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "card-keys", "namespace": "default", "annotations": {
                  "team": "pay", "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"k":"czNjcjN0"}}'}},
              "data": {"k": base64.b64encode(b"s3cr3t").decode()}, "stringData": {"pin": "0000"}}
    resp = await h.admit(secret)
    patched = patched_object(secret, resp)
    assert patched["metadata"]["annotations"]["seen-type"] == "Opaque"
    assert patched["metadata"]["annotations"]["seen-team"] == "pay"
    assert patched["data"] == secret["data"] and patched["stringData"] == {"pin": "0000"}  # untouched
    # Another kind's fields of those names are the object's own and do go to OPA.
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
          "data": {"k": "v"}}
    denied = await h.admit(cm)
    assert denied["allowed"] is False and "OPA saw the Secret's data" in denied["status"]["message"]


async def test_errors_deny_listing_every_error_with_aggregated_events(harness: Harness, kube_namespace: str) -> None:
    h = harness
    await h.put_policy("""
errors contains "requested replica-set-preferences includes invalid clusters" if {
    input.metadata.annotations["fedplace.io/bad"] == "true"
}
errors contains "pci-compliance-level 3 is not available" if {
    input.metadata.annotations["fedplace.io/bad"] == "true"
}
annotations := {"fedplace.io/placed": "yes"}
""")
    await h.add_policy_configmap()
    obj = replicaset(name="", generateName="denied-", namespace=kube_namespace, annotations={"fedplace.io/bad": "true"})

    # A dry run is decided the same way but writes no Event.
    dry = await h.admit(obj, dry_run=True)
    assert dry["allowed"] is False
    assert h.webhook.recorder is not None
    await h.webhook.recorder.flush()
    assert await events_for(h, kube_namespace, "denied-", "PlacementDenied") == []

    d = Delta()
    for _ in range(2):
        resp = await h.admit(obj)
        assert resp["allowed"] is False
        assert resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden"
        msg = resp["status"]["message"]
        assert "invalid clusters" in msg and "pci-compliance-level 3" in msg
    assert d("fedplace_admission_requests_total", outcome="denied") == 2

    async def aggregated() -> list[dict[str, Any]]:
        evs = await events_for(h, kube_namespace, "denied-", "PlacementDenied")
        return evs if evs and evs[0].get("count") == 2 else []
    evs = await eventually(aggregated, 5, "one PlacementDenied Event with count 2")
    assert len(evs) == 1
    ev = evs[0]
    assert ev["type"] == "Warning"
    assert ev["involvedObject"]["kind"] == "ReplicaSet" and ev["involvedObject"]["namespace"] == kube_namespace
    assert "invalid clusters" in ev["message"]


async def test_undefined_decision_fails_closed(harness: Harness, kube_namespace: str) -> None:
    h = harness  # a ConfigMap exists, but no module defines the decision document
    await h.add_policy_configmap()
    d = Delta()
    obj = replicaset(name="undecided", namespace=kube_namespace)
    resp = await h.admit(obj)
    assert resp["allowed"] is False
    assert "no policy decision" in resp["status"]["message"]
    assert d("fedplace_admission_fail_closed_total", cause="undefined") == 1

    async def event() -> list[dict[str, Any]]:
        return await events_for(h, kube_namespace, "undecided", "PolicyEngineUnavailable")
    evs = await eventually(event, 5, "a PolicyEngineUnavailable Event")
    assert "no policy decision" in evs[0]["message"]


async def test_policy_patch_valid_and_invalid(harness: Harness) -> None:
    h = harness
    await h.put_policy("""
annotations := {"fedplace.io/placed": "yes"}
patch := [
    {"op": "test", "path": "/spec/replicas", "value": 2},
    {"op": "replace", "path": "/spec/replicas", "value": 3},
    {"op": "add", "path": "/metadata/labels", "value": {"placed": "eu"}},
] if { input.metadata.name == "good" }
patch := [{"op": "add", "path": "/status/replicas", "value": 1}] if { input.metadata.name == "bad" }
patch := [{"op": "test", "path": "/spec/replicas", "value": 99}] if { input.metadata.name == "failing-test" }
""")
    await h.add_policy_configmap()
    good = replicaset(name="good")
    out = patched_object(good, await h.admit(good))
    assert out["spec"]["replicas"] == 3
    assert out["metadata"]["labels"] == {"placed": "eu"}
    assert out["metadata"]["annotations"] == {"fedplace.io/placed": "yes"}

    d = Delta()
    for name, fragment in (("bad", "outside /metadata and /spec"), ("failing-test", "does not apply")):
        resp = await h.admit(replicaset(name=name))
        assert resp["allowed"] is False, name
        assert "invalid policy patch" in resp["status"]["message"] and fragment in resp["status"]["message"]
    assert d("fedplace_admission_fail_closed_total", cause="invalid_decision") == 2


# -- OPA failures, retries, Retry-After (fault injection) --------------------------------------

FAULTS = [
    # (id, fault spec, expected cause, message fragment, retried?, per-attempt OPA timeout)
    ("500", {"fail": {"path": "/v1/data", "method": "POST", "status": 500, "count": -1}},
     "unavailable", "500", True, 0.9),
    # Slow 500s: the last attempt is cut short by the deadline; the denial must
    # still name OPA's own failure, not the cut.
    ("500-slow", {"fail": {"path": "/v1/data", "method": "POST", "status": 500, "count": -1, "delay": 0.6}},
     "unavailable", "500", True, 0.9),
    ("bad-json", {"fail": {"path": "/v1/data", "method": "POST", "status": 200, "count": -1, "body": "{not json"}},
     "malformed", "not JSON", False, 0.9),
    ("401", {"fail": {"path": "/v1/data", "method": "POST", "status": 401, "count": -1}},
     "request", "401", False, 0.9),
    ("timeout", {"fail": {"path": "/v1/data", "method": "POST", "status": 200, "count": -1, "delay": 1.5}},
     "unavailable", "timed out", True, 0.4),
    # Every connection dropped before an answer (OPA crashing on each query).
    ("cut", {"cut": {"path": "/v1/data", "method": "POST", "count": -1}},
     "unavailable", "connection closed", True, 0.9),
]


@pytest.mark.parametrize("spec,cause,fragment,retried,timeout", [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
async def test_engine_failures_fail_closed(proxied_harness: Harness, spec: dict[str, Any], cause: str, fragment: str,
                                           retried: bool, timeout: float) -> None:
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    hook = await h.start_webhook(deadline=1.0, opa={"timeout": timeout})
    await h.add_policy_configmap(webhooks=[hook])
    await inject(h, spec)
    d = Delta()
    started = time.monotonic()
    resp = await h.admit(replicaset(name=f"f-{cause}"), webhook=hook)
    elapsed = time.monotonic() - started
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert fragment in resp["status"]["message"]
    assert d("fedplace_admission_fail_closed_total", cause=cause) == 1
    assert (d("fedplace_admission_opa_retries_total") >= 1) is retried
    assert elapsed < 1.0 + 1.0, "must answer within the deadline (plus scheduling slack)"
    await clear_faults(h)
    assert (await h.admit(replicaset(), webhook=hook))["allowed"] is True  # recovers at once


# A rule whose builtin fails on this input: OPA's server alone would make it undefined (the
# object admitted without it); the webhook asks with strict builtin errors.
FAILING_BUILTIN = """
errors contains "too big" if { to_number(input.metadata.annotations["size"]) > 3 }
"""


async def test_a_failing_builtin_fails_closed_naming_the_module(harness: Harness) -> None:
    """A rule whose builtin fails (``to_number("big")``) denies the object at once (no retry),
    naming the module and row, and puts a Warning ``PolicyEvaluationError`` on the policy
    ConfigMap holding that module; the same rule decides as written where it does not fail."""
    h = harness
    await h.add_policy_configmap()
    module = f"{h.policy_namespace}/placement/rules.rego"
    await h.opa_client.put_policy(module, "package io.k8s.federation.admission\n" + FAILING_BUILTIN)
    try:
        small, big = replicaset(name="small"), replicaset(name="odd")
        small["metadata"]["annotations"] = {"size": "2"}
        big["metadata"]["annotations"] = {"size": "big"}
        assert (await h.admit(small))["allowed"] is True
        small["metadata"]["annotations"] = {"size": "5"}
        assert (await h.admit(small))["status"]["message"] == "denied by policy: too big"

        d = Delta()
        resp = await h.admit(big)
        assert resp["allowed"] is False and resp["status"]["code"] == 403
        message = resp["status"]["message"]
        assert "failing closed" in message and f"{module}:3: eval_builtin_error: to_number" in message, message
        assert d("fedplace_admission_fail_closed_total", cause="evaluation") == 1
        assert d("fedplace_admission_opa_attempts_total") == 1 and d("fedplace_admission_opa_retries_total") == 0

        async def reported() -> list[dict[str, Any]]:
            return await events_for(h, h.policy_namespace, "placement", "PolicyEvaluationError")
        await eventually(reported, 5, "a PolicyEvaluationError Event on the policy ConfigMap")
        [event] = await reported()
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "ConfigMap"
        assert "odd" in event["message"] and f"{module}:3" in event["message"], event["message"]
    finally:
        await h.opa_client.delete_policy(module)


async def test_retried_until_success(proxied_harness: Harness) -> None:
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    await h.add_policy_configmap()
    await inject(h, {"fail": {"path": "/v1/data", "method": "POST", "status": 503, "count": 2}})
    d = Delta()
    obj = replicaset()
    resp = await h.admit(obj)
    assert patched_object(obj, resp)["metadata"]["annotations"] == {"fedplace.io/placed": "yes"}
    assert d("fedplace_admission_opa_attempts_total") == 3
    assert d("fedplace_admission_opa_retries_total") == 2
    assert d("fedplace_admission_requests_total", outcome="patched") == 1


@pytest.mark.parametrize("speedups", [[], ["lean-http"], ["first-attempt"]], ids=["none", "lean-http", "first-attempt"])
async def test_the_library_way_decides_alike(proxied_harness: Harness, speedups: list[str]) -> None:
    """Each speed-up switched off (``speedups``) — aiohttp's client, every attempt inside
    tenacity's loop — answers and counts as with all on."""
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    hook = await h.start_webhook(speedups=speedups)
    await h.add_policy_configmap(webhooks=[hook])
    await inject(h, {"fail": {"path": "/v1/data", "method": "POST", "status": 503, "count": 2}})
    d = Delta()
    obj = replicaset(name=f"lib-{'-'.join(speedups) or 'none'}")
    resp = await h.admit(obj, webhook=hook)
    assert patched_object(obj, resp)["metadata"]["annotations"] == {"fedplace.io/placed": "yes"}
    assert d("fedplace_admission_opa_attempts_total") == 3
    assert d("fedplace_admission_opa_retries_total") == 2
    assert d("fedplace_admission_requests_total", outcome="patched") == 1
    assert (await h.admit(replicaset(name="lib-again"), webhook=hook))["allowed"] is True


async def test_a_cut_connection_is_retried(proxied_harness: Harness) -> None:
    """OPA's connection dropped before it answered (twice): the query is sent again, on a
    new connection, and the third attempt decides."""
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    await h.add_policy_configmap()
    await inject(h, {"cut": {"path": "/v1/data", "method": "POST", "count": 2}})
    d = Delta()
    obj = replicaset()
    resp = await h.admit(obj)
    assert patched_object(obj, resp)["metadata"]["annotations"] == {"fedplace.io/placed": "yes"}
    assert d("fedplace_admission_opa_attempts_total") == 3
    assert d("fedplace_admission_opa_retries_total") == 2


async def test_retry_after_is_honoured(proxied_harness: Harness) -> None:
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    await h.add_policy_configmap()
    await inject(h, {"fail": {"path": "/v1/data", "method": "POST", "status": 429, "count": 1, "retry_after": 1}})
    started = time.monotonic()
    resp = await h.admit(replicaset())
    elapsed = time.monotonic() - started
    assert resp["allowed"] is True and "patch" in resp
    assert 0.95 <= elapsed < 2.0  # waited what the server asked (not the 20 ms backoff), within the deadline


async def test_retry_after_beyond_the_deadline_fails_closed_at_once(proxied_harness: Harness) -> None:
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    await h.add_policy_configmap()
    await inject(h, {"fail": {"path": "/v1/data", "method": "POST", "status": 503, "count": -1,
                              "retry_after": 30}})
    started = time.monotonic()
    resp = await h.admit(replicaset())
    assert resp["allowed"] is False and "503" in resp["status"]["message"]
    assert "Retry-After 30s is beyond" in resp["status"]["message"]
    assert time.monotonic() - started < 1.0  # no pointless sleep until the deadline


# -- bad input and ops endpoints ---------------------------------------------------------------


BAD_INPUT = [
    ("not-json", b"{this is not json", 400, "not valid JSON"),
    ("empty", b"", 400, "empty body"),
    ("wrong-api-version", json.dumps({"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview",
                                      "request": {"uid": "x"}}).encode(), 400, "apiVersion"),
    ("wrong-kind", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}).encode(), 400, "kind"),
    ("no-request", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
     400, "request is missing"),
    ("no-uid", json.dumps({**review(replicaset()), "request": {**review(replicaset())["request"], "uid": ""}}).encode(),
     400, "request.uid"),
    ("too-large", b"{" + b" " * (3 * 1024 * 1024 + 10) + b"}", 413, "exceeds the limit"),
]


@pytest.mark.parametrize("body,status,fragment", [b[1:] for b in BAD_INPUT], ids=[b[0] for b in BAD_INPUT])
async def test_bad_input_is_a_clear_4xx(harness: Harness, body: bytes, status: int, fragment: str) -> None:
    d = Delta()
    got, doc = await harness.post(None, raw=body)
    assert got == status
    assert isinstance(doc, dict) and fragment in doc["error"] and doc["code"] == status
    assert d("fedplace_admission_requests_total", outcome="error") == 1


async def test_oversized_chunked_body_is_413(harness: Harness) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(5):
            yield b" " * (1024 * 1024)
    async with harness.session.post(harness.url + "/mutate", data=chunks()) as resp:
        assert resp.status == 413
        assert "exceeds the limit" in (await resp.json())["error"]


async def test_other_methods_and_paths_get_json_errors(harness: Harness) -> None:
    async with harness.session.get(harness.url + "/mutate") as resp:
        assert resp.status == 405 and "error" in await resp.json()
    async with harness.session.post(harness.url + "/nope", data=b"{}") as resp:
        assert resp.status == 404 and "error" in await resp.json()


async def test_ops_endpoints(harness: Harness) -> None:
    h = harness
    await h.admit(replicaset())
    for path in ("/healthz", "/readyz"):
        async with h.session.get(h.url + path) as resp:
            assert resp.status == 200
    async with h.session.get(h.url + "/metrics") as resp:
        text = await resp.text()
    for name in ("fedplace_admission_requests_total", "fedplace_admission_opa_request_duration_seconds",
                 "fedplace_admission_opa_retries_total", "fedplace_admission_fail_open_total",
                 "fedplace_admission_fail_closed_total"):
        assert name in text


# -- graceful shutdown ---------------------------------------------------------------------


async def test_stop_finishes_in_flight_requests(proxied_harness: Harness) -> None:
    h = proxied_harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    hook = await h.start_webhook()
    await h.add_policy_configmap(webhooks=[hook])
    await inject(h, {"latency": 0.5})
    pending = asyncio.create_task(h.admit(replicaset(), webhook=hook))
    await asyncio.sleep(0.1)  # let the request reach the handler (not an assertion)
    url = hook.url
    await hook.stop()
    resp = await pending
    assert resp["allowed"] is True and "patch" in resp
    with pytest.raises(aiohttp.ClientConnectionError):
        async with h.session.get(url + "/healthz") as r:
            await r.read()


# -- OPA bearer token from a file, re-read when it changes -------------------------------------


async def test_token_file_rotation(harness: Harness, opa_auth: Any, tmp_path: Any) -> None:
    from fedplace.common.opa_client import OpaClient, OpaSettings

    h = harness
    async with OpaClient(OpaSettings(url=opa_auth.url, token=opa_auth.token)) as admin:
        await admin.put_policy("fedplace-tests/token.rego",
                               "package io.k8s.federation.admission\n\n" + ALLOW_WITH_ANNOTATION)
        await write_loaded_record(admin, h.policy_namespace, ["placement"])
    token_file = tmp_path / "opa.token"
    token_file.write_text("stale-token\n")
    hook = await h.start_webhook(opa={"url": opa_auth.url, "token_file": str(token_file)})
    await h.add_policy_configmap(webhooks=[hook])
    d = Delta()
    resp = await h.admit(replicaset(), webhook=hook)
    assert resp["allowed"] is False and "401" in resp["status"]["message"]
    assert d("fedplace_admission_fail_closed_total", cause="request") == 1
    assert d("fedplace_admission_opa_retries_total") == 0  # a refused token is not retried

    token_file.write_text(opa_auth.token + "\n")  # rotated: picked up by the next request
    obj = replicaset()
    assert patched_object(obj, await h.admit(obj, webhook=hook))["metadata"]["annotations"] == {
        "fedplace.io/placed": "yes"}
