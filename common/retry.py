"""Retry policies built on tenacity, shared by every component.

Two shapes:

* :func:`deadline_retrying` — for request paths (admission): exponential
  backoff with jitter, ``Retry-After`` honoured, and nothing started or slept
  past one overall deadline. Callers bound each attempt with
  :meth:`Deadline.remaining`.
* :func:`forever_retrying` — for background loops (sync): retry until
  cancelled, with capped exponential backoff and jitter.

Only exceptions of the given types are retried; anything else propagates at
once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_exponential_jitter,
)
from tenacity.wait import wait_base

__all__ = ["Backoff", "Deadline", "WaitRetryAfter", "deadline_retrying", "forever_retrying"]


@dataclass
class Deadline:
    """A point in monotonic time by which work must be finished."""

    seconds: float
    start: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return max(0.0, self.start + self.seconds - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0.0


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: ``initial * 2**n + U(0, jitter)``, capped at ``maximum``."""

    initial: float = 0.05
    maximum: float = 1.0
    jitter: float = 0.05


class WaitRetryAfter(wait_base):
    """Wait what the server asked for (``exc.retry_after``), else ``fallback``.

    With a ``deadline``, never waits longer than the time left.
    """

    def __init__(self, fallback: wait_base, deadline: Deadline | None = None) -> None:
        self.fallback = fallback
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        asked = getattr(exc, "retry_after", None)
        wait = float(asked) if asked is not None else self.fallback(retry_state)
        if self.deadline is not None:
            wait = min(wait, self.deadline.remaining())
        return max(0.0, wait)


def deadline_retrying(
    deadline: Deadline,
    retry_on: tuple[type[BaseException], ...],
    backoff: Backoff = Backoff(),
    **kwargs: Any,
) -> AsyncRetrying:
    """Retry ``retry_on`` errors until the deadline; the last error is re-raised."""
    fallback = wait_exponential_jitter(multiplier=backoff.initial, max=backoff.maximum, jitter=backoff.jitter)
    return AsyncRetrying(
        retry=retry_if_exception_type(retry_on),
        wait=WaitRetryAfter(fallback, deadline),
        stop=_stop_at(deadline),
        reraise=True,
        **kwargs,
    )


def _stop_at(deadline: Deadline, min_attempt: float = 0.01):  # type: ignore[no-untyped-def]
    """Stop when, after the coming wait, less than ``min_attempt`` seconds would be left."""

    def stop(retry_state: RetryCallState) -> bool:
        return deadline.remaining() - (retry_state.upcoming_sleep or 0.0) < min_attempt

    return stop


def forever_retrying(
    retry_on: tuple[type[BaseException], ...],
    backoff: Backoff = Backoff(initial=0.2, maximum=10.0, jitter=0.5),
    **kwargs: Any,
) -> AsyncRetrying:
    """Retry ``retry_on`` errors until the task is cancelled."""
    fallback = wait_exponential_jitter(multiplier=backoff.initial, max=backoff.maximum, jitter=backoff.jitter)
    return AsyncRetrying(
        retry=retry_if_exception_type(retry_on),
        wait=WaitRetryAfter(fallback),
        reraise=True,
        **kwargs,
    )
