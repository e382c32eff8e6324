"""Policy ConfigMaps → OPA modules, with the load status written back.

Every ConfigMap in a policy namespace is policy; each data key is one module
with OPA id ``<namespace>/<configmap>/<key>``. Each
informer handler for one namespace (:class:`PolicyHandler`):

* a changed ConfigMap PUTs its modules; a removed key or a deleted ConfigMap
  DELETEs them; a relist also deletes modules under ``<namespace>/`` that no
  ConfigMap defines any more;
* before OPA sees a module it is checked (:class:`fedplace.sync.policy_check.ModuleCheck`:
  limits, and no ``data.system…`` package unless allowed). ``binaryData`` keys
  are never loaded and say so;
* at most one request per module id is outstanding at OPA: writes wait for
  OPA's answer (``write_timeout``, long) instead of giving up and sending
  again — OPA keeps working on an abandoned request, queued with the rest. A
  write that got no answer at all leaves the id "unsettled": before the next
  write to it, the sync reads the module back (the read waits for OPA's
  pending write) and only then writes, with backoff in between;
* the outcome is written back as the annotation ``fedplace.io/policy-status``
  (:class:`fedplace.sync.policy_status.StatusWriter`), whenever it changes and
  until the API server took it (:meth:`PolicyHandler.run_retries` schedules
  what did not go through), and kept in the gauge ``fedplace_sync_policy_modules``
  (modules ok / failing now, per ConfigMap; its series go with the ConfigMap);
* after loading, rules that several modules define (:mod:`fedplace.common.rego_scan`'s
  outline) are evaluated once without input: an ``eval_conflict_error`` puts
  an error naming the other ConfigMaps on every ConfigMap involved; when OPA
  refuses a module because of another ConfigMap's (conflicting rules, two
  defaults), the error names that ConfigMap too;
* our own annotation writes come back as MODIFIED events: a ConfigMap whose
  data did not change is not reloaded, so there is no reload loop;
* modules that failed to compile are retried after every successful load and
  on a backoff timer (a module may depend on one that loads later);
* :attr:`PolicyHandler.covered` names the ConfigMaps whose modules have all
  been sent to OPA and answered (loaded or refused); ``on_covered`` is awaited
  when that set changes, before the status is written back (the sync's record
  of a complete load, :mod:`fedplace.sync.loaded`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Awaitable, Callable

from kubernetes_asyncio import client
from prometheus_client import Counter

from fedplace.common.events import EventRecorder
from fedplace.common.opa_client import (
    OpaClient,
    OpaCompileError,
    OpaEvaluationError,
    OpaRequestError,
    OpaUnavailable,
    data_path,
)
from fedplace.common.rego_scan import RegoScanError, RuleHead
from fedplace.common.rules_contract import RULES_ROOT, contract_problems
from fedplace.sync.policy_check import Limits, ModuleCheck, data_hash, module_error, module_ids, normalize_errors
from fedplace.sync.policy_status import ConfigMapState, StatusWriter, forget_modules
from fedplace.sync.signal import ChangeSignal

__all__ = ["PolicyHandler"]

log = logging.getLogger(__name__)

# The placement library's contract violations that hold whatever the object (docs/policies.md).
CONTRACT_ERRORS = "io/k8s/federation/placement/contract_errors"

# Every failed attempt, retries included (a module that keeps failing adds one per retry): for the
# rate of failures. Whether anything is failing now is fedplace_sync_policy_modules{status="error"}.
LOAD_ERRORS = Counter("fedplace_sync_policy_load_errors_total",
                      "Failed policy module load attempts, retries included (refused by OPA or by the sync)")
LOADS = Counter("fedplace_sync_policy_loads_total", "Policy modules loaded into OPA")
REFUSED = Counter("fedplace_sync_policy_refused_total",
                  "Policy modules the sync refused before OPA saw them", ["reason"])
CONFLICTS = Counter("fedplace_sync_policy_conflicts_total",
                    "Rules found conflicting across policy modules at evaluation")


class PolicyHandler:
    """Keeps OPA's modules ``<namespace>/…`` equal to the ConfigMaps of one namespace."""

    def __init__(self, namespace: str, opa: OpaClient, api: client.ApiClient, signal: ChangeSignal,
                 events: EventRecorder | None = None, allow_system: bool = False, limits: Limits = Limits(),
                 write_timeout: float = 600.0, on_covered: Callable[[], Awaitable[None]] | None = None) -> None:
        self.namespace = namespace
        self.on_covered = on_covered
        self.covered: set[str] = set()  # ConfigMaps whose modules OPA has all answered
        self.write_timeout = write_timeout
        self.opa = opa
        self.signal = signal
        self.check = ModuleCheck(limits, allow_system)
        self._retry = asyncio.Event()  # set: repair soon
        self.status = StatusWriter(namespace, api, events, on_pending=self._retry.set)
        self.configmaps: dict[str, ConfigMapState] = {}
        self.loaded = asyncio.Event()
        self._lock = asyncio.Lock()
        self._dirty: dict[str, dict[str, Any]] = {}  # ConfigMaps whose load OPA did not answer
        self._orphans: set[str] = set()  # module ids to delete that are still in OPA
        self._unsettled: set[str] = set()  # ids whose last write got no answer: OPA may still be on it
        self.writing: str | None = None  # the module id of the write in flight (for Events)
        self.writes = 0  # module PUTs and DELETEs OPA took: an event that made none changed no policy

    # -- informer handler ------------------------------------------------------

    async def on_sync(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        async with self._lock:
            names = set()
            for cm in objects:
                names.add(cm["metadata"]["name"])
                await self._apply(cm, force=True)
            for gone in set(self.configmaps) - names:
                await self._drop(gone)
            wanted = {mid for st in self.configmaps.values() for mid in st.modules}
            for policy in await self.opa.list_policies():
                pid = str(policy.get("id", ""))
                if pid.startswith(self.namespace + "/") and pid not in wanted:
                    self._orphans.add(pid)
            self._dirty.clear()
            await self._delete_orphans()
            await self._retry_failed()
            await self._check_conflicts()
        self.loaded.set()
        self.signal.notify("policy")

    async def on_event(self, event_type: str, cm: dict[str, Any]) -> None:
        """Apply one change. OPA unavailable → remembered and repaired by :meth:`run_retries`
        (not raised: the informer would back off and relist everything). The change signal
        says "policy" only when OPA's modules changed: not for our own status write-back or a
        label edit (each would otherwise start a remediation pass)."""
        name = cm["metadata"]["name"]
        writes = self.writes
        async with self._lock:
            try:
                if event_type == "DELETED":
                    self._dirty.pop(name, None)
                    await self._drop(name)
                else:
                    dirty = self._dirty.pop(name, None) is not None
                    try:
                        await self._apply(cm, force=dirty)
                    except OpaUnavailable:
                        self._dirty[name] = cm
                        raise
                await self._delete_orphans()
                await self._retry_failed()
                await self._check_conflicts()
            except OpaUnavailable as exc:
                log.warning("OPA unavailable while loading policy; will retry",
                            extra={"configmap": name, "error": str(exc)})
                self._retry.set()
                return
        if self.writes != writes:
            self.signal.notify("policy")

    # -- loading -------------------------------------------------------------------

    async def _apply(self, cm: dict[str, Any], force: bool) -> None:
        name = cm["metadata"]["name"]
        data = cm.get("data") or {}
        binary = tuple(sorted(cm.get("binaryData") or {}))
        digest = data_hash(data, binary)
        old = self.configmaps.get(name)
        if old is not None and old.data_hash == digest and not force:
            old.obj = cm  # our own status write, or a label change: nothing to reload
            if old.status_pending:
                await self.status.write(old)
            return
        modules = module_ids(self.namespace, name, data)
        state = ConfigMapState(digest, modules, cm, binary_keys=binary)
        if old is not None:
            state.conflicts = {mid: errs for mid, errs in old.conflicts.items() if old.modules.get(mid) == modules.get(mid)}
        self.configmaps[name] = state
        self._orphans |= set(old.modules if old else {}) - set(modules)
        self._orphans -= set(modules)
        await self._delete_orphans()
        for mid, raw in modules.items():
            if not force and old is not None and old.modules.get(mid) == raw and mid not in old.errors \
                    and mid not in old.refused:
                continue
            await self._put(state, mid, raw)
        if old is not None and not force:
            for mid in (set(old.errors) | set(old.refused)) & set(modules):
                if old.modules.get(mid) == modules[mid] and mid not in state.errors and mid not in state.refused:
                    if mid in old.errors:
                        state.errors[mid] = old.errors[mid]
                    else:
                        state.refused[mid] = old.refused[mid]
        await self._cover(name, True)
        await self.status.write(state)

    async def _put(self, state: ConfigMapState, mid: str, raw: str) -> bool:
        others = ((m, r) for st in self.configmaps.values() for m, r in st.loaded().items())
        problem = self.check.refusal(mid, raw, others)
        if problem is not None:
            err, retry = problem
            target, other = (state.errors, state.refused) if retry else (state.refused, state.errors)
            other.pop(mid, None)
            if target.get(mid) != [err]:
                LOAD_ERRORS.inc()
                REFUSED.labels(err["code"].removeprefix("fedplace_")).inc()
                log.warning("policy module refused before OPA saw it", extra={"policy_id": mid, "error": err["message"]})
            target[mid] = [err]
            return False
        state.refused.pop(mid, None)
        try:
            await self._write(mid, raw)
        except OpaCompileError as exc:
            state.errors[mid] = self._name_configmaps(mid, normalize_errors(mid, exc.errors))
            LOAD_ERRORS.inc()
            log.warning("policy failed to compile", extra={"policy_id": mid, "errors": exc.errors})
            return False
        except OpaRequestError as exc:
            state.errors[mid] = normalize_errors(mid, [{"code": exc.code or "invalid_parameter", "message": exc.message}])
            LOAD_ERRORS.inc()
            return False
        state.errors.pop(mid, None)
        LOADS.inc()
        return True

    async def _write(self, mid: str, raw: str | None) -> None:
        """PUT (``raw``) or DELETE (None) one module, never with another request for it outstanding."""
        if mid in self._unsettled:
            # Our last write of it got no answer; OPA may still be compiling it. Reading the module
            # waits for that write (OPA's store lock); only then is it safe to write again.
            current = await self.opa.get_policy(mid, timeout=self.write_timeout)
            self._unsettled.discard(mid)
            if (current is None and raw is None) or (current is not None and current.get("raw") == raw):
                self.writes += 1
                return  # the earlier write landed
        self.writing = mid
        try:
            if raw is None:
                await self.opa.delete_policy(mid, missing_ok=True, timeout=self.write_timeout)
            else:
                await self.opa.put_policy(mid, raw, timeout=self.write_timeout)
            self.writes += 1
        except OpaUnavailable as exc:
            if not exc.answered:
                self._unsettled.add(mid)
            raise
        finally:
            self.writing = None

    def configmap_of(self, mid: str) -> str | None:
        prefix = self.namespace + "/"
        if not mid.startswith(prefix):
            return None
        name = mid[len(prefix):].split("/", 1)[0]
        return name if name in self.configmaps else None

    def _name_configmaps(self, mid: str, errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """OPA refused ``mid`` because of another ConfigMap's module (conflicting rules, two
        defaults): say which, from the error's location and the rule paths it names."""
        own = self.configmap_of(mid)
        out = []
        for err in errors:
            others: set[str] = set()
            loc_file = str((err.get("location") or {}).get("file", ""))
            for file in [loc_file, *re.findall(r"(\S+?\.\w+):\d+", str(err.get("message", "")))]:
                name = self.configmap_of(file)
                if name and name != own:
                    others.add(name)
            for ref in re.findall(r"\bdata((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", str(err.get("message", ""))):
                path = tuple(ref.strip(".").split("."))
                for st in self.configmaps.values():
                    if st.name == own:
                        continue
                    for m, r in st.loaded().items():
                        if any(h.path == path for h in self.check.outline(m, r)[1]):
                            others.add(st.name)
            if others:
                err = dict(err)
                err["conflicts_with"] = sorted(others)
                err["message"] = (f"{err.get('message', '')} (conflicts with ConfigMap"
                                  f"{'s' if len(others) > 1 else ''} {', '.join(sorted(others))})")
            out.append(err)
        return out

    async def _drop(self, name: str) -> None:
        state = self.configmaps.pop(name, None)
        if state is None:
            return
        forget_modules(self.namespace, name)
        self._orphans |= set(state.modules)
        await self._delete_orphans()
        await self._cover(name, False)

    async def _cover(self, name: str, covered: bool) -> None:
        """Add or remove ``name`` from :attr:`covered`; tell ``on_covered`` when that changed it."""
        if (name in self.covered) == covered:
            return
        if covered:
            self.covered.add(name)
        else:
            self.covered.discard(name)
        if self.on_covered is not None:
            await self.on_covered()

    async def _delete_orphans(self) -> None:
        """Delete modules no ConfigMap defines any more. OPA refusing one (another module
        imports it) keeps it for a later try; OPA unavailable raises."""
        for mid in sorted(self._orphans):
            try:
                await self._write(mid, None)
            except OpaRequestError as exc:
                log.warning("OPA refused to delete a module; will retry",
                            extra={"policy_id": mid, "error": str(exc)})
                continue
            self._orphans.discard(mid)
            self.check.forget(mid)

    async def _retry_failed(self) -> None:
        """Retry every failed module until a round loads none of them."""
        progress = True
        while progress:
            progress = False
            for state in list(self.configmaps.values()):
                for mid in list(state.errors):
                    if await self._put(state, mid, state.modules[mid]):
                        progress = True
                        await self.status.write(state)

    # -- conflicts only evaluation shows ---------------------------------------------

    async def _check_conflicts(self) -> None:
        """Evaluate, without input, every rule document that modules of different ConfigMaps
        define (or one defines inside another's); ``eval_conflict_error`` → an error on each."""
        docs: dict[tuple[str, ...], list[tuple[str, str, RuleHead]]] = {}
        for st in self.configmaps.values():
            for mid, raw in st.loaded().items():
                for head in self.check.outline(mid, raw)[1]:
                    if head.kind in ("complete", "partial_object"):
                        docs.setdefault(head.path, []).append((st.name, mid, head))
        paths = sorted(docs)
        found: dict[str, dict[str, list[dict[str, Any]]]] = {}
        warnings = await self._contract_warnings()
        checked: set[tuple[str, ...]] = set()
        for path in paths:
            if any(path[:n] in checked for n in range(1, len(path))):
                continue  # a shorter document covering this one was evaluated already
            defs = [d for p in paths if p[:len(path)] == path for d in docs[p]]
            if len({cm for cm, _, _ in defs}) < 2:
                continue
            checked.add(path)
            try:
                await self.opa.query(data_path(path))
                continue
            except (OpaEvaluationError, OpaUnavailable) as exc:
                if isinstance(exc, OpaUnavailable) and not exc.answered:
                    return  # no answer: keep what we know, check again after the next load
                conflict = next((e for e in exc.errors if e.get("code") == "eval_conflict_error"), None)
            except Exception as exc:  # noqa: BLE001 - the check must never break loading
                log.info("conflict check skipped", extra={"path": ".".join(path), "error": str(exc)})
                continue
            names = sorted({cm for cm, _, _ in defs})
            if conflict is None:
                values = {(cm, h.value) for cm, _, h in defs if h.path == path and h.kind == "complete"}
                if len({v for _, v in values}) > 1 and len({cm for cm, _ in values}) > 1:
                    for cm, mid, head in defs:
                        warnings.setdefault(cm, []).append(module_error(
                            "fedplace_possible_conflict",
                            f"data.{'.'.join(path)} is also defined by ConfigMap(s) "
                            f"{', '.join(n for n in names if n != cm)} with another value: if both rules hold "
                            "for one input, OPA cannot evaluate it (eval_conflict_error)",
                            mid, head.row, conflicts_with=[n for n in names if n != cm]))
                continue
            CONFLICTS.inc()
            for cm, mid, head in defs:
                others = [n for n in names if n != cm] or [cm]
                found.setdefault(cm, {}).setdefault(mid, []).append(module_error(
                    "fedplace_rule_conflict",
                    f"data.{'.'.join(path)} is defined by ConfigMaps {', '.join(names)} and OPA cannot evaluate "
                    f"it: {conflict.get('message', 'eval_conflict_error')} (eval_conflict_error); decisions that "
                    "read it fail until the definitions agree", mid, head.row, conflicts_with=others))
        for st in list(self.configmaps.values()):
            new = found.get(st.name, {})
            new_warnings = warnings.get(st.name, [])
            if new != st.conflicts or new_warnings != st.warnings:
                st.conflicts, st.warnings = new, new_warnings
                await self.status.write(st)

    async def _contract_warnings(self) -> dict[str, list[dict[str, Any]]]:
        """ConfigMap name → the placement-rules contract's violations in its modules: rule
        sets of the wrong shape (read from each module's outline), and the library's
        ``contract_errors`` without input (a requirement of the wrong shape whatever the
        object), each on the ConfigMaps declaring that rule set."""
        warnings: dict[str, list[dict[str, Any]]] = {}
        sets: dict[str, list[tuple[str, str, int]]] = {}  # rule set name → (ConfigMap, module id, row)
        for st in self.configmaps.values():
            for mid, raw in st.loaded().items():
                shape = self.check.outline(mid, raw)[0]
                if isinstance(shape, RegoScanError):
                    continue
                for problem in contract_problems(shape):
                    warnings.setdefault(st.name, []).append(module_error(
                        "fedplace_rules_contract", problem.message, mid, problem.row))
                path = shape.package.path
                if len(path) == len(RULES_ROOT) + 1 and path[:len(RULES_ROOT)] == RULES_ROOT:
                    sets.setdefault(path[-1], []).append((st.name, mid, shape.package.row))
        if not sets:
            return warnings
        try:
            errors = await self.opa.query(CONTRACT_ERRORS)
        except Exception as exc:  # noqa: BLE001 - the check must never break loading
            log.info("placement rules contract check skipped", extra={"error": str(exc)})
            return warnings
        for message in errors if isinstance(errors, list) else []:
            for name, where in sets.items():
                if isinstance(message, str) and message.startswith(f"placement rule set {name}:"):
                    for cm, mid, row in where:
                        warnings.setdefault(cm, []).append(module_error(
                            "fedplace_rules_contract", message + " (for every object: the objects it applies "
                            "to are denied)", mid, row))
        return warnings

    async def push_all(self) -> None:
        """Load every module again (after OPA lost its state)."""
        async with self._lock:
            self._orphans.clear()  # OPA holds nothing of ours any more
            self._dirty.clear()  # the states below already carry the latest data
            self._unsettled.clear()
            for state in self.configmaps.values():
                for mid, raw in state.modules.items():
                    await self._put(state, mid, raw)
            await self._retry_failed()
            for state in self.configmaps.values():
                await self.status.write(state)
            await self._check_conflicts()
        self.signal.notify("policy")

    async def run_retries(self, initial: float = 0.5, maximum: float = 30.0) -> None:
        """Until cancelled: repair loads OPA did not answer and status writes the API server did
        not take (backoff 50 ms → 1 s), and retry modules that failed to compile (backoff
        ``initial`` → ``maximum``)."""
        delay = initial
        repair_failures = 0
        while True:
            repairs = self._repairs_due()
            timeout = min(1.0, 0.05 * 2 ** repair_failures) if repairs else delay
            try:
                await asyncio.wait_for(self._retry.wait(), timeout=timeout)
            except asyncio.TimeoutError:
                pass
            self._retry.clear()
            repairs = self._repairs_due()
            if not (repairs or any(st.errors for st in self.configmaps.values())):
                delay, repair_failures = initial, 0
                continue
            try:
                async with self._lock:
                    for name, cm in list(self._dirty.items()):
                        await self._apply(cm, force=True)
                        del self._dirty[name]
                    await self._delete_orphans()
                    await self._retry_failed()
                    for state in list(self.configmaps.values()):
                        if state.status_pending:
                            await self.status.write(state)
                    await self._check_conflicts()
                repair_failures = 0 if not self._repairs_due() else min(repair_failures + 1, 6)
                self.signal.notify("policy")
            except OpaUnavailable:
                repair_failures = min(repair_failures + 1, 6)
            if not repairs:
                delay = min(maximum, delay * 2)

    def _repairs_due(self) -> bool:
        return bool(self._dirty or self._orphans or any(st.status_pending for st in self.configmaps.values()))
