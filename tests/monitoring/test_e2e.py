"""End to end with the real Prometheus (Debian's ``prometheus``, 2.42): it scrapes a
running stack, evaluates the shipped rules, and answers the dashboard's queries.

The stack: the devstack OPA and API server (or the servers of
``FEDPLACE_TEST_*``), ``opa-kube-sync`` and ``fedplace-admission`` as their own
processes (``python -m fedplace.sync`` / ``fedplace.admission``: each with its own
metrics registry, as in a pod), the webhook registered with the API server over
TLS. Prometheus scrapes them with a static configuration built from what
deploy/components/monitoring/podmonitors.yaml declares (each endpoint's port, path,
scheme and TLS verification, mapped to the local processes; the target labels the
Prometheus operator adds), scraping and evaluating every second, with the shipped
rule file unchanged (fedplace.rules.yml: FedplacePolicyLoadFailing waits 30 s).

* a broken policy ConfigMap makes FedplacePolicyLoadFailing fire, and no other
  alert is pending or firing meanwhile; fixing the ConfigMap clears it;
* every rule evaluates without error against the real series;
* every query of the Grafana dashboard (dashboard.json, ``$__rate_interval`` as
  5m) returns data from the running stack.

Skipped, saying so, where ``prometheus`` is not installed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trustme
import yaml

from devstack.launch import ServerProcess
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import MWC_PATH, eventually, policy_loaded, rules
from tests.monitoring.conftest import DASHBOARD, PODMONITORS, RULES, Prometheus

pytestmark = pytest.mark.timeout(120)

GOOD = {
    # The webhook's decision: one annotation on every ReplicaSet.
    "admission.rego": 'package io.k8s.federation.admission\n\nannotations := {"fedplace.io/monitored": "yes"}\n',
    # The remediator's query: nothing to change.
    "remediation.rego": "package io.k8s.federation.remediation\n\nnotifications := []\n",
}
BROKEN = {"rules.rego": "package fedplace_monitoring.extra\n\nallow if {\n"}  # does not parse
FIXED = {"rules.rego": "package fedplace_monitoring.extra\n\nallow := true\n"}
ALERT = "FedplacePolicyLoadFailing"


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


async def status_of(api: Any, ns: str, name: str) -> str | None:
    cm = await kube_json(api, "GET", cm_path(ns, name))
    raw = (cm["metadata"].get("annotations") or {}).get("fedplace.io/policy-status")
    return json.loads(raw)["status"] if raw else None


def scrape_configs(targets: dict[tuple[str, str], str], ca_file: Path, server_name: str) -> list[dict[str, Any]]:
    """One scrape job per PodMonitor endpoint, as the operator generates them: the endpoint's
    scheme, path and TLS verification (its CA Secret → ``ca_file``, its serverName → the
    test certificate's), targets = the local process serving that pod port (``targets``:
    (PodMonitor, port name) → host:port), labelled job/namespace/pod/container/endpoint."""
    out = []
    for monitor in yaml.safe_load_all(PODMONITORS.read_text()):
        meta = monitor["metadata"]
        for i, ep in enumerate(monitor["spec"]["podMetricsEndpoints"]):
            job: dict[str, Any] = {
                "job_name": f"podMonitor/{meta['namespace']}/{meta['name']}/{i}",
                "scheme": ep.get("scheme", "http"),
                "metrics_path": ep.get("path", "/metrics"),
                "static_configs": [{"targets": [targets[(meta["name"], ep["port"])]],
                                    "labels": {"job": f"{meta['namespace']}/{meta['name']}",
                                               "namespace": meta["namespace"], "pod": f"{meta['name']}-0",
                                               "endpoint": ep["port"]}}],
            }
            tls = ep.get("tlsConfig")
            if tls is not None:
                assert tls["ca"]["secret"]["key"] == "ca.crt"
                job["tls_config"] = {"ca_file": str(ca_file), "server_name": server_name}
            out.append(job)
    return out


def dashboard_queries() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"].replace("$__rate_interval", "5m"))
            for p in doc["panels"] for t in p.get("targets", [])]


@pytest.fixture
async def stack(opa: Any, kube: Any, kube_api: Any, kube_namespaces: ScratchNamespaces,
                tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """opa-kube-sync and fedplace-admission running, the webhook registered, a policy loaded."""
    policy_ns = await kube_namespaces.create("mon-policy")
    app_ns = await kube_namespaces.create("mon-app")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    token: list[str] = []
    if opa.token:
        (tmp_path / "opa.token").write_text(opa.token)
        token = ["--opa-token-file", str(tmp_path / "opa.token")]
    sync = ServerProcess("opa-kube-sync", [
        "-m", "fedplace.sync", "--opa-url", opa.url + "/v1", *token, "--kubeconfig", str(kube.kubeconfig),
        "--listen", "127.0.0.1:{port}", "--opa-check-interval", "0.2", "--policy-namespace", policy_ns,
        "--replicate", "apps/v1/replicasets", "--replicate-ignore-namespaces", policy_ns,
        "--remediate", "dry-run", "--remediate-resource", "apps/v1/replicasets",
        "--leader-election-namespace", policy_ns, "--leader-election-identity", "monitoring-e2e"],
        ready_path="/readyz", log_dir=tmp_path)
    hook = ServerProcess("fedplace-admission", [
        "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}", "--tls-cert-file", str(tmp_path / "tls.crt"),
        "--tls-private-key-file", str(tmp_path / "tls.key"), "--kubeconfig", str(kube.kubeconfig),
        "--policy-namespace", policy_ns, "--opa-url", opa.url, *token, "--opa-timeout", "5", "--deadline", "10"],
        ready_path="/readyz", log_dir=tmp_path, scheme="https", cafile=str(tmp_path / "ca.crt"))
    mwc = f"fedplace-monitoring-{app_ns}"
    try:
        await asyncio.gather(asyncio.to_thread(sync.start, 30), asyncio.to_thread(hook.start, 30))
        await kube_json(kube_api, "POST", MWC_PATH, body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": mwc},
            "webhooks": [{
                "name": "placement.fedplace.io",
                "clientConfig": {"url": hook.url + "/mutate",
                                 "caBundle": base64.b64encode(ca.cert_pem.bytes()).decode()},
                "rules": rules(("apps", ["replicasets"])), "failurePolicy": "Fail", "sideEffects": "None",
                "timeoutSeconds": 10, "admissionReviewVersions": ["v1"],
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                            "values": [app_ns]}]}}]})
        await kube_json(kube_api, "POST", cm_path(policy_ns), body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "placement"}, "data": GOOD})
        await eventually(lambda: policy_loaded(kube_api, policy_ns, "placement"), what="the policy to load")
        yield {"policy_ns": policy_ns, "app_ns": app_ns, "sync": sync, "hook": hook, "opa": opa,
               "ca_file": tmp_path / "ca.crt"}
    finally:
        try:
            await kube_json(kube_api, "DELETE", f"{MWC_PATH}/{mwc}")
        except KubeApiError:
            pass
        await asyncio.gather(asyncio.to_thread(hook.stop), asyncio.to_thread(sync.stop))


async def test_prometheus_alerts_on_a_broken_policy_and_the_dashboard_has_data(
        prometheus: Prometheus, stack: dict[str, Any], kube_api: Any):
    policy_ns, app_ns = stack["policy_ns"], stack["app_ns"]
    targets = {("fedplace-admission", "https"): f"127.0.0.1:{stack['hook'].port}",
               ("opa", "diagnostics"): stack["opa"].url.split("://", 1)[1].rstrip("/"),
               ("opa", "sync-http"): f"127.0.0.1:{stack['sync'].port}"}
    await asyncio.to_thread(prometheus.start, {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],  # the shipped file, unchanged
        "scrape_configs": scrape_configs(targets, stack["ca_file"], "localhost"),
    })

    async def fedplace_targets_up() -> bool:
        up = {s["metric"]["endpoint"]: s["value"][1] for s in await prometheus.query("up")}
        return up.get("https") == "1" and up.get("sync-http") == "1"  # OPA's: only a real OPA has /metrics

    await prometheus.wait_for(fedplace_targets_up, 15, "the webhook's and the sidecar's metrics to be scraped")

    # Traffic while Prometheus watches: ReplicaSets admitted through the webhook (decisions, OPA
    # attempts), replicated into OPA (watch events), each a targeted remediation pass.
    for i in range(3):
        created = await kube_json(kube_api, "POST", f"/apis/apps/v1/namespaces/{app_ns}/replicasets", body={
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": f"web-{i}"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
        assert created["metadata"]["annotations"]["fedplace.io/monitored"] == "yes"

    # A module that does not parse: the sync says so on the ConfigMap, and the alert fires.
    await kube_json(kube_api, "POST", cm_path(policy_ns), body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "broken"}, "data": BROKEN})
    await eventually(lambda: _is(status_of(kube_api, policy_ns, "broken"), "error"), what="status error")

    async def firing() -> list[dict[str, Any]]:
        return [a for a in await prometheus.alerts("firing") if a["labels"]["alertname"] == ALERT]

    (alert,) = await prometheus.wait_for(firing, 50, f"{ALERT} to fire")
    assert alert["labels"] == {"alertname": ALERT, "severity": "warning", "namespace": "opa",
                               "policy_namespace": policy_ns, "configmap": "broken"}
    assert alert["annotations"]["summary"] == f"Policy ConfigMap {policy_ns}/broken does not load"
    # The healthy rest of the stack raised nothing, not even pending.
    others = [(a["labels"]["alertname"], a["state"]) for a in await prometheus.alerts()
              if a["labels"]["alertname"] != ALERT]
    assert others == []

    # Fixed: the alert clears.
    cm = await kube_json(kube_api, "GET", cm_path(policy_ns, "broken"))
    cm["data"] = FIXED
    await kube_json(kube_api, "PUT", cm_path(policy_ns, "broken"), body=cm)
    await eventually(lambda: _is(status_of(kube_api, policy_ns, "broken"), "ok"), what="status ok")

    async def cleared() -> bool:
        return not [a for a in await prometheus.alerts() if a["labels"]["alertname"] == ALERT]

    await prometheus.wait_for(cleared, 15, f"{ALERT} to clear")

    # Every rule evaluated without error against the real series.
    groups = (await prometheus.api("rules"))["groups"]
    evaluated = [(r["name"], r["health"], r.get("lastError", "")) for g in groups for r in g["rules"]]
    assert len(evaluated) == sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])
    assert [e for e in evaluated if e[1] != "ok"] == []

    # Every dashboard query has data: a sample with a number (not only NaN) from this stack.
    empty = []
    for title, expr in dashboard_queries():
        samples = await prometheus.query(expr)
        if not any(math.isfinite(float(s["value"][1])) for s in samples):
            empty.append(f"{title}: {expr} -> {samples}")
    assert empty == [], "\n".join(empty)


async def _is(value: Any, expected: Any) -> bool:
    return (await value) == expected
