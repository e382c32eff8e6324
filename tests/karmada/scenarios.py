"""Karmada scenarios: templates and policies created, bindings and ``spec.clusters`` awaited, each
run as ``scenario(karmada) -> outcome`` on a :class:`~tests.fixtures.karmada.Karmada` — real
Karmada or the stand-ins —, the outcome a plain dict that must be the same on both (clusters by
role, so that names do not matter). :data:`SCENARIOS` maps each name to the scenario and the
outcome real Karmada gives.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES, RESOURCE_BINDINGS
from devstack.karmada.standins import APPLIED_PLACEMENT, PERMANENT_ID_LABELS
from fedplace.common.kube_client import kube_json
from tests.fixtures.karmada import Karmada

from .helpers import DEPLOYMENTS_PATH, deployment, policy

Outcome = dict[str, Any]
Scenario = Callable[[Karmada], Awaitable[Outcome]]
MERGE = "application/merge-patch+json"
QUIET = 3.0  # how long a scenario waits to see that something does not happen


def weighted(k: Karmada) -> dict[str, Any]:
    """Divided replicas, every cluster of the test weighted 1 (an even split)."""
    return {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [{"targetCluster": {"labelSelector": k.run_selector},
                                                       "weight": 1}]}}


async def propagate(k: Karmada, name: str, placement: dict[str, Any], replicas: int = 2) -> None:
    """A Deployment ``name`` and a PropagationPolicy of the same name selecting it."""
    await kube_json(k.api, "POST", PROPAGATION_POLICIES.collection_path(k.namespace), body=policy(
        name, [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}], placement=placement))
    await kube_json(k.api, "POST", DEPLOYMENTS_PATH.format(ns=k.namespace), body=deployment(name, replicas=replicas))


async def set_placement(k: Karmada, name: str, placement: dict[str, Any]) -> None:
    """Replace the placement of PropagationPolicy ``name`` (the detector then rewrites the binding)."""
    path = PROPAGATION_POLICIES.object_path(name, k.namespace)
    current = await kube_json(k.api, "GET", path)
    current["spec"]["placement"] = placement
    await kube_json(k.api, "PUT", path, body=current)


def scheduled_condition(binding: dict[str, Any]) -> str | None:
    """The status of the binding's ``Scheduled`` condition, if any."""
    for condition in (binding.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Scheduled":
            return condition.get("status")
    return None


async def zones_overlap(k: Karmada) -> Outcome:
    """``zone`` In matches a cluster with any listed zone; the binding carries the policy's
    permanent id, and the scheduler records the placement it scheduled."""
    await k.add_cluster("a", zones=["z1", "z2"])
    await k.add_cluster("b", zones=["z3"])
    await k.add_cluster("c")
    placement = {"clusterAffinity": {"labelSelector": k.run_selector, "fieldSelector": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["z1", "z4"]}]}}}
    await propagate(k, "zones", placement)
    b = await k.scheduled("zones", lambda b: bool(b["spec"].get("clusters")))
    return {"clusters": k.roles(b),
            "permanent_id": any(label in b["metadata"].get("labels", {}) for label in PERMANENT_ID_LABELS),
            "applied": json.loads(b["metadata"]["annotations"][APPLIED_PLACEMENT]) == placement}


async def exclude_everything(k: Karmada) -> Outcome:
    """A scheduled binding whose policy then excludes every candidate loses every cluster."""
    a, b_ = await k.add_cluster("a"), await k.add_cluster("b")
    await propagate(k, "gone", {"clusterAffinity": {"labelSelector": k.run_selector}})
    before = k.roles(await k.scheduled("gone", lambda b: len(b["spec"].get("clusters") or []) == 2))
    await set_placement(k, "gone", {"clusterAffinity": {"labelSelector": k.run_selector, "exclude": [a, b_]}})
    b = await k.scheduled("gone", lambda b: bool(b["spec"]["placement"]["clusterAffinity"].get("exclude"))
                          and scheduled_condition(b) == "False")
    return {"before": before, "after": k.roles(b)}


