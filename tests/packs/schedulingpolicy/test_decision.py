"""The SchedulingPolicy pack's admission decision over HTTP (the devstack engine,
or a real OPA with FEDPLACE_TEST_OPA_URL), turned into the webhook's patch.

Every case loads the pack as a deployment does, writes the replicated world
(SchedulingPolicies and RBAC) where opa-kube-sync writes it, queries
``/v1/data/io/k8s/federation/admission`` with the object, and builds the
JSONPatch with the webhook's own ``admission.patches.build_patch`` — which
proves the pack's operations apply to the object as submitted.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import jsonpatch
import pytest

from fedplace.admission.patches import build_patch
from tests.packs.schedulingpolicy.helpers import (
    API_SERVER_POD_SPEC,
    API_SERVER_TOLERATIONS,
    POD_SPEC_PATH,
    RK,
    ROOT,
    SETTINGS_ID,
    binding,
    everyone_may_use,
    group,
    modules,
    pod_spec_of,
    policy,
    priority_class,
    sa,
    settings_module,
    use_role,
    user,
    workload,
    world,
)

NS = "team-a"
PK = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass
class Decision:
    obj: dict[str, Any]
    result: dict[str, Any]

    @property
    def errors(self) -> list[str]:
        return sorted(self.result.get("errors") or [])

    @property
    def admitted(self) -> dict[str, Any]:
        """The object as the webhook would admit it (asserting it is not denied)."""
        assert not self.errors, self.errors
        ops = build_patch(self.obj, self.result.get("annotations"), self.result.get("patch"), self.result.get("patches"))
        return jsonpatch.JsonPatch(ops).apply(self.obj, in_place=False) if ops else self.obj

    @property
    def pod_spec(self) -> dict[str, Any]:
        return pod_spec_of(self.admitted)


class Pack:
    def __init__(self, opa: Any) -> None:
        self.opa = opa

    async def load(self, mods: dict[str, str]) -> None:
        for mid, src in mods.items():
            status, body = await self.opa.put_policy(mid, src)
            assert status == 200, (mid, body)

    async def unload(self, mid: str) -> None:
        status, body = await self.opa.request("DELETE", "/v1/policies/" + mid)
        assert status == 200, body

    async def world(self, objects: list[dict[str, Any]]) -> None:
        status, body = await self.opa.request("PUT", "/v1/data/kubernetes", json_body=world(objects))
        assert status == 204, body

    async def decide(self, obj: dict[str, Any]) -> Decision:
        status, body = await self.opa.query("io/k8s/federation/admission", obj)
        assert status == 200, body
        return Decision(obj, body.get("result") or {})


@pytest.fixture
async def pack(opa: Any) -> Pack:
    p = Pack(opa)
    await p.load(modules())
    return p


def pod(spec: dict[str, Any] | None = None, namespace: str = NS) -> dict[str, Any]:
    return workload("Pod", spec or {}, namespace)


ALL_DEFAULTS = {
    "schedulerName": "team-scheduler",
    "priorityClassName": "team-low",
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}],
    "affinity": {"podAntiAffinity": {PK: [{"weight": 50, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"team": "a"}}}}]}},
}


# -- defaults -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(POD_SPEC_PATH))
async def test_defaults_injected_at_the_pod_spec_of_every_kind(pack: Pack, kind: str) -> None:
    await pack.world([policy("team", {"default": ALL_DEFAULTS}), *everyone_may_use()])
    obj = workload(kind, {}, NS)
    d = await pack.decide(obj)
    ops = d.result["patches"]["schedulingpolicy"]
    prefix = "/" + "/".join(POD_SPEC_PATH[kind][1])
    assert {op["path"] for op in ops} == {f"{prefix}/{field}" for field in ALL_DEFAULTS}
    admitted = d.admitted
    assert pod_spec_of(admitted) == {**pod_spec_of(obj), **ALL_DEFAULTS}
    # nothing but the pod spec's scheduling fields changed
    stripped = copy.deepcopy(admitted)
    spec = pod_spec_of(stripped)
    for field in ALL_DEFAULTS:
        del spec[field]
    assert stripped == obj
    # and what the pack injected is allowed when the object comes back (an update)
    again = await pack.decide(admitted)
    assert again.errors == [] and not (again.result.get("patches") or {}).get("schedulingpolicy")


async def test_defaults_only_for_the_components_the_pod_leaves_unset(pack: Pack) -> None:
    await pack.world([policy("team", {"default": ALL_DEFAULTS, "allowed": {"schedulerNames": ["mine"], "nodeSelectors": {}}}),
                      *everyone_may_use()])
    d = await pack.decide(pod({"schedulerName": "mine", "nodeSelector": {"disk": "ssd"}, "priorityClassName": ""}))
    spec = d.pod_spec
    assert spec["schedulerName"] == "mine" and spec["nodeSelector"] == {"disk": "ssd"}
    assert spec["priorityClassName"] == "team-low", "an empty value counts as unset"
    assert spec["tolerations"] == ALL_DEFAULTS["tolerations"] and spec["affinity"] == ALL_DEFAULTS["affinity"]


async def test_default_tolerations_go_beside_the_api_server_s_own(pack: Pack) -> None:
    await pack.world([policy("team", {"default": {"tolerations": [
        {"key": "dedicated", "operator": "Equal", "values": ["a", "b"], "effect": "NoSchedule"}]}}), *everyone_may_use()])
    api_server = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    d = await pack.decide(pod({"tolerations": api_server}))
    assert d.pod_spec["tolerations"] == api_server + [
        {"key": "dedicated", "operator": "Equal", "value": v, "effect": "NoSchedule"} for v in ("a", "b")]


# -- what the API server fills in itself ------------------------------------------------------


async def test_a_pod_as_the_api_server_sends_it_needs_no_policy(pack: Pack) -> None:
    await pack.world([policy("restricted", {"allowed": {"schedulerNames": ["default-scheduler"]}}),  # granted to nobody
                      priority_class("cluster-default", 7, global_default=True)])
    d = await pack.decide(pod({**API_SERVER_POD_SPEC, "priorityClassName": "cluster-default", "priority": 7}))
    assert d.errors == [] and d.admitted == d.obj
    # a class that is not the global default is the pod's own choice: checked
    other = await pack.decide(pod({**API_SERVER_POD_SPEC, "priorityClassName": "gold"}))
    assert [e.split(";")[0] for e in other.errors] == ['SchedulingPolicy: priorityClassName "gold": not allowed (allowed: none)']


async def test_what_the_api_server_filled_in_gives_way_to_the_defaults(pack: Pack) -> None:
    await pack.world([policy("team", {"default": ALL_DEFAULTS}), *everyone_may_use(),
                      priority_class("cluster-default", 7, global_default=True), priority_class("team-low", 1000)])
    obj = pod({**API_SERVER_POD_SPEC, "priorityClassName": "cluster-default", "priority": 7})
    d = await pack.decide(obj)
    spec = d.pod_spec
    assert {k: spec[k] for k in ALL_DEFAULTS} == {**ALL_DEFAULTS,
                                                  "tolerations": API_SERVER_TOLERATIONS + ALL_DEFAULTS["tolerations"]}
    # the priority resolved from the old class goes: the API server resolves the new one
    assert "priority" not in spec and "preemptionPolicy" not in spec
    assert {k: v for k, v in spec.items() if k not in ALL_DEFAULTS} == \
        {k: v for k, v in pod_spec_of(obj).items() if k not in {*ALL_DEFAULTS, "priority", "preemptionPolicy"}}
    # a pod template carries no resolved priority: nothing but the five fields changes
    template = await pack.decide(workload("Deployment", {"priorityClassName": "cluster-default"}, NS))
    assert {op["op"] for op in template.result["patches"]["schedulingpolicy"]} == {"add"}


# -- deny-all-except, required, allowed ---------------------------------------------------

EVERY_COMPONENT = {
    "schedulerName": "gpu-scheduler",
    "priorityClassName": "gold",
    "nodeSelector": {"disk": "ssd"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {RK: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["z1"]}]}]}}},
}


async def test_nothing_usable_denies_every_component_naming_it(pack: Pack) -> None:
    await pack.world([policy("restricted", {"allowed": {"schedulerNames": ["default-scheduler"]}})])  # granted to nobody
    d = await pack.decide(pod(EVERY_COMPONENT))
    tail = "policies considered for service account team-a/default: none (merge: smart)"
    assert d.errors == sorted([
        f'SchedulingPolicy: schedulerName "gpu-scheduler": not allowed (allowed: none); {tail}',
        f'SchedulingPolicy: priorityClassName "gold": not allowed (allowed: none); {tail}',
        f"SchedulingPolicy: nodeSelector disk=ssd: not allowed (no node selector key is allowed); {tail}",
        'SchedulingPolicy: toleration {"effect":"NoSchedule","key":"gpu","operator":"Exists"}: not allowed '
        f"(no allowed toleration rule covers it); {tail}",
        f"SchedulingPolicy: affinity nodeAffinity: not allowed (no nodeAffinities in the policies); {tail}",
    ])
    plain = await pack.decide(pod({}))
    assert plain.errors == [] and plain.admitted == plain.obj


# (policy spec, pod spec, None = admitted unchanged | substring of the one error)
SEMANTICS = {
    "required scheduler, one of the list": ({"required": {"schedulerNames": ["a", "b"]}}, {"schedulerName": "b"}, None),
    "required scheduler missing": ({"required": {"schedulerNames": ["a", "b"]}}, {},
                                   'schedulerName none: required, one of "a", "b"'),
    "required scheduler, another": ({"required": {"schedulerNames": ["a"]}}, {"schedulerName": "c"},
                                    'schedulerName "c": required, one of "a"'),
    "allowed priority classes: [] = any": ({"allowed": {"priorityClassNames": []}}, {"priorityClassName": "x"}, None),
    "allowed priority class list": ({"allowed": {"priorityClassNames": ["gold"]}}, {"priorityClassName": "silver"},
                                    'priorityClassName "silver": not allowed (allowed: "gold")'),
    "the design's spelling": ({"allowed": {"priorityClasseNames": ["gold"]}}, {"priorityClassName": "gold"}, None),
    "node selector value in the list": ({"allowed": {"nodeSelectors": {"disk": ["ssd", "hdd"]}}},
                                        {"nodeSelector": {"disk": "hdd"}}, None),
    "node selector value outside": ({"allowed": {"nodeSelectors": {"disk": ["ssd"]}}},
                                    {"nodeSelector": {"disk": "nvme"}}, 'nodeSelector disk=nvme: not allowed (allowed values of disk: "ssd")'),
    "node selector [] = any value": ({"allowed": {"nodeSelectors": {"region": []}}},
                                     {"nodeSelector": {"region": "anything"}}, None),
    "required node selector key": ({"required": {"nodeSelectors": {"arch": ["amd64"]}}, "allowed": {"nodeSelectors": {}}},
                                   {"nodeSelector": {"disk": "ssd"}}, 'nodeSelector arch unset: required, arch one of "amd64"'),
    "toleration within a fine-grain rule": (
        {"allowed": {"tolerations": [{"keys": ["k"], "operators": ["Equal"], "values": ["v"], "effects": ["NoSchedule"]}]}},
        {"tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]}, None),
    "toleration Exists wider than the rule's values": (
        {"allowed": {"tolerations": [{"keys": ["k"], "operators": ["Equal", "Exists"], "values": ["v"]}]}},
        {"tolerations": [{"key": "k", "operator": "Exists"}]}, 'toleration {"key":"k","operator":"Exists"}: not allowed'),
    "coarse-grain: any PreferNoSchedule": ({"allowed": {"tolerations": [{"effects": ["PreferNoSchedule"]}]}},
                                           {"tolerations": [{"key": "x", "value": "y", "effect": "PreferNoSchedule"}]}, None),
    "affinity expression matches a rule": (
        {"allowed": {"affinities": {"nodeAffinities": {RK: {"nodeSelectorTerms": [{"matchExpressions": [
            {"keys": ["zone"], "operators": ["In", "NotIn"], "values": ["z1", "z2"]}]}]}}}}},
        {"affinity": EVERY_COMPONENT["affinity"]}, None),
    "affinity expression outside the rules": (
        {"allowed": {"affinities": {"nodeAffinities": {RK: {"nodeSelectorTerms": [{"matchExpressions": [
            {"keys": ["zone"], "operators": ["NotIn"]}]}]}}}}},
        {"affinity": EVERY_COMPONENT["affinity"]},
        'affinity nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution match expression {"key":"zone","operator":"In","values":["z1"]}: not allowed'),
    "all pod anti-affinities": ({"allowed": {"affinities": {"podAntiAffinities": {}}}}, {"affinity": ALL_DEFAULTS["affinity"]}, None),
    "pod affinity not listed": ({"allowed": {"affinities": {"podAntiAffinities": {}}}},
                                {"affinity": {"podAffinity": {PK: []}}}, "affinity podAffinity: not allowed (no podAffinities in the policies)"),
    "the default is allowed": ({"default": {"priorityClassName": "low"}}, {"priorityClassName": "low"}, None),
}


@pytest.mark.parametrize("case", list(SEMANTICS))
async def test_component_semantics(pack: Pack, case: str) -> None:
    spec, pod_spec, error = SEMANTICS[case]
    await pack.world([policy("p", spec), *everyone_may_use()])
    d = await pack.decide(pod(pod_spec))
    if error is None:
        assert d.errors == [] and d.admitted == d.obj
    else:
        assert len(d.errors) == 1 and error in d.errors[0], d.errors
        assert d.errors[0].endswith("policies considered for service account team-a/default: p (merge: smart)")


# -- RBAC `use` ---------------------------------------------------------------------------

GOLD = policy("gold", {"allowed": {"priorityClassNames": ["gold"]}})
GOLD_POD = {"serviceAccountName": "builder", "priorityClassName": "gold"}

# name → (RBAC objects, True if builder in team-a may use "gold", else what it may use)
GRANTS = {
    "ClusterRoleBinding to the service account": (
        [use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [sa("builder", NS)])], True),
    "ClusterRoleBinding to the service account's user name": (
        [use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [user(f"system:serviceaccount:{NS}:builder")])], True),
    "system:serviceaccounts": ([use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [group("system:serviceaccounts")])], True),
    "system:serviceaccounts:<ns>": (
        [use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [group(f"system:serviceaccounts:{NS}")])], True),
    "system:authenticated": ([use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [group("system:authenticated")])], True),
    "RoleBinding in the pod's namespace, ClusterRole": (
        [use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [sa("builder", NS)], namespace=NS)], True),
    "RoleBinding in the pod's namespace, Role": (
        [use_role("gold-user", ["gold"], namespace=NS), binding("b", "gold-user", [sa("builder", NS)], NS, "Role")], True),
    "a rule without resourceNames": ([use_role("sp:all"), binding("b", "sp:all", [sa("builder", NS)])], True),
    "RoleBinding in another namespace": (
        [use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [sa("builder", NS)], namespace="team-b")], None),
    "another namespace's service account": ([use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [sa("builder", "team-b")])], None),
    "another service account": ([use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [sa("web", NS)])], None),
    "another namespace's group": (
        [use_role("sp:gold", ["gold"]), binding("b", "sp:gold", [group("system:serviceaccounts:team-b")])], None),
    "another policy's name": ([use_role("sp:silver", ["silver"]), binding("b", "sp:silver", [sa("builder", NS)])], "silver"),
    "a verb other than use": (
        [{**use_role("sp:gold", ["gold"]), "rules": [{"apiGroups": ["scheduling.fedplace.io"], "resources": ["schedulingpolicies"],
                                                      "verbs": ["get"], "resourceNames": ["gold"]}]},
         binding("b", "sp:gold", [sa("builder", NS)])], None),
    "the design's API group (extensions)": (
        [{**use_role("sp:gold", ["gold"]), "rules": [{"apiGroups": ["extensions"], "resources": ["schedulingpolicies"],
                                                      "verbs": ["use"]}]},
         binding("b", "sp:gold", [sa("builder", NS)])], None),
}


@pytest.mark.parametrize("case", list(GRANTS))
async def test_rbac_use(pack: Pack, case: str) -> None:
    rbac, usable = GRANTS[case]
    await pack.world([GOLD, policy("silver", {}), *rbac])
    d = await pack.decide(pod(GOLD_POD))
    if usable is True:
        assert d.errors == []
    else:
        assert d.errors == ['SchedulingPolicy: priorityClassName "gold": not allowed (allowed: none); '
                            f"policies considered for service account team-a/builder: {usable or 'none'} (merge: smart)"]


# -- merging: the design's worked examples, option by option --------------------------------

ARCH, OS = "beta.kubernetes.io/arch", "beta.kubernetes.io/os"
SCHEDPOL_A = policy("schedpol-a", {
    "required": {"nodeSelectors": {ARCH: ["amd64", "arm64"]}},
    "allowed": {"nodeSelectors": {"disk": ["ssd"]}},
    "default": {"nodeSelector": {ARCH: "amd64"}},
})
SCHEDPOL_B = policy("schedpol-b", {
    "required": {"nodeSelectors": {ARCH: ["amd64", "arm64", "i386"], OS: ["Linux", "Windows"]},
                 "priorityClasseNames": ["bronze", "gold", "silver"]},
    "allowed": {"nodeSelectors": {"disk": ["sata"]}},
    "default": {"nodeSelector": {ARCH: "i386", OS: "Linux"}, "priorityClasseName": "bronze"},
})

# option → (defaults a bare pod gets, {pod nodeSelector + priority class: admitted?})
MERGES = {
    "smart": ({"nodeSelector": {ARCH: "amd64", OS: "Linux"}, "priorityClassName": "bronze"}, {
        "arm64/Windows/sata/gold": True,   # allowed is additive: sata from b
        "amd64/Linux/ssd/silver": True,
        "i386/Linux/ssd/gold": False,      # required per key: a's arch values win
        "amd64/-/ssd/gold": False,         # b's os is required
        "amd64/Linux/ssd/copper": False,   # b's priority classes are required
    }),
    "first": ({"nodeSelector": {ARCH: "amd64"}}, {
        "arm64/-/ssd/-": True,             # only schedpol-a counts
        "amd64/-/sata/-": False,
        "amd64/-/ssd/gold": False,
        "amd64/Linux/ssd/-": False,        # os is not even allowed
    }),
    "simple": ({"nodeSelector": {ARCH: "amd64"}, "priorityClassName": "bronze"}, {
        "amd64/-/ssd/gold": True,          # required.nodeSelectors is a's, priority classes b's
        "amd64/-/sata/gold": False,        # allowed.nodeSelectors is a's alone
        "amd64/Linux/ssd/gold": False,
        "i386/-/ssd/gold": False,
    }),
}


def merge_pod(shape: str) -> dict[str, Any]:
    arch, os_, disk, prio = shape.split("/")
    selector = {ARCH: arch, "disk": disk, **({OS: os_} if os_ != "-" else {})}
    return {"nodeSelector": selector, **({"priorityClassName": prio} if prio != "-" else {})}


@pytest.mark.parametrize("option", list(MERGES))
async def test_merge_options_as_the_design_s_examples(pack: Pack, option: str) -> None:
    await pack.load({SETTINGS_ID: settings_module(option)})
    await pack.world([SCHEDPOL_A, SCHEDPOL_B, *everyone_may_use()])
    defaults, cases = MERGES[option]
    bare = await pack.decide(pod({}))
    assert bare.pod_spec == {**bare.obj["spec"], **defaults}
    for shape, admitted in cases.items():
        d = await pack.decide(pod(merge_pod(shape)))
        assert (d.errors == []) is admitted, (option, shape, d.errors)
        for e in d.errors:
            assert e.endswith(f"service account team-a/default: schedpol-a, schedpol-b (merge: {option})"), e


async def test_smart_is_the_default_and_a_bad_setting_denies(pack: Pack) -> None:
    await pack.world([SCHEDPOL_A, SCHEDPOL_B, *everyone_may_use()])
    d = await pack.decide(pod({}))
    assert d.pod_spec["nodeSelector"] == {ARCH: "amd64", OS: "Linux"}
    await pack.load({SETTINGS_ID: settings_module("deepest")})
    bad = await pack.decide(pod({}))
    assert bad.errors == ['SchedulingPolicy: setting merge "deepest" is not one of first, simple, smart '
                          "(module io.k8s.federation.schedulingpolicy.settings)"]


# -- the SchedulingPolicy object itself ---------------------------------------------------


async def test_a_schedulingpolicy_is_validated_at_admission(pack: Pack) -> None:
    await pack.world([])
    bad = await pack.decide(policy("team-a", {"required": {"priorityClassNames": []}, "default": {"tolerations": []}}))
    assert bad.errors == [
        'SchedulingPolicy "team-a": spec.default.tolerations: an empty list injects nothing and is not valid; leave the field out',
        'SchedulingPolicy "team-a": spec.required.priorityClassNames: an empty list requires nothing and is not valid; '
        "list the names a pod must pick from, or leave the field out",
    ]
    good = await pack.decide(SCHEDPOL_B)
    assert good.errors == [] and good.admitted == SCHEDPOL_B


# -- when the pack decides ----------------------------------------------------------------


async def test_off_until_schedulingpolicies_are_replicated(pack: Pack) -> None:
    status, body = await pack.opa.request("PUT", "/v1/data/kubernetes", json_body={})
    assert status == 204, body
    d = await pack.decide(pod(EVERY_COMPONENT))
    assert d.errors == [] and d.admitted == d.obj


async def test_rbac_not_replicated_is_a_denial_naming_the_flags(pack: Pack) -> None:
    status, body = await pack.opa.request("PUT", "/v1/data/kubernetes", json_body={"schedulingpolicies": {}})
    assert status == 204, body
    d = await pack.decide(pod({}))
    assert d.errors == ["SchedulingPolicy: cannot tell which policies service account team-a/default may use: "
                        "clusterrolebindings, clusterroles, rolebindings, roles not replicated (opa-kube-sync "
                        "--replicate-cluster for clusterroles and clusterrolebindings, --replicate for roles and "
                        "rolebindings, group rbac.authorization.k8s.io/v1)"]


# -- composition with the placement pack -----------------------------------------------------

PLACEMENT = {f"{p.parent.name}/{p.name}": p.read_text()
             for p in [*sorted((ROOT / "policies/federation").glob("*.rego")), ROOT / "policies/rules-eu-pci/eu_pci.rego"]
             if not p.name.endswith("_test.rego")}
CLUSTERS = {"eu": {"metadata": {"name": "eu"}, "status": {"region": "europe-west1"}},
            "us": {"metadata": {"name": "us"}, "status": {"region": "us-east1"}}}


def eu_replicaset(pod_spec: dict[str, Any]) -> dict[str, Any]:
    rs = workload("ReplicaSet", pod_spec, NS, "web")
    rs["metadata"]["annotations"] = {"policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true"}
    return rs


async def unload_pack(pack: Pack) -> None:
    """Delete the pack's modules, dependants first (OPA refuses a deletion that breaks another module)."""
    for name in ("admission", "pods", "validate", "rbac", "match", "merge"):
        await pack.unload(f"policies/schedulingpolicy/{name}.rego")


