"""End to end: the API server calls fedplace-admission over TLS for every
pod-bearing object and for SchedulingPolicies; opa-kube-sync replicates the
SchedulingPolicies and the RBAC objects into OPA and loads the pack from its
ConfigMaps (the pack's, the lib's, and the component's settings ConfigMap).

Everything a user does goes through the API server: the CRD and the default
policies and RBAC are the deploy component's own files.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import yaml

from common.kube_client import KubeApiError, Resource, kube_json
from devstack.schedulingpolicy import COMPONENT, SYNC_FLAGS, component, pack_sources
from sync.policies import STATUS_ANNOTATION
from tests.admission.conftest import eventually
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import rules, webhook_stack
from tests.packs.schedulingpolicy.helpers import (GROUP, POD_SPEC_PATH, ROOT, binding, pod_spec_of, policy,
                                                  use_role, workload)

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SP = Resource(GROUP, "v1alpha1", "schedulingpolicies", False)
PLURAL = {"Pod": "pods", "ReplicaSet": "replicasets", "Deployment": "deployments", "StatefulSet": "statefulsets",
          "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs", "ClusterRole": "clusterroles",
          "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}
TEAM_DEFAULTS = {
    "schedulerName": "team-scheduler",
    "priorityClassName": "team-low",
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}],
    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"team": "a"}}}}]}},
}


def path_of(obj: dict[str, Any]) -> str:
    """The collection path of an object (built-in or SchedulingPolicy)."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "SchedulingPolicy":
        return SP.collection_path()
    api_version = obj["apiVersion"]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    ns = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
    return f"{prefix}{ns}/{PLURAL[kind]}"


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def pack_configmaps() -> list[dict[str, Any]]:
    """What deploy/ ships for the pack: the lib and pack ConfigMaps, and the component's settings."""
    lib = {p.name: p.read_text() for p in sorted((ROOT / "policies/lib").glob("*.rego"))
           if not p.name.endswith("_test.rego")}
    (settings,) = component("settings.yaml")
    return [configmap("fedplace-lib", lib), configmap("fedplace-schedulingpolicy", pack_sources()),
            configmap(settings["metadata"]["name"], settings["data"])]


@dataclass
class Stack:
    api: Any
    opa: Any
    ns: str
    policy_ns: str
    created: list[str]

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        body = json.loads(json.dumps(obj))
        if body["metadata"].get("namespace") == "team-a":  # the test's scratch namespace
            body["metadata"]["namespace"] = self.ns
        for s in body.get("subjects") or []:
            if s.get("namespace") == "team-a":
                s["namespace"] = self.ns
            if s.get("name") == "system:serviceaccounts:team-a":
                s["name"] = f"system:serviceaccounts:{self.ns}"
        out = await kube_json(self.api, "POST", path_of(body), body=body)
        if "namespace" not in body["metadata"]:
            self.created.append(f"{path_of(body)}/{body['metadata']['name']}")
        return out

    async def denied(self, obj: dict[str, Any]) -> str:
        with pytest.raises(KubeApiError) as err:
            await self.create(obj)
        assert err.value.status == 403, err.value
        return err.value.message

    async def replicated(self, plural: str, *path: str) -> bool:
        status, body = await self.opa.request("GET", "/v1/data/kubernetes/" + "/".join((plural, *path)))
        return status == 200 and (body or {}).get("result") is not None

    async def wait_replicated(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        path = ((self.ns if meta["namespace"] == "team-a" else meta["namespace"]),) if "namespace" in meta else ()
        plural = "schedulingpolicies" if obj["kind"] == "SchedulingPolicy" else PLURAL[obj["kind"]]
        await eventually(lambda: self.replicated(plural, *path, meta["name"]), 10, f"{plural} {meta['name']} in OPA")

    async def policies_loaded(self) -> bool:
        doc = await kube_json(self.api, "GET", f"/api/v1/namespaces/{self.policy_ns}/configmaps")
        states = [json.loads((cm["metadata"].get("annotations") or {}).get(STATUS_ANNOTATION, "{}")).get("status")
                  for cm in doc["items"]]
        return len(states) == 3 and all(s == "ok" for s in states)


@pytest.fixture
async def stack(opa: Any, kube: Any, kube_api: Any, kube_namespaces: ScratchNamespaces,
                tmp_path: Path) -> AsyncIterator[Stack]:
    ns = await kube_namespaces.create("team-a")
    policy_ns = await kube_namespaces.create("fp-policy")
    s = Stack(kube_api, opa, ns, policy_ns, [])
    (crd,) = component("crd.yaml")
    await kube_json(kube_api, "POST", CRD_PATH, body=crd)
    await eventually(lambda: _served(kube_api), 10, "the SchedulingPolicy CRD to be served")

    _, rule = yaml.safe_load((COMPONENT / "webhook-rule.yaml").read_text())  # the component's rule, after its `test`
    try:
        async with webhook_stack(
                opa, kube, kube_api, tmp_path, name=f"fedplace-sp-{uuid.uuid4().hex[:8]}", policy_ns=policy_ns,
                sync_flags=SYNC_FLAGS,  # the component's flags
                webhook_rules=[*rules(("apps", ["replicasets", "deployments", "statefulsets", "daemonsets"]),
                                      ("", ["pods"]), ("batch", ["jobs", "cronjobs"])), rule["value"]],
                namespaces=[ns], webhook_name="placement.federation.fedplace.io") as stack:
            for cm in pack_configmaps():
                await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body=cm)
            await eventually(s.policies_loaded, 20, "the pack's ConfigMaps to load (fedplace.io/policy-status ok)")
            await eventually(lambda: _true(stack.sync.is_ready()), 15, "the sync to be ready")
            yield s
    finally:
        for path in [*reversed(s.created), f"{CRD_PATH}/{crd['metadata']['name']}"]:
            try:
                await kube_json(kube_api, "DELETE", path)
            except KubeApiError:
                pass


