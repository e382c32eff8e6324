"""The remediator: patch objects whose desired annotations changed.

A pass asks OPA for the notifications (the remediation library's output) of
its objects in chunks (``input.objects``; a small first chunk, then growing
ones, :func:`fedplace.remediator.plan.chunks`), plans each chunk's patches as it
arrives (:mod:`fedplace.remediator.plan`) and hands them to a
:class:`~fedplace.remediator.pipeline.PatchPipeline`, so patches go out while OPA
evaluates the next chunk:

* only when ``ready()`` says the sync has pushed every type and policy;
* only while this replica leads (when leader election is on), checked
  immediately before each PATCH (and each retry of one): a replica whose
  leadership ran out mid-pass (:mod:`fedplace.remediator.leader`: a failed
  renewal, or none within the renew deadline) sends nothing more and
  evaluates no further chunk; the objects it skipped (counted,
  ``reason="not_leader"``) are covered by the full pass of whichever replica
  leads next — this one too, if it leads again;
* merge patches on ``metadata.annotations`` with the policy's keys only,
  concurrent, rate-limited, retried with backoff on 409 / 429 / 5xx, skipped
  when the object is gone (404);
* never when the pass would change more than ``max_fraction`` of the objects
  (the guard: a Warning Event and a metric, nothing patched — patches are held
  until the guard can no longer trip);
* in dry-run mode, Events only;
* checked against the PATCH's answer (the object as stored after admission): a
  patch whose annotations are not all there was undone by a mutating webhook —
  e.g. one whose OPA replica has not loaded the new policy yet. It is not counted
  as patched (``fedplace_remediation_skipped_total{reason="reverted"}``, a
  warning naming the object and the annotation keys) and the object is
  re-targeted after a backoff (1 s, 2 s, 4 s … at most 30 s; at most
  ``REVERT_ATTEMPTS`` times per object and desired change, reset when the object
  is patched or its desired annotations change; after that the periodic full
  pass is its next chance).

Passes are triggered by :meth:`Remediator.trigger` (the sync calls it after
data or policy changes; triggers within ``debounce`` are folded into one), by
:meth:`Remediator.on_replicated` (changed remediated objects: a targeted
pass), by a periodic full pass every ``interval`` seconds, and by ``POST
/v1/notifications`` (:mod:`fedplace.sync.notifications`), whose items are applied
directly (:meth:`Remediator.apply_notifications`). A
request made while a pass runs is pruned by what that pass evaluated after it
(:func:`fedplace.remediator.coverage.outstanding`): a full pass interrupted by a
cluster change re-evaluates only the objects it had evaluated before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol

from kubernetes_asyncio import client
from prometheus_client import Counter, Gauge, Histogram
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from fedplace.common.annotations import annotation_merge_patch, canonical_value
from fedplace.common.events import EventRecorder, InvolvedObject
from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from fedplace.common.opa_client import OpaClient, OpaError
from fedplace.remediator.bindings import dependent_bindings
from fedplace.remediator.config import RemediatorSettings
from fedplace.remediator.coverage import outstanding
from fedplace.remediator.leader import LEADER, LeaderElector, default_identity
from fedplace.remediator.pipeline import PassResult, PatchPipeline
from fedplace.remediator.plan import Notification, PatchAction, Plan, chunks, parse_notifications, plan_pass

__all__ = ["ApiObjectSource", "ObjectSource", "PassResult", "Remediator"]

log = logging.getLogger(__name__)

PASSES = Counter("fedplace_remediation_passes_total",
                 "Remediation passes, by outcome and scope (full, or targeted at changed objects)",
                 ["outcome", "scope"])
PATCHES = Counter("fedplace_remediation_patches_total", "Objects patched (or, in dry-run, that would be)", ["mode"])
SKIPPED = Counter("fedplace_remediation_skipped_total", "Objects skipped, by reason", ["reason"])
CONFLICTS = Counter("fedplace_remediation_conflicts_total", "Patches retried after a 409 Conflict")
GUARD_TRIPS = Counter("fedplace_remediation_guard_trips_total", "Passes aborted by the max-fraction guard")
PASS_SECONDS = Histogram("fedplace_remediation_pass_seconds", "Duration of a remediation pass")
UNSATISFIABLE = Gauge("fedplace_remediation_unsatisfiable_objects",
                      "Objects whose placement policy no cluster satisfies, as the last pass found them (0 on a "
                      "replica that does not lead)", ["resource"])
STUCK = Gauge("fedplace_remediation_stuck_objects",
              "Objects whose current placement still uses targets the policy forbids (a Karmada binding the "
              "scheduler could not reschedule), as the last pass found them (0 on a replica that does not lead)",
              ["resource"])
# Every label value the code uses exists from the start (at 0), so rate() has data before the
# first occurrence.
for _outcome in ("ok", "guard", "error", "opa_error"):
    for _scope in ("full", "targeted"):
        PASSES.labels(_outcome, _scope)
for _mode in ("enforce", "dry-run"):
    PATCHES.labels(_mode)
for _reason in ("missing", "deleted", "failed", "not_leader", "reverted"):
    SKIPPED.labels(_reason)

RETRYABLE = frozenset({409, 429, 500, 502, 503, 504})
MEMO_SECONDS = 30.0
Key = tuple[str, str, str]  # (resource, namespace or "", name)
HISTORY = 200  # remediations remembered for the placement page (newest first)
# A patch undone by admission: re-targeted after 1 s, 2 s, 4 s … (at most REVERT_MAX_DELAY), at most
# REVERT_ATTEMPTS times per object and desired change.
REVERT_FIRST_DELAY = 1.0
REVERT_MAX_DELAY = 30.0
REVERT_ATTEMPTS = 6


class ObjectSource(Protocol):
    """Where the remediator reads live objects (the sync's informer caches, or the API)."""

    def get(self, resource: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def count(self, resource: str) -> int: ...

    def keys(self, resource: str) -> Iterable[tuple[str, str]]:
        """(namespace or "", name) of every object of ``resource``."""
        ...


class ApiObjectSource:
    """An :class:`ObjectSource` over plain dicts, refreshed from the API server by :meth:`load`."""

    def __init__(self, api: client.ApiClient, resources: list[Resource]) -> None:
        self.api = api
        self.resources = {r.plural: r for r in resources}
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}

    async def load(self) -> None:
        for plural, res in self.resources.items():
            doc = await kube_json(self.api, "GET", res.collection_path())
            self.objects[plural] = {res.key(o): o for o in doc.get("items") or []}

    def get(self, resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        key = f"{namespace}/{name}" if namespace else name
        return self.objects.get(resource, {}).get(key)

    def count(self, resource: str) -> int:
        return len(self.objects.get(resource, {}))

    def keys(self, resource: str) -> Iterable[tuple[str, str]]:
        return [((o.get("metadata") or {}).get("namespace") or "", (o.get("metadata") or {}).get("name") or "")
                for o in self.objects.get(resource, {}).values()]


@dataclass(frozen=True)
class _OwnPatch:
    """One PATCH we sent: the version the object source showed before it, and what the
    plan needs of the result (its annotations: ``{"metadata": {"annotations": …}}``,
    not the whole object — a full pass may remember thousands)."""

    stamp: float
    before_rv: str | None
    after_rv: str | None
    after: Mapping[str, Any]


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, KubeApiError) and exc.status in RETRYABLE


class Remediator:
    """Runs passes on triggers while ready (and leading); see the module docstring."""

    def __init__(
        self,
        settings: RemediatorSettings,
        api: client.ApiClient,
        opa: OpaClient,
        objects: ObjectSource,
        ready: Callable[[], bool],
        events: EventRecorder | None = None,
    ) -> None:
        self.settings = settings
        self.api = api
        self.opa = opa
        self.objects = objects
        self.ready = ready
        self.events = events
        self.resources = {r.plural: r for r in settings.resources}
        self._trigger = asyncio.Event()
        self._pass_lock = asyncio.Lock()
        self.leader: LeaderElector | None = None
        if settings.leader_election:
            self.leader = LeaderElector(api, settings.lease_namespace, settings.lease_name,
                                        settings.identity or default_identity(), settings.lease_duration)
        else:
            LEADER.labels("").set(1)  # the only replica: it always leads
        self.last_result: PassResult | None = None
        # For the placement page (insight/page.py): the last remediations (newest first) and the
        # objects whose decision the passes found unsatisfiable, with wall-clock times.
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.unsatisfiable: dict[tuple[str, str, str], dict[str, Any]] = {}
        # Objects the policy reports stuck (the decision's "stuck"), with its targets and message.
        self.stuck: dict[Key, dict[str, Any]] = {}
        self._publish_unsatisfiable()
        self.last_pass_time: float | None = None
        # Our own PATCHes, until the watch echoes them back (see _live and is_echo).
        self._patched: dict[tuple[str, str, str], _OwnPatch] = {}
        # What the next pass covers: everything (stamp of the latest request) and/or these
        # objects (key → stamp); stamps come from _clock (remediator/coverage.py).
        self._clock = 0
        self._full_at: int | None = 0
        self._targets: dict[Key, int] = {}
        # Objects whose PATCH is in flight → their watch events received meanwhile (the echo
        # can overtake the PATCH's answer); and the Events of the running pass, sent after it.
        self._inflight: dict[Key, list[Mapping[str, Any]]] = {}
        self._held_events: list[tuple[str, str, str, str, str, str]] | None = None
        self._held_ref_events: list[tuple[InvolvedObject, str, str, str]] = []
        # Whether this replica's leadership ran out during the running pass (patches not sent,
        # counted in PassResult.not_leading, or chunks left unevaluated).
        self._lost_leadership = False
        # Objects whose last patch admission undid → (the changes it set, reverts so far), and
        # the delayed re-targeting of each (see _reverted_patch).
        self._reverts: dict[Key, tuple[dict[str, str], int]] = {}
        self._revert_timers: dict[Key, asyncio.TimerHandle] = {}

    # -- triggers ------------------------------------------------------------

    def trigger(self, reason: str = "change") -> None:
        """Ask for a full pass soon (debounced); the change has reached OPA. Never blocks."""
        log.debug("remediation triggered", extra={"reason": reason})
        self._clock += 1
        self._full_at = self._clock
        self._trigger.set()

    def on_replicated(self, resource: str, objects: list[dict[str, Any]] | None) -> None:
        """Replicated data reached OPA: ``objects`` of ``resource`` written, or (None) the
        whole collection. A change to other data may change any decision: full pass.
        A change to remediated objects re-evaluates those objects only (a targeted
        pass), except the echoes of our own patches, which change nothing we have not
        planned for, plus the remediated Karmada bindings of those objects (their
        templates; :mod:`fedplace.remediator.bindings`). Never blocks."""
        if resource not in self.resources or objects is None:
            self.trigger(f"data:{resource}")
            return
        # Karmada bindings are decided from their templates: a changed template's binding too.
        keys = dependent_bindings(objects, self.resources, self.objects.get)
        for obj in objects:
            key = _key(resource, obj)
            held = self._inflight.get(key)
            if held is not None:  # our PATCH of it is in flight: settled when it returns (_patch)
                held.append(obj)
            elif not self.is_echo(resource, obj):
                keys.add(key)
        self._add_targets(keys)

    def _add_targets(self, keys: set[Key]) -> None:
        """Ask for a targeted pass over ``keys`` (changes that reached OPA)."""
        if keys:
            self._clock += 1
            self._targets.update(dict.fromkeys(keys, self._clock))
            self._trigger.set()

    def is_echo(self, resource: str, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is exactly the state one of our own PATCHes produced (same
        resourceVersion). Each echo is recognised once; anything else is a change."""
        meta = obj.get("metadata") or {}
        key = _key(resource, obj)
        own = self._patched.get(key)
        if own is None or not own.after_rv or own.after_rv != meta.get("resourceVersion"):
            return False
        del self._patched[key]
        return True

    def is_leader(self) -> bool:
        return self.leader is None or self.leader.is_leader

    def _publish_unsatisfiable(self) -> None:
        """``fedplace_remediation_unsatisfiable_objects`` per remediated resource, read at scrape
        time: 0 on a replica that does not lead (what it found while it led is no longer kept
        up to date)."""
        for plural, res in self.resources.items():  # labelled as the sync's metrics: apps/v1/replicasets
            UNSATISFIABLE.labels(str(res)).set_function(lambda r=plural: self.unsatisfiable_count(r))
            STUCK.labels(str(res)).set_function(lambda r=plural: self.stuck_count(r))

    def unsatisfiable_count(self, resource: str) -> int:
        """Objects of ``resource`` (a plural) found unsatisfiable; 0 when not leading."""
        if not self.is_leader():
            return 0
        return sum(1 for key in self.unsatisfiable if key[0] == resource)

    def stuck_count(self, resource: str) -> int:
        """Objects of ``resource`` (a plural) found stuck; 0 when not leading."""
        if not self.is_leader():
            return 0
        return sum(1 for key in self.stuck if key[0] == resource)

    async def run(self) -> None:
        """Wait for triggers or the interval and run passes, until cancelled."""
        tasks: list[asyncio.Task[None]] = []
        if self.leader is not None:
            tasks.append(asyncio.create_task(self.leader.run(), name="remediator-lease"))
        try:
            self._trigger.set()  # a first full pass once ready
            while True:
                try:
                    await asyncio.wait_for(self._trigger.wait(), timeout=self.settings.interval)
                except asyncio.TimeoutError:
                    self._full_at = self._clock  # the interval elapsed: the periodic full pass
                if self.settings.debounce > 0:
                    await asyncio.sleep(self.settings.debounce)
                self._trigger.clear()
                if not self.ready():
                    await asyncio.sleep(0.2)
                    self._trigger.set()
                    continue
                if not self.is_leader() and self.leader is not None:
                    # Keep the request, as a full pass (bounded memory), and run it
                    # once this replica leads.
                    self._full_at, self._targets = self._clock, {}
                    self._trigger.set()
                    self.leader.changed.clear()
                    await self.leader.changed.wait()
                    continue
                full_at, targets = self._full_at, self._targets
                self._full_at, self._targets = None, {}
                if full_at is None and not targets:
                    continue
                full = full_at is not None
                scope = "full" if full else "targeted"
                try:
                    _, evaluated_at = await self._run_pass(None if full else sorted(targets))
                    # What changed meanwhile and was evaluated after it needs no second look.
                    self._full_at, self._targets = outstanding(self._full_at, self._targets, evaluated_at, full)
                    if self._lost_leadership:
                        # What the pass skipped or did not evaluate is left to a full pass, run
                        # once this replica leads again (the next leader runs one anyway).
                        self._full_at, self._targets = self._clock, {}
                        self._trigger.set()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep the loop alive
                    if isinstance(exc, OpaError):
                        PASSES.labels("opa_error", scope).inc()
                        log.warning("remediation pass failed: OPA", extra={"error": str(exc)})
                    else:
                        PASSES.labels("error", scope).inc()
                        log.exception("remediation pass failed")
                    # Not lost: part of the next pass (on the next trigger or the interval).
                    if full and self._full_at is None:
                        self._full_at = full_at
                    self._targets = {**targets, **self._targets}
        finally:
            for timer in self._revert_timers.values():
                timer.cancel()
            self._revert_timers.clear()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.leader is not None:
                await self.leader.release()

    # -- a pass ----------------------------------------------------------------

    async def query_notifications(self, objects: list[tuple[str, str, str]] | None = None) -> list[Notification]:
        """One OPA query: every object's desired annotations (and errors), or only
        those of ``objects`` ((resource, namespace, name); a targeted pass)."""
        query: dict[str, Any] = {
            "resources": [{"plural": r.plural, "namespaced": r.namespaced} for r in self.settings.resources],
        }
        if objects is not None:
            query["objects"] = [{"resource": r, "namespace": ns, "name": n} for r, ns, n in objects]
        doc = await self.opa.query(self.settings.query_path, query)
        if doc is None:
            return []
        return parse_notifications(doc)

    async def run_pass(self, objects: list[Key] | None = None) -> PassResult:
        """Plan against OPA's notifications — for every object, or only ``objects``
        ((resource, namespace, name)) — and apply; returns what happened."""
        return (await self._run_pass(objects))[0]

    def _all_keys(self) -> list[Key]:
        return sorted((plural, ns, name) for plural in self.resources for ns, name in self.objects.keys(plural))

    async def _run_pass(self, objects: list[Key] | None) -> tuple[PassResult, dict[Key, int]]:
        """:meth:`run_pass`, also returning the clock at which each object was evaluated.

        The objects are queried chunk by chunk; each chunk's patches go to the
        pipeline (sent once the guard allows) while the next chunk is evaluated.
        """
        async with self._pass_lock:
            start = time.monotonic()
            scope = "full" if objects is None else "targeted"
            self._patched = {k: v for k, v in self._patched.items() if start - v.stamp <= MEMO_SECONDS}
            keys = self._all_keys() if objects is None else list(objects)
            total = sum(self.objects.count(p) for p in self.resources)
            pipeline = PatchPipeline(self._patch, self._note_dry_run, total=total, unevaluated=len(keys),
                                     max_fraction=self.settings.max_fraction, rate=self.settings.rate,
                                     concurrency=self.settings.concurrency, dry_run=self.settings.dry_run)
            evaluated_at: dict[Key, int] = {}
            queries, query_seconds = 0, 0.0
            self._lost_leadership = False
            self._hold_events()
            try:
                for chunk in chunks(keys, self.settings.chunk, self.settings.max_chunk):
                    if not self.is_leader():
                        self._lost_leadership = True
                        break  # the next leader's full pass covers the rest
                    clock = self._clock  # every change stamped up to here has reached OPA
                    sent = time.monotonic()
                    notifications = [n for n in await self.query_notifications(list(chunk))
                                     if n.resource in self.resources]
                    queries, query_seconds = queries + 1, query_seconds + time.monotonic() - sent
                    evaluated_at.update(dict.fromkeys(chunk, clock))
                    plan = plan_pass(notifications, self._live, total, 1.0)  # the guard is the pipeline's
                    self._note_unsatisfiable(plan.unsatisfiable, chunk)
                    self._note_stuck(plan.stuck, chunk)
                    self._report(plan)
                    if not pipeline.add(plan, len(chunk)):
                        break  # the guard tripped: the rest cannot change that
                result = await pipeline.finish()
            except BaseException:
                await pipeline.cancel()
                raise
            finally:
                self._send_events()
            if objects is None and len(evaluated_at) == len(keys):  # objects gone since the last full pass
                self.unsatisfiable = {k: v for k, v in self.unsatisfiable.items() if k in evaluated_at}
                self.stuck = {k: v for k, v in self.stuck.items() if k in evaluated_at}
            if result.guard_tripped:
                self._guard_tripped(pipeline.would_patch, total)
            PASS_SECONDS.observe(time.monotonic() - start)
            PASSES.labels("guard" if result.guard_tripped else "ok", scope).inc()
            self.last_result = result
            self.last_pass_time = time.time()
            log.info("remediation pass", extra={"scope": scope,
                                                "objects": "all" if objects is None else len(objects),
                                                "evaluated": len(evaluated_at), "queries": queries,
                                                "patched": result.patched, "planned": result.planned,
                                                "in_sync": result.in_sync, "missing": result.skipped_missing,
                                                "failed": result.failed, "reverted": result.reverted,
                                                "not_leading": result.not_leading,
                                                "guard": result.guard_tripped,
                                                "dry_run": result.dry_run,
                                                "query_seconds": round(query_seconds, 3),
                                                "seconds": round(time.monotonic() - start, 3)})
            return result, evaluated_at

    def _note_unsatisfiable(self, found: list[Notification], objects: Iterable[Key]) -> None:
        """Remember which of ``objects`` (a chunk just evaluated) are unsatisfiable now; what
        a full pass no longer finds at all is dropped at its end (:meth:`_run_pass`)."""
        now = time.time()
        for key in objects:
            self.unsatisfiable.pop(key, None)
        for n in found:
            self.unsatisfiable[(n.resource, n.namespace, n.name)] = {
                "resource": n.resource, "namespace": n.namespace, "name": n.name, "errors": list(n.errors),
                "time": now}

    def _note_stuck(self, found: list[Notification], objects: Iterable[Key]) -> None:
        """Remember which of ``objects`` (a chunk just evaluated) are stuck now. A Warning Event
        (the policy's reason and message) goes to the object and to each related object when
        it becomes stuck or its stuck targets change, not on every pass."""
        before = {key: self.stuck.pop(key) for key in objects if key in self.stuck}
        for n in found:
            if n.stuck is None:
                continue
            key = (n.resource, n.namespace, n.name)
            old = before.get(key)
            targets = list(n.stuck.targets)
            self.stuck[key] = {"resource": n.resource, "namespace": n.namespace, "name": n.name,
                               "targets": targets, "reason": n.stuck.reason, "message": n.stuck.message,
                               "time": old["time"] if old and old["targets"] == targets else time.time()}
            if old is not None and old["targets"] == targets:
                continue
            self._event(n.resource, n.namespace, n.name, "Warning", n.stuck.reason, n.stuck.message)
            for ref in n.stuck.related:
                self._event_ref(InvolvedObject(ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""),
                                               ref.get("namespace", ""), ref.get("uid", "")),
                                "Warning", n.stuck.reason, n.stuck.message)

    def _record(self, a: PatchAction, outcome: str) -> None:
        self.history.appendleft({"time": time.time(), "resource": a.resource, "namespace": a.namespace,
                                 "name": a.name, "changes": dict(a.changes), "old": dict(a.old), "outcome": outcome})

    def _live(self, resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The object source's view, or what our own PATCH returned while the source
        still shows the version we patched (planning against that stale version
        would send the same patch again). Any other version is newer than the one we
        patched, so the source wins."""
        cached = self.objects.get(resource, namespace, name)
        own = self._patched.get((resource, namespace, name))
        if cached is None or own is None or time.monotonic() - own.stamp > MEMO_SECONDS:
            return cached
        if (cached.get("metadata") or {}).get("resourceVersion") == own.before_rv:
            return own.after
        return cached

    async def apply_notifications(self, notifications: list[Notification]) -> PassResult:
        """Apply pushed notifications (no guard: they name their objects explicitly)."""
        async with self._pass_lock:
            live: dict[Key, Mapping[str, Any] | None] = {}
            for n in notifications:
                live[(n.resource, n.namespace, n.name)] = await self._get_live(n)
            plan = plan_pass(notifications, lambda r, ns, name: live.get((r, ns, name)), len(notifications), 1.0)
            self._report(plan)
            pipeline = PatchPipeline(self._patch, self._note_dry_run, total=len(notifications),
                                     unevaluated=len(notifications), max_fraction=1.0, rate=self.settings.rate,
                                     concurrency=self.settings.concurrency, dry_run=self.settings.dry_run)
            self._lost_leadership = False
            self._hold_events()
            try:
                pipeline.add(plan, len(notifications))
                return await pipeline.finish()
            finally:
                self._send_events()

    async def _get_live(self, n: Notification) -> Mapping[str, Any] | None:
        res = self.resources.get(n.resource)
        if res is None:
            return None
        try:
            return await kube_json(self.api, "GET", res.object_path(n.name, n.namespace or None))
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _report(self, plan: Plan) -> None:
        """Metrics and Events for what a plan found besides patches."""
        SKIPPED.labels("missing").inc(plan.missing)
        for n in plan.unsatisfiable:
            self._event(n.resource, n.namespace, n.name, "Warning", "PlacementUnsatisfiable",
                        "placement policy cannot be met: " + "; ".join(n.errors))

    def _guard_tripped(self, would_patch: int, total: int) -> None:
        GUARD_TRIPS.inc()
        log.warning("remediation guard tripped: nothing patched",
                    extra={"would_patch_at_least": would_patch, "total": total,
                           "max_fraction": self.settings.max_fraction})
        self._event_lease("Warning", "RemediationGuardTripped",
                          f"pass would patch at least {would_patch} of {total} objects, more than "
                          f"{self.settings.max_fraction:.0%}; nothing patched")

    def _note_dry_run(self, a: PatchAction) -> None:
        """Dry-run: what would be patched, as an Event (and in the history)."""
        PATCHES.labels("dry-run").inc()
        self._record(a, "dry-run")
        self._event(a.resource, a.namespace, a.name, "Normal", "PlacementRemediationPlanned",
                    "dry-run, not patched: " + _describe(a))

    def _still_leading(self, a: PatchAction) -> bool:
        """Checked immediately before each PATCH: False (counted, logged) once this replica
        no longer leads — whoever leads next patches the object in its full pass."""
        if self.is_leader():
            return True
        self._lost_leadership = True
        SKIPPED.labels("not_leader").inc()
        log.info("remediation patch skipped: not the leader any more",
                 extra={"object": f"{a.resource}/{a.namespace}/{a.name}"})
        return False

    async def _patch(self, a: PatchAction) -> str:
        """Send one patch. Watch events of the object that arrive while it is in flight are
        held, then settled by its outcome: our own echo, or somebody else's change (a target)."""
        key = (a.resource, a.namespace, a.name)
        self._inflight[key] = []
        try:
            return await self._send_patch(a)
        finally:
            held = self._inflight.pop(key, [])
            self._add_targets({key} if [o for o in held if not self.is_echo(a.resource, o)] else set())

    async def _send_patch(self, a: PatchAction) -> str:
        res = self.resources[a.resource]
        path = res.object_path(a.name, a.namespace or None)

        def count_conflict(state: Any) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, KubeApiError) and exc.status == 409:
                CONFLICTS.inc()

        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_retryable),
                wait=wait_exponential_jitter(multiplier=0.05, max=2.0, jitter=0.05),
                stop=stop_after_attempt(self.settings.patch_attempts),
                before_sleep=count_conflict,
                reraise=True,
            ):
                with attempt:
                    if not self._still_leading(a):
                        return "not_leader"
                    before = self.objects.get(a.resource, a.namespace, a.name) or {}
                    patched = await kube_json(self.api, "PATCH", path, body=annotation_merge_patch(a.changes),
                                              content_type="application/merge-patch+json")
        except KubeApiError as exc:
            if exc.status == 404:
                SKIPPED.labels("deleted").inc()
                return "missing"
            SKIPPED.labels("failed").inc()
            self._record(a, "failed")
            log.warning("remediation patch failed", extra={"object": f"{a.resource}/{a.namespace}/{a.name}",
                                                           "status": exc.status, "error": exc.message})
            return "failed"
        key = (a.resource, a.namespace, a.name)
        if isinstance(patched, dict):
            meta = patched.get("metadata") or {}
            # Remembered even when undone: its echo (if it changed anything) is no news.
            self._patched[key] = _OwnPatch(
                time.monotonic(), (before.get("metadata") or {}).get("resourceVersion"), meta.get("resourceVersion"),
                {"metadata": {"annotations": meta.get("annotations") or {}}})
            stored = meta.get("annotations") or {}
            undone = sorted(k for k, v in a.changes.items() if stored.get(k) != canonical_value(v))
            if undone:
                self._reverted_patch(a, undone)
                return "reverted"
        self._reverts.pop(key, None)
        PATCHES.labels("enforce").inc()
        self._event(a.resource, a.namespace, a.name, "Normal", "PlacementRemediated", _describe(a))
        self._record(a, "patched")
        return "patched"

    def _reverted_patch(self, a: PatchAction, keys: list[str]) -> None:
        """The PATCH was answered with an object lacking ``keys`` of ``a.changes``: admission
        undid it. Counted and logged (keys, never values); the object is re-targeted after
        a backoff, a bounded number of times per desired change (module docstring)."""
        key = (a.resource, a.namespace, a.name)
        SKIPPED.labels("reverted").inc()
        self._record(a, "reverted")
        changes, reverts = self._reverts.get(key, ({}, 0))
        reverts = reverts + 1 if changes == a.changes else 1
        self._reverts[key] = (dict(a.changes), reverts)
        obj = f"{a.resource}/{a.namespace}/{a.name}"
        if reverts > REVERT_ATTEMPTS:
            log.warning("remediation patch undone by admission again; left to the periodic full pass",
                        extra={"object": obj, "annotations": keys, "reverts": reverts})
            return
        delay = min(REVERT_MAX_DELAY, REVERT_FIRST_DELAY * 2 ** (reverts - 1))
        log.warning("remediation patch undone by admission (a webhook whose OPA has an older policy?); "
                    "retrying the object later",
                    extra={"object": obj, "annotations": keys, "reverts": reverts, "retry_in_s": delay})
        old = self._revert_timers.pop(key, None)
        if old is not None:
            old.cancel()

        def retarget() -> None:
            self._revert_timers.pop(key, None)
            self._add_targets({key})

        self._revert_timers[key] = asyncio.get_running_loop().call_later(delay, retarget)

    # -- events ------------------------------------------------------------------

    def _hold_events(self) -> None:
        """Keep the Events of the pass that starts until :meth:`_send_events`: its patches
        come first (Events cost the API server about what a patch costs)."""
        self._held_events = []

    def _send_events(self) -> None:
        held, self._held_events = self._held_events or [], None
        for args in held:
            self._event(*args)
        refs, self._held_ref_events = self._held_ref_events, []
        for ref_args in refs:
            self._event_ref(*ref_args)

    def _event(self, resource: str, namespace: str, name: str, etype: str, reason: str, message: str) -> None:
        if self.events is None:
            return
        if self._held_events is not None:
            self._held_events.append((resource, namespace, name, etype, reason, message))
            return
        obj = self.objects.get(resource, namespace, name) or {}
        res = self.resources.get(resource)
        kind = str(obj.get("kind") or "")
        api_version = str(obj.get("apiVersion") or (res.api_version if res else ""))
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        self.events.record(InvolvedObject(api_version, kind, name, namespace, uid), etype, reason, message)

    def _event_ref(self, obj: InvolvedObject, etype: str, reason: str, message: str) -> None:
        """An Event about an object named by reference (held, like :meth:`_event`, during a pass)."""
        if self.events is None:
            return
        if self._held_events is not None:
            self._held_ref_events.append((obj, etype, reason, message))
            return
        self.events.record(obj, etype, reason, message)

    def _event_lease(self, etype: str, reason: str, message: str) -> None:
        if self.events is None:
            return
        self.events.record(InvolvedObject("coordination.k8s.io/v1", "Lease", self.settings.lease_name,
                                          self.settings.lease_namespace), etype, reason, message)


def _key(resource: str, obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return resource, str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _describe(a: PatchAction) -> str:
    parts = [f"{k}: {a.old.get(k)!r} -> {v!r}" for k, v in sorted(a.changes.items())]
    return "; ".join(parts)
