"""Shared by the SchedulingPolicy pack's tests: the pack's modules, objects, and
the replicated world (policies and RBAC) in the layout opa-kube-sync writes.

* :func:`modules` — what a deployment loads for the pack
  (:func:`devstack.schedulingpolicy.modules`); ``settings`` adds a settings module.
* :func:`policy`, :func:`use_role`, :func:`binding`, :func:`priority_class` — API objects.
* :func:`world` — ``data.kubernetes`` for policies, roles, bindings and PriorityClasses.
* :data:`API_SERVER_POD_SPEC`, :data:`API_SERVER_TOLERATIONS` — what a Kubernetes 1.24
  API server fills into a Pod's spec before the webhook sees it.
* :func:`workload` — a Pod or a pod-bearing workload with a given pod spec, and
  :data:`POD_SPEC_PATH` where each kind carries it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from devstack import schedulingpolicy

ROOT = Path(__file__).resolve().parents[3]
GROUP = "scheduling.fedplace.io"
API_VERSION = f"{GROUP}/v1alpha1"
RBAC = "rbac.authorization.k8s.io"
RK = "requiredDuringSchedulingIgnoredDuringExecution"
SETTINGS_ID = "tests/schedulingpolicy-settings.rego"

# kind → (apiVersion, path of the pod spec)
POD_SPEC_PATH = {
    "Pod": ("v1", ["spec"]),
    "ReplicaSet": ("apps/v1", ["spec", "template", "spec"]),
    "Deployment": ("apps/v1", ["spec", "template", "spec"]),
    "StatefulSet": ("apps/v1", ["spec", "template", "spec"]),
    "DaemonSet": ("apps/v1", ["spec", "template", "spec"]),
    "Job": ("batch/v1", ["spec", "template", "spec"]),
    "CronJob": ("batch/v1", ["spec", "jobTemplate", "spec", "template", "spec"]),
}


def modules(settings: str | None = None) -> dict[str, str]:
    out = schedulingpolicy.modules()
    if settings is not None:
        out[SETTINGS_ID] = settings_module(settings)
    return out


def settings_module(merge: str) -> str:
    return f'package io.k8s.federation.schedulingpolicy.settings\n\nmerge := "{merge}"\n'


def policy(name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "SchedulingPolicy", "metadata": {"name": name}, "spec": spec}


def use_role(name: str, policies: list[str] | None = None, namespace: str | None = None) -> dict[str, Any]:
    """A ClusterRole (or a Role in ``namespace``) granting `use` of ``policies`` (all when None)."""
    rule: dict[str, Any] = {"apiGroups": [GROUP], "resources": ["schedulingpolicies"], "verbs": ["use"]}
    if policies is not None:
        rule["resourceNames"] = policies
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role" if namespace else "ClusterRole", "metadata": meta,
            "rules": [rule]}


def binding(name: str, role: str, subjects: list[dict[str, Any]], namespace: str | None = None,
            role_kind: str = "ClusterRole") -> dict[str, Any]:
    """A ClusterRoleBinding, or a RoleBinding in ``namespace``."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role}, "subjects": subjects}


def sa(name: str, namespace: str) -> dict[str, Any]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def group(name: str) -> dict[str, Any]:
    return {"kind": "Group", "name": name, "apiGroup": RBAC}


def user(name: str) -> dict[str, Any]:
    return {"kind": "User", "name": name, "apiGroup": RBAC}


PLURALS = {"SchedulingPolicy": "schedulingpolicies", "ClusterRole": "clusterroles", "Role": "roles",
           "ClusterRoleBinding": "clusterrolebindings", "RoleBinding": "rolebindings",
           "PriorityClass": "priorityclasses"}


def world(objects: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """data.kubernetes holding these objects (every collection present, possibly empty)."""
    doc: dict[str, Any] = {plural: {} for plural in PLURALS.values()}
    for o in objects:
        meta = o["metadata"]
        coll = doc[PLURALS[o["kind"]]]
        if "namespace" in meta:
            coll.setdefault(meta["namespace"], {})[meta["name"]] = o
        else:
            coll[meta["name"]] = o
    return doc


def everyone_may_use(*policies: str) -> list[dict[str, Any]]:
    """RBAC letting every service account use ``policies`` (all when none given)."""
    return [use_role("sp:everyone", list(policies) or None),
            binding("sp:everyone", "sp:everyone", [group("system:authenticated")])]


def priority_class(name: str, value: int, global_default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": global_default}


# What a Kubernetes 1.24 API server puts into a Pod's spec before any webhook sees it:
# defaults at decode, then the Priority (no global default class: priority 0) and
# DefaultTolerationSeconds admission plugins.
API_SERVER_TOLERATIONS = [{"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute",
                           "tolerationSeconds": 300} for taint in ("not-ready", "unreachable")]
API_SERVER_POD_SPEC = {"schedulerName": "default-scheduler", "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                       "terminationGracePeriodSeconds": 30, "securityContext": {}, "priority": 0,
                       "preemptionPolicy": "PreemptLowerPriority", "tolerations": API_SERVER_TOLERATIONS}


def workload(kind: str, pod_spec: dict[str, Any], namespace: str, name: str = "w") -> dict[str, Any]:
    api_version, path = POD_SPEC_PATH[kind]
    spec = {"containers": [{"name": "app", "image": "nginx:1.27"}], **pod_spec}
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    if kind == "Pod":
        obj["spec"] = spec
        return obj
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": spec}
    if kind == "CronJob":
        template["spec"] = {**spec, "restartPolicy": "OnFailure"}
        obj["spec"] = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}
    elif kind == "Job":
        template["spec"] = {**spec, "restartPolicy": "Never"}
        obj["spec"] = {"template": template}
    else:
        obj["spec"] = {"selector": {"matchLabels": labels}, "template": template}
        if kind == "StatefulSet":
            obj["spec"]["serviceName"] = name
    return obj


def pod_spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    node: Any = obj
    for key in POD_SPEC_PATH[obj["kind"]][1]:
        node = node[key]
    return node