async def _served(api: Any) -> bool:
    await kube_json(api, "GET", SP.collection_path())
    return True


async def _true(value: bool) -> bool:
    return value


async def install_defaults(s: Stack) -> None:
    """The component's default policies and RBAC (restricted for everyone), replicated."""
    for obj in component("policies.yaml") + [o for o in component("rbac.yaml") if o["metadata"]["name"].startswith("sp:")]:
        if obj["metadata"].get("namespace") == "kube-system":
            continue  # kube-system is not the test's to write
        await s.create(obj)
    for obj in component("policies.yaml"):
        await s.wait_replicated(obj)
    await eventually(lambda: s.replicated("clusterrolebindings", "sp:restricted"), 10, "sp:restricted in OPA")


async def grant_team_policy(s: Stack) -> None:
    """A team's policy, and a RoleBinding granting it to every service account of the team's namespace."""
    await s.create(policy("team-a", {"default": TEAM_DEFAULTS,
                                     "allowed": {"priorityClassNames": ["team-high"], "nodeSelectors": {"disk": ["ssd"]}}}))
    await s.create(use_role("sp:team-a", ["team-a"]))
    rb = binding("sp:team-a", "sp:team-a", [{"kind": "Group", "name": "system:serviceaccounts:team-a"}], namespace="team-a")
    await s.create(rb)
    await s.wait_replicated(rb)
    await eventually(lambda: s.replicated("schedulingpolicies", "team-a"), 10, "team-a in OPA")


# -- the tests ------------------------------------------------------------------------


async def test_an_invalid_schedulingpolicy_is_refused_naming_the_field(stack: Stack) -> None:
    message = await stack.denied(policy("broken", {"required": {"priorityClasseNames": []}, "default": {"tolerations": []}}))
    assert 'SchedulingPolicy "broken": spec.required.priorityClasseNames: an empty list requires nothing' in message
    assert 'SchedulingPolicy "broken": spec.default.tolerations: an empty list injects nothing' in message
    created = await stack.create(policy("fine", {"allowed": {"priorityClasseNames": ["gold"]}}))
    assert created["spec"] == {"allowed": {"priorityClasseNames": ["gold"]}}


