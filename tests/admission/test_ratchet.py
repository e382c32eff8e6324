"""Ratcheting in decide(): an UPDATE is denied only for the policy errors it introduces.

Pure and table-driven: the new object's and the old object's decisions are given as
:class:`OpaOutcome` values, as the handler obtains them from OPA.
"""

from __future__ import annotations

from typing import Any

import pytest

from fedplace.admission.decision import (
    RATCHET_DELETING,
    RATCHET_PREEXISTING,
    REASON_DENIED,
    OpaOutcome,
    decide,
    introduced_errors,
    is_being_deleted,
    needs_old_query,
    policy_errors,
)
from fedplace.admission.review import AdmissionRequest

A, B, C = "pack: violation a", "pack: violation b", "pack: violation c"


def rs(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", **meta}, "spec": {"replicas": 1}}


def update(obj: dict[str, Any] | None = None, old: dict[str, Any] | None = None,
           operation: str = "UPDATE") -> AdmissionRequest:
    return AdmissionRequest(api_version="admission.k8s.io/v1", uid="u-1", operation=operation,
                            kind={"group": "apps", "version": "v1", "kind": "ReplicaSet"}, namespace="default",
                            name="web", object=obj if obj is not None else rs(),
                            old_object=old if old is not None or operation != "UPDATE" else rs())


def errors(*texts: Any, **rest: Any) -> OpaOutcome:
    return OpaOutcome.ok({"errors": list(texts), **rest})


DELETING = rs(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[])


# -- the pure helpers ----------------------------------------------------------------

def test_policy_errors_reads_only_a_usable_decision() -> None:
    assert policy_errors(errors(A, B)) == [A, B]
    assert policy_errors(OpaOutcome.ok({})) == []
    assert policy_errors(OpaOutcome.ok({"errors": {"x": 1}})) is None
    assert policy_errors(OpaOutcome.ok(["x"])) is None
    assert policy_errors(OpaOutcome.undefined()) is None
    assert policy_errors(OpaOutcome.failed("unavailable", "503")) is None
    assert policy_errors(None) is None
    assert policy_errors(errors({"code": 1})) == ['{"code":1}']  # canonical text, as in a denial


def test_introduced_errors_keeps_the_new_order_and_treats_an_unknown_old_as_nothing_known() -> None:
    assert introduced_errors([C, A, B], [A]) == [C, B]
    assert introduced_errors([A], [A, B]) == []
    assert introduced_errors([A, B], None) == [A, B]
    assert introduced_errors([A], []) == [A]


def test_being_deleted_is_the_deletion_timestamp() -> None:
    assert is_being_deleted(DELETING)
    assert not is_being_deleted(rs())
    assert not is_being_deleted(rs(deletionTimestamp=None))
    assert not is_being_deleted({"metadata": "odd"}) and not is_being_deleted(None)


@pytest.mark.parametrize(("req", "outcome", "expected"), [
    (update(), errors(A), True),
    (update(), errors(), False),
    (update(), OpaOutcome.failed("unavailable", "503"), False),
    (update(), OpaOutcome.ok({"errors": "x"}), False),
    (update(operation="CREATE"), errors(A), False),
    (update(obj=DELETING), errors(A), False),
    (AdmissionRequest(api_version="admission.k8s.io/v1", uid="u", operation="UPDATE", object=rs()), errors(A), False),
])
def test_the_old_object_is_evaluated_only_for_an_update_with_errors(req: AdmissionRequest, outcome: OpaOutcome,
                                                                     expected: bool) -> None:
    assert needs_old_query(req, outcome) is expected


# -- decide ----------------------------------------------------------------------------

def test_errors_the_old_object_has_too_admit_the_update_with_warnings() -> None:
    d = decide(update(), True, errors(A, B), errors(B, A))
    assert d.allowed and d.outcome == "allowed" and d.ratchet == RATCHET_PREEXISTING
    assert d.warnings == (f"placement policy error not introduced by this update: {A}",
                          f"placement policy error not introduced by this update: {B}")
    assert d.event_reason is None


def test_only_the_introduced_errors_are_named_in_the_denial() -> None:
    d = decide(update(), True, errors(A, C), errors(A))
    assert not d.allowed and d.outcome == "denied" and d.code == 403 and d.event_reason == REASON_DENIED
    assert d.message == f"denied by policy: {C}"
    assert d.warnings == () and d.ratchet == ""


def test_an_old_object_without_errors_leaves_every_error_introduced() -> None:
    d = decide(update(), True, errors(A, B), errors())
    assert d.message == f"denied by policy: {A}; {B}"


@pytest.mark.parametrize("old", [
    None,  # not obtained
    OpaOutcome.failed("unavailable", "OPA POST …: 503", attempts=2),
    OpaOutcome.undefined(),
    OpaOutcome.ok("not an object"),
    OpaOutcome.ok({"errors": "not a list"}),
])
def test_an_old_object_that_cannot_be_evaluated_denies_as_before(old: OpaOutcome | None) -> None:
    d = decide(update(), True, errors(A, B), old)
    assert not d.allowed and d.outcome == "denied" and d.message == f"denied by policy: {A}; {B}"


def test_an_object_being_deleted_is_never_denied_for_policy_errors() -> None:
    d = decide(update(obj=DELETING), True, errors(A))
    assert d.allowed and d.ratchet == RATCHET_DELETING
    assert d.warnings == (f"placement policy error not enforced on an object being deleted: {A}",)


def test_an_admitted_update_keeps_the_rest_of_the_decision() -> None:
    annotations = {"example.io/placed": "yes"}
    d = decide(update(), True, errors(A, annotations=annotations), errors(A))
    assert d.allowed and d.outcome == "patched" and d.ratchet == RATCHET_PREEXISTING
    assert d.patch == [{"op": "add", "path": "/metadata/annotations", "value": annotations}]
    # …and its fail-closed checks: a bad patch still fails closed
    bad = decide(update(), True, errors(A, patch=[{"op": "add", "path": "/status/x", "value": 1}]), errors(A))
    assert not bad.allowed and bad.outcome == "fail_closed" and bad.cause == "invalid_decision"


def test_create_and_fail_closed_outcomes_are_unchanged() -> None:
    create = decide(update(operation="CREATE"), True, errors(A), errors(A))
    assert not create.allowed and create.message == f"denied by policy: {A}"
    for new in (OpaOutcome.failed("unavailable", "503"), OpaOutcome.undefined(), OpaOutcome.ok({"errors": 3})):
        d = decide(update(), True, new, errors(A))
        assert not d.allowed and d.outcome == "fail_closed"
    deleting = decide(update(obj=DELETING), True, OpaOutcome.failed("unavailable", "503"))
    assert not deleting.allowed and deleting.outcome == "fail_closed"
