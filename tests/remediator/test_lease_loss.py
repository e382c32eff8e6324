"""Remediation exactly once when the leader loses its Lease mid-pass.

Each replica reaches the API server (devstack or real) through its own
recording, fault-injecting proxy (tests/ha/harness.py's ``AuditProxy``, a
tests/fixtures/proxy.py ``FaultProxy``): the proxy answers the test's
``/_devstack/faults`` calls over HTTP and records every write with when it was
answered — how PATCHes and Lease writes are counted here. The remediators run
in process and are driven only through their public interface (their
constructor's ``ready``, ``run()``) and the Lease as the API server shows it.

* A leader whose Lease renewals hang gives leadership up (``is_leader`` false)
  within the lease duration of its last successful renewal, although the
  renewal has not returned.
* A leader whose Lease renewals hang, or are refused, in the middle of a pass
  stops patching within the lease duration — before the other replica can
  take over — and that replica takes over and completes the remediation:
  every object patched exactly once, no patch of the old leader after the
  takeover.
"""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
from kubernetes_asyncio import client, config

from fedplace.common.kube_client import Resource, kube_json
from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.remediator.config import RemediatorSettings
from fedplace.remediator.leader import LeaderElector
from fedplace.remediator.remediator import ApiObjectSource, Remediator
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.proxy import KubeProxy
from tests.fixtures.stack import eventually
from tests.ha.harness import AuditProxy, Write
from tests.metrics import metric
from tests.remediator import workloads

pytestmark = pytest.mark.timeout(120)

RS = Resource("apps", "v1", "replicasets", True)
PREFS = "federation.kubernetes.io/replica-set-preferences"
CLUSTERS = {
    "eu-a": {"metadata": {"name": "eu-a", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "europe-west1"}},
    "eu-b": {"metadata": {"name": "eu-b", "labels": {"pci-compliance-level": "1"}}, "status": {"region": "eu-west-1"}},
}
LEASE = "fedplace-remediator"
LEASE_SECONDS = 3.0  # renewals every 1 s; a dead holder replaced 3 s after its last renewal
OBJECTS, RATE, FAULT_AFTER = 40, 5.0, 5  # the leader's pass would take 8 s; the fault after its 5th patch
HANG = 60.0  # a hanging Lease renewal is answered (504) after this long: never, within the test

FAULTS = {
    # Lease updates hang: the renewal neither succeeds nor fails for a minute.
    "hang": lambda path: {"fail": {"path": path, "method": "PUT", "status": 504, "count": -1, "delay": HANG}},
    # Lease updates refused: the connection is closed without an answer.
    "refuse": lambda path: {"cut": {"path": path, "method": "PUT", "count": -1}},
}


