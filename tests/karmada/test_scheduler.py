"""The Scheduler stand-in against an API server: spec.clusters from each binding's placement over
the Cluster objects, written only when it differs; and the detector and scheduler together."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes_asyncio import client

from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES, RESOURCE_BINDINGS
from devstack.karmada.standins import APPLIED_PLACEMENT, DEPLOYMENTS, Detector, Scheduler
from devstack.scratch import unique_name
from fedplace.common.kube_client import kube_json

from .helpers import DEPLOYMENTS_PATH, ClusterScoped, binding, deployment, get_binding, policy, wait_for

MERGE = "application/merge-patch+json"
RUN_LABEL = "fedplace.io/test-run"


async def member_clusters(scratch: ClusterScoped, run: str) -> dict[str, str]:
    """Four Clusters labelled with ``run``: their names by role (a, b, c, d)."""
    specs = {
        "a": ({"env": "prod"}, {"provider": "aws", "region": "eu-west-1", "zones": ["eu-west-1a"]}),
        "b": ({"env": "prod"}, {"provider": "gcp", "region": "us-east1"}),
        "c": ({"env": "dev"}, {"provider": "aws", "region": "us-east1"}),
        "d": ({}, {"provider": "azure", "region": "westeurope"}),
    }
    names = {}
    for role, (labels, spec) in specs.items():
        name = f"{run}-{role}"
        await scratch.create(CLUSTERS, {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                                        "metadata": {"name": name, "labels": {RUN_LABEL: run, **labels}},
                                        "spec": {"syncMode": "Push", **spec}})
        names[role] = name
    return names


async def test_scheduler_honours_placement(karmada_api: client.ApiClient, kube_namespace: str,
                                           cluster_scoped: ClusterScoped) -> None:
    ns, api = kube_namespace, karmada_api
    run = unique_name("m")
    m = await member_clusters(cluster_scoped, run)
    prod = {"labelSelector": {"matchLabels": {"env": "prod"}}}
    placements: dict[str, tuple[dict[str, Any] | None, int | None, list[dict[str, Any]]]] = {
        # name: (placement, replicas, the expected spec.clusters)
        "everywhere": (None, None, [{"name": m[r]} for r in "abcd"]),
        "exclude": ({"clusterAffinity": {"exclude": [m["a"], m["c"]]}}, 2,
                    [{"name": m["b"], "replicas": 2}, {"name": m["d"], "replicas": 2}]),
        "names": ({"clusterAffinity": {"clusterNames": [m["c"], m["a"], "nowhere"]}}, None,
                  [{"name": m["a"]}, {"name": m["c"]}]),
        "names-exclude": ({"clusterAffinity": {"clusterNames": [m["a"], m["c"]], "exclude": [m["c"]]}}, None,
                          [{"name": m["a"]}]),
        "labels": ({"clusterAffinity": prod, "replicaScheduling": {"replicaSchedulingType": "Divided"}}, 5,
                   [{"name": m["a"], "replicas": 3}, {"name": m["b"], "replicas": 2}]),
        "expressions": ({"clusterAffinity": {"labelSelector": {"matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["prod"]}]}}}, None, [{"name": m["c"]}, {"name": m["d"]}]),
        "fields": ({"clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "provider", "operator": "In", "values": ["aws"]},
            {"key": "region", "operator": "NotIn", "values": ["eu-west-1"]}]}}}, None, [{"name": m["c"]}]),
        "first-term": ({"clusterAffinities": [
            {"affinityName": "gone", "clusterNames": ["nowhere"]},
            {"affinityName": "prod-but-a", **prod, "exclude": [m["a"]]},
            {"affinityName": "all"}]}, 3, [{"name": m["b"], "replicas": 3}]),
        "no-term": ({"clusterAffinities": [{"affinityName": "gone", "clusterNames": ["nowhere"]},
                                           {"affinityName": "excluded", **prod, "exclude": [m["a"], m["b"]]}]},
                    3, []),
        "nowhere": ({"clusterAffinity": {"clusterNames": ["nowhere"]}}, 1, []),
    }
    for name, (placement, replicas, _) in placements.items():
        await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=binding(name, placement, replicas))
    scheduler = Scheduler(api, namespaces=[ns], cluster_bindings=False, cluster_selector=f"{RUN_LABEL}={run}")

    report = await scheduler.schedule_once()
    assert sorted(report.updated) == sorted(f"{ns}/{n}-deployment" for n in placements)
    assert not report.refused
    stored = {n: await get_binding(api, ns, f"{n}-deployment") for n in placements}
    assert {n: rb["spec"].get("clusters", []) for n, rb in stored.items()} == {n: want for n, (_, _, want) in placements.items()}
    assert all(rb["spec"].get("placement") == placements[n][0] for n, rb in stored.items())  # nothing else written
    for n, rb in stored.items():  # the placement scheduled for; the generation observed unless nothing fits
        assert json.loads(rb["metadata"]["annotations"][APPLIED_PLACEMENT]) == (placements[n][0] or {}), n
        fits = bool(placements[n][2])
        assert (rb["status"].get("schedulerObservedGeneration") == rb["metadata"]["generation"]) == fits, n
        assert rb["status"]["conditions"][0]["reason"] == ("Success" if fits else "NoClusterFit"), n

    # nothing changed: nothing written
    report = await scheduler.schedule_once()
    assert not report.updated and len(report.unchanged) == len(placements)
    for n, rb in stored.items():
        assert (await get_binding(api, ns, f"{n}-deployment"))["metadata"]["resourceVersion"] == \
            rb["metadata"]["resourceVersion"], n

    # c becomes prod: the Duplicated bindings whose choice depends on it, and only those, are
    # rescheduled; a Divided one whose placement did not change ("labels") is left as it was
    await kube_json(api, "PATCH", CLUSTERS.object_path(m["c"]), body={"metadata": {"labels": {"env": "prod"}}},
                    content_type=MERGE)
    report = await scheduler.schedule_once()
    assert sorted(report.updated) == sorted(f"{ns}/{n}-deployment"
                                            for n in ("expressions", "first-term", "no-term"))
    assert (await get_binding(api, ns, "labels-deployment"))["spec"]["clusters"] == [
        {"name": m["a"], "replicas": 3}, {"name": m["b"], "replicas": 2}]
    assert (await get_binding(api, ns, "expressions-deployment"))["spec"]["clusters"] == [{"name": m["d"]}]
    assert (await get_binding(api, ns, "first-term-deployment"))["spec"]["clusters"] == [
        {"name": m["b"], "replicas": 3}, {"name": m["c"], "replicas": 3}]
    # no term admitted a cluster; now the second one does
    assert (await get_binding(api, ns, "no-term-deployment"))["spec"]["clusters"] == [{"name": m["c"], "replicas": 3}]


async def test_scheduler_scope(karmada_api: client.ApiClient, kube_namespace: str,
                               cluster_scoped: ClusterScoped) -> None:
    """A binding outside the scheduler's namespaces or binding selector is left alone."""
    ns, api = kube_namespace, karmada_api
    run = unique_name("m")
    m = await member_clusters(cluster_scoped, run)
    await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=binding("mine", labels={"team": "a"}))
    await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=binding("theirs", labels={"team": "b"}))
    report = await Scheduler(api, namespaces=[ns], cluster_bindings=False, binding_selector="team=a",
                             cluster_selector=f"{RUN_LABEL}={run},env=prod").schedule_once()
    assert report.updated == [f"{ns}/mine-deployment"]
    assert (await get_binding(api, ns, "mine-deployment"))["spec"]["clusters"] == [{"name": m["a"]}, {"name": m["b"]}]
    assert "clusters" not in (await get_binding(api, ns, "theirs-deployment"))["spec"]


