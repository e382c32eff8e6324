"""The remediator against OPA and the API server (devstack or real), over HTTP.

The remediator runs in-process with an :class:`ApiObjectSource`; OPA holds the
placement policy, the remediation library, and a mirror of the ReplicaSets and
clusters written through OPA's data API (what opa-kube-sync does in
production — tested end to end in tests/sync). API server faults come from the
fault-injecting proxy in front of it (``kube_proxy``, tests/fixtures/proxy.py).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from typing import Any

import pytest
from aiohttp import web

from fedplace.common.events import EventRecorder
from fedplace.common.kube_client import Resource, kube_json
from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.remediator.config import RemediatorSettings
from fedplace.remediator.leader import LeaderElector
from fedplace.remediator.remediator import ApiObjectSource, Remediator
from fedplace.sync.notifications import add_notifications_route
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually
from tests.metrics import metric, metric_total
from tests.remediator import workloads

PREFS = "federation.kubernetes.io/replica-set-preferences"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
RS = Resource("apps", "v1", "replicasets", True)
NS = "shop"

CLUSTERS = {
    "eu-a": {"metadata": {"name": "eu-a", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "europe-west1"}},
    "eu-b": {"metadata": {"name": "eu-b", "labels": {"pci-compliance-level": "1"}}, "status": {"region": "eu-west-1"}},
}


def rs_body(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return workloads.workload("ReplicaSet", name, NS, annotations)


async def load_policies(opa) -> None:
    """The placement policy and the remediation library, with the root module the sync generates."""
    await workloads.load_policies(opa, (*workloads.RULES, "policies/federation/placement.rego",
                                        "policies/federation/lib.rego", "policies/lib/remediation.rego"))


async def mirror(api, opa, clusters: dict[str, Any]) -> None:
    """Put the API server's ReplicaSets and ``clusters`` into OPA, as the sync would."""
    await workloads.mirror(api, opa, RS, "ReplicaSet", clusters)


async def annotations_of(api, name: str) -> dict[str, str]:
    return await workloads.annotations_of(api, RS, NS, name)


@pytest.fixture(autouse=True)
def fresh_namespace(kube_namespaces: ScratchNamespaces, monkeypatch: pytest.MonkeyPatch) -> None:
    """NS names a fresh namespace in every test: a real API server still has the
    previous test's, Terminating (tests/fixtures/kube.py)."""
    kube_namespaces.rebind(monkeypatch, globals(), NS="shop")


@pytest.fixture
async def world(kube, kube_api, opa):
    """Namespace, policies, three ReplicaSets (two constrained), mirrored into OPA."""
    await load_policies(opa)
    await workloads.seed(kube_api, opa, RS, "ReplicaSet", NS, CLUSTERS)
    return kube_api


def make(api, opa, mode: str = "enforce", **kw: Any) -> tuple[Remediator, ApiObjectSource, OpaClient]:
    events = kw.pop("events", None)
    ready = kw.pop("ready", lambda: True)
    kw.setdefault("max_fraction", 1.0)  # three objects: the guard has its own test
    settings = RemediatorSettings(mode=mode, resources=[RS], leader_election=kw.pop("leader_election", False),
                                  debounce=0.0, **kw)
    client = OpaClient(OpaSettings(url=opa.url, token=opa.token))
    source = ApiObjectSource(api, [RS])
    return Remediator(settings, api, client, source, ready=ready, events=events), source, client


def prefs(annotations: dict[str, str]) -> set[str]:
    return set(json.loads(annotations[PREFS])["clusters"])


