"""fedplace as deploy/ ships it for Karmada (the policy ConfigMaps, ``control_plane :=
"karmada"``, opa-kube-sync and the webhook registered beside karmada-webhook) on real Karmada:
karmada-webhook, the resource detector and binding controller, karmada-scheduler.

Each test is a case real Karmada showed: overflow tiers; Karmada's own bookkeeping on a template
that became unsatisfiable; a controller-manager restart against a restarted OPA; a user's
exclusion equal to one fedplace added.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from devstack.karmada import PROPAGATION_POLICIES
from devstack.karmada.standins import PP_PERMANENT_ID
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.karmada import restart_controller_manager
from tests.fixtures.stack import eventually
from tests.karmada.scenarios import set_placement
from tests.packs.karmada.helpers import ADDED

from .conftest import NEEDS_EU_PCI2, Fleet

pytestmark = pytest.mark.karmada_real

AGGREGATED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
QUIET = 10.0  # seconds a test watches spec.clusters for a forbidden cluster


def distinct(seen: list[dict[str, int]]) -> list[dict[str, int]]:
    """``seen`` without consecutive repeats: the sequence of different values."""
    return [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]


def affinity_excludes(binding: dict[str, Any]) -> list[str]:
    return (binding["spec"]["placement"].get("clusterAffinity") or {}).get("exclude") or []


async def test_no_replica_overflows_to_a_forbidden_cluster(fleet: Fleet) -> None:
    """An overflow tier naming a US cluster beside an EU one: the replicas beyond the first
    cluster's room go to the EU cluster of the tier, never to the US one."""
    k = fleet.karmada
    await fleet.cluster("eu1", "eu-west-1", "3", pods=5)
    await fleet.cluster("eu2", "europe-west4", "3", pods=15)
    us1 = await fleet.cluster("us1", "us-east-1", "3", pods=100)
    async with fleet.fedplace():
        await fleet.template("web", NEEDS_EU_PCI2, replicas=20)
        await fleet.propagation_policy("web", {"clusterAffinities": [{
            "affinityName": "main", "clusterNames": [k.clusters["eu1"]],
            "overflowAffinities": [{"affinityName": "spill", "clusterNames": [us1, k.clusters["eu2"]]}]}],
            "replicaScheduling": AGGREGATED})
        seen = await fleet.clusters_over("web", QUIET)
        assert not [s for s in seen if "us1" in s], f"replicas on the forbidden cluster: {distinct(seen)}"
        assert seen[-1] == {"eu1": 5, "eu2": 15}


async def test_deleting_the_policy_of_an_unsatisfiable_template_is_not_blocked(fleet: Fleet) -> None:
    """A template satisfied when created, unsatisfiable once its cluster is downgraded: deleting
    its PropagationPolicy goes through (the detector's clean-up of the template is admitted and
    the policy's finalizer removed)."""
    k = fleet.karmada
    await fleet.cluster("eu1", "eu-west-1", "3")
    async with fleet.fedplace():
        await fleet.template("web", NEEDS_EU_PCI2)
        await fleet.propagation_policy("web", {"clusterAffinity": {"labelSelector": k.run_selector}})
        await k.scheduled("web", lambda b: k.roles(b) == {"eu1": 2})
        await fleet.set_pci("eu1", "1")
        await eventually(lambda: _excluding(fleet, "web", k.clusters["eu1"]), 20, "the binding re-narrowed")

        await kube_json(fleet.api, "DELETE", PROPAGATION_POLICIES.object_path("web", fleet.ns))

        async def gone() -> bool:
            try:
                await kube_json(fleet.api, "GET", PROPAGATION_POLICIES.object_path("web", fleet.ns))
            except KubeApiError as exc:
                return exc.status == 404
            return False

        await eventually(gone, 30, "the PropagationPolicy deleted (no finalizer left)")
        template = await kube_json(fleet.api, "GET", f"/apis/apps/v1/namespaces/{fleet.ns}/deployments/web")
        assert PP_PERMANENT_ID not in (template["metadata"].get("labels") or {})


