"""opa-kube-sync as one object: informers, replication and policy handlers,
restart detection, the remediator when enabled, and the HTTP endpoints.

Start-up order: write the sentinel (retrying until OPA answers), then start
the informers; once every type's initial list and every policy namespace's
initial load are pushed, confirm the sentinel is still ours (else re-push),
write the record of a complete load (:mod:`fedplace.sync.loaded`), and only
then report ready (``/readyz``) — so an OPA restart at any moment of the
start-up is caught. :func:`run` is the in-process entry point.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Mapping

from aiohttp import web
from kubernetes_asyncio import client

from fedplace.common.events import EventRecorder, InvolvedObject, involved_object
from fedplace.common.informer import Informer
from fedplace.common.kube_client import new_api_client
from fedplace.common.opa_client import OpaError
from fedplace.common.ops_http import add_ops_routes
from fedplace.common.policy_configmaps import CONFIGMAPS, policy_informer_settings
from fedplace.insight import page as placement_page
from fedplace.insight.evaluate import LiveOpa
from fedplace.insight.reasons import read_settings
from fedplace.insight.rules import PageRules
from fedplace.remediator.remediator import Remediator
from fedplace.sync import loaded, replicated_root
from fedplace.sync.config import SyncConfig
from fedplace.sync.notifications import add_notifications_route
from fedplace.sync.opa_watch import Responsiveness, SlowRequest, WatchedOpaClient
from fedplace.sync.policy_loader import PolicyHandler
from fedplace.sync.replicate import ReplicationHandler
from fedplace.sync.sentinel import RestartDetector
from fedplace.sync.signal import ChangeSignal

__all__ = ["InformerObjects", "SyncApp", "run"]

log = logging.getLogger(__name__)



class InformerObjects:
    """The remediator's view of live objects (an ``ObjectSource``): the replication informers' caches."""

    def __init__(self, replicators: dict[str, ReplicationHandler]) -> None:
        self.replicators = replicators

    def get(self, resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        rep = self.replicators.get(resource)
        if rep is None:
            return None
        return rep.informer.objects.get(f"{namespace}/{name}" if rep.resource.namespaced else name)

    def count(self, resource: str) -> int:
        rep = self.replicators.get(resource)
        return len(rep.informer.objects) if rep is not None else 0

    def keys(self, resource: str) -> list[tuple[str, str]]:
        """(namespace or "", name) of every cached object (cache keys are ``ns/name`` or ``name``)."""
        rep = self.replicators.get(resource)
        if rep is None:
            return []
        if not rep.resource.namespaced:
            return [("", key) for key in rep.informer.objects]
        return [tuple(key.split("/", 1)) for key in rep.informer.objects]  # type: ignore[misc]


class SyncApp:
    """The whole sync; :meth:`start` spawns everything as tasks, :meth:`stop` tears it down."""

    def __init__(self, settings: SyncConfig, api: client.ApiClient | None = None) -> None:
        self.settings = settings
        self._api = api
        self.api: client.ApiClient | None = None
        # "In time" is the per-request timeout: a request waiting longer makes the sync not ready.
        self.watch = Responsiveness(settings.opa.timeout)
        self.watch.listeners.append(self._on_responsiveness)
        self.opa = WatchedOpaClient(settings.opa, self.watch)
        self.signal = ChangeSignal()
        self.replicators: dict[str, ReplicationHandler] = {}
        self.loaders: list[PolicyHandler] = []
        self.informers: list[Informer] = []
        self.record = (loaded.LoadedRecord(self.opa, self.loaded_record) if settings.admission_package
                       else None)
        self.detector = RestartDetector(self.opa, settings.opa_check_interval, self.restore, record=self.record)
        self.confirmed = asyncio.Event()  # initial sync done, the sentinel confirmed, the record written
        self.events: EventRecorder | None = None
        self.remediator: Remediator | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        # The placement policy's settings for the placement page (read from OPA after each policy load),
        # and the placement rules' answers for its workloads (kept by _placement_page).
        self.placement_settings: dict[str, Any] | None = None
        self.page_rules = PageRules()

    # -- readiness -----------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        for plural, rep in self.replicators.items():
            if not rep.synced.is_set():
                return False, f"initial sync of {plural} not complete"
        for loader in self.loaders:
            if not loader.loaded.is_set():
                return False, f"policies of {loader.namespace} not loaded"
        if not self.confirmed.is_set():
            return False, "initial sync not confirmed in OPA (sentinel)"
        if not self.watch.answering:
            return False, self.watch.reason()
        return True, ""

    def is_ready(self) -> bool:
        return self.ready()[0]

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        self.api = self._api or await new_api_client(s.kubeconfig)
        self.events = EventRecorder(self.api, "opa-kube-sync")
        self._spawn(self.events.run(), "events")
        if s.remediator.enabled:
            self.remediator = Remediator(s.remediator, self.api, self.opa, InformerObjects(self.replicators),
                                         ready=self.is_ready, events=self.events)
        if s.enable_data:
            for res in s.resources:
                rep = ReplicationHandler(res, self.api, self.opa, s.replicate_path, self.signal, s.ignore_namespaces,
                                         on_opa_error=self.detector.poke, on_written=self._on_written)
                self.replicators[res.plural] = rep
                self.informers.append(rep.informer)
                self._spawn(rep.run_flusher(), f"flush-{res.plural}")
        if s.enable_policies:
            for ns in s.policy_namespaces:
                loader = PolicyHandler(ns, self.opa, self.api, self.signal, self.events,
                                       allow_system=s.allow_system_packages, limits=s.policy_limits,
                                       write_timeout=s.opa_policy_timeout, on_covered=self._publish_record)
                self.loaders.append(loader)
                self.informers.append(Informer(self.api, CONFIGMAPS, loader, namespace=ns,
                                                 settings=policy_informer_settings()))
                self._spawn(loader.run_retries(), f"policy-retries-{ns}")
        self._spawn(self._lifecycle(), "lifecycle")
        self._spawn(self.watch.run(), "opa-responsiveness")

        app = web.Application()
        add_ops_routes(app, self.ready)
        if self.remediator is not None:
            add_notifications_route(app, self.remediator, s.remediator.notifications_token_file, self.is_ready)
            self._spawn(self._forward_changes(self.remediator), "remediator-triggers")
            self._spawn(self.remediator.run(), "remediator")
        if s.placement_page:
            placement_page.add_routes(app, lambda: placement_page.sync_view(self), s.placement_page_refresh,
                                      token_file=s.placement_page_token_file)
            self._spawn(self._placement_page(), "placement-page")
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, s.listen[0], s.listen[1])
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        log.info("opa-kube-sync started", extra={"listen": f"{s.listen[0]}:{self.port}",
                                                 "resources": [str(r) for r in s.resources],
                                                 "policy_namespaces": s.policy_namespaces,
                                                 "remediate": s.remediator.mode})

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        task.add_done_callback(self._task_done)
        self._tasks.append(task)

    @staticmethod
    def _task_done(task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("background task died", extra={"task": task.get_name(), "error": repr(task.exception())})

    async def _lifecycle(self) -> None:
        """Sentinel, informers, initial sync, confirmation, then restart detection."""
        await self._until_ok(self.detector.mark, "cannot write the sentinel yet")
        await self._until_ok(self.push_own_modules, "cannot load the sync's own modules yet")
        for inf in self.informers:
            self._spawn(inf.run(), f"informer-{inf.resource.plural}")
        waits = [rep.synced.wait() for rep in self.replicators.values()]
        waits += [loader.loaded.wait() for loader in self.loaders]
        await asyncio.gather(*waits)

        async def confirm() -> None:
            if not await self.detector.intact():
                log.warning("OPA lost its state during the initial sync: pushing everything again")
                await self.detector.mark()
                await self.restore()
            if self.record is not None:
                await self.record.publish(complete=True)

        await self._until_ok(confirm, "cannot confirm the initial sync yet")
        self.confirmed.set()
        log.info("initial sync complete; ready")
        await self.detector.run()

    @staticmethod
    async def _until_ok(step: Any, what: str) -> None:
        delay = 0.05
        while True:
            try:
                await step()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - OPA down: keep trying
                log.info(what, extra={"error": str(exc)})
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)

    def _on_responsiveness(self, answering: bool, cause: SlowRequest | None) -> None:
        """OPA stopped answering in time: a Warning Event on this pod (downward API ``POD_NAME``,
        ``POD_NAMESPACE``) and on the policy ConfigMap whose module OPA is working on, if any."""
        if answering or self.events is None:
            return
        what = cause.describe() if cause else "a request"
        message = (f"OPA is not answering opa-kube-sync in time ({what}; threshold {self.watch.threshold:g} s): "
                   "not ready until it does; requests still waiting are not sent again")
        pod, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
        if pod and namespace:
            self.events.record(InvolvedObject("v1", "Pod", pod, namespace), "Warning", "PolicyEngineNotResponding",
                               message)
        for loader in self.loaders:
            mid = loader.writing
            name = loader.configmap_of(mid) if mid else None
            if name is not None:
                self.events.record(involved_object(loader.configmaps[name].obj), "Warning",
                                   "PolicyEngineNotResponding",
                                   f"OPA is still working on module {mid} after {self.watch.threshold:g} s; the "
                                   "sync waits for its answer and does not send it again. " + message)

    def _on_written(self, plural: str, objects: list[dict[str, Any]] | None) -> None:
        if self.remediator is not None:
            self.remediator.on_replicated(plural, objects)

    async def _forward_changes(self, remediator: Remediator) -> None:
        """Turn policy loads into full remediation passes (replicated data reaches the
        remediator object by object, through :meth:`_on_written`)."""
        seen = self.signal.generation
        while True:
            generation = await self.signal.wait(seen)
            if "policy" in self.signal.kinds_since(seen):
                remediator.trigger("policy")
            seen = generation

    async def _placement_page(self) -> None:
        """Keep what the placement page reads from OPA current, once the sync is ready:
        :attr:`placement_settings` (the policy's selector kinds, cluster name label, …: to read
        placements as the policy does), read after every policy load; and :attr:`page_rules`,
        the placement rules' answer for each object the page shows — asked again for every
        object after a policy load or a change of any replicated type the rules may read (the
        clusters, the namespaces, …), only for the new objects when the page's own workloads
        and templates change. When OPA cannot be asked the last values stay and it is tried
        again after a pause."""
        await self.confirmed.wait()
        seen = self.signal.generation
        evaluator = LiveOpa(self.opa)
        stale_settings = True
        while True:
            try:
                if stale_settings:
                    self.placement_settings = await read_settings(self.opa)
                    stale_settings = False
                objects, _ = placement_page.page_objects(self)
                await self.page_rules.refresh(evaluator, objects)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - OPA busy or down: keep the last answers, retry
                log.info("cannot ask OPA what the placement page shows", extra={"error": str(exc)})
                await asyncio.sleep(5)
                continue
            generation = await self.signal.wait(seen)
            await asyncio.sleep(0.2)  # a burst of changes: one refresh
            kinds = self.signal.kinds_since(seen)
            seen = max(generation, self.signal.generation)
            _, own = placement_page.page_objects(self)
            if "policy" in kinds:
                stale_settings = True
            if any(k == "policy" or (k.startswith("data:") and k[len("data:"):] not in own) for k in kinds):
                self.page_rules.forget()

    async def push_own_modules(self) -> None:
        """Load the generated modules before any policy ConfigMap: the one naming the
        replicated data root (libraries such as remediation call its functions) and the one
        putting the record of a complete load into the admission decision."""
        await self.opa.put_policy(replicated_root.POLICY_ID, replicated_root.render(self.settings.replicate_path),
                                  timeout=self.settings.opa_policy_timeout)
        if self.record is not None:
            await self.opa.put_policy(loaded.POLICY_ID, loaded.render(self.settings.admission_package),
                                      timeout=self.settings.opa_policy_timeout)

    def loaded_record(self) -> dict[str, Any]:
        """The record of what OPA holds: every policy ConfigMap OPA has answered for, per
        namespace, and every replicated resource whose initial list was pushed."""
        return loaded.record_document({loader.namespace: set(loader.covered) for loader in self.loaders},
                                      {plural for plural, rep in self.replicators.items() if rep.synced.is_set()})

    async def _publish_record(self) -> None:
        """A policy ConfigMap finished loading or went away: write the record again (not before
        the first complete load). OPA refusing or not answering is left to restart detection."""
        if self.record is None:
            return
        try:
            await self.record.publish()
        except OpaError as exc:
            log.info("cannot write the record of a complete load; checking OPA", extra={"error": str(exc)})
            self.detector.poke()

    async def restore(self) -> None:
        """Push every cached object and policy again (OPA lost its state)."""
        await self.push_own_modules()
        await asyncio.gather(*(rep.push_all() for rep in self.replicators.values()))
        for loader in self.loaders:
            await loader.push_all()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.opa.close()
        if self.api is not None and self._api is None:
            await self.api.close()


async def run(config: SyncConfig, stop: asyncio.Event | None = None) -> None:
    """Run the sync until ``stop`` is set (or, without one, until cancelled)."""
    app = SyncApp(config)
    await app.start()
    try:
        if stop is None:
            await asyncio.Event().wait()
        else:
            await stop.wait()
    finally:
        log.info("shutting down")
        await app.stop()
