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

import aiohttp
import pytest
import yaml

from devstack.schedulingpolicy import COMPONENT, SYNC_FLAGS, component, pack_sources
from devstack.scratch import install_crd
from fedplace.common.kube_client import KubeApiError, Resource, kube_json, kube_stream
from fedplace.sync.policy_status import STATUS_ANNOTATION
from tests.admission.conftest import eventually
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import rules, webhook_stack
from tests.packs.schedulingpolicy.helpers import (
    API_SERVER_TOLERATIONS,
    GROUP,
    POD_SPEC_PATH,
    ROOT,
    binding,
    pod_spec_of,
    policy,
    priority_class,
    use_role,
    workload,
)

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# A real API server serves a new CRD asynchronously: Established, then discovery
# (measured on kube-apiserver 1.24 here: 0.07-0.15 s after the create). A bound for a
# stuck server, not a guess at the delay: the waits end as soon as the server says so.
CRD_TIMEOUT = 60.0
SP = Resource(GROUP, "v1alpha1", "schedulingpolicies", False)
PLURAL = {"Pod": "pods", "ReplicaSet": "replicasets", "Deployment": "deployments", "StatefulSet": "statefulsets",
          "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs", "ClusterRole": "clusterroles",
          "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
          "PriorityClass": "priorityclasses"}
SCHEDULING_FIELDS = ("schedulerName", "priorityClassName", "nodeSelector", "tolerations", "affinity")
# The PriorityClasses the tests name (the API server's Priority plugin refuses a Pod
# naming a class that does not exist), with their values.
PRIORITY_CLASSES = {"team-low": 1000, "team-high": 2000}
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
    hook_url: str = ""

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

    async def ensure(self, obj: dict[str, Any]) -> None:
        """Create a cluster-scoped object unless it exists (then it is not the test's to delete)."""
        try:
            await self.create(obj)
        except KubeApiError as exc:
            if exc.status != 409:
                raise

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
    ns = await kube_namespaces.create("team-a")  # with its default ServiceAccount, which Pods need
    policy_ns = await kube_namespaces.create("fp-policy")
    s = Stack(kube_api, opa, ns, policy_ns, [])
    (crd,) = component("crd.yaml")
    await install_crd(kube_api, crd, timeout=CRD_TIMEOUT)  # created, and Established
    await eventually(lambda: _discovered(kube_api), CRD_TIMEOUT, "discovery to list schedulingpolicies")

    _, rule = yaml.safe_load((COMPONENT / "webhook-rule.yaml").read_text())  # the component's rule, after its `test`
    try:
        async with webhook_stack(
                opa, kube, kube_api, tmp_path, name=f"fedplace-sp-{uuid.uuid4().hex[:8]}", policy_ns=policy_ns,
                sync_flags=SYNC_FLAGS,  # the component's flags
                webhook_rules=[*rules(("apps", ["replicasets", "deployments", "statefulsets", "daemonsets"]),
                                      ("", ["pods"]), ("batch", ["jobs", "cronjobs"])), rule["value"]],
                namespaces=[ns], webhook_name="placement.federation.fedplace.io") as stack:
            s.hook_url = stack.hook.url
            for cm in pack_configmaps():
                await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body=cm)
            await eventually(s.policies_loaded, 20, "the pack's ConfigMaps to load (fedplace.io/policy-status ok)")
            await eventually(lambda: _true(stack.sync.is_ready()), 15, "the sync to be ready")
            for name, value in PRIORITY_CLASSES.items():
                await s.ensure(priority_class(name, value))
            yield s
    finally:
        for path in [*reversed(s.created), f"{CRD_PATH}/{crd['metadata']['name']}"]:
            try:
                await kube_json(kube_api, "DELETE", path)
            except KubeApiError:
                pass


async def _discovered(api: Any) -> bool:
    """Discovery of scheduling.fedplace.io/v1alpha1 lists the resource (a 404 while the group is not served yet)."""
    try:
        doc = await kube_json(api, "GET", f"/apis/{GROUP}/v1alpha1")
    except KubeApiError as exc:
        if exc.status == 404:
            return False
        raise
    return any(r.get("name") == SP.plural for r in doc.get("resources") or [])


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


