"""Rejected pods, as the kubelet reports them, against the API server (``kube`` fixture).

No kubelet here: the pod is created through the API, the rejection is written
with :func:`fedplace.nodeadmit.rejection.report_rejection` (or by the console script's
``--report``), and the test reads back the pod's status and the Event.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.nodeadmit.rejection import rejected_pod_status, rejection_event, report_rejection
from fedplace.nodeadmit.result import AdmitResult
from tests.fixtures.kube import KubeServer
from tests.nodeadmit.conftest import Node, pod, run_manager

REJECTED = AdmitResult(False, "HostNetworkForbidden", "node-admit: the pod uses the host's network namespace")


async def create_pod(api: client.ApiClient, namespace: str, name: str = "web", **spec: Any) -> dict[str, Any]:
    return await kube_json(api, "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod(name, namespace, **spec))


async def events_about(api: client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    doc = await kube_json(api, "GET", f"/api/v1/namespaces/{namespace}/events")
    return [e for e in doc["items"] if (e.get("involvedObject") or {}).get("name") == name]


def test_the_status_the_kubelet_writes() -> None:
    assert rejected_pod_status(REJECTED) == {
        "phase": "Failed", "reason": "HostNetworkForbidden",
        "message": "Pod was rejected: node-admit: the pod uses the host's network namespace"}
    assert rejected_pod_status(AdmitResult(False, "OnlyAReason"))["message"] == "Pod was rejected: OnlyAReason"
    with pytest.raises(ValueError):
        rejected_pod_status(AdmitResult(True))


def test_the_event_names_the_pod_the_node_and_the_reason() -> None:
    the_pod = {**pod("web", "shop"), "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"}}
    event = rejection_event(the_pod, REJECTED, "node-1")
    assert event["metadata"]["namespace"] == "shop" and event["metadata"]["name"].startswith("web.")
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "shop",
                                       "uid": "u-1"}
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "HostNetworkForbidden", 1)
    assert event["message"] == rejected_pod_status(REJECTED)["message"]
    assert event["source"] == {"component": "kubelet", "host": "node-1"}
    static = rejection_event({"metadata": {"name": "etcd"}}, REJECTED, "node-1")  # a manifest without namespace
    assert static["metadata"]["namespace"] == static["involvedObject"]["namespace"] == "default"


async def test_report_rejection_writes_failed_status_and_a_warning_event(
        kube_api: client.ApiClient, kube_namespace: str) -> None:
    created = await create_pod(kube_api, kube_namespace, hostNetwork=True)
    stored, event = await report_rejection(kube_api, created, REJECTED, "node-1")
    live = await kube_json(kube_api, "GET", f"/api/v1/namespaces/{kube_namespace}/pods/web")
    for doc in (stored, live):
        assert doc["status"]["phase"] == "Failed"
        assert doc["status"]["reason"] == "HostNetworkForbidden"
        assert doc["status"]["message"] == "Pod was rejected: node-admit: the pod uses the host's network namespace"
    assert live["spec"] == created["spec"]  # the pod itself is not changed, nor deleted
    events = await events_about(kube_api, kube_namespace, "web")
    assert [e["metadata"]["name"] for e in events] == [event["metadata"]["name"]]
    e = events[0]
    assert (e["type"], e["reason"], e["source"]["component"], e["source"]["host"]) == (
        "Warning", "HostNetworkForbidden", "kubelet", "node-1")
    assert e["involvedObject"]["uid"] == created["metadata"]["uid"]


async def test_report_rejection_of_a_pod_that_is_gone(kube_api: client.ApiClient, kube_namespace: str) -> None:
    with pytest.raises(KubeApiError) as err:
        await report_rejection(kube_api, pod("ghost", kube_namespace), REJECTED, "node-1")
    assert err.value.status == 404
    assert await events_about(kube_api, kube_namespace, "ghost") == []


async def test_the_console_script_reports_a_rejected_api_pod(
        kube: KubeServer, kube_api: client.ApiClient, kube_namespace: str, node: Node) -> None:
    node.shell("no", 'cat >/dev/null\necho \'{"admit": false, "reason": "HostPIDForbidden", "message": "host PID"}\'')
    node.config([{"name": "no", "type": "shell"}])
    created = await create_pod(kube_api, kube_namespace, "agent", hostPID=True)
    proc = run_manager(node, "--report", "--kubeconfig", str(kube.kubeconfig), "--node-name", "node-7",
                       stdin=json.dumps(created))
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["podStatus"]["reason"] == "HostPIDForbidden"
    live = await kube_json(kube_api, "GET", f"/api/v1/namespaces/{kube_namespace}/pods/agent")
    assert (live["status"]["phase"], live["status"]["reason"]) == ("Failed", "HostPIDForbidden")
    assert live["status"]["message"] == "Pod was rejected: no: host PID"
    [event] = await events_about(kube_api, kube_namespace, "agent")
    assert (event["reason"], event["source"]["host"]) == ("HostPIDForbidden", "node-7")

    node.shell("no", 'cat >/dev/null\necho \'{"admit": true}\'')  # admitted: nothing is written
    created = await create_pod(kube_api, kube_namespace, "fine")
    proc = run_manager(node, "--report", "--kubeconfig", str(kube.kubeconfig), stdin=json.dumps(created))
    assert proc.returncode == 0, proc.stderr
    live = await kube_json(kube_api, "GET", f"/api/v1/namespaces/{kube_namespace}/pods/fine")
    assert (live.get("status") or {}).get("phase") != "Failed"
    assert await events_about(kube_api, kube_namespace, "fine") == []