def overflow(k: Karmada, tier_exclude: list[str]) -> dict[str, Any]:
    """One term: cluster ``eu`` first, with an overflow tier naming ``us`` (and excluding
    ``tier_exclude``); the term itself excludes ``us``. Aggregated: karmada-webhook allows
    overflow tiers only with it or dynamic weights."""
    return {"clusterAffinities": [{"affinityName": "main", "clusterNames": [k.clusters["eu"]],
                                   "exclude": [k.clusters["us"]],
                                   "overflowAffinities": [{"affinityName": "spill", "clusterNames": [k.clusters["us"]],
                                                           "exclude": tier_exclude}]}],
            "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}


async def overflow_then_old_result(k: Karmada) -> Outcome:
    """Replicas beyond the first cluster's room overflow to the tier's cluster (the term's own
    exclude does not keep it out: the tier has its own). When the tier then excludes it too, the
    replicas fit nowhere and the previous result is kept."""
    await k.add_cluster("eu", pods=5)
    await k.add_cluster("us", pods=100)
    await propagate(k, "spill", overflow(k, []), replicas=20)
    first = await k.scheduled("spill", lambda b: bool(b["spec"].get("clusters")))
    await set_placement(k, "spill", overflow(k, [k.clusters["us"]]))
    b = await k.scheduled("spill", lambda b: bool(b["spec"]["placement"]["clusterAffinities"][0]
                                                  ["overflowAffinities"][0].get("exclude"))
                          and scheduled_condition(b) == "False", timeout=30)
    return {"overflowed": k.roles(first), "kept": k.roles(b),
            "affinity": (first.get("status") or {}).get("schedulerObservingAffinityName")}


async def terms_move_forward(k: Karmada) -> Outcome:
    """With clusterAffinities, the first term that fits is used; a cluster that later fits an
    earlier term does not bring the binding back to it."""
    await k.add_cluster("b")
    first = f"{k.run}-a"
    await propagate(k, "terms", {"clusterAffinities": [
        {"affinityName": "first", "clusterNames": [first]},
        {"affinityName": "second", "clusterNames": [k.clusters["b"]]}]})
    b = await k.scheduled("terms", lambda b: bool(b["spec"].get("clusters")))
    await k.add_cluster("a")
    await asyncio.sleep(QUIET)
    after = await k.binding("terms")
    assert after is not None
    return {"clusters": k.roles(b), "affinity": b["status"].get("schedulerObservingAffinityName"),
            "later": k.roles(after), "later_affinity": after["status"].get("schedulerObservingAffinityName")}


async def unlabelled_binding_ignored(k: Karmada) -> Outcome:
    """A binding no policy's detector wrote (no permanent-id label) is never scheduled."""
    await k.add_cluster("a")
    await kube_json(k.api, "POST", DEPLOYMENTS_PATH.format(ns=k.namespace), body=deployment("orphan"))
    await kube_json(k.api, "POST", RESOURCE_BINDINGS.collection_path(k.namespace), body={
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "orphan-deployment"},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": k.namespace,
                              "name": "orphan"},
                 "replicas": 2, "placement": {"clusterAffinity": {"clusterNames": [k.clusters["a"]]}}}})
    await asyncio.sleep(QUIET)
    b = await k.binding("orphan")
    assert b is not None
    return {"clusters": k.roles(b), "observed": (b.get("status") or {}).get("schedulerObservedGeneration")}


async def divided_stays_on_cluster_change(k: Karmada) -> Outcome:
    """A Divided binding is not rescheduled when another cluster starts matching its placement:
    only a new generation (placement or replicas) reschedules it."""
    await k.add_cluster("a", labels={"tier": "gold"})
    await k.add_cluster("b")
    placement = {"clusterAffinity": {"labelSelector": {"matchLabels": {**k.run_selector["matchLabels"],
                                                                        "tier": "gold"}}},
                 "replicaScheduling": weighted(k)}
    await propagate(k, "steady", placement, replicas=4)
    first = await k.scheduled("steady", lambda b: bool(b["spec"].get("clusters")))
    await kube_json(k.api, "PATCH", CLUSTERS.object_path(k.clusters["b"]), content_type=MERGE,
                    body={"metadata": {"labels": {"tier": "gold"}}})
    await asyncio.sleep(QUIET)
    after = await k.binding("steady")
    assert after is not None
    # Scaled: a new generation, rescheduled over both.
    await kube_json(k.api, "PATCH", DEPLOYMENTS_PATH.format(ns=k.namespace) + "/steady", content_type=MERGE,
                    body={"spec": {"replicas": 6}})
    scaled = await k.scheduled("steady", lambda b: sum(k.roles(b).values()) == 6)
    return {"first": k.roles(first), "after_relabel": k.roles(after), "scaled": k.roles(scaled)}


SCENARIOS: dict[str, tuple[Scenario, Outcome]] = {
    "zones_overlap": (zones_overlap, {"clusters": {"a": 2}, "permanent_id": True, "applied": True}),
    "exclude_everything": (exclude_everything, {"before": {"a": 2, "b": 2}, "after": {}}),
    "overflow_then_old_result": (overflow_then_old_result, {"overflowed": {"eu": 5, "us": 15},
                                                            "kept": {"eu": 5, "us": 15}, "affinity": "main"}),
    "terms_move_forward": (terms_move_forward, {"clusters": {"b": 2}, "affinity": "second",
                                                "later": {"b": 2}, "later_affinity": "second"}),
    "unlabelled_binding_ignored": (unlabelled_binding_ignored, {"clusters": {}, "observed": None}),
    "divided_stays_on_cluster_change": (divided_stays_on_cluster_change, {
        "first": {"a": 4}, "after_relabel": {"a": 4}, "scaled": {"a": 3, "b": 3}}),
}