async def test_what_the_api_server_fills_in_needs_no_policy_and_gives_way_to_defaults(stack: Stack) -> None:
    """A Pod that sets nothing arrives with the default scheduler, the cluster's global default
    PriorityClass and DefaultTolerationSeconds' tolerations: admitted under `restricted`
    alone, and given the team's defaults once the team's policy is usable."""
    await install_defaults(stack)
    cluster_default = f"fp-default-{uuid.uuid4().hex[:8]}"
    await stack.create(priority_class(cluster_default, 7, global_default=True))
    await eventually(lambda: stack.replicated("priorityclasses", cluster_default), 10, "the PriorityClass in OPA")

    plain = pod_spec_of(await stack.create(workload("Pod", {}, "team-a", "plain")))
    assert scheduling(plain) == {"schedulerName": "default-scheduler", "priorityClassName": cluster_default,
                                 "tolerations": API_SERVER_TOLERATIONS}
    assert plain["priority"] == 7

    await grant_team_policy(stack)
    team = pod_spec_of(await stack.create(workload("Pod", {}, "team-a", "team")))
    assert scheduling(team) == {**TEAM_DEFAULTS, "tolerations": API_SERVER_TOLERATIONS + TEAM_DEFAULTS["tolerations"]}
    assert team["priority"] == PRIORITY_CLASSES["team-low"]

    # a toleration like the API server's but tolerating for ever is the pod's own: checked
    forever = {k: v for k, v in API_SERVER_TOLERATIONS[1].items() if k != "tolerationSeconds"}
    message = await stack.denied(workload("Pod", {"tolerations": [forever]}, "team-a", "forever"))
    assert ('SchedulingPolicy: toleration {"effect":"NoExecute","key":"node.kubernetes.io/unreachable",'
            '"operator":"Exists"}: not allowed (no allowed toleration rule covers it)') in message


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