async def test_detector_and_scheduler_together(karmada_api: client.ApiClient, kube_namespace: str,
                                               cluster_scoped: ClusterScoped) -> None:
    """A policy's exclusion reaches spec.clusters: detector pass, scheduler pass."""
    ns, api = kube_namespace, karmada_api
    run = unique_name("m")
    m = await member_clusters(cluster_scoped, run)
    await kube_json(api, "POST", DEPLOYMENTS_PATH.format(ns=ns), body=deployment("web", replicas=4))
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
        "web", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
        placement={"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}},
                   "replicaScheduling": {"replicaSchedulingType": "Divided"}}))
    detector = Detector(api, [DEPLOYMENTS], namespaces=[ns])
    scheduler = Scheduler(api, namespaces=[ns], cluster_bindings=False, cluster_selector=f"{RUN_LABEL}={run}")

    await detector.reconcile_once()
    await scheduler.schedule_once()
    assert (await get_binding(api, ns, "web-deployment"))["spec"]["clusters"] == [
        {"name": m["a"], "replicas": 2}, {"name": m["b"], "replicas": 2}]

    await kube_json(api, "PATCH", PROPAGATION_POLICIES.object_path("web", ns), content_type=MERGE,
                    body={"spec": {"placement": {"clusterAffinity": {"exclude": [m["a"]]}}}})
    assert (await detector.reconcile_once()).updated == [f"{ns}/web-deployment"]
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["placement"]["clusterAffinity"]["exclude"] == [m["a"]]
    assert rb["spec"]["clusters"] == [{"name": m["a"], "replicas": 2}, {"name": m["b"], "replicas": 2}]  # kept
    await scheduler.schedule_once()
    assert (await get_binding(api, ns, "web-deployment"))["spec"]["clusters"] == [{"name": m["b"], "replicas": 4}]


async def test_run_keeps_scheduling(karmada_api: client.ApiClient, kube_namespace: str,
                                    cluster_scoped: ClusterScoped) -> None:
    ns, api = kube_namespace, karmada_api
    run = unique_name("m")
    m = await member_clusters(cluster_scoped, run)
    scheduler = Scheduler(api, namespaces=[ns], cluster_bindings=False, cluster_selector=f"{RUN_LABEL}={run}")
    task = asyncio.create_task(scheduler.run(interval=0.05))
    try:
        await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns),
                        body=binding("late", {"clusterAffinity": {"clusterNames": [m["d"]]}}, replicas=2))

        async def scheduled() -> list[dict[str, Any]] | None:
            return (await get_binding(api, ns, "late-deployment"))["spec"].get("clusters")

        assert await wait_for(scheduled, "a binding created while the scheduler runs scheduled") == [
            {"name": m["d"], "replicas": 2}]
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
