"""Sending a pass's patches while OPA still evaluates the rest of it.

:class:`PatchPipeline` receives the plan of each evaluated chunk
(:meth:`~PatchPipeline.add`) and sends its patches with concurrent workers,
spaced by one rate limiter — as soon as the max-fraction guard can no longer
trip (:func:`~fedplace.remediator.plan.guard_verdict`). Until then patches are held;
if the guard trips, the held ones are dropped and nothing is sent, exactly as
when the whole pass was planned before patching. In dry-run mode released
actions are only noted (Events), never sent.

Contract: ``add`` never blocks and returns False once the guard has tripped
(the caller stops evaluating); ``finish`` waits until every released patch
has been sent and returns the pass's counts; ``cancel`` stops the workers
(a failed pass). One pipeline per pass. Once a send answers "not_leader", the
patches still queued are handed to ``send`` without waiting for the rate
limiter (each is then refused at once, counted ``not_leading``): a replica
that lost its lease ends its pass without pacing patches it will not send.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from fedplace.remediator.plan import PatchAction, Plan, guard_verdict

__all__ = ["PassResult", "PatchPipeline", "RateLimiter"]


@dataclass
class PassResult:
    patched: int = 0
    planned: int = 0
    skipped_missing: int = 0
    in_sync: int = 0
    failed: int = 0
    reverted: int = 0  # sent, but undone by admission (remediator.py re-targets them)
    not_leading: int = 0  # not sent: this replica no longer led (the next leader's full pass makes them)
    unsatisfiable: int = 0
    guard_tripped: bool = False
    dry_run: bool = False


class RateLimiter:
    """Spaces calls at least ``1/rate`` seconds apart (shared by concurrent workers)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next = time.monotonic()
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self.lock:
            now = time.monotonic()
            delay = self.next - now
            self.next = max(now, self.next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


Send = Callable[[PatchAction], Awaitable[str]]  # → "patched" | "missing" | "reverted" | "not_leader" | "failed"


class PatchPipeline:
    """One pass's patches: held until the guard allows, then sent concurrently (see module)."""

    def __init__(self, send: Send, note: Callable[[PatchAction], None], *, total: int, unevaluated: int,
                 max_fraction: float, rate: float, concurrency: int, dry_run: bool) -> None:
        """``total``: objects of the remediated kinds (the guard's base); ``unevaluated``:
        objects this pass will evaluate; ``note``: what dry-run does with an action."""
        self.send, self.note = send, note
        self.total, self.unevaluated, self.max_fraction = total, unevaluated, max_fraction
        self.concurrency = max(1, concurrency)
        self.result = PassResult(dry_run=dry_run)
        self.would_patch = 0  # when the guard tripped: patches planned by then (a lower bound)
        self._held: list[PatchAction] = []
        self._released = False
        self._limiter = RateLimiter(rate)
        self._queue: asyncio.Queue[PatchAction | None] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._lost_leadership = False

    def add(self, plan: Plan, evaluated: int) -> bool:
        """The plan of ``evaluated`` more objects; False once the guard has tripped."""
        r = self.result
        if r.guard_tripped:
            return False
        r.planned += len(plan.actions)
        r.in_sync += plan.in_sync
        r.skipped_missing += plan.missing
        r.unsatisfiable += len(plan.unsatisfiable)
        self.unevaluated = max(0, self.unevaluated - evaluated)
        self._held.extend(plan.actions)
        verdict = guard_verdict(r.planned, self.unevaluated, self.total, self.max_fraction)
        if verdict == "trip":
            r.guard_tripped, self.would_patch, self._held = True, r.planned, []
            return False
        if verdict == "release" or self._released:
            self._release()
        return True

    def _release(self) -> None:
        self._released = True
        held, self._held = self._held, []
        if self.result.dry_run:
            for action in held:
                self.note(action)
            return
        for action in held:
            self._queue.put_nowait(action)
        while len(self._workers) < min(self.concurrency, self._queue.qsize() + len(self._workers)):
            self._workers.append(asyncio.create_task(self._worker(), name="remediation-patch"))

    async def _worker(self) -> None:
        while True:
            action = await self._queue.get()
            if action is None:
                return
            if not self._lost_leadership:
                await self._limiter.wait()
            outcome = await self.send(action)
            if outcome == "patched":
                self.result.patched += 1
            elif outcome == "missing":
                self.result.skipped_missing += 1
            elif outcome == "reverted":
                self.result.reverted += 1
            elif outcome == "not_leader":
                self.result.not_leading += 1
                self._lost_leadership = True
            else:
                self.result.failed += 1

    async def finish(self) -> PassResult:
        """Everything was evaluated: release what the guard allows, wait for the patches."""
        if not self.result.guard_tripped and self._held:
            self.unevaluated = 0
            if guard_verdict(self.result.planned, 0, self.total, self.max_fraction) == "trip":
                self.result.guard_tripped, self.would_patch, self._held = True, self.result.planned, []
            else:
                self._release()
        for _ in self._workers:
            self._queue.put_nowait(None)
        await asyncio.gather(*self._workers)
        return self.result

    async def cancel(self) -> None:
        """Stop sending (the pass failed); patches not yet sent are dropped."""
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
