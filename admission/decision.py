"""The admission decision — a pure function, like the federation plugin's ``admission.go``.

:func:`decide` maps (the request, whether policies exist, what the query step
got from OPA) onto a :class:`Decision`. No I/O: the HTTP handler runs the
query (:mod:`fedplace.admission.query`) only when :func:`needs_query` says so, then
calls :func:`decide`, and carries out the result (response, Event, metrics).

Rules (docs/admission.md, "Decision contract" and "Failure semantics"):

====================================  ==================================  ===========
situation                             decision                            outcome
====================================  ==================================  ===========
DELETE or CONNECT                     allow, unchanged, OPA not asked     allowed
no policy ConfigMaps                  allow, unchanged, OPA not asked     fail_open
OPA failed after retries              deny 403, Event                     fail_closed
the policy failed evaluating (a       deny 403 naming module:row, Event   fail_closed
builtin error, a conflict; asked      on the object and a Warning
with strict builtin errors)           ``PolicyEvaluationError`` on each
                                      policy ConfigMap located
result undefined                      deny 403 "no policy decision"       fail_closed
policy set still loading              deny 403 "policies are loading      fail_closed
(:mod:`fedplace.admission.loading`)   into OPA ...", Event
result not {errors, annotations,      deny 403, Event                     fail_closed
patch, patches, events} of the right
types, or an invalid ``patch``/
``patches``/``events``
non-empty ``errors``                  deny 403 listing every error,       denied
                                      Event PlacementDenied
UPDATE whose ``errors`` the old       allow (as without errors), one      allowed /
object has too, or of an object       warning per error, not denied       patched
being deleted (ratcheting, below)
annotations / patch change something  allow with one JSONPatch            patched
nothing to change                     allow, no patch                     allowed
====================================  ==================================  ===========

An allowed decision carries the policy's ``events`` (Events to record on other
objects, :mod:`fedplace.admission.policy_events`).

Ratcheting (UPDATE only): an update is denied only for the errors it introduces.
When the new object has errors, :func:`needs_old_query` asks for the old object
(``request.oldObject``) to be evaluated against the same policy, and :func:`decide`
denies with the errors of the new object that the old one does not have (compared
as their canonical text). Errors the old object already had are not the update's
doing: with none introduced, the update is decided as if the policy reported no
errors, and the errors become AdmissionReview warnings (``ratchet`` names why:
:data:`RATCHET_PREEXISTING`). An update of an object being deleted
(``metadata.deletionTimestamp`` set) is never denied for policy errors
(:data:`RATCHET_DELETING`; the old object is not evaluated). When the old object's
evaluation gives no usable list of errors (OPA failed, undefined, malformed), the
update is denied with every error of the new object, as without ratcheting.
CREATE is unchanged, and so are the fail-closed outcomes of the new object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedplace.admission.patches import InvalidPatch, build_patch
from fedplace.admission.policy_events import InvalidEvents, PolicyEvent, parse_events
from fedplace.admission.review import AdmissionRequest
from fedplace.common.annotations import canonical_value
from fedplace.common.opa_query import OpaOutcome

__all__ = [
    "Decision",
    "OpaOutcome",
    "RATCHET_DELETING",
    "RATCHET_PREEXISTING",
    "REASON_DENIED",
    "REASON_ENGINE",
    "UNCHECKED_OPERATIONS",
    "decide",
    "introduced_errors",
    "is_being_deleted",
    "loading",
    "needs_old_query",
    "needs_query",
    "policy_errors",
]

REASON_DENIED = "PlacementDenied"
REASON_ENGINE = "PolicyEngineUnavailable"
REASON_EVALUATION = "PolicyEvaluationError"
UNCHECKED_OPERATIONS = frozenset({"DELETE", "CONNECT"})
RESULT_KEYS = ("errors", "annotations", "patch", "patches", "events")
RATCHET_PREEXISTING = "preexisting_errors"
RATCHET_DELETING = "being_deleted"


@dataclass(frozen=True)
class Decision:
    """What to answer. ``outcome`` is the metric label; ``cause`` says why a
    fail-closed denial happened (``unavailable``, ``malformed``, ``request``,
    ``undefined``, ``invalid_decision``, ``loading``); ``event_reason`` is set when a
    Warning Event should be recorded; ``events`` are the policy's own Events
    about other objects (allowed decisions only); ``warnings`` go into the
    AdmissionReview answer; ``ratchet`` is set (:data:`RATCHET_PREEXISTING`,
    :data:`RATCHET_DELETING`) when an UPDATE was admitted despite policy errors."""

    allowed: bool
    outcome: str
    patch: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    cause: str = ""
    event_reason: str | None = None
    code: int = 200
    events: tuple[PolicyEvent, ...] = ()
    warnings: tuple[str, ...] = ()
    ratchet: str = ""


def needs_query(request: AdmissionRequest, policies_exist: bool) -> bool:
    """Whether OPA must be asked: a CREATE or UPDATE while policies exist."""
    return policies_exist and request.operation not in UNCHECKED_OPERATIONS


def is_being_deleted(obj: dict[str, Any] | None) -> bool:
    """Whether ``obj`` carries ``metadata.deletionTimestamp`` (its deletion has begun)."""
    meta = (obj or {}).get("metadata")
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))


def policy_errors(outcome: OpaOutcome | None) -> list[str] | None:
    """The canonical texts of a decision's ``errors`` (``[]`` for none), or ``None`` when
    ``outcome`` holds no usable decision (OPA failed, undefined, not an object, ``errors``
    not a list)."""
    if outcome is None or outcome.error is not None or not outcome.defined or not isinstance(outcome.result, dict):
        return None
    errors = outcome.result.get("errors")
    if errors is None:
        return []
    if not isinstance(errors, list):
        return None
    return [_error_text(e) for e in errors]


def needs_old_query(request: AdmissionRequest, outcome: OpaOutcome | None) -> bool:
    """Whether the old object must be evaluated too: an UPDATE with an old object, not
    being deleted, whose new object the policy gave errors."""
    return (request.operation == "UPDATE" and isinstance(request.old_object, dict)
            and not is_being_deleted(request.object) and bool(policy_errors(outcome)))


def introduced_errors(new: list[str], old: list[str] | None) -> list[str]:
    """The errors of ``new`` that ``old`` does not have, in order (all of ``new`` when
    ``old`` is ``None``: the old object could not be evaluated)."""
    if old is None:
        return list(new)
    before = set(old)
    return [e for e in new if e not in before]


def _fail_closed(cause: str, message: str) -> Decision:
    return Decision(allowed=False, outcome="fail_closed", cause=cause, code=403,
                    message=f"placement policy could not be evaluated (failing closed): {message}",
                    event_reason=REASON_ENGINE)


def loading(reason: str) -> Decision:
    """Fail closed: OPA's policy set is not complete yet (cause ``loading``, ``reason`` from
    :func:`fedplace.admission.loading.check_loaded`), whatever the partial decision says."""
    return _fail_closed("loading", reason)


def failing_configmaps(outcome: OpaOutcome | None, namespace: str, names: list[str]) -> list[str]:
    """The policy ConfigMaps (names in ``namespace``, among ``names``) holding the modules an
    evaluation error was located in; module ids are ``<namespace>/<configmap>/<key>`` as
    opa-kube-sync loads them (other modules name no ConfigMap)."""
    if outcome is None or outcome.error_kind != "evaluation":
        return []
    known, out = set(names), []
    for module in outcome.modules:
        ns, _, rest = module.partition("/")
        name = rest.partition("/")[0]
        if ns == namespace and name in known and name not in out:
            out.append(name)
    return out


def _error_text(err: Any) -> str:
    return canonical_value(err)


def decide(request: AdmissionRequest, policies_exist: bool, outcome: OpaOutcome | None,
           old_outcome: OpaOutcome | None = None) -> Decision:
    """The decision for ``request``; see the module docstring for the table. ``old_outcome``
    is the old object's evaluation, asked for when :func:`needs_old_query` says so (``None``
    otherwise, or when it was not obtained)."""
    if request.operation in UNCHECKED_OPERATIONS:
        return Decision(allowed=True, outcome="allowed", message=f"{request.operation} is not checked")
    if not policies_exist:
        return Decision(allowed=True, outcome="fail_open", message="no placement policies: admitted unchanged")
    if outcome is None:
        return _fail_closed("undefined", "no policy decision was obtained")
    if outcome.error is not None:
        tries = f" after {outcome.attempts} attempts" if outcome.attempts > 1 else ""
        return _fail_closed(outcome.error_kind or "unavailable", f"policy engine error{tries}: {outcome.error}")
    where = f" (data.{outcome.query_path.replace('/', '.')} is undefined)" if outcome.query_path else ""
    if not outcome.defined:
        return _fail_closed("undefined", f"no policy decision{where}")

    result = outcome.result
    if not isinstance(result, dict):
        return _fail_closed("malformed", f"the decision is a {type(result).__name__}, not an object")
    errors = result.get("errors")
    if errors is not None and not isinstance(errors, list):
        return _fail_closed("malformed", "errors must be a list (or set) of strings")
    warnings: tuple[str, ...] = ()
    ratchet = ""
    if errors:
        texts = [_error_text(e) for e in errors]
        if request.operation == "UPDATE" and is_being_deleted(request.object):
            ratchet, note = RATCHET_DELETING, "placement policy error not enforced on an object being deleted"
        else:
            old = policy_errors(old_outcome) if request.operation == "UPDATE" else None
            introduced = introduced_errors(texts, old)
            if introduced:
                return Decision(allowed=False, outcome="denied", code=403, event_reason=REASON_DENIED,
                                message="denied by policy: " + "; ".join(introduced))
            ratchet, note = RATCHET_PREEXISTING, "placement policy error not introduced by this update"
        warnings = tuple(f"{note}: {t}" for t in texts)
    annotations = result.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        return _fail_closed("malformed", "annotations must be an object")
    assert request.object is not None  # parse_review guarantees it for CREATE/UPDATE
    try:
        patch = build_patch(request.object, annotations, result.get("patch"), result.get("patches"))
    except InvalidPatch as exc:
        return _fail_closed("invalid_decision", f"invalid policy patch: {exc}")
    try:
        events = tuple(parse_events(result.get("events")))
    except InvalidEvents as exc:
        return _fail_closed("invalid_decision", f"invalid policy events: {exc}")
    if patch:
        return Decision(allowed=True, outcome="patched", patch=patch, events=events, warnings=warnings,
                        ratchet=ratchet)
    return Decision(allowed=True, outcome="allowed", events=events, warnings=warnings, ratchet=ratchet)
