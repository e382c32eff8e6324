"""Bookkeeping that must not delay an answer, done while the webhook waits anyway.

The metrics and the log line of a decision are of no use to the API server, yet
done just after the answer they still delay the answers when the API server
runs on the same machine: the reader of an answer is either woken on the
webhook's own CPU (a "sync" wakeup, which expects the writer to block next) and
waits there until the webhook does, or sends its next request while they still
run. Measured at one request in flight over TLS, that tail cost ~0.06 ms of
every answer (docs/benchmarks.md, "Admission webhook").

So :class:`Deferred` queues such work (:meth:`Deferred.add`) and runs all of it,
in the order queued:

* while the next request waits for OPA: :meth:`Deferred.run_while_waiting`,
  called just before the query is sent, schedules the run for the moment the
  request suspends, its query on the wire;
* at the latest ``max_delay`` seconds after the oldest queued item, when no
  request comes (a timer), or as soon as ``max_items`` are queued (requests
  that do not ask OPA, e.g. while no policy exists, never wait for it);
* on :meth:`Deferred.flush`: before ``/metrics`` answers (a scrape counts every
  request answered before it) and at shutdown (after in-flight requests end).

An item that raises is logged with its traceback; the others still run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

__all__ = ["Deferred"]

log = logging.getLogger(__name__)


class Deferred:
    """A queue of calls run later on the running event loop; see the module docstring."""

    def __init__(self, max_delay: float = 0.05, max_items: int = 64) -> None:
        self.max_delay = max_delay
        self.max_items = max_items
        self._queue: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; runs within ``max_delay`` seconds (call from the event loop)."""
        self._queue.append((fn, args))
        if len(self._queue) >= self.max_items:
            self.run_while_waiting()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.max_delay, self.flush)

    def run_while_waiting(self) -> None:
        """Run the queue once the current task next suspends (its OPA query sent)."""
        if self._queue and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Run everything queued, now."""
        self._scheduled = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        queue, self._queue = self._queue, []
        for fn, args in queue:
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 — one failed item must not lose the others
                log.exception("deferred bookkeeping failed", extra={"call": getattr(fn, "__qualname__", repr(fn))})
