"""devstack/karmada/crds.yaml on an API server: installed and served, full objects kept as sent,
the JSON patch shapes fedplace's admission sends accepted — and, on a real kube-apiserver (the
devstack validates no custom resource against its schema), invalid ones refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client

from devstack.karmada import (
    CLUSTER_PROPAGATION_POLICIES,
    CLUSTER_RESOURCE_BINDINGS,
    CLUSTERS,
    DIGEST_ANNOTATION,
    PROPAGATION_POLICIES,
    RESOURCE_BINDINGS,
    crds,
    install_crds,
)
from devstack.scratch import CRDS_PATH, unique_name
from fedplace.common.kube_client import KubeApiError, kube_json

from .helpers import ClusterScoped, binding, get_binding, policy, wait_for

JSON_PATCH = "application/json-patch+json"

LABEL_SELECTOR = {"matchLabels": {"env": "prod"},
                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                                       {"key": "legacy", "operator": "DoesNotExist"}]}
FIELD_SELECTOR = {"matchExpressions": [{"key": "provider", "operator": "In", "values": ["aws"]},
                                       {"key": "region", "operator": "NotIn", "values": ["us-east-1"]},
                                       {"key": "zone", "operator": "In", "values": ["eu-west-1a"]}]}
AFFINITY = {"labelSelector": LABEL_SELECTOR, "fieldSelector": FIELD_SELECTOR, "clusterNames": ["m1", "m2"],
            "exclude": ["m3"]}
# Every placement field the CRDs type.
FULL_PLACEMENT: dict[str, Any] = {
    "clusterAffinity": AFFINITY,
    "clusterTolerations": [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule",
                            "tolerationSeconds": 300}],
    "spreadConstraints": [{"spreadByField": "region", "maxGroups": 2, "minGroups": 1},
                          {"spreadByLabel": "team", "maxGroups": 3}],
    "replicaScheduling": {
        "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": [{"targetCluster": AFFINITY, "weight": 2},
                                                  {"targetCluster": {"clusterNames": ["m2"]}, "weight": 1}],
                             "dynamicWeight": "AvailableReplicas"}},
}
TERMS = [{"affinityName": "primary", **AFFINITY}, {"affinityName": "backup", "clusterNames": ["m4"]}]


async def test_crds_install_and_are_served(karmada_api: client.ApiClient) -> None:
    # the fixture installed them; installing again writes nothing
    assert await install_crds(karmada_api) == []
    for crd in crds():
        name, spec = crd["metadata"]["name"], crd["spec"]
        stored = await kube_json(karmada_api, "GET", f"{CRDS_PATH}/{name}")
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions.get("Established") == "True", (name, conditions)
        assert stored["metadata"]["annotations"][DIGEST_ANNOTATION]
        version = spec["versions"][0]["name"]
        group_version = f"{spec['group']}/{version}"
        kind, plural = spec["names"]["kind"], spec["names"]["plural"]

        async def discovered(group_version: str = group_version, plural: str = plural) -> dict[str, Any] | None:
            # a real server's discovery follows on its own time
            try:
                doc = await kube_json(karmada_api, "GET", f"/apis/{group_version}")
            except KubeApiError:
                return None
            return {r["name"]: r for r in doc["resources"]} if plural in {r["name"] for r in doc["resources"]} else None

        resources = await wait_for(discovered, f"{plural} in the discovery of {group_version}")
        assert resources[plural]["kind"] == kind
        assert resources[plural]["namespaced"] is (spec["scope"] == "Namespaced")
        has_status = "status" in (spec["versions"][0].get("subresources") or {})
        assert (f"{plural}/status" in resources) is has_status, name
        listed = await kube_json(karmada_api, "GET", f"/apis/{group_version}/{plural}")
        assert listed["kind"] == f"{kind}List" and isinstance(listed["items"], list)


async def test_install_crds_replaces_an_outdated_crd(karmada_api: client.ApiClient) -> None:
    name = "clusterpropagationpolicies.policy.karmada.io"
    stored = await kube_json(karmada_api, "GET", f"{CRDS_PATH}/{name}")
    # as if an older crds.yaml had installed it
    await kube_json(karmada_api, "PATCH", f"{CRDS_PATH}/{name}", content_type="application/merge-patch+json",
                    body={"metadata": {"annotations": {DIGEST_ANNOTATION: "older"}}})
    assert await install_crds(karmada_api) == [name]
    again = await kube_json(karmada_api, "GET", f"{CRDS_PATH}/{name}")
    assert again["metadata"]["annotations"][DIGEST_ANNOTATION] == stored["metadata"]["annotations"][DIGEST_ANNOTATION]
    assert again["metadata"]["uid"] == stored["metadata"]["uid"]  # replaced in place: its objects stay


async def test_full_objects_are_kept_as_sent(karmada_api: client.ApiClient, kube_namespace: str,
                                             cluster_scoped: ClusterScoped) -> None:
    """Each typed field round-trips: a real server prunes a field its schema does not know."""
    ns = kube_namespace
    rb = binding("web", placement={**FULL_PLACEMENT, "clusterAffinities": TERMS}, replicas=4)
    rb["spec"]["resource"].update(namespace=ns, uid="0d1f4c1e-0000-4000-8000-000000000001", resourceVersion="12")
    rb["spec"]["clusters"] = [{"name": "m1", "replicas": 3}, {"name": "m2", "replicas": 1}]
    rb["spec"]["replicaRequirements"] = {"resourceRequest": {"cpu": "100m"}, "anything": {"goes": True}}
    created = await kube_json(karmada_api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=rb)
    assert created["spec"] == rb["spec"]
    assert (await get_binding(karmada_api, ns, "web-deployment"))["spec"] == rb["spec"]

    pp = policy("pp", [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "web",
                        "labelSelector": LABEL_SELECTOR}], placement=FULL_PLACEMENT, priority=5)
    pp["spec"].update(conflictResolution="Overwrite", preemption="Never", propagateDeps=True)
    created = await kube_json(karmada_api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=pp)
    assert created["spec"] == pp["spec"]

    cpp = policy(unique_name("cpp"), [{"apiVersion": "v1", "kind": "Namespace", "name": ns}],
                 placement={"clusterAffinities": TERMS}, kind="ClusterPropagationPolicy")
    assert (await cluster_scoped.create(CLUSTER_PROPAGATION_POLICIES, cpp))["spec"] == cpp["spec"]

    crb = binding("role", placement=FULL_PLACEMENT)
    crb.update(kind="ClusterResourceBinding")
    crb["metadata"]["name"] = unique_name("role-clusterrole")
    crb["spec"]["resource"] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "role"}
    assert (await cluster_scoped.create(CLUSTER_RESOURCE_BINDINGS, crb))["spec"] == crb["spec"]

    member = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": unique_name("m")},
              "spec": {"syncMode": "Push", "apiEndpoint": "https://m.example.invalid", "provider": "aws",
                       "region": "eu-west-1", "zone": "eu-west-1a", "zones": ["eu-west-1a", "eu-west-1b"],
                       "taints": [{"key": "maintenance", "value": "yes", "effect": "NoSchedule",
                                   "timeAdded": "2024-01-02T03:04:05Z"}],
                       "secretRef": {"namespace": "karmada-cluster", "name": "m"}}}
    created = await cluster_scoped.create(CLUSTERS, member)
    assert created["spec"] == member["spec"]
    status = {"kubernetesVersion": "v1.24.0",
              "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady",
                              "message": "cluster is healthy and ready to accept workloads",
                              "lastTransitionTime": "2024-01-02T03:04:05Z"}],
              "nodeSummary": {"totalNum": 3, "readyNum": 3}}
    path = CLUSTERS.object_path(member["metadata"]["name"]) + "/status"
    updated = await kube_json(karmada_api, "PATCH", path, body={"status": status},
                              content_type="application/merge-patch+json")
    assert updated["status"] == status


# (placement before, JSON patch, placement after): the shapes fedplace's admission sends.
PATCHES = [
    ({"clusterAffinity": {"clusterNames": ["m1", "m2"]}},
     [{"op": "add", "path": "/spec/placement/clusterAffinity/exclude", "value": ["m2"]}],
     {"clusterAffinity": {"clusterNames": ["m1", "m2"], "exclude": ["m2"]}}),
    ({"clusterAffinity": {"exclude": ["m9"]}},
     [{"op": "replace", "path": "/spec/placement/clusterAffinity/exclude", "value": ["m9", "m2"]}],
     {"clusterAffinity": {"exclude": ["m9", "m2"]}}),
    ({"clusterAffinities": copy.deepcopy(TERMS)},
     [{"op": "add", "path": "/spec/placement/clusterAffinities/0/exclude", "value": ["m1", "m3"]},
      {"op": "add", "path": "/spec/placement/clusterAffinities/1/exclude", "value": ["m1"]}],
     {"clusterAffinities": [{**TERMS[0], "exclude": ["m1", "m3"]}, {**TERMS[1], "exclude": ["m1"]}]}),
    ({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
     [{"op": "add", "path": "/spec/placement/clusterAffinity", "value": {"exclude": ["m1"]}}],
     {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}, "clusterAffinity": {"exclude": ["m1"]}}),
    (None,
     [{"op": "add", "path": "/spec/placement", "value": {"clusterAffinity": {"exclude": ["m1", "m2"]}}}],
     {"clusterAffinity": {"exclude": ["m1", "m2"]}}),
]


async def test_placement_patches_are_accepted(karmada_api: client.ApiClient, kube_namespace: str) -> None:
    ns = kube_namespace
    for i, (before, patch, after) in enumerate(PATCHES):
        name = f"app{i}"
        await kube_json(karmada_api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=binding(name, before))
        patched = await kube_json(karmada_api, "PATCH", RESOURCE_BINDINGS.object_path(f"{name}-deployment", ns),
                                  body=patch, content_type=JSON_PATCH)
        assert patched["spec"]["placement"] == after, (i, patched["spec"])
        assert (await get_binding(karmada_api, ns, f"{name}-deployment"))["spec"]["placement"] == after


# (placement before, JSON patch, what the answer names): refused by the schema.
INVALID_PATCHES = [
    ({"clusterAffinity": {}},
     [{"op": "add", "path": "/spec/placement/clusterAffinity/exclude", "value": "m1"}],
     "spec.placement.clusterAffinity.exclude"),
    ({"clusterAffinity": {}},
     [{"op": "add", "path": "/spec/placement/clusterAffinity/exclude", "value": [1]}],
     "spec.placement.clusterAffinity.exclude[0]"),
    ({"clusterAffinities": copy.deepcopy(TERMS)},
     [{"op": "add", "path": "/spec/placement/clusterAffinities/-", "value": {"exclude": ["m1"]}}],
     "spec.placement.clusterAffinities[2].affinityName"),
    ({"clusterAffinities": copy.deepcopy(TERMS)},
     [{"op": "replace", "path": "/spec/placement/clusterAffinities/0/affinityName", "value": ""}],
     "spec.placement.clusterAffinities[0].affinityName"),
    ({"clusterAffinities": copy.deepcopy(TERMS)},
     [{"op": "add", "path": "/spec/placement/clusterAffinities/1/exclude", "value": {"m1": True}}],
     "spec.placement.clusterAffinities[1].exclude"),
    (None,
     [{"op": "add", "path": "/spec/placement", "value": {"clusterAffinity": {"exclude": "m1"}}}],
     "spec.placement.clusterAffinity.exclude"),
    (None,
     [{"op": "add", "path": "/spec/placement", "value": {"clusterAffinity": {"fieldSelector": {
         "matchExpressions": [{"key": "color", "operator": "Exists"}]}}}}],
     "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0]"),
    (None,
     [{"op": "add", "path": "/spec/placement", "value": {"spreadConstraints": [{"spreadByField": "country"}]}}],
     "spec.placement.spreadConstraints[0].spreadByField"),
    (None,
     [{"op": "add", "path": "/spec/clusters", "value": [{"replicas": 1}]}],
     "spec.clusters[0].name"),
    (None,
     [{"op": "remove", "path": "/spec/resource/kind"}],
     "spec.resource.kind"),
]


async def test_invalid_patches_are_refused(karmada_api: client.ApiClient, kube_namespace: str) -> None:
    ns = kube_namespace
    for i, (before, patch, field_path) in enumerate(INVALID_PATCHES):
        name = f"app{i}"
        created = await kube_json(karmada_api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=binding(name, before))
        with pytest.raises(KubeApiError) as info:
            await kube_json(karmada_api, "PATCH", RESOURCE_BINDINGS.object_path(f"{name}-deployment", ns),
                            body=patch, content_type=JSON_PATCH)
        assert info.value.status == 422 and info.value.reason == "Invalid", (i, info.value)
        assert field_path in info.value.message, (i, info.value.message)
        stored = await get_binding(karmada_api, ns, f"{name}-deployment")
        assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_invalid_objects_are_refused(karmada_api: client.ApiClient, kube_namespace: str) -> None:
    ns = kube_namespace
    cases = [
        (PROPAGATION_POLICIES, {**policy("none", []), "spec": {}}, "spec.resourceSelectors"),
        (PROPAGATION_POLICIES, policy("empty", []), "spec.resourceSelectors"),
        (PROPAGATION_POLICIES, policy("nokind", [{"apiVersion": "apps/v1"}]), "spec.resourceSelectors[0].kind"),
        (PROPAGATION_POLICIES, policy("term", [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                                      placement={"clusterAffinities": [{"clusterNames": ["m1"]}]}),
         "spec.placement.clusterAffinities[0].affinityName"),
        (PROPAGATION_POLICIES, policy("weight", [{"apiVersion": "apps/v1", "kind": "Deployment"}], placement={
            "replicaScheduling": {"replicaSchedulingType": "Split"}}),
         "spec.placement.replicaScheduling.replicaSchedulingType"),
        (RESOURCE_BINDINGS, {**binding("noresource"), "spec": {"replicas": 1}}, "spec.resource"),
        (RESOURCE_BINDINGS, binding("replicas", replicas="two"), "spec.replicas"),  # type: ignore[arg-type]
    ]
    for resource, body, field_path in cases:
        with pytest.raises(KubeApiError) as info:
            await kube_json(karmada_api, "POST", resource.collection_path(ns), body=body)
        assert info.value.status == 422, (body, info.value)
        assert field_path in info.value.message, (field_path, info.value.message)
    with pytest.raises(KubeApiError) as info:
        await kube_json(karmada_api, "POST", CLUSTERS.collection_path(), body={
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": unique_name("m")},
            "spec": {"syncMode": "Sideways", "taints": [{"key": "k", "effect": "Sometimes"}]}})
    assert info.value.status == 422
    assert "spec.syncMode" in info.value.message and "spec.taints[0].effect" in info.value.message


async def test_unknown_fields_are_pruned(karmada_api: client.ApiClient, kube_namespace: str) -> None:
    """Where the schema is typed, a real server drops what it does not know (the devstack keeps it)."""
    body = binding("web", placement={"clusterAffinity": {"exclude": ["m1"], "excludeTypo": ["m2"]},
                                     "unknownPlacementField": 1})
    body["spec"]["replicaRequirements"] = {"kept": {"as": "sent"}}
    created = await kube_json(karmada_api, "POST", RESOURCE_BINDINGS.collection_path(kube_namespace), body=body)
    assert created["spec"]["placement"] == {"clusterAffinity": {"exclude": ["m1"]}}
    assert created["spec"]["replicaRequirements"] == {"kept": {"as": "sent"}}
