"""The stand-ins' pure parts (devstack/karmada/standins.py) and the shape of devstack/karmada/crds.yaml."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstack.karmada import crds
from devstack.karmada.standins import (
    APPLIED_PLACEMENT,
    CPP_NAME,
    CPP_PERMANENT_ID,
    PP_NAME,
    PP_NAMESPACE,
    PP_PERMANENT_ID,
    NoClusterFits,
    Unschedulable,
    available_replicas,
    binding_name,
    candidates,
    choose_clusters,
    choose_policy,
    cluster_matches,
    desired_binding,
    field_selector_matches,
    label_selector_matches,
    needs_scheduling,
    permanent_id_label,
    placement_changed,
    schedule,
    selector_priority,
    target_clusters,
)


def deployment(name: str, namespace: str = "ns", labels: dict[str, str] | None = None,
               replicas: Any = 2) -> dict[str, Any]:
    spec = {} if replicas is None else {"replicas": replicas}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "7",
                         "labels": labels or {}},
            "spec": spec}


def pp(name: str, selectors: list[dict[str, Any]], namespace: str = "ns", priority: int | None = None,
       placement: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": selectors}
    if priority is not None:
        spec["priority"] = priority
    if placement is not None:
        spec["placement"] = placement
    return {"kind": "PropagationPolicy", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def cpp(name: str, selectors: list[dict[str, Any]], priority: int | None = None) -> dict[str, Any]:
    policy = pp(name, selectors, priority=priority)
    policy["kind"] = "ClusterPropagationPolicy"
    del policy["metadata"]["namespace"]
    return policy


def cluster(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment"}

# ---- naming and selection ------------------------------------------------------------------------


@pytest.mark.parametrize("name, kind, expected", [
    ("web", "Deployment", "web-deployment"),
    ("Web", "ConfigMap", "web-configmap"),
    ("system:aggregate-to-view", "ClusterRole", "system.aggregate-to-view-clusterrole"),
])
def test_binding_name(name: str, kind: str, expected: str) -> None:
    assert binding_name(name, kind) == expected


@pytest.mark.parametrize("selector, labels, expected", [
    (None, {}, True),
    ({}, {"a": "1"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchLabels": {"a": "1"}}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"b": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"}, False),
    ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
])
def test_label_selector_matches(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_matches(selector, labels) is expected


def test_selector_priority() -> None:
    web = deployment("web", labels={"app": "web"})
    assert selector_priority({**DEPLOY, "name": "web"}, web) == 3
    # a name that differs does not match, whatever the label selector says
    assert selector_priority({**DEPLOY, "name": "api", "labelSelector": {"matchLabels": {"app": "web"}}}, web) == 0
    assert selector_priority({**DEPLOY, "labelSelector": {"matchLabels": {"app": "web"}}}, web) == 2
    assert selector_priority({**DEPLOY, "labelSelector": {"matchLabels": {"app": "api"}}}, web) == 0
    assert selector_priority(DEPLOY, web) == 1
    assert selector_priority({**DEPLOY, "namespace": "ns"}, web) == 1
    assert selector_priority({**DEPLOY, "namespace": "other"}, web) == 0
    assert selector_priority({"apiVersion": "apps/v1beta1", "kind": "Deployment"}, web) == 0
    assert selector_priority({"apiVersion": "apps/v1", "kind": "StatefulSet"}, web) == 0


def test_propagation_policy_selects_in_its_own_namespace_only() -> None:
    web = deployment("web", namespace="ns")
    assert choose_policy([pp("p", [DEPLOY], namespace="elsewhere")], web) is None
    assert choose_policy([pp("p", [{**DEPLOY, "namespace": "ns"}], namespace="elsewhere")], web) is None
    assert choose_policy([pp("p", [DEPLOY], namespace="ns")], web)["metadata"]["name"] == "p"
    # nor does it select a cluster-scoped template
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}
    assert choose_policy([pp("p", [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}])], role) is None
    assert choose_policy([cpp("c", [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}])],
                         role)["metadata"]["name"] == "c"


def test_choose_policy_precedence() -> None:
    web = deployment("web", labels={"app": "web"})
    by_name = {**DEPLOY, "name": "web"}
    by_labels = {**DEPLOY, "labelSelector": {"matchLabels": {"app": "web"}}}

    def chosen(*policies: dict[str, Any]) -> str:
        policy = choose_policy(policies, web)
        assert policy is not None
        return f"{policy['kind']}/{policy['metadata']['name']}"

    # a PropagationPolicy beats any ClusterPropagationPolicy, whatever their priorities
    assert chosen(cpp("c", [by_name], priority=100), pp("p", [DEPLOY])) == "PropagationPolicy/p"
    # then the explicit priority …
    assert chosen(pp("a", [by_name]), pp("b", [DEPLOY], priority=1)) == "PropagationPolicy/b"
    # … then the better match (name, label selector, all) …
    assert chosen(pp("a", [DEPLOY]), pp("b", [by_labels]), pp("c", [by_name])) == "PropagationPolicy/c"
    assert chosen(pp("a", [DEPLOY]), pp("b", [by_labels])) == "PropagationPolicy/b"
    assert chosen(cpp("a", [DEPLOY]), cpp("b", [by_labels, DEPLOY])) == "ClusterPropagationPolicy/b"
    # … then the name
    assert chosen(pp("b", [DEPLOY]), pp("a", [DEPLOY])) == "PropagationPolicy/a"
    assert choose_policy([pp("x", [{**DEPLOY, "name": "api"}])], web) is None


def test_desired_binding_new() -> None:
    placement = {"clusterAffinity": {"exclude": ["c1"]}}
    binding = desired_binding(deployment("web", replicas=3), pp("p", [DEPLOY], placement=placement))
    assert binding == {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "web-deployment", "namespace": "ns",
                     "annotations": {PP_NAME: "p", PP_NAMESPACE: "ns"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "uid": "uid-web", "controller": True}]},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns", "name": "web",
                              "uid": "uid-web", "resourceVersion": "7"},
                 "replicas": 3, "placement": placement},
    }
    assert binding["spec"]["placement"] is not placement  # a copy


def test_desired_binding_cluster_scoped() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "a:b", "uid": "u", "resourceVersion": "3"}}
    binding = desired_binding(role, cpp("c", []))
    assert binding["kind"] == "ClusterResourceBinding"
    assert binding["metadata"]["name"] == "a.b-clusterrole" and "namespace" not in binding["metadata"]
    assert binding["metadata"]["annotations"] == {CPP_NAME: "c"}
    assert binding["spec"] == {"resource": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                            "name": "a:b", "uid": "u", "resourceVersion": "3"},
                               "placement": {}}  # as Karmada's detector writes it for a policy without one


def test_desired_binding_update_overwrites_placement_and_merges_annotations() -> None:
    existing = {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "web-deployment", "namespace": "ns", "resourceVersion": "41", "labels": {"l": "1"},
                     "annotations": {"keep": "me", CPP_NAME: "old-cpp"}},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns", "name": "web"},
                 "replicas": 5,
                 "placement": {"clusterAffinity": {"exclude": ["c1"], "clusterNames": ["c1", "c2"]},
                               "replicaScheduling": {"replicaSchedulingType": "Divided"}},
                 "clusters": [{"name": "c2", "replicas": 5}]},
        "status": {"schedulerObservedGeneration": 3},
    }
    before = repr(existing)
    new_placement = {"clusterAffinities": [{"affinityName": "a", "clusterNames": ["c3"]}]}
    out = desired_binding(deployment("web", replicas=None), pp("p", [DEPLOY], placement=new_placement), existing)
    assert repr(existing) == before  # not modified
    assert out["spec"]["placement"] == new_placement  # whole: nothing of the old placement left
    assert "replicas" not in out["spec"]
    assert out["spec"]["clusters"] == [{"name": "c2", "replicas": 5}]
    assert out["metadata"]["annotations"] == {"keep": "me", PP_NAME: "p", PP_NAMESPACE: "ns"}
    assert out["metadata"]["resourceVersion"] == "41" and out["metadata"]["labels"] == {"l": "1"}
    assert out["status"] == {"schedulerObservedGeneration": 3}
    # a policy without placement empties the binding's (Karmada's detector writes {})
    assert desired_binding(deployment("web"), pp("p", [DEPLOY]), existing)["spec"]["placement"] == {}
    # booleans are not replica counts
    assert "replicas" not in desired_binding(deployment("web", replicas=True), pp("p", [DEPLOY]))["spec"]


# ---- scheduling -----------------------------------------------------------------------------------

CLUSTERS = [
    cluster("a", {"env": "prod"}, provider="aws", region="eu-west-1", zones=["eu-west-1a", "eu-west-1b"]),
    cluster("b", {"env": "prod"}, provider="gcp", region="us-east1", zone="us-east1-b"),
    cluster("c", {"env": "dev"}, provider="aws", region="us-east1"),
    cluster("d", {}, provider="azure"),
]


@pytest.mark.parametrize("placement, expected", [
    (None, ["a", "b", "c", "d"]),
    ({}, ["a", "b", "c", "d"]),
    ({"clusterAffinity": {}}, ["a", "b", "c", "d"]),
    ({"clusterAffinity": {"exclude": ["a", "zzz"]}}, ["b", "c", "d"]),
    ({"clusterAffinity": {"clusterNames": ["c", "a", "zzz"]}}, ["a", "c"]),
    ({"clusterAffinity": {"clusterNames": []}}, ["a", "b", "c", "d"]),
    ({"clusterAffinity": {"clusterNames": ["a", "c"], "exclude": ["c"]}}, ["a"]),
    ({"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}}}, ["a", "b"]),
    ({"clusterAffinity": {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn",
                                                                  "values": ["prod"]}]}}}, ["c", "d"]),
    ({"clusterAffinity": {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}}}, ["d"]),
    ({"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}, "clusterNames": ["b", "c"]}}, ["b"]),
    ({"clusterAffinity": {"fieldSelector": {"matchExpressions": [{"key": "provider", "operator": "In",
                                                                  "values": ["aws"]}]}}}, ["a", "c"]),
    ({"clusterAffinity": {"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "NotIn",
                                                                  "values": ["us-east1"]}]}}}, ["a", "d"]),
    ({"clusterAffinity": {"fieldSelector": {"matchExpressions": [
        {"key": "provider", "operator": "In", "values": ["aws", "gcp"]},
        {"key": "region", "operator": "In", "values": ["us-east1"]}]}}}, ["b", "c"]),
    ({"clusterAffinity": {"clusterNames": ["zzz"]}}, []),
    # clusterAffinities: the first term, in order, that leaves a cluster
    ({"clusterAffinities": [{"affinityName": "gone", "clusterNames": ["zzz"]},
                            {"affinityName": "dev", "labelSelector": {"matchLabels": {"env": "dev"}}},
                            {"affinityName": "all"}]}, ["c"]),
    ({"clusterAffinities": [{"affinityName": "all"},
                            {"affinityName": "dev", "labelSelector": {"matchLabels": {"env": "dev"}}}]},
     ["a", "b", "c", "d"]),
    ({"clusterAffinities": [{"affinityName": "x", "exclude": ["a", "b", "c", "d"]},
                            {"affinityName": "y", "clusterNames": ["zzz"]}]}, []),
    ({"clusterAffinities": []}, ["a", "b", "c", "d"]),
])
def test_choose_clusters(placement: Any, expected: list[str]) -> None:
    assert choose_clusters(placement, reversed(CLUSTERS)) == expected


@pytest.mark.parametrize("requirement, matching", [
    ({"key": "zone", "operator": "In", "values": ["eu-west-1a", "eu-west-1b", "x"]}, ["a"]),  # all its zones
    ({"key": "zone", "operator": "In", "values": ["eu-west-1a"]}, ["a"]),                       # any overlap
    ({"key": "zone", "operator": "In", "values": ["us-east1-b"]}, []),                          # spec.zone unread
    ({"key": "zone", "operator": "NotIn", "values": ["eu-west-1a"]}, ["b", "c", "d"]),
    ({"key": "zone", "operator": "NotIn", "values": ["eu-west-1b", "x"]}, ["b", "c", "d"]),
    ({"key": "provider", "operator": "Exists"}, []),
    ({"key": "color", "operator": "In", "values": ["red"]}, []),
])
def test_field_selector_zones_and_unknowns(requirement: dict[str, Any], matching: list[str]) -> None:
    fs = {"matchExpressions": [requirement]}
    assert [c["metadata"]["name"] for c in CLUSTERS if field_selector_matches(fs, c)] == matching
    assert [c["metadata"]["name"] for c in CLUSTERS if cluster_matches({"fieldSelector": fs}, c)] == matching


@pytest.mark.parametrize("names, placement, replicas, expected", [
    (["a", "b"], None, 3, [{"name": "a", "replicas": 3}, {"name": "b", "replicas": 3}]),
    (["a", "b"], {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}, 2,
     [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}]),
    (["a", "b", "c"], {"replicaScheduling": {"replicaSchedulingType": "Divided"}}, 5,
     [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}, {"name": "c", "replicas": 1}]),
    # a cluster given none of a Divided binding's replicas is left out (Karmada removes it)
    (["a", "b", "c"], {"replicaScheduling": {}}, 2, [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1}]),
    (["a", "b"], {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                        "replicaDivisionPreference": "Weighted"}}, 4,
     [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}]),
    (["a", "b"], None, None, [{"name": "a"}, {"name": "b"}]),
    (["a"], {"replicaScheduling": {"replicaSchedulingType": "Divided"}}, 0, [{"name": "a"}]),
    ([], None, 3, []),
])
def test_target_clusters(names: list[str], placement: Any, replicas: Any, expected: list[dict[str, Any]]) -> None:
    assert target_clusters(names, placement, replicas) == expected


# ---- the CRDs' shape -----------------------------------------------------------------------------

def _schema(kind: str) -> dict[str, Any]:
    crd = next(c for c in crds() if c["spec"]["names"]["kind"] == kind)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_crds_names_scopes_versions() -> None:
    got = {(c["metadata"]["name"], c["spec"]["scope"], c["spec"]["versions"][0]["name"],
            "status" in (c["spec"]["versions"][0].get("subresources") or {})) for c in crds()}
    assert got == {("clusters.cluster.karmada.io", "Cluster", "v1alpha1", True),
                   ("propagationpolicies.policy.karmada.io", "Namespaced", "v1alpha1", False),
                   ("clusterpropagationpolicies.policy.karmada.io", "Cluster", "v1alpha1", False),
                   ("resourcebindings.work.karmada.io", "Namespaced", "v1alpha2", True),
                   ("clusterresourcebindings.work.karmada.io", "Cluster", "v1alpha2", True)}


def test_placement_schema_is_one_and_typed() -> None:
    placements = [_schema(k)["properties"]["spec"]["properties"]["placement"]
                  for k in ("PropagationPolicy", "ClusterPropagationPolicy", "ResourceBinding", "ClusterResourceBinding")]
    assert all(p == placements[0] for p in placements)
    props = placements[0]["properties"]
    strings = {"type": "array", "items": {"type": "string"}}
    assert props["clusterAffinity"]["properties"]["exclude"] == strings
    assert props["clusterAffinity"]["properties"]["clusterNames"] == strings
    term = props["clusterAffinities"]["items"]
    assert term["required"] == ["affinityName"]
    assert term["properties"]["affinityName"] == {"type": "string", "minLength": 1}
    tiers = term["properties"]["overflowAffinities"]
    assert tiers["type"] == "array" and tiers["items"]["required"] == ["affinityName"]
    assert tiers["items"]["properties"] == {k: v for k, v in term["properties"].items() if k != "overflowAffinities"}
    assert {k: v for k, v in term["properties"].items() if k not in ("affinityName", "overflowAffinities")} == \
        props["clusterAffinity"]["properties"]

    def preserving(node: Any, path: str = "") -> list[str]:
        if not isinstance(node, dict):
            return []
        here = [path] if node.get("x-kubernetes-preserve-unknown-fields") else []
        return here + [p for k, v in node.items() for p in preserving(v, f"{path}/{k}")]

    assert preserving(placements[0]) == []  # placement is typed all through


def test_binding_spec_fields() -> None:
    spec = _schema("ResourceBinding")["properties"]["spec"]
    assert spec["required"] == ["resource"]
    assert spec["properties"]["resource"]["required"] == ["apiVersion", "kind", "name"]
    assert set(spec["properties"]["resource"]["properties"]) == {"apiVersion", "kind", "namespace", "name", "uid",
                                                                 "resourceVersion"}
    assert spec["properties"]["clusters"]["items"]["properties"] == {"name": {"type": "string"},
                                                                     "replicas": {"type": "integer", "format": "int32"}}
    assert spec["properties"]["replicaRequirements"].get("x-kubernetes-preserve-unknown-fields") is True
    policy = _schema("PropagationPolicy")["properties"]["spec"]
    assert policy["required"] == ["resourceSelectors"]
    assert policy["properties"]["resourceSelectors"]["items"]["required"] == ["apiVersion", "kind"]


def _structural_errors(node: Any, path: str) -> list[str]:
    """What makes a schema non-structural, the common cases: a node without a type (unless it
    preserves unknown fields), an array without items, properties beside additionalProperties."""
    errors = []
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        errors.append(f"{path}: no type")
    if node.get("type") == "array" and "items" not in node:
        errors.append(f"{path}: an array without items")
    if "properties" in node and "additionalProperties" in node:
        errors.append(f"{path}: properties and additionalProperties")
    for name, child in (node.get("properties") or {}).items():
        errors += _structural_errors(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            errors += _structural_errors(node[key], f"{path}[{key}]")
    return errors


def test_schemas_are_structural() -> None:
    """The devstack accepts a non-structural CRD that a real kube-apiserver refuses: checked here
    too, so that a devstack-only run catches the common mistakes."""
    for crd in crds():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert _structural_errors(schema, crd["metadata"]["name"]) == []
        assert schema["properties"]["metadata"] == {"type": "object"}


# ---- scheduling as karmada-scheduler: overflow tiers, terms, generations --------------------------

def pods(c: dict[str, Any], allocatable: int, allocated: int = 0) -> dict[str, Any]:
    return {**c, "status": {"resourceSummary": {"allocatable": {"pods": str(allocatable)},
                                                "allocated": {"pods": str(allocated)}}}}


DIVIDED = {"replicaScheduling": {"replicaSchedulingType": "Divided"}}


def overflow(primary: dict[str, Any], *tiers: dict[str, Any]) -> dict[str, Any]:
    return {"clusterAffinities": [{"affinityName": "main", **primary,
                                   "overflowAffinities": [{"affinityName": f"t{i}", **t} for i, t in enumerate(tiers)]}],
            **DIVIDED}


def test_available_replicas() -> None:
    assert available_replicas(pods(CLUSTERS[0], 10, 3)) == 7
    assert available_replicas(pods(CLUSTERS[0], 2, 5)) == 0
    assert available_replicas(CLUSTERS[0]) == 0


def test_overflow_tiers_fill_in_order_each_with_its_own_exclude() -> None:
    fleet = [pods(CLUSTERS[0], 5), pods(CLUSTERS[1], 100), pods(CLUSTERS[2], 100), pods(CLUSTERS[3], 100)]
    # a (5 pods) first, then the tier: b, excluded by the term, is admitted by the tier
    placement = overflow({"clusterNames": ["a"], "exclude": ["b"]}, {"clusterNames": ["b"]})
    assert schedule(placement, fleet, 20) == ([{"name": "a", "replicas": 5}, {"name": "b", "replicas": 15}], "main")
    # the tier's own exclude keeps b out: not enough room, the old result is kept
    with pytest.raises(Unschedulable):
        schedule(overflow({"clusterNames": ["a"]}, {"clusterNames": ["b"], "exclude": ["b"]}), fleet, 20)
    # enough room in the primary tier: the overflow tier is not used
    assert schedule(placement, fleet, 4) == ([{"name": "a", "replicas": 4}], "main")
    # the primary tier admits nothing: the term is still used, through its tier
    assert schedule(overflow({"clusterNames": ["zzz"]}, {"clusterNames": ["b"]}), fleet, 3) == (
        [{"name": "b", "replicas": 3}], "main")
    # not a workload (no replicas): overflow tiers do not count
    with pytest.raises(NoClusterFits):
        schedule(overflow({"clusterNames": ["zzz"]}, {"clusterNames": ["b"]}), fleet, None)
    assert candidates(overflow({"clusterNames": ["a"]}, {"clusterNames": ["b", "a"]}), fleet, workload=True).tiers == {
        "a": 0, "b": 1}


def test_terms_move_forward_only_and_an_exclude_of_everything_fits_nothing() -> None:
    placement = {"clusterAffinities": [{"affinityName": "first", "clusterNames": ["a"]},
                                       {"affinityName": "second", "clusterNames": ["b"]}]}
    assert candidates(placement, CLUSTERS).affinity_name == "first"
    assert candidates(placement, CLUSTERS, observed_affinity="second").tiers == {"b": 0}
    assert candidates(placement, CLUSTERS, observed_affinity="gone").affinity_name == "first"
    with pytest.raises(NoClusterFits):
        schedule({"clusterAffinity": {"exclude": ["a", "b", "c", "d"]}}, CLUSTERS, 2)


def rb(generation: int, observed: int | None, labels: dict[str, str] | None = None,
       placement: dict[str, Any] | None = None, applied: str | None = None, replicas: int | None = 2,
       clusters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "generation": generation,
                            "labels": {PP_PERMANENT_ID: "id"} if labels is None else labels,
                            "annotations": {} if applied is None else {APPLIED_PLACEMENT: applied}}
    return {"metadata": meta, "spec": {"placement": placement or {}, "replicas": replicas, "clusters": clusters or []},
            "status": {} if observed is None else {"schedulerObservedGeneration": observed}}


def test_needs_scheduling_reads_the_permanent_id_and_the_generation() -> None:
    assert needs_scheduling(rb(2, None, placement=DIVIDED))
    assert needs_scheduling(rb(3, 2, placement=DIVIDED))
    assert not needs_scheduling(rb(2, 2, placement=DIVIDED))
    assert needs_scheduling(rb(2, 2))                                  # Duplicated: looked at every time
    assert not needs_scheduling(rb(2, None, labels={}))
    assert needs_scheduling(rb(2, None, labels={CPP_PERMANENT_ID: "id"}, placement=DIVIDED))


def test_placement_changed_compares_the_applied_placement() -> None:
    same = json.dumps({**DIVIDED})
    assert placement_changed(rb(2, 1, placement=DIVIDED))                               # never applied
    assert not placement_changed(rb(2, 1, placement=DIVIDED, applied=same, clusters=[{"name": "a", "replicas": 2}]))
    assert placement_changed(rb(2, 1, placement=DIVIDED, applied=same, clusters=[{"name": "a", "replicas": 1}]))
    assert placement_changed(rb(2, 1, placement={"clusterAffinity": {}}, applied=same))
    assert placement_changed(rb(2, 1, placement={}, applied="{}"))                      # Duplicated: always


def test_detector_copies_the_permanent_id() -> None:
    policy = pp("p", [DEPLOY])
    assert desired_binding(deployment("web"), policy)["metadata"].get("labels") is None
    policy["metadata"]["uid"] = "u-1"
    assert permanent_id_label(policy) == {PP_PERMANENT_ID: "u-1"}
    policy["metadata"]["labels"] = {PP_PERMANENT_ID: "from-webhook"}
    existing = {"metadata": {"name": "web-deployment", "labels": {"keep": "me", PP_PERMANENT_ID: "old"}}, "spec": {}}
    assert desired_binding(deployment("web"), policy, existing)["metadata"]["labels"] == {
        "keep": "me", PP_PERMANENT_ID: "from-webhook"}