class NamespaceObjects(ApiObjectSource):
    """ApiObjectSource over one namespace (on a real server, other tests' namespaces linger)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        super().__init__(api, [RS])
        self.namespace = namespace

    async def load(self) -> None:
        doc = await kube_json(self.api, "GET", RS.collection_path(self.namespace))
        self.objects["replicasets"] = {RS.key(o): o for o in doc.get("items") or []}


class Replica:
    """One remediator replica, talking to the API server through its own AuditProxy."""

    def __init__(self, identity: str, kube: Any, tmp: Path) -> None:
        self.identity = identity
        self.proxy = AuditProxy(kube.kubeconfig).start()
        self.kubeconfig = self.proxy.kubeconfig(identity, tmp / f"{identity}.kubeconfig")
        self.faults = KubeProxy(self.proxy, self.kubeconfig, kube.external)  # its HTTP admin calls
        self.api: client.ApiClient | None = None
        self.opa: OpaClient | None = None
        self.ready = False
        self.task: asyncio.Task[None] | None = None

    async def start(self, opa: Any, namespace: str) -> "Replica":
        self.api = await config.new_client_from_config(config_file=str(self.kubeconfig), persist_config=False)
        self.opa = OpaClient(OpaSettings(url=opa.url, token=opa.token))
        self.source = NamespaceObjects(self.api, namespace)
        settings = RemediatorSettings(mode="enforce", resources=[RS], leader_election=True, identity=self.identity,
                                      lease_namespace=namespace, lease_duration=LEASE_SECONDS, debounce=0.0,
                                      max_fraction=1.0, rate=RATE, concurrency=1)
        self.remediator = Remediator(settings, self.api, self.opa, self.source, ready=lambda: self.ready)
        self.task = asyncio.create_task(self.remediator.run())
        return self

    def patches(self, prefix: str, any_status: bool = False) -> list[Write]:
        return [w for w in list(self.proxy.writes) if w.method == "PATCH" and w.path.startswith(prefix)
                and (any_status or 200 <= w.status < 300)]

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.opa is not None:
            await self.opa.close()
        if self.api is not None:
            await self.api.close()
        self.proxy.stop()


@pytest.fixture
async def namespace(kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces, opa: Any) -> str:
    """A namespace of OBJECTS ReplicaSets asking for PCI level 1 (each needs one patch: the
    preferences annotation), mirrored into OPA with the placement policy."""
    ns = await kube_namespaces.create("lease-loss")
    await workloads.load_policies(opa, (*workloads.RULES, "policies/federation/placement.rego",
                                        "policies/federation/lib.rego", "policies/lib/remediation.rego"))
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        async with sem:
            await kube_json(kube_api, "POST", RS.collection_path(ns),
                            body=workloads.workload("ReplicaSet", f"rs-{i:02d}", ns, {workloads.PCI: "1"}))

    await asyncio.gather(*(one(i) for i in range(OBJECTS)))
    doc = await kube_json(kube_api, "GET", RS.collection_path(ns))
    layout = {ns: {i["metadata"]["name"]: {**i, "kind": "ReplicaSet", "apiVersion": "apps/v1"} for i in doc["items"]}}
    assert (await opa.request("PUT", "/v1/data/kubernetes/replicasets", json_body=layout))[0] == 204
    assert (await opa.request("PUT", "/v1/data/kubernetes/clusters", json_body=CLUSTERS))[0] == 204
    return ns


@pytest.fixture
async def replicas(kube: Any, tmp_path: Path) -> AsyncIterator[Callable[[str], Replica]]:
    made: list[Replica] = []

    def make(identity: str) -> Replica:
        made.append(Replica(identity, kube, tmp_path))
        return made[-1]

    try:
        yield make
    finally:
        for r in made:
            await r.stop()


def lease_path(ns: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE}"


async def holder(api: client.ApiClient, ns: str) -> str | None:
    return ((await kube_json(api, "GET", lease_path(ns))).get("spec") or {}).get("holderIdentity")


async def test_hanging_renewal_ends_leadership_by_the_deadline(kube: Any, kube_api: client.ApiClient,
                                                             kube_namespaces: ScratchNamespaces, tmp_path: Path):
    """Lease updates hang from now on: ``is_leader`` turns false no later than the lease
    duration after the last renewal the API server accepted — while that renewal (or a
    later attempt) is still waiting for its answer."""
    ns = await kube_namespaces.create("lease-hang")
    proxy = AuditProxy(kube.kubeconfig).start()
    faults = KubeProxy(proxy, proxy.kubeconfig("replica-a", tmp_path / "a.kubeconfig"), kube.external)
    api = await faults.new_client()
    elector = LeaderElector(api, ns, LEASE, "replica-a", lease_duration=LEASE_SECONDS)
    task = asyncio.create_task(elector.run())
    try:
        async def leads() -> bool:
            return elector.is_leader

        await eventually(leads, 10, "leadership")
        await asyncio.sleep(LEASE_SECONDS / 2)  # a renewal or so
        await faults.set_faults(FAULTS["hang"](lease_path(ns)))
        t_fault = time.monotonic()
        while elector.is_leader:
            assert time.monotonic() - t_fault < 2 * LEASE_SECONDS, "still leading while renewals hang"
            await asyncio.sleep(0.01)
        t_lost = time.monotonic()
        last = proxy.lease_writes(lease_path(ns))[-1]  # the last renewal answered (none since the fault)
        assert last.t <= t_fault + 0.5
        assert t_lost - last.t <= LEASE_SECONDS, f"led {t_lost - last.t:.2f} s after the last renewal"
        assert t_lost - t_fault < HANG  # no renewal has returned: they hang for a minute
        assert await holder(kube_api, ns) == "replica-a"  # the API server never heard otherwise
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        proxy.stop()


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_leader_losing_its_lease_mid_pass_stops_patching_and_the_other_completes(
        fault: str, kube_api: client.ApiClient, opa: Any, namespace: str,
        replicas: Callable[[str], Replica]) -> None:
    """replica-a leads and patches; after its 5th patch its Lease updates hang (or are
    refused). It must send no PATCH later than the lease duration after that, nor after
    replica-b's takeover; replica-b, whose object source is loaded once it holds the Lease
    (an informer cache in sync), completes the remediation: each object patched once."""
    ns = namespace
    prefix = RS.collection_path(ns) + "/"
    skipped = metric("fedplace_remediation_skipped_total", reason="not_leader")
    a = await replicas("replica-a").start(opa, ns)
    await eventually(lambda: holder(kube_api, ns), 10, "a Lease")
    assert await holder(kube_api, ns) == "replica-a"
    b = await replicas("replica-b").start(opa, ns)  # follows; not ready yet
    await a.source.load()
    a.ready = True

    async def a_patched() -> bool:
        return len(a.patches(prefix)) >= FAULT_AFTER

    await eventually(a_patched, 30, f"replica-a's first {FAULT_AFTER} patches")
    await a.faults.set_faults(FAULTS[fault](lease_path(ns)))
    t_fault = time.monotonic()

    async def b_holds() -> bool:
        return await holder(kube_api, ns) == "replica-b"

    await eventually(b_holds, 4 * LEASE_SECONDS, "replica-b's takeover")

    async def takeover_recorded() -> list[Write]:  # the proxy records a write once it has answered it
        return [w for w in b.proxy.lease_writes(lease_path(ns)) if w.t > t_fault]

    takeover = (await eventually(takeover_recorded, 5, "replica-b's takeover at its proxy"))[0]
    await b.source.load()
    b.ready = True

    async def all_patched() -> bool:
        doc = await kube_json(kube_api, "GET", RS.collection_path(ns))
        return sum(PREFS in (i["metadata"].get("annotations") or {}) for i in doc["items"]) == OBJECTS

    await eventually(all_patched, 60, "every object remediated")
    await asyncio.sleep(1.0)  # a late patch would show now

    a_sent = a.patches(prefix, any_status=True)
    late = [round(w.t - t_fault, 2) for w in a_sent if w.t > t_fault + LEASE_SECONDS or w.t >= takeover.t]
    assert late == [], (f"replica-a patched after losing its Lease ({fault}): s after the fault {late}; "
                        f"replica-b took over {takeover.t - t_fault:.2f} s after it")
    counts = collections.Counter(w.path[len(prefix):] for w in a.patches(prefix) + b.patches(prefix))
    assert {n: c for n, c in counts.items() if c != 1} == {}, "patched more than once"
    assert len(counts) == OBJECTS
    assert len(a.patches(prefix)) >= FAULT_AFTER and len(b.patches(prefix)) >= 1
    assert len(a.patches(prefix)) < OBJECTS  # the fault came mid-pass
    assert metric("fedplace_remediation_skipped_total", reason="not_leader") > skipped  # counted
