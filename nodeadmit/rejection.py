"""What the kubelet does with a rejected pod: status ``Failed`` with the reason, and a Warning Event.

The kubelet rejects a pod its admit handlers refuse by setting its status to
``{"phase": "Failed", "reason": <reason>, "message": "Pod was rejected: <message>"}``
and recording a Warning Event with the same reason about the pod. The pod is
not deleted or rescheduled: an operator (e.g. a descheduler) can act on the
reason. These functions build both from the manager's result, and
:func:`report_rejection` writes them to the API server (merge patch of the
``status`` subresource, guarded by the pod's uid, and a core/v1 Event).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fedplace.nodeadmit.result import AdmitResult

if TYPE_CHECKING:
    from kubernetes_asyncio import client

# The Kubernetes client is imported where it is used: the manager's console script
# only needs it with --report, and importing it costs a quarter of a second per pod.

__all__ = ["COMPONENT", "MESSAGE_PREFIX", "rejected_pod_status", "rejection_event", "report_rejection"]

COMPONENT = "kubelet"
MESSAGE_PREFIX = "Pod was rejected: "


def rejected_pod_status(result: AdmitResult) -> dict[str, Any]:
    """The pod status the kubelet writes for a rejection."""
    if result.admit:
        raise ValueError("the pod was admitted: there is no rejection to report")
    return {"phase": "Failed", "reason": result.reason, "message": MESSAGE_PREFIX + (result.message or result.reason)}


def rejection_event(pod: dict[str, Any], result: AdmitResult, node_name: str) -> dict[str, Any]:
    """The Warning Event about ``pod`` (core/v1, in the pod's namespace), from the node ``node_name``."""
    from fedplace.common.events import event_body, involved_object

    status = rejected_pod_status(result)
    obj = involved_object({**pod, "apiVersion": pod.get("apiVersion") or "v1", "kind": pod.get("kind") or "Pod"},
                          namespace=(pod.get("metadata") or {}).get("namespace") or "default")
    return event_body(obj, "Warning", status["reason"], status["message"], COMPONENT, host=node_name)


async def report_rejection(api: "client.ApiClient", pod: dict[str, Any], result: AdmitResult,
                           node_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write the rejection: the pod's status (uid-guarded), then the Event; returns both as stored.

    Raises :class:`fedplace.common.kube_client.KubeApiError` (e.g. 404 when the pod is gone).
    """
    from fedplace.common.kube_client import kube_json

    meta = pod.get("metadata") or {}
    namespace, name = meta.get("namespace") or "default", meta["name"]
    patch: dict[str, Any] = {"status": rejected_pod_status(result)}
    if meta.get("uid"):
        patch["metadata"] = {"uid": meta["uid"]}  # a pod recreated under the same name is not touched
    stored = await kube_json(api, "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body=patch,
                             content_type="application/merge-patch+json")
    event = rejection_event(stored, result, node_name)
    created = await kube_json(api, "POST", f"/api/v1/namespaces/{namespace}/events", body=event)
    return stored, created