async def test_restricted_by_default_then_a_rolebinding_grants_the_team_policy(stack: Stack) -> None:
    await install_defaults(stack)
    s = stack
    plain = await s.create(workload("Deployment", {"schedulerName": "default-scheduler"}, "team-a", "plain"))
    assert pod_spec_of(plain)["schedulerName"] == "default-scheduler"
    message = await s.denied(workload("Deployment", {"priorityClassName": "team-high"}, "team-a", "early"))
    assert message.startswith('admission webhook "placement.federation.fedplace.io" denied the request: ')
    assert (f'SchedulingPolicy: priorityClassName "team-high": not allowed (allowed: none); policies considered '
            f"for service account {s.ns}/default: restricted (merge: smart)") in message

    await grant_team_policy(s)
    ok = await s.create(workload("Deployment", {"priorityClassName": "team-high"}, "team-a", "later"))
    assert pod_spec_of(ok)["priorityClassName"] == "team-high"
    message = await s.denied(workload("Pod", {"nodeSelector": {"disk": "nvme"}}, "team-a", "nvme"))
    assert (f"SchedulingPolicy: nodeSelector disk=nvme: not allowed (allowed values of disk: \"ssd\"); policies "
            f"considered for service account {s.ns}/default: restricted, team-a (merge: smart)") in message


@pytest.mark.parametrize("kind", sorted(POD_SPEC_PATH))
async def test_defaults_land_at_each_kind_s_pod_spec(stack: Stack, kind: str) -> None:
    await install_defaults(stack)
    await grant_team_policy(stack)
    obj = workload(kind, {}, "team-a", f"{kind.lower()}-x")
    created = await stack.create(obj)
    assert pod_spec_of(created) == {**pod_spec_of(obj), **TEAM_DEFAULTS}
    stored = await kube_json(stack.api, "GET", f"{path_of({**obj, 'metadata': {**obj['metadata'], 'namespace': stack.ns}})}/{obj['metadata']['name']}")
    assert pod_spec_of(stored) == pod_spec_of(created)


async def test_the_merge_setting_changes_the_decision(stack: Stack) -> None:
    await install_defaults(stack)
    await grant_team_policy(stack)
    smart = await stack.create(workload("Deployment", {}, "team-a", "smart"))
    assert pod_spec_of(smart)["priorityClassName"] == "team-low"

    # "first": restricted alone (first in name order), which defaults nothing
    (settings,) = component("settings.yaml")
    src = settings["data"]["settings.rego"].replace('merge := "smart"', 'merge := "first"')
    await kube_json(stack.api, "PATCH", f"/api/v1/namespaces/{stack.policy_ns}/configmaps/{settings['metadata']['name']}",
                    body={"data": {"settings.rego": src}}, content_type="application/merge-patch+json")

    async def first_applies() -> bool:
        status, body = await stack.opa.request("GET", "/v1/data/io/k8s/federation/schedulingpolicy/settings/merge")
        return status == 200 and (body or {}).get("result") == "first"

    await eventually(first_applies, 10, "the new setting in OPA")
    plain = await stack.create(workload("Deployment", {}, "team-a", "first"))
    assert "priorityClassName" not in pod_spec_of(plain)
    message = await stack.denied(workload("Deployment", {"priorityClassName": "team-high"}, "team-a", "first-2"))
    assert "policies considered for service account" in message and "restricted, team-a (merge: first)" in message


async def test_revoking_the_rolebinding_revokes_the_policy(stack: Stack) -> None:
    await install_defaults(stack)
    await grant_team_policy(stack)
    await stack.create(workload("Pod", {"priorityClassName": "team-high"}, "team-a", "before"))
    await kube_json(stack.api, "DELETE", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{stack.ns}/rolebindings/sp:team-a")
    await eventually(lambda: _gone(stack), 10, "the RoleBinding gone from OPA")
    message = await stack.denied(workload("Pod", {"priorityClassName": "team-high"}, "team-a", "after"))
    assert f"service account {stack.ns}/default: restricted (merge: smart)" in message


async def _gone(s: Stack) -> bool:
    return not await s.replicated("rolebindings", s.ns, "sp:team-a")