async def test_label_downgrade_reannotates_affected_only_and_second_pass_is_idle(world, opa):
    api = world
    rem, source, client = make(api, opa)
    try:
        await source.load()
        first = await rem.run_pass()
        assert first.patched == 2 and first.failed == 0
        assert prefs(await annotations_of(api, "pci2")) == {"eu-a"}
        assert prefs(await annotations_of(api, "pci1")) == {"eu-a", "eu-b"}
        assert await annotations_of(api, "free") == {"team": "web"}

        downgraded = json.loads(json.dumps(CLUSTERS))
        downgraded["eu-b"]["metadata"]["labels"]["pci-compliance-level"] = "0"
        await mirror(api, opa, downgraded)
        await source.load()
        pci2_before = await kube_json(api, "GET", RS.object_path("pci2", NS))
        second = await rem.run_pass()
        assert second.patched == 1 and second.in_sync == 1
        assert prefs(await annotations_of(api, "pci1")) == {"eu-a"}
        pci2_after = await kube_json(api, "GET", RS.object_path("pci2", NS))
        assert pci2_after["metadata"]["resourceVersion"] == pci2_before["metadata"]["resourceVersion"]
        assert (await annotations_of(api, "pci1"))[PCI] == "1"  # the developer's own annotation kept

        await mirror(api, opa, downgraded)
        await source.load()
        third = await rem.run_pass()
        assert third.patched == 0 and third.in_sync == 2
    finally:
        await client.close()


async def test_own_patches_remembered_until_the_cache_moves_on(world, opa):
    """A cache that has not yet seen our patches must not make us send them again;
    once it shows anybody's newer version, that version is what is planned against."""
    api = world
    rem, source, client = make(api, opa)
    try:
        await source.load()
        assert (await rem.run_pass()).patched == 2
        again = await rem.run_pass()  # the source still shows the versions before our patches
        assert again.patched == 0 and again.in_sync == 2

        await kube_json(api, "PATCH", RS.object_path("pci2", NS), body={"metadata": {"annotations": {PREFS: "{}"}}},
                        content_type="application/merge-patch+json")
        await source.load()
        after_edit = await rem.run_pass()
        assert after_edit.patched == 1 and after_edit.in_sync == 1
        assert prefs(await annotations_of(api, "pci2")) == {"eu-a"}
    finally:
        await client.close()