async def test_the_detector_claims_an_unsatisfiable_template(fleet: Fleet) -> None:
    """A PropagationPolicy created for a template that became unsatisfiable: the detector's claim
    (its labels on the template) is admitted, and the template's binding excludes every cluster."""
    k = fleet.karmada
    await fleet.cluster("eu1", "eu-west-1", "3")
    async with fleet.fedplace():
        await fleet.template("late", NEEDS_EU_PCI2)
        await fleet.set_pci("eu1", "1")
        await asyncio.sleep(1.0)  # the downgrade replicated
        await fleet.propagation_policy("late", {"clusterAffinity": {"labelSelector": k.run_selector}})

        async def claimed() -> bool:
            t = await kube_json(fleet.api, "GET", f"/apis/apps/v1/namespaces/{fleet.ns}/deployments/late")
            return PP_PERMANENT_ID in (t["metadata"].get("labels") or {})

        await eventually(claimed, 30, "the detector's labels on the template")
        b = await eventually(lambda: _excluding(fleet, "late", k.clusters["eu1"]), 20, "the binding narrowed")
        assert not k.roles(b)


async def test_a_controller_manager_restart_after_an_opa_restart_moves_no_workload(fleet: Fleet,
                                                                                   opa_process: Any) -> None:
    """A binding fedplace decided; then OPA restarts (empty: the sync loads everything again) and
    karmada-controller-manager restarts (its detector re-PUTs every binding meanwhile): the
    workload stays where it is."""
    k = fleet.karmada
    await fleet.cluster("eu1", "eu-west-1", "3")
    await fleet.cluster("eu2", "europe-west4", "3")
    await fleet.cluster("us1", "us-east-1", "3")
    async with fleet.fedplace(opa_process):
        await fleet.template("web", NEEDS_EU_PCI2)
        await fleet.propagation_policy("web", {"clusterAffinity": {"labelSelector": k.run_selector}})
        before = k.roles(await k.scheduled("web", lambda b: k.roles(b) == {"eu1": 2, "eu2": 2}))

        opa_process.process.kill()
        opa_process.process.start()
        await restart_controller_manager()
        seen = await fleet.clusters_over("web", QUIET)
        assert all(s == before for s in seen), f"spec.clusters moved: {before} -> {distinct(seen)}"


async def test_a_user_exclusion_equal_to_one_fedplace_added_stays(fleet: Fleet) -> None:
    """fedplace excludes a downgraded cluster; the user then writes the same exclusions into the
    policy; the cluster is upgraded again: fedplace takes back its own exclusion, the user's
    stays."""
    k = fleet.karmada
    await fleet.cluster("eu1", "eu-west-1", "3")
    eu2 = await fleet.cluster("eu2", "europe-west4", "3")
    async with fleet.fedplace():
        await fleet.template("web", NEEDS_EU_PCI2)
        await fleet.propagation_policy("web", {"clusterAffinity": {"labelSelector": k.run_selector}})
        await k.scheduled("web", lambda b: k.roles(b) == {"eu1": 2, "eu2": 2})
        await fleet.set_pci("eu2", "1")
        b = await eventually(lambda: _excluding(fleet, "web", eu2), 20, "fedplace's exclusion of the downgraded cluster")

        # The user writes the same exclusions into the policy (what fedplace added, exactly: the
        # record says none of the list's entries is the user's).
        assert json.loads(b["metadata"]["annotations"][ADDED])["clusterAffinity"]["user"] == 0
        ours = b["spec"]["placement"]["clusterAffinity"]["exclude"]
        assert eu2 in ours
        await set_placement(k, "web", {"clusterAffinity": {"labelSelector": k.run_selector, "exclude": ours}})
        await k.scheduled("web", lambda b: k.roles(b) == {"eu1": 2})
        await fleet.set_pci("eu2", "3")
        await asyncio.sleep(5.0)  # remediation of the upgrade
        b = await k.binding("web")
        assert b is not None
        assert eu2 in affinity_excludes(b), b["spec"]["placement"]
        assert k.roles(b) == {"eu1": 2}
        assert all(s == {"eu1": 2} for s in await fleet.clusters_over("web", 3.0))


async def _excluding(fleet: Fleet, template: str, cluster: str) -> dict[str, Any] | None:
    b = await fleet.karmada.binding(template)
    return b if b is not None and cluster in affinity_excludes(b) else None