async def load_placement_world(pack: Pack) -> None:
    await pack.world([policy("team", {"default": ALL_DEFAULTS}), *everyone_may_use()])
    status, body = await pack.opa.request("PUT", "/v1/data/kubernetes/clusters", json_body=CLUSTERS)
    assert status == 204, body


async def test_composes_with_the_placement_policy_and_switches_off_with_its_modules(pack: Pack) -> None:
    # As opa-kube-sync loads them: ConfigMap by ConfigMap in name order (fedplace-federation first).
    mine = {m: src for m, src in modules().items() if m.startswith("policies/schedulingpolicy/")}
    await unload_pack(pack)
    await pack.load(PLACEMENT)
    await pack.load(mine)
    await load_placement_world(pack)
    rs = eu_replicaset({})
    admitted = (await pack.decide(rs)).admitted
    prefs = admitted["metadata"]["annotations"]["federation.kubernetes.io/replica-set-preferences"]
    assert '"eu"' in prefs and '"us"' not in prefs
    assert pod_spec_of(admitted) == {**pod_spec_of(rs), **ALL_DEFAULTS}

    # Both packs' denials in one answer.
    both = await pack.decide({**eu_replicaset({"schedulerName": "elsewhere"}), "metadata": {
        **rs["metadata"], "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": "9"}}})
    assert len(both.errors) == 2
    assert any(e.startswith("no cluster satisfies the placement policy") for e in both.errors)
    assert any(e.startswith('SchedulingPolicy: schedulerName "elsewhere"') for e in both.errors)

    # The pack's modules removed (its ConfigMap deleted): placement alone, pod spec untouched.
    await unload_pack(pack)
    d2 = await pack.decide(rs)
    assert not (d2.result.get("patches") or {}).get("schedulingpolicy")
    assert pod_spec_of(d2.admitted) == pod_spec_of(rs)
    assert "federation.kubernetes.io/replica-set-preferences" in d2.admitted["metadata"]["annotations"]


async def test_the_pack_decides_whatever_the_module_load_order(pack: Pack) -> None:
    await pack.load(PLACEMENT)  # after the pack this time
    await load_placement_world(pack)
    d = await pack.decide(eu_replicaset({"schedulerName": "elsewhere"}))
    assert d.errors == ['SchedulingPolicy: schedulerName "elsewhere": not allowed (allowed: "team-scheduler"); '
                        "policies considered for service account team-a/default: team (merge: smart)"]
    assert {op["path"].rsplit("/", 1)[1] for op in d.result["patches"]["schedulingpolicy"]} == set(ALL_DEFAULTS) - {"schedulerName"}
