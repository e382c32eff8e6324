"""Asking OPA for the admission decision — the federation plugin's ``query.go``.

:func:`query_decision` POSTs ``{"input": <object>}`` to the decision document
with :class:`common.opa_client.OpaClient`, retrying
:class:`~common.opa_client.OpaUnavailable` (connection errors, timeouts, 429,
5xx) with exponential backoff and jitter, honouring ``Retry-After``, all inside
one :class:`~common.retry.Deadline`. Each attempt's timeout is
``min(per-attempt timeout, deadline.remaining())``. Malformed answers and
other 4xx are not retried. When the deadline cuts the last attempt short, the
failure reported is OPA's own last one (e.g. its 500), not the cut. It never
raises for an OPA failure: the result is an
:class:`~admission.decision.OpaOutcome` for :func:`~admission.decision.decide`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from tenacity import RetryCallState

from admission import metrics
from admission.decision import OpaOutcome
from common.opa_client import (
    OpaClient,
    OpaError,
    OpaMalformedResponse,
    OpaRequestError,
    OpaUnavailable,
    OpaUndefined,
)
from common.retry import Backoff, Deadline, deadline_retrying

__all__ = ["query_decision"]

log = logging.getLogger(__name__)

MIN_ATTEMPT_SECONDS = 0.01


def _kind(exc: OpaError) -> str:
    if isinstance(exc, OpaUnavailable):
        return "unavailable"
    if isinstance(exc, OpaMalformedResponse):
        return "malformed"
    if isinstance(exc, OpaRequestError):
        return "request"
    return "unavailable"


async def query_decision(
    client: OpaClient,
    query_path: str,
    obj: dict[str, Any],
    *,
    deadline: Deadline,
    attempt_timeout: float,
    backoff: Backoff = Backoff(),
) -> OpaOutcome:
    """Query ``data.<query_path>`` with ``obj`` as input; never raises for OPA errors."""
    attempts = 0
    # The last failure that was OPA's own, not an attempt cut short by the deadline:
    # that is what an operator needs to read in the denial.
    last_cause: str | None = None

    def before_sleep(state: RetryCallState) -> None:
        metrics.OPA_RETRIES.inc()
        exc = state.outcome.exception() if state.outcome else None
        log.info("OPA decision attempt failed; retrying",
                 extra={"attempt": state.attempt_number, "error": str(exc),
                        "sleep_s": round(state.upcoming_sleep, 3),
                        "deadline_left_s": round(deadline.remaining(), 3)})

    async def attempt_once() -> Any:
        nonlocal attempts, last_cause
        remaining = deadline.remaining()
        if remaining < MIN_ATTEMPT_SECONDS:
            raise OpaUnavailable("deadline exceeded before the attempt")
        attempts += 1
        metrics.OPA_ATTEMPTS.inc()
        started = time.monotonic()
        result_label = "ok"
        timeout = min(attempt_timeout, remaining)
        try:
            return await client.query(query_path, obj, undefined_ok=False, timeout=timeout)
        except OpaUndefined:
            result_label = "undefined"
            raise
        except OpaError as exc:
            result_label = _kind(exc)
            if not (timeout < attempt_timeout and "timed out" in exc.message):
                last_cause = exc.message
            raise
        finally:
            metrics.OPA_SECONDS.labels(result_label).observe(time.monotonic() - started)

    try:
        async for attempt in deadline_retrying(deadline, (OpaUnavailable,), backoff, before_sleep=before_sleep):
            with attempt:
                result = await attempt_once()
        return OpaOutcome.ok(result, attempts=attempts, query_path=query_path)
    except OpaUndefined:
        return OpaOutcome.undefined(attempts=attempts, query_path=query_path)
    except OpaUnavailable as exc:
        cause = exc.message
        if last_cause is not None and (deadline.expired() or cause.startswith("deadline exceeded")):
            cause = last_cause  # the final attempt was only cut short by the deadline
        if exc.retry_after is not None and exc.retry_after >= deadline.remaining():
            cause = f"{cause} (Retry-After {exc.retry_after:g}s is beyond the {deadline.seconds:g}s deadline)"
        elif deadline.expired() or "timed out" in cause:
            cause = f"{cause} (deadline {deadline.seconds:g}s)"
        return OpaOutcome.failed("unavailable", cause, attempts=attempts, query_path=query_path)
    except OpaError as exc:
        return OpaOutcome.failed(_kind(exc), exc.message, attempts=attempts, query_path=query_path)
