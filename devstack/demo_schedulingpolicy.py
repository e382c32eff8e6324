"""The SchedulingPolicy pack in the end-to-end demo (``make demo``).

devstack/demo.py creates :data:`CRDS` with the Cluster CRD, starts
opa-kube-sync with :data:`SYNC_FLAGS` (the sync is only ready once every
replicated type can be listed, hence the CRD first), and calls
:func:`schedulingpolicy_steps` after its own steps. They show, through the API
server and the webhook, with the deploy component's own files
(deploy/components/schedulingpolicy):

1. the pack switched on: its ConfigMaps loaded, the webhook also sent
   SchedulingPolicies (the component's rule), the default policies and RBAC
   created, and a SchedulingPolicy the design calls invalid refused;
2. a Deployment of the shop team denied, the denial naming the component, the
   offending value and the policies its service account may use (only
   ``restricted``);
3. a RoleBinding granting the shop team its own policy: a Deployment's pod
   template is then defaulted, and one outside the policy is denied.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

import yaml
from kubernetes_asyncio import client

from devstack.schedulingpolicy import COMPONENT, CRDS, SYNC_FLAGS, component, pack_sources
from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["CRDS", "SYNC_FLAGS", "schedulingpolicy_steps"]

POLICY_NS = "kube-federation-scheduling-policy"
NS = "shop"
WEBHOOK_CONFIG = "fedplace"
SP_PATH = "/apis/scheduling.fedplace.io/v1alpha1/schedulingpolicies"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
# What the API server itself gives every pod spec (SetDefaults_PodSpec), before any webhook.
API_SERVER_POD_SPEC_DEFAULTS = {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
                                "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler"}

SHOP_POLICY = {
    "apiVersion": "scheduling.fedplace.io/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": "shop"},
    "spec": {
        "allowed": {"priorityClassNames": ["shop-high"], "nodeSelectors": {"disk": ["ssd"]}},
        "default": {
            "priorityClassName": "shop-low",
            "nodeSelector": {"kubernetes.io/arch": "amd64"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}],
        },
    },
}


def deployment(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], **pod_spec}}}}


async def schedulingpolicy_steps(api: client.ApiClient, first: int, *, say: Callable[[str], None],
                                 step: Callable[[int, str], None], check: Callable[[bool, str], None],
                                 eventually: Callable[..., Awaitable[float]]) -> None:
    """Steps ``first`` … ``first + 2``, with the demo's helpers (``check`` and
    ``eventually`` end the demo on a failure)."""

    async def denied(path: str, body: dict[str, Any]) -> str:
        try:
            await kube_json(api, "POST", path, body=body)
        except KubeApiError as exc:
            check(exc.status == 403, f"{body['metadata']['name']} denied (403)")
            return exc.message
        check(False, f"{body['metadata']['name']} should have been denied")
        return ""

    step(first, "SchedulingPolicy: the pack switched on (deploy/components/schedulingpolicy)")
    _, rule = yaml.safe_load((COMPONENT / "webhook-rule.yaml").read_text())
    await kube_json(api, "PATCH", f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{WEBHOOK_CONFIG}",
                    body=[rule], content_type="application/json-patch+json")
    say("   webhook: SchedulingPolicies are admitted through it too")
    # The pack as deploy/ ships it and its settings (the component's ConfigMap); the
    # pod-spec library it needs is in ConfigMap fedplace-lib, which the demo loads in step 3.
    configmaps = {"fedplace-schedulingpolicy": pack_sources()}
    (settings,) = component("settings.yaml")
    configmaps[settings["metadata"]["name"]] = settings["data"]
    for name, data in configmaps.items():
        await kube_json(api, "POST", f"/api/v1/namespaces/{POLICY_NS}/configmaps", body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})

    async def loaded() -> bool:
        for name in configmaps:
            cm = await kube_json(api, "GET", f"/api/v1/namespaces/{POLICY_NS}/configmaps/{name}")
            status = ((cm.get("metadata") or {}).get("annotations") or {}).get("fedplace.io/policy-status")
            if not status or json.loads(status).get("status") != "ok":
                return False
        return True

    took = await eventually(loaded, 60, "the pack's ConfigMaps to load")
    say(f"   {', '.join(configmaps)}: policy-status ok after {took:.2f}s")
    for obj in component("policies.yaml") + [o for o in component("rbac.yaml") if o["metadata"]["name"].startswith("sp:")]:
        meta = obj["metadata"]
        plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
                  "RoleBinding": "rolebindings", "SchedulingPolicy": "schedulingpolicies"}[obj["kind"]]
        prefix = SP_PATH.rsplit("/", 1)[0] if obj["kind"] == "SchedulingPolicy" else "/apis/rbac.authorization.k8s.io/v1"
        ns = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
        await kube_json(api, "POST", f"{prefix}{ns}/{plural}", body=obj)
    say("   SchedulingPolicies restricted (default scheduler only) and privileged; "
        "sp:restricted bound to system:authenticated")
    message = await denied(SP_PATH, {"apiVersion": "scheduling.fedplace.io/v1alpha1", "kind": "SchedulingPolicy",
                                     "metadata": {"name": "gold-only"}, "spec": {"required": {"priorityClassNames": []}}})
    say(f"   {message}")
    check("spec.required.priorityClassNames: an empty list requires nothing" in message,
          "an invalid SchedulingPolicy refused, naming the field and why")

    step(first + 1, "A Deployment asking for more than its service account may use is denied")
    await kube_json(api, "POST", SP_PATH, body=SHOP_POLICY)
    say("   SchedulingPolicy shop created (not granted to anybody yet)")
    await eventually(lambda: _restricted_applies(api), 30, "restricted to be replicated")
    message = await denied(DEPLOYMENTS, deployment("worker", {"priorityClassName": "shop-high"}))
    say(f"   {message}")
    check('priorityClassName "shop-high": not allowed' in message
          and f"service account {NS}/default: restricted (merge: smart)" in message,
          "the denial names the component, the value and the policies considered")

    step(first + 2, "A RoleBinding grants the shop team its policy: pod templates are defaulted")
    await kube_json(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "sp:shop"},
        "rules": [{"apiGroups": ["scheduling.fedplace.io"], "resources": ["schedulingpolicies"], "verbs": ["use"],
                   "resourceNames": ["shop"]}]})
    await kube_json(api, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "sp:shop"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sp:shop"},
        "subjects": [{"kind": "Group", "name": f"system:serviceaccounts:{NS}",
                      "apiGroup": "rbac.authorization.k8s.io"}]})
    say(f"   RoleBinding {NS}/sp:shop: system:serviceaccounts:{NS} may use SchedulingPolicy shop")
    bare = deployment("worker", {})

    async def granted() -> bool:
        out = await kube_json(api, "POST", DEPLOYMENTS, query=[("dryRun", "All")], body=bare)
        return "priorityClassName" in out["spec"]["template"]["spec"]

    took = await eventually(granted, 30, "the grant to be replicated")
    created = await kube_json(api, "POST", DEPLOYMENTS, body=bare)
    spec = created["spec"]["template"]["spec"]
    injected = {k: spec[k] for k in ("priorityClassName", "nodeSelector", "tolerations") if k in spec}
    say(f"   worker admitted {took:.2f}s after the grant; its pod template got {json.dumps(injected)}")
    check(injected == SHOP_POLICY["spec"]["default"], "the pod template defaulted at spec.template.spec")
    added = set(spec) - {"containers"} - set(API_SERVER_POD_SPEC_DEFAULTS)
    check(added == set(injected) and spec["schedulerName"] == API_SERVER_POD_SPEC_DEFAULTS["schedulerName"],
          "nothing else added (beside the API server's own pod spec defaults)")
    message = await denied(DEPLOYMENTS, deployment("indexer", {"nodeSelector": {"disk": "nvme"}}))
    say(f"   {message}")
    check('nodeSelector disk=nvme: not allowed (allowed values of disk: "ssd")' in message
          and f"service account {NS}/default: restricted, shop (merge: smart)" in message,
          "a template outside the shop policy is denied, naming both policies considered")


async def _restricted_applies(api: client.ApiClient) -> bool:
    """restricted is replicated once a Deployment asking for the default scheduler passes (dry run)."""
    await kube_json(api, "POST", DEPLOYMENTS, query=[("dryRun", "All")],
                    body=deployment("probe", {"schedulerName": "default-scheduler"}))
    return True
