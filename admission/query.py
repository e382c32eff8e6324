"""Asking OPA for the admission decision — the federation plugin's ``query.go``.

:func:`query_decision` is :func:`fedplace.common.opa_query.query_within_deadline` (POST
``{"input": <object>}``, retries with backoff and jitter inside one deadline,
``Retry-After`` honoured, OPA's own last failure reported) with the webhook's
metrics attached. It never raises for an OPA failure: the result is an
:class:`~fedplace.admission.decision.OpaOutcome` for :func:`~fedplace.admission.decision.decide`.
"""

from __future__ import annotations

from typing import Any

from fedplace.admission import metrics
from fedplace.admission.decision import OpaOutcome
from fedplace.common.opa_client import OpaClient
from fedplace.common.opa_query import QueryHooks, query_within_deadline
from fedplace.common.retry import Backoff, Deadline

__all__ = ["query_decision"]


def _attempted(result_label: str, seconds: float) -> None:
    metrics.OPA_ATTEMPTS.inc()
    metrics.OPA_SECONDS_BY_RESULT[result_label].observe(seconds)


HOOKS = QueryHooks(attempt=_attempted, retry=metrics.OPA_RETRIES.inc)


async def query_decision(
    client: OpaClient,
    query_path: str,
    obj: dict[str, Any],
    *,
    deadline: Deadline,
    attempt_timeout: float,
    backoff: Backoff = Backoff(),
    first_attempt_outside: bool = True,
) -> OpaOutcome:
    """Query ``data.<query_path>`` with ``obj`` as input, with strict builtin errors; never
    raises for OPA errors. Strict: a builtin failing inside a rule (``to_number("x")``, an
    invalid regex) fails the decision (``evaluation``, fail closed) instead of making that
    rule undefined, which would silently narrow or widen the placement."""
    return await query_within_deadline(client, query_path, obj, deadline=deadline,
                                       attempt_timeout=attempt_timeout, backoff=backoff, hooks=HOOKS,
                                       first_attempt_outside=first_attempt_outside, strict=True)
