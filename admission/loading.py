"""Is the decision computed from the whole policy set? A pure check of OPA's answer.

opa-kube-sync writes, after a complete load of every policy ConfigMap and the
replicated data, a record that the admission decision carries under the key
:data:`LOADED_KEY` (docs/sync.md, "The record of a complete load";
:mod:`fedplace.sync.loaded`)::

    {"configmaps": {"<policy namespace>": ["<name>", ...]}, "resources": [...]}

Both come from one query, so they describe the same state of OPA. The decision
counts as **loading** (the webhook fails closed, cause ``loading``) when policies
exist and the record is missing (OPA restarted, the sync is still loading) or
does not name every policy ConfigMap the webhook's informer sees (one was added
and is not loaded yet). :func:`check_loaded` also removes the key, so the
policy's own decision is judged as before; a decision holding nothing else is
undefined (no policy defines the package).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from fedplace.common.opa_query import OpaOutcome

__all__ = ["LOADED_KEY", "LoadCheck", "check_loaded"]

LOADED_KEY = "fedplace_loaded"
NAMES_SHOWN = 5


@dataclass(frozen=True)
class LoadCheck:
    """``outcome`` without the record; ``loading`` says why the policy set is incomplete
    ("" when it is complete, or when there is no decision to judge)."""

    outcome: OpaOutcome
    loading: str = ""


def _missing(record: Any, namespace: str, names: Iterable[str]) -> list[str] | None:
    """ConfigMaps of ``namespace`` the record does not name; None when the record is malformed."""
    if not isinstance(record, dict) or not isinstance(record.get("configmaps"), dict):
        return None
    loaded = record["configmaps"].get(namespace, [])
    if not isinstance(loaded, list):
        return None
    have = set(loaded)
    return sorted(n for n in names if n not in have)


def check_loaded(outcome: OpaOutcome, namespace: str, names: Iterable[str]) -> LoadCheck:
    """Judge a defined decision object against the policy ConfigMaps ``names`` of
    ``namespace`` (the informer's view). Errors, undefined and non-object results are
    passed through unchanged for :func:`~fedplace.admission.decision.decide`."""
    result = outcome.result
    if outcome.error is not None or not outcome.defined or not isinstance(result, dict):
        return LoadCheck(outcome)
    rest = {k: v for k, v in result.items() if k != LOADED_KEY}
    stripped = (replace(outcome, result=rest) if rest
                else OpaOutcome.undefined(outcome.attempts, outcome.query_path))
    if LOADED_KEY not in result:
        return LoadCheck(stripped, "policies are loading into OPA: the decision carries no record of a complete "
                                   "load (opa-kube-sync has not finished loading every policy ConfigMap and the "
                                   "replicated data since it started or OPA restarted)")
    missing = _missing(result[LOADED_KEY], namespace, names)
    if missing is None:
        return LoadCheck(stripped, f"policies are loading into OPA: the record of a complete load is malformed "
                                   f"({LOADED_KEY} must be {{\"configmaps\": {{namespace: [name, ...]}}}})")
    if missing:
        shown = ", ".join(missing[:NAMES_SHOWN]) + (f" and {len(missing) - NAMES_SHOWN} more"
                                                     if len(missing) > NAMES_SHOWN else "")
        return LoadCheck(stripped, f"policies are loading into OPA: policy ConfigMap(s) {shown} of {namespace} "
                                   "not loaded yet")
    return LoadCheck(stripped)