async def test_no_pass_before_ready_then_periodic_passes(world, opa):
    """Nothing runs while the sync is not ready; once ready, the first pass runs,
    and the periodic pass catches a change nobody signalled."""
    api = world
    ready = False
    rem, source, client = make(api, opa, ready=lambda: ready, interval=0.3)
    passes = metric("fedplace_remediation_passes_total", outcome="ok", scope="full")
    task = asyncio.create_task(rem.run())
    try:
        await source.load()
        await asyncio.sleep(0.6)  # two intervals: no pass may run yet
        assert rem.last_pass_time is None and PREFS not in await annotations_of(api, "pci2")
        ready = True
        for _ in range(100):
            if rem.last_pass_time is not None:
                break
            await asyncio.sleep(0.05)
        assert prefs(await annotations_of(api, "pci1")) == {"eu-a", "eu-b"}
        assert metric("fedplace_remediation_passes_total", outcome="ok", scope="full") - passes >= 1

        downgraded = json.loads(json.dumps(CLUSTERS))
        downgraded["eu-b"]["metadata"]["labels"]["pci-compliance-level"] = "0"
        await mirror(api, opa, downgraded)  # no trigger: only the periodic pass can see it
        await source.load()
        for _ in range(100):
            if prefs(await annotations_of(api, "pci1")) == {"eu-a"}:
                break
            await asyncio.sleep(0.05)
        assert prefs(await annotations_of(api, "pci1")) == {"eu-a"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_dry_run_patches_nothing_and_records_events(world, opa):
    api = world
    events = EventRecorder(api, "test-remediator")
    task = asyncio.create_task(events.run())
    rem, source, client = make(api, opa, mode="dry-run", events=events)
    try:
        await source.load()
        result = await rem.run_pass()
        assert result.dry_run and result.planned == 2 and result.patched == 0
        assert PREFS not in await annotations_of(api, "pci2")
        await events.flush()
        evs = await kube_json(api, "GET", f"/api/v1/namespaces/{NS}/events")
        reasons = {(e["involvedObject"]["name"], e["reason"]) for e in evs["items"]}
        assert ("pci2", "PlacementRemediationPlanned") in reasons
        assert ("pci1", "PlacementRemediationPlanned") in reasons
    finally:
        task.cancel()
        await client.close()


async def test_guard_trips_and_patches_nothing(world, opa):
    api = world
    rem, source, client = make(api, opa, max_fraction=0.5)  # 2 of 3 objects would change
    trips = metric("fedplace_remediation_guard_trips_total")
    try:
        await source.load()
        result = await rem.run_pass()
        assert result.guard_tripped and result.patched == 0
        assert metric("fedplace_remediation_guard_trips_total") - trips == 1
        assert PREFS not in await annotations_of(api, "pci2")
        assert PREFS not in await annotations_of(api, "pci1")
    finally:
        await client.close()


async def test_conflict_on_patch_is_retried(world, opa, kube_proxy, kube_proxy_api):
    """Two PATCHes answered 409 by the API server (through the fault-injecting proxy the
    remediator talks to): the third goes through."""
    api = world
    rem, source, client = make(kube_proxy_api, opa)
    try:
        await source.load()
        await kube_proxy.set_faults({"fail": {"path": RS.object_path("pci2", NS), "method": "PATCH",
                                              "status": 409, "count": 2}})
        conflicts = metric("fedplace_remediation_conflicts_total")
        result = await rem.run_pass()
        assert result.patched == 2 and result.failed == 0
        assert metric("fedplace_remediation_conflicts_total") - conflicts == 2
        assert prefs(await annotations_of(api, "pci2")) == {"eu-a"}
    finally:
        await client.close()


async def test_object_deleted_during_pass_is_skipped(world, opa):
    api = world
    rem, source, client = make(api, opa)
    try:
        await source.load()  # the remediator still believes pci1 exists…
        await kube_json(api, "DELETE", RS.object_path("pci1", NS))  # …but it is gone
        deleted = metric("fedplace_remediation_skipped_total", reason="deleted")
        result = await rem.run_pass()
        assert result.patched == 1 and result.skipped_missing == 1 and result.failed == 0
        assert metric("fedplace_remediation_skipped_total", reason="deleted") - deleted == 1
        doc = await kube_json(api, "GET", RS.collection_path(NS))
        assert sorted(i["metadata"]["name"] for i in doc["items"]) == ["free", "pci2"]
    finally:
        await client.close()


async def test_two_replicas_one_leader_patches(world, opa):
    """Both replicas ready (their object sources loaded, as the sync's readiness
    guarantees in production) before they start: the one that takes the Lease runs
    the first pass and patches; the other runs none."""
    api = world
    a, source_a, client_a = make(api, opa, leader_election=True, identity="replica-a", lease_namespace=NS)
    b, source_b, client_b = make(api, opa, leader_election=True, identity="replica-b", lease_namespace=NS)
    await source_a.load()
    await source_b.load()
    tasks = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        async def a_pass_ran() -> bool:
            return a.last_pass_time is not None or b.last_pass_time is not None

        await eventually(a_pass_ran, 30, "the leader's first pass")
        assert sum(r.is_leader() for r in (a, b)) == 1
        leader = a if a.is_leader() else b
        follower = b if leader is a else a
        assert leader.last_pass_time is not None and follower.last_pass_time is None
        assert prefs(await annotations_of(api, "pci2")) == {"eu-a"}
        lease = await kube_json(api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/fedplace-remediator")
        assert lease["spec"]["holderIdentity"] == leader.leader.identity
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client_a.close()
        await client_b.close()


async def test_a_dead_holder_is_replaced_within_its_lease_duration(world):
    """The Lease's holder died right after renewing it for 2 s. A replica whose own
    retry period is 5 s (lease duration 15 s) takes over when those 2 s are up, not at
    its next periodic retry: a new leader within the lease duration of the last renewal."""
    api = world
    renewed = datetime.now(timezone.utc)
    await kube_json(api, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", body={
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "fedplace-remediator"},
        "spec": {"holderIdentity": "replica-gone", "leaseDurationSeconds": 2, "leaseTransitions": 0,
                 "acquireTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                 "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}})
    elector = LeaderElector(api, NS, "fedplace-remediator", "replica-b", lease_duration=15.0)
    task = asyncio.create_task(elector.run())
    try:
        async def leads() -> None:
            while not elector.is_leader:
                elector.changed.clear()
                await elector.changed.wait()

        await asyncio.wait_for(leads(), 30)
        took = (datetime.now(timezone.utc) - renewed).total_seconds()
        assert 2.0 <= took < 3.5, f"took over {took:.2f} s after the last renewal of a 2 s lease"
        lease = await kube_json(api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/fedplace-remediator")
        assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_no_notifications_route_without_a_token_file(world, opa, aiohttp_client):
    rem, _, client = make(api=world, opa=opa)
    app = web.Application()
    add_notifications_route(app, rem, rem.settings.notifications_token_file, lambda: True)
    http = await aiohttp_client(app)
    try:
        assert (await http.post("/v1/notifications", json=[])).status == 404
    finally:
        await client.close()


async def test_notifications_endpoint(world, opa, tmp_path, aiohttp_client):
    api = world
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    ready = {"now": False}
    rem, source, client = make(api, opa, notifications_token_file=str(token_file))
    app = web.Application()
    add_notifications_route(app, rem, rem.settings.notifications_token_file, lambda: ready["now"])
    http = await aiohttp_client(app)
    item = {"resource": "replicasets", "namespace": NS, "name": "free",
            "annotations": {PREFS: {"clusters": {"eu-b": {"weight": 2}}}}}
    try:
        resp = await http.post("/v1/notifications", json=[item])
        assert resp.status == 401
        resp = await http.post("/v1/notifications", json=[item], headers={"Authorization": "Bearer wrong"})
        assert resp.status == 401
        resp = await http.post("/v1/notifications", json=[item], headers={"Authorization": "Bearer s3cret"})
        assert resp.status == 503 and "not ready" in (await resp.json())["error"]
        ready["now"] = True
        resp = await http.post("/v1/notifications", data="{bad", headers={"Authorization": "Bearer s3cret"})
        assert resp.status == 400
        other = dict(item, resource="deployments")
        resp = await http.post("/v1/notifications", json=[other], headers={"Authorization": "Bearer s3cret"})
        assert resp.status == 400 and "not remediated here: deployments" in (await resp.json())["error"]
        resp = await http.post("/v1/notifications", json=[item], headers={"Authorization": "Bearer s3cret"})
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["patched"] == 1
        ann = await annotations_of(api, "free")
        assert json.loads(ann[PREFS]) == {"clusters": {"eu-b": {"weight": 2}}} and ann["team"] == "web"
        resp = await http.post("/v1/notifications", json=[item], headers={"Authorization": "Bearer s3cret"})
        assert (await resp.json()) == {"patched": 0, "in_sync": 1, "missing": 0, "failed": 0, "dry_run": False}
    finally:
        await client.close()


# -- a pass in chunks: pipelined, guarded, incremental ---------------------------------------------------
# chunk=1: the pass queries OPA object by object, in key order: free, pci1, pci2.


def traced(rem: Remediator, log: list[tuple[str, str]]) -> None:
    """Record each chunk query (sent / answered) and each patch sent, in order."""
    query, send = rem.query_notifications, rem._send_patch

    async def traced_query(objects=None):
        log.append(("query", objects[0][2]))
        out = await query(objects)
        log.append(("answered", objects[0][2]))
        return out

    async def traced_send(action):
        log.append(("patch", action.name))
        return await send(action)

    rem.query_notifications, rem._send_patch = traced_query, traced_send


async def traced_pass(api, opa, log: list[tuple[str, str]] | None = None,
                      **kw: Any) -> tuple[Any, list[tuple[str, str]]]:
    """One pass with chunk=1 over the world's three objects, traced into ``log``; (result, log)."""
    rem, source, client = make(api, opa, chunk=1, max_chunk=1, **kw)
    log = [] if log is None else log
    traced(rem, log)
    try:
        await source.load()
        return await rem.run_pass(), log
    finally:
        await client.close()


async def test_patches_go_out_while_later_chunks_are_evaluated(world, opa):
    """pci1's patch is sent before pci2 has been evaluated: with 3 objects and at most 70%
    (2.1) allowed to change, the guard cannot trip once 'free' is known to be in sync."""
    result, log = await traced_pass(world, opa, max_fraction=0.7)
    assert (result.patched, result.in_sync, result.guard_tripped) == (2, 0, False)
    assert [e for e in log if e[0] == "query"] == [("query", "free"), ("query", "pci1"), ("query", "pci2")]
    assert log.index(("patch", "pci1")) < log.index(("answered", "pci2")), log
    assert prefs(await annotations_of(world, "pci2")) == {"eu-a"}


async def test_guard_holds_early_chunks_patches_and_trips_with_nothing_sent(world, opa):
    """At most 50% (1.5 of 3) may change: pci1's patch is held while pci2 might still need
    one, and when it does, the guard trips and pci1 is not patched either."""
    result, log = await traced_pass(world, opa, max_fraction=0.5)
    assert result.guard_tripped and result.patched == 0
    assert not [e for e in log if e[0] == "patch"]
    assert PREFS not in await annotations_of(world, "pci1")


async def test_a_change_during_a_full_pass_re_evaluates_only_what_was_evaluated_before_it(world, opa):
    """A cluster changes (a full-pass request) once free and pci1 have been queried: the
    pass goes on, evaluating pci2 after the change; the next pass covers free and pci1 only."""
    api = world
    rem, source, client = make(api, opa, chunk=1, max_chunk=1)
    queried: list[list[str]] = []
    query = rem.query_notifications

    async def changing(objects=None):
        queried.append([o[2] for o in objects])
        out = await query(objects)
        if len(queried) == 2:
            rem.trigger("a cluster changed")  # reached OPA after pci1's query was sent
        return out

    rem.query_notifications = changing
    await source.load()
    before = metric_total("fedplace_remediation_passes_total")
    task = asyncio.create_task(rem.run())
    try:
        for _ in range(200):
            if metric_total("fedplace_remediation_passes_total") - before >= 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # a third pass, if one were (wrongly) asked for, would start now
        assert queried == [["free"], ["pci1"], ["pci2"], ["free"], ["pci1"]]
        assert metric_total("fedplace_remediation_passes_total") - before == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_watch_events_overtaking_the_patch_answer_are_settled_by_it(world, opa, monkeypatch):
    """The watch may deliver the state our PATCH produced before the PATCH's answer arrives:
    that echo starts no pass; anybody else's version arriving meanwhile does (a target)."""
    import fedplace.remediator.remediator as module

    api = world
    rem, source, client = make(api, opa)
    real = module.kube_json

    async def overtaken(api_, method, path, **kw):
        out = await real(api_, method, path, **kw)
        if method == "PATCH":  # delivered to the remediator before it sees the answer
            other = {**out, "metadata": {**out["metadata"], "resourceVersion": "someone-else"}}
            rem.on_replicated("replicasets", [out if out["metadata"]["name"] == "pci1" else other])
        return out

    monkeypatch.setattr(module, "kube_json", overtaken)
    try:
        await source.load()
        assert (await rem.run_pass()).patched == 2
        assert set(rem._targets) == {("replicasets", NS, "pci2")}
    finally:
        await client.close()


async def test_events_of_a_pass_are_recorded_after_its_patches(world, opa):
    log: list[tuple[str, str]] = []

    class Recorder:
        def record(self, involved, etype, reason, message):
            log.append(("event", involved.name))

    result, _ = await traced_pass(world, opa, log, events=Recorder())
    assert result.patched == 2
    assert [kind for kind, _ in log if kind in ("patch", "event")] == ["patch", "patch", "event", "event"], log
