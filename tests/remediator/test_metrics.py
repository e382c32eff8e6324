"""The remediator's gauges of the current state.

* ``fedplace_remediation_leader{lease}``: 1 while this replica holds the Lease,
  0 once it gave it up (against the API server, devstack or real); ``lease=""``
  and always 1 without leader election;
* ``fedplace_remediation_unsatisfiable_objects{resource}``: the objects the last
  passes found unsatisfiable, per remediated resource, 0 on a replica that does
  not lead;
* the counters' label values exist from the start (so rate() has data).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from prometheus_client import REGISTRY

from fedplace.common.kube_client import Resource
from fedplace.remediator.config import RemediatorSettings
from fedplace.remediator.leader import LeaderElector
from fedplace.remediator.remediator import Remediator
from tests.fixtures.kube import ScratchNamespaces

RS = Resource("apps", "v1", "replicasets", True)
DEPLOY = Resource("apps", "v1", "deployments", True)


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


class NoObjects:
    def get(self, resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def count(self, resource: str) -> int:
        return 0

    def keys(self, resource: str) -> Iterable[tuple[str, str]]:
        return []


async def test_leader_gauge_follows_the_lease(kube_api: Any, kube_namespaces: ScratchNamespaces):
    ns = await kube_namespaces.create("lease")
    elector = LeaderElector(kube_api, ns, "fedplace-remediator", "replica-a")
    lease = f"{ns}/fedplace-remediator"
    assert sample("fedplace_remediation_leader", lease=lease) == 0
    assert await elector.try_acquire()
    assert sample("fedplace_remediation_leader", lease=lease) == 1
    await elector.release()
    assert sample("fedplace_remediation_leader", lease=lease) == 0


def test_without_leader_election_the_replica_leads():
    settings = RemediatorSettings(mode="dry-run", resources=[RS], leader_election=False)
    Remediator(settings, None, None, NoObjects(), ready=lambda: True)  # type: ignore[arg-type]
    assert sample("fedplace_remediation_leader", lease="") == 1


async def test_unsatisfiable_gauge_counts_per_resource_on_the_leader_only(kube_api: Any,
                                                                          kube_namespaces: ScratchNamespaces):
    ns = await kube_namespaces.create("metrics")
    rem = Remediator(RemediatorSettings(mode="enforce", resources=[RS, DEPLOY], leader_election=True,
                                        lease_namespace=ns, identity="me"),
                     kube_api, None, NoObjects(), ready=lambda: True)  # type: ignore[arg-type]
    assert rem.leader is not None
    assert sample("fedplace_remediation_unsatisfiable_objects", resource="apps/v1/replicasets") == 0
    rem.unsatisfiable = {("replicasets", "shop", "a"): {}, ("replicasets", "shop", "b"): {},
                         ("deployments", "shop", "c"): {}}
    assert sample("fedplace_remediation_unsatisfiable_objects", resource="apps/v1/replicasets") == 0  # not leading
    assert await rem.leader.try_acquire()
    assert sample("fedplace_remediation_unsatisfiable_objects", resource="apps/v1/replicasets") == 2
    assert sample("fedplace_remediation_unsatisfiable_objects", resource="apps/v1/deployments") == 1
    rem.unsatisfiable = {}
    assert sample("fedplace_remediation_unsatisfiable_objects", resource="apps/v1/replicasets") == 0
    await rem.leader.release()


def test_counter_label_values_exist_from_the_start():
    for outcome in ("ok", "guard", "error", "opa_error"):
        for scope in ("full", "targeted"):
            assert sample("fedplace_remediation_passes_total", outcome=outcome, scope=scope) is not None
    for mode in ("enforce", "dry-run"):
        assert sample("fedplace_remediation_patches_total", mode=mode) is not None
    for reason in ("missing", "deleted", "failed", "not_leader"):
        assert sample("fedplace_remediation_skipped_total", reason=reason) is not None
