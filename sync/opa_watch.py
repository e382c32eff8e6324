"""Is OPA answering in time? The sync's view, for ``/readyz``, a metric and an Event.

OPA recompiles every module on each policy write while holding its store's
write lock, so a module that takes long to compile holds up every other
request, reads included. Nothing tells the sync, and a client that gives up
does not stop OPA: the abandoned request still runs, queued behind the
others. :class:`WatchedOpaClient` times every request the sync makes;
:class:`Responsiveness` turns that into one state:

* **not answering in time** as soon as one request has been waiting longer
  than ``threshold`` seconds (a watchdog notices while it is still waiting),
  or one timed out;
* **answering** again once a request completes within ``threshold`` and none
  is still waiting longer than that.

Transitions set the gauge ``fedplace_sync_opa_responsive`` (1/0), count
``fedplace_sync_opa_unresponsive_total`` and call the listeners (the sync
records a Warning Event ``PolicyEngineNotResponding`` and reports not ready).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from prometheus_client import Counter, Gauge

from fedplace.common.opa_client import OpaClient, OpaSettings, OpaUnavailable

__all__ = ["Responsiveness", "SlowRequest", "WatchedOpaClient"]

log = logging.getLogger(__name__)

RESPONSIVE = Gauge("fedplace_sync_opa_responsive", "1 while OPA answers the sync's requests in time, else 0")
UNRESPONSIVE = Counter("fedplace_sync_opa_unresponsive_total",
                       "Times OPA stopped answering the sync's requests in time")
SLOW_REQUESTS = Counter("fedplace_sync_opa_slow_requests_total",
                        "Requests to OPA that took longer than the answer threshold or timed out", ["method"])


@dataclass(frozen=True)
class SlowRequest:
    """The request that made OPA count as not answering: ``waited`` seconds so far."""

    method: str
    path: str
    waited: float
    timed_out: bool = False

    def describe(self) -> str:
        state = "timed out after" if self.timed_out else "has waited"
        return f"{self.method} {self.path} {state} {self.waited:.1f} s"


class Responsiveness:
    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.answering = True
        self.since = time.monotonic()
        self.cause: SlowRequest | None = None
        self.listeners: list[Callable[[bool, SlowRequest | None], None]] = []
        self._inflight: dict[int, tuple[str, str, float]] = {}
        self._ids = itertools.count()
        RESPONSIVE.set(1)

    def begin(self, method: str, path: str) -> int:
        token = next(self._ids)
        self._inflight[token] = (method, path, time.monotonic())
        return token

    def end(self, token: int, timed_out: bool = False) -> None:
        method, path, started = self._inflight.pop(token, ("", "", time.monotonic()))
        took = time.monotonic() - started
        if timed_out or took > self.threshold:
            SLOW_REQUESTS.labels(method).inc()
            self._set(False, SlowRequest(method, path, took, timed_out))
        elif not self._overdue():
            self._set(True, None)

    def _overdue(self) -> SlowRequest | None:
        now = time.monotonic()
        for method, path, started in self._inflight.values():
            if now - started > self.threshold:
                return SlowRequest(method, path, now - started)
        return None

    def check(self) -> None:
        """The watchdog's step: a request still waiting past the threshold counts at once."""
        late = self._overdue()
        if late is not None and self.answering:
            SLOW_REQUESTS.labels(late.method).inc()
            self._set(False, late)

    async def run(self) -> None:
        """Until cancelled: :meth:`check` a few times per threshold."""
        while True:
            await asyncio.sleep(max(0.05, self.threshold / 4))
            self.check()

    def _set(self, answering: bool, cause: SlowRequest | None) -> None:
        if answering == self.answering:
            return
        self.answering = answering
        self.cause = cause
        elapsed = time.monotonic() - self.since
        self.since = time.monotonic()
        RESPONSIVE.set(1 if answering else 0)
        if answering:
            log.info("OPA answers in time again", extra={"after_s": round(elapsed, 1)})
        else:
            UNRESPONSIVE.inc()
            log.warning("OPA is not answering in time", extra={
                "threshold_s": self.threshold, "request": cause.describe() if cause else ""})
        for listener in list(self.listeners):
            try:
                listener(answering, cause)
            except Exception:  # noqa: BLE001 - a listener must not break the client
                log.exception("responsiveness listener failed")

    def reason(self) -> str:
        """Why the sync is not ready ("" while OPA answers in time)."""
        if self.answering:
            return ""
        what = self.cause.describe() if self.cause else "a request"
        return (f"OPA is not answering in time: {what} (threshold {self.threshold:g} s, "
                f"for {time.monotonic() - self.since:.0f} s)")


class WatchedOpaClient(OpaClient):
    """:class:`OpaClient` whose every request is timed by a :class:`Responsiveness`."""

    def __init__(self, settings: OpaSettings, watch: Responsiveness) -> None:
        super().__init__(settings)
        self.watch = watch

    async def request(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        token = self.watch.begin(method, path.split("?", 1)[0])
        timed_out = False
        try:
            return await super().request(method, path, **kwargs)
        except OpaUnavailable as exc:
            timed_out = exc.message.endswith("timed out")
            raise
        finally:
            self.watch.end(token, timed_out=timed_out)
