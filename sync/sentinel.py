"""Detect that OPA lost its state (a restart) and have everything pushed again.

OPA keeps data and policies in memory and tells nobody when it restarts. After
each full sync the detector writes a sentinel document,
``data.fedplace_sync = {"generation": <random id>}``, and checks it every
``interval`` seconds — and at once when a writer reports an OPA error
(:meth:`poke`). Missing or different → a new sentinel is written, then
``restore()`` re-pushes all data and policies from the caches. While OPA does
not answer, checks repeat with a short backoff (≤ the interval), so the state
is back within about one interval plus the push once OPA answers again.

With a :class:`~fedplace.sync.loaded.LoadedRecord`, writing the sentinel
withdraws the record of a complete load, and a completed re-push writes it
again (a failed write of the record counts as a failed re-push).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from contextlib import AbstractAsyncContextManager
from typing import Awaitable, Callable, Protocol

from prometheus_client import Counter, Histogram

from fedplace.common.opa_client import OpaClient, OpaError

__all__ = ["SENTINEL_PATH", "Record", "RestartDetector"]

log = logging.getLogger(__name__)


class Record(Protocol):
    """What the detector needs of the record of a complete load
    (:class:`fedplace.sync.loaded.LoadedRecord`, which imports this module)."""

    def withdrawn(self) -> AbstractAsyncContextManager[None]: ...

    async def publish(self, complete: bool = False) -> None: ...


SENTINEL_PATH = ["fedplace_sync"]
RESYNCS = Counter("fedplace_sync_opa_resyncs_total", "Full re-pushes after OPA lost its state")
RESTORE_SECONDS = Histogram("fedplace_sync_opa_restore_seconds", "Time to re-push everything after OPA lost its state")


class RestartDetector:
    def __init__(self, opa: OpaClient, interval: float, restore: Callable[[], Awaitable[None]],
                 record: Record | None = None) -> None:
        self.opa = opa
        self.record = record
        self.interval = interval
        self.restore = restore
        self.generation = ""
        self.marked = asyncio.Event()
        self._poke = asyncio.Event()

    def poke(self) -> None:
        """Check soon: something failed talking to OPA."""
        self._poke.set()

    async def mark(self) -> None:
        """Write a new sentinel: OPA now holds everything we pushed."""
        generation = uuid.uuid4().hex
        if self.record is None:
            await self.opa.put_data(SENTINEL_PATH, {"generation": generation})
        else:
            async with self.record.withdrawn():
                await self.opa.put_data(SENTINEL_PATH, {"generation": generation})
        self.generation = generation
        self.marked.set()

    async def intact(self) -> bool:
        doc = await self.opa.get_data(SENTINEL_PATH)
        return isinstance(doc, dict) and doc.get("generation") == self.generation

    async def run(self) -> None:
        """Check until cancelled (start after the first :meth:`mark`).

        A new sentinel is written *before* the re-push: if OPA loses its state
        again while we push, the sentinel is gone too and the next check
        catches it; the reverse order would hide a loss in between.
        """
        failures = 0
        while True:
            delay = self.interval if failures == 0 else min(self.interval, 0.1 * 2 ** min(failures - 1, 4))
            try:
                await asyncio.wait_for(self._poke.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
            self._poke.clear()
            restoring = False
            try:
                if await self.intact():
                    failures = 0
                    continue
                log.warning("OPA lost its state (restart?): pushing everything again")
                start = time.monotonic()
                restoring = True
                await self.mark()
                await self.restore()
                if self.record is not None:
                    await self.record.publish(complete=True)
                RESYNCS.inc()
                RESTORE_SECONDS.observe(time.monotonic() - start)
                failures = 0
                log.info("OPA state restored", extra={"seconds": round(time.monotonic() - start, 3)})
            except OpaError as exc:
                # Down, or failed mid-restore: check again soon (backoff capped at the
                # interval); if the sentinel we wrote survived but the push did not
                # complete, forget it so the next check restores again.
                failures += 1
                if restoring:
                    self.generation = ""
                log.info("OPA not answering; will check again", extra={"error": str(exc)})