def scheduling(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """The five scheduling fields of a pod spec (those it has)."""
    return {field: pod_spec[field] for field in SCHEDULING_FIELDS if field in pod_spec}


@pytest.mark.parametrize("kind", sorted(POD_SPEC_PATH))
async def test_defaults_land_at_each_kind_s_pod_spec(stack: Stack, kind: str) -> None:
    """The API server defaults every pod spec at decode (schedulerName default-scheduler, …):
    the policy's defaults replace what it filled in, beside the tolerations it adds to Pods."""
    await install_defaults(stack)
    await grant_team_policy(stack)
    obj = workload(kind, {}, "team-a", f"{kind.lower()}-x")
    created = await stack.create(obj)
    expected = dict(TEAM_DEFAULTS)
    if kind == "Pod":  # DefaultTolerationSeconds' two, then the policy's
        expected["tolerations"] = API_SERVER_TOLERATIONS + TEAM_DEFAULTS["tolerations"]
        # the Priority plugin, run again after the webhook, resolved the defaulted class
        assert pod_spec_of(created)["priority"] == PRIORITY_CLASSES["team-low"]
    assert scheduling(pod_spec_of(created)) == expected
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


# -- Pod updates: what an update may change is checked, nothing is patched ----------------

FUZZ_TOLERATION = {"key": "x", "operator": "Exists", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "drain", "operator": "Exists", "effect": "NoExecute"}
MERGE = "application/merge-patch+json"


async def update_pod(s: Stack, name: str, body: dict[str, Any]) -> tuple[int, Any, list[str]]:
    """(status, object or error message, Warning headers) of a merge patch of Pod ``name``."""
    resp = None
    try:
        resp = await kube_stream(s.api, "PATCH", f"/api/v1/namespaces/{s.ns}/pods/{name}", body=body,
                                 content_type=MERGE)
        return resp.status, json.loads(await resp.read()), resp.headers.getall("Warning", [])
    except KubeApiError as exc:
        return exc.status, exc.message, []
    finally:
        if resp is not None:
            resp.release()


async def add_toleration(s: Stack, name: str, toleration: dict[str, Any]) -> tuple[int, Any, list[str]]:
    pod = await kube_json(s.api, "GET", f"/api/v1/namespaces/{s.ns}/pods/{name}")
    return await update_pod(s, name, {"spec": {"tolerations": [*pod["spec"].get("tolerations", []), toleration]}})


async def test_a_pod_update_adding_a_toleration_no_policy_allows_is_denied_as_at_creation(stack: Stack) -> None:
    """The fuzz case: a compliant Pod, then an update adding a toleration no usable policy
    allows — denied with the message its creation would get; a NoExecute one likewise."""
    await install_defaults(stack)
    await grant_team_policy(stack)
    created = await stack.create(workload("Pod", {}, "team-a", "web"))
    for toleration in (FUZZ_TOLERATION, NO_EXECUTE):
        status, message, _ = await add_toleration(stack, "web", toleration)
        assert status == 403, message
        at_creation = await stack.denied(workload("Pod", {"tolerations": [toleration]}, "team-a", "again"))
        assert message == at_creation
        assert (f"SchedulingPolicy: toleration {json.dumps(toleration, sort_keys=True, separators=(',', ':'))}: "
                "not allowed (no allowed toleration rule covers it)") in message
    stored = await kube_json(stack.api, "GET", f"/api/v1/namespaces/{stack.ns}/pods/web")
    assert stored["spec"]["tolerations"] == pod_spec_of(created)["tolerations"]


async def test_a_pod_update_adding_an_allowed_toleration_is_admitted_unpatched(stack: Stack) -> None:
    """A Pod created under `restricted` alone, the team's policy granted afterwards: an update
    adding the toleration that policy allows is admitted as sent (nothing injected)."""
    await install_defaults(stack)
    created = await stack.create(workload("Pod", {}, "team-a", "web"))
    assert pod_spec_of(created)["tolerations"] == API_SERVER_TOLERATIONS
    await grant_team_policy(stack)
    allowed = TEAM_DEFAULTS["tolerations"][0]  # what the team's policy injects is allowed
    status, updated, warnings = await add_toleration(stack, "web", allowed)
    assert status == 200, updated
    assert updated["spec"]["tolerations"] == [*API_SERVER_TOLERATIONS, allowed]
    assert {k: v for k, v in pod_spec_of(updated).items() if k != "tolerations"} == \
        {k: v for k, v in pod_spec_of(created).items() if k != "tolerations"}
    assert warnings == []


async def test_a_label_update_of_a_pod_that_predates_a_stricter_policy_is_admitted(stack: Stack) -> None:
    """A Pod admitted with a toleration the team's policy allowed, the policy then revoked:
    the Pod now breaks what is usable, but a label change introduces nothing — admitted,
    with a warning naming what the Pod already breaks; adding a toleration is still denied."""
    await install_defaults(stack)
    await grant_team_policy(stack)
    team = TEAM_DEFAULTS["tolerations"][0]
    before = await stack.create(workload("Pod", {"tolerations": [team]}, "team-a", "before"))
    await kube_json(stack.api, "DELETE", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{stack.ns}/rolebindings/sp:team-a")
    await eventually(lambda: _gone(stack), 10, "the RoleBinding gone from OPA")

    status, labelled, warnings = await update_pod(stack, "before", {"metadata": {"labels": {"tier": "web"}}})
    assert status == 200, labelled
    assert labelled["metadata"]["labels"]["tier"] == "web"
    assert pod_spec_of(labelled) == pod_spec_of(before)
    assert any("placement policy error not introduced by this update: SchedulingPolicy: toleration "
               '{\\"effect\\":\\"NoSchedule\\",\\"key\\":\\"dedicated\\"' in w for w in warnings), warnings
    status, message, _ = await add_toleration(stack, "before", FUZZ_TOLERATION)
    assert status == 403 and '"key":"x"' in message and '"key":"dedicated"' not in message


async def test_a_gated_pod_s_node_selector_set_by_an_update(stack: Stack) -> None:
    """A Pod with scheduling gates whose nodeSelector an update sets: a value no usable policy
    allows is denied by the webhook, before the API server's own validation. Neither server
    here lets the update through when it is allowed: kube-apiserver 1.24 drops
    ``schedulingGates`` and refuses a nodeSelector change (422), and the devstack models 1.24;
    the 1.27+ case, where the API server accepts it, is the next test's, at the webhook."""
    await install_defaults(stack)
    await grant_team_policy(stack)
    await stack.create(workload("Pod", {"schedulingGates": [{"name": "fedplace.io/wait"}]}, "team-a", "gated"))
    status, message, _ = await update_pod(stack, "gated", {"spec": {"nodeSelector": {"disk": "nvme"}}})
    assert status == 403, message
    assert "SchedulingPolicy: nodeSelector disk=nvme: not allowed" in message
    status, message, _ = await update_pod(stack, "gated", {"spec": {"nodeSelector": {"disk": "ssd"}}})
    assert status == 422 and "pod updates may not change fields" in message, message


async def test_a_gated_pod_update_as_kubernetes_1_27_sends_it(stack: Stack) -> None:
    """What the webhook answers a 1.27+ API server for a gated Pod whose nodeSelector an
    update sets (an AdmissionReview as the API server sends it, posted to the webhook)."""
    await install_defaults(stack)
    await grant_team_policy(stack)
    created = await stack.create(workload("Pod", {}, "team-a", "gated"))
    old = {**created, "spec": {**created["spec"], "schedulingGates": [{"name": "fedplace.io/wait"}]}}

    async def answer(node_selector: dict[str, str]) -> dict[str, Any]:
        new = {**old, "spec": {**old["spec"], "nodeSelector": {**old["spec"]["nodeSelector"], **node_selector}}}
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "gated",
            "namespace": stack.ns, "operation": "UPDATE", "userInfo": {"username": "tester"},
            "object": new, "oldObject": old, "dryRun": False}}
        async with aiohttp.ClientSession() as session:
            async with session.post(stack.hook_url + "/mutate", json=review, ssl=False) as resp:
                assert resp.status == 200
                return (await resp.json())["response"]

    denied = await answer({"disk": "nvme"})
    assert denied["allowed"] is False
    assert denied["status"]["message"].startswith("denied by policy: SchedulingPolicy: nodeSelector disk=nvme: not allowed")
    allowed = await answer({"disk": "ssd"})
    assert allowed["allowed"] is True and "patch" not in allowed and "warnings" not in allowed
