"""decide(), the review codec and patch building: pure, table-driven."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from fedplace.admission.decision import REASON_DENIED, REASON_ENGINE, OpaOutcome, decide, needs_query
from fedplace.admission.patches import InvalidPatch, build_patch, validate_policy_patch
from fedplace.admission.review import AdmissionRequest, BadReview, parse_review, review_response

PREFS = "federation.kubernetes.io/replica-set-preferences"


def rs(annotations: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "nginx", "namespace": "default", **meta}
    if annotations is not None:
        md["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": md, "spec": {"replicas": 2}}


def request(obj: dict[str, Any] | None = None, operation: str = "CREATE", **kw: Any) -> AdmissionRequest:
    if obj is None and operation in ("CREATE", "UPDATE"):
        obj = rs()
    return AdmissionRequest(api_version="admission.k8s.io/v1", uid="u-1", operation=operation,
                            kind={"group": "apps", "version": "v1", "kind": "ReplicaSet"},
                            namespace="default", name="nginx", object=obj, **kw)


def applied(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    return jsonpatch.JsonPatch(patch).apply(obj, in_place=False)


# -- decide: the failure table ------------------------------------------------------

FAIL_TABLE = [
    # (name, outcome, expected cause, message fragment)
    ("5xx", OpaOutcome.failed("unavailable", "OPA POST …: 500 internal_error", attempts=3), "unavailable",
     "after 3 attempts: OPA POST …: 500"),
    ("connection refused", OpaOutcome.failed("unavailable", "ClientConnectorError: refused"), "unavailable",
     "refused"),
    ("malformed json", OpaOutcome.failed("malformed", "answer 200 is not JSON"), "malformed", "not JSON"),
    ("4xx", OpaOutcome.failed("request", "401 unauthorized"), "request", "401"),
    ("undefined", OpaOutcome.undefined(query_path="io/k8s/federation/admission"), "undefined",
     "no policy decision (data.io.k8s.federation.admission is undefined)"),
    ("result not an object", OpaOutcome.ok(["x"]), "malformed", "not an object"),
    ("errors not a list", OpaOutcome.ok({"errors": "nope"}), "malformed", "errors must be a list"),
    ("annotations not an object", OpaOutcome.ok({"annotations": ["a"]}), "malformed", "annotations must be"),
    ("invalid patch op", OpaOutcome.ok({"patch": [{"op": "move", "from": "/spec", "path": "/spec/x"}]}),
     "invalid_decision", "op 'move' not allowed"),
    ("patch outside metadata/spec", OpaOutcome.ok({"patch": [{"op": "add", "path": "/status/x", "value": 1}]}),
     "invalid_decision", "outside /metadata and /spec"),
    ("patch that does not apply", OpaOutcome.ok({"patch": [{"op": "test", "path": "/spec/replicas", "value": 9}]}),
     "invalid_decision", "does not apply"),
    ("no outcome at all", None, "undefined", "no policy decision"),
    ("events not a list", OpaOutcome.ok({"events": {"reason": "X"}}), "invalid_decision",
     "invalid policy events: events must be a list"),
    ("event without object", OpaOutcome.ok({"events": [{"reason": "X", "message": "m"}]}), "invalid_decision",
     "events[0].object must be an object"),
    ("event reason not CamelCase", OpaOutcome.ok({"events": [
        {"object": {"apiVersion": "v1", "kind": "Pod", "name": "p"}, "reason": "not ok", "message": "m"}]}),
     "invalid_decision", "events[0].reason must be UpperCamelCase"),
    ("event of an unknown type", OpaOutcome.ok({"events": [
        {"object": {"apiVersion": "v1", "kind": "Pod", "name": "p"}, "reason": "R", "message": "m", "type": "Error"}]}),
     "invalid_decision", "events[0].type must be Normal or Warning"),
    ("patches not an object", OpaOutcome.ok({"patches": [{"op": "add", "path": "/spec/x", "value": 1}]}),
     "invalid_decision", "patches must be an object"),
    ("a pack's invalid op names the pack", OpaOutcome.ok({"patches": {"limits": [{"op": "copy", "path": "/spec/x"}]}}),
     "invalid_decision", "patches['limits'][0]: op 'copy' not allowed"),
    ("a pack's op that does not apply", OpaOutcome.ok({"patches": {"p": [{"op": "remove", "path": "/spec/none"}]}}),
     "invalid_decision", "does not apply"),
]


@pytest.mark.parametrize("name,outcome,cause,fragment", FAIL_TABLE, ids=[r[0] for r in FAIL_TABLE])
def test_fails_closed_when_policies_exist(name: str, outcome: OpaOutcome | None, cause: str, fragment: str) -> None:
    d = decide(request(), True, outcome)
    assert not d.allowed
    assert d.outcome == "fail_closed"
    assert d.cause == cause
    assert d.code == 403
    assert fragment in d.message
    assert d.event_reason == REASON_ENGINE
    assert d.patch == []


@pytest.mark.parametrize("name,outcome,cause,fragment", FAIL_TABLE, ids=[r[0] for r in FAIL_TABLE])
def test_fails_open_without_policies(name: str, outcome: OpaOutcome | None, cause: str, fragment: str) -> None:
    d = decide(request(), False, outcome)
    assert d.allowed and d.outcome == "fail_open" and d.patch == [] and d.event_reason is None


@pytest.mark.parametrize("op", ["DELETE", "CONNECT"])
@pytest.mark.parametrize("policies", [True, False])
def test_delete_and_connect_untouched(op: str, policies: bool) -> None:
    req = request(operation=op)
    assert not needs_query(req, policies)
    d = decide(req, policies, None)
    assert d.allowed and d.outcome == "allowed" and d.patch == []


def test_events_ride_on_an_allowed_decision() -> None:
    event = {"object": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web",
                        "uid": "u-9"}, "reason": "PlacementUnsatisfiable", "message": "no cluster"}
    d = decide(request(), True, OpaOutcome.ok({"events": [event, {**event, "type": "Normal", "reason": "Noted"}]}))
    assert d.allowed and d.outcome == "allowed" and d.patch == []
    assert [(e.involved.as_ref(), e.type, e.reason, e.message) for e in d.events] == [
        (event["object"], "Warning", "PlacementUnsatisfiable", "no cluster"),
        (event["object"], "Normal", "Noted", "no cluster")]


def test_needs_query() -> None:
    assert needs_query(request(), True)
    assert needs_query(request(operation="UPDATE"), True)
    assert not needs_query(request(), False)


def test_errors_deny_listing_every_error() -> None:
    d = decide(request(), True, OpaOutcome.ok({"errors": ["clusters invalid", "pci too low"],
                                               "annotations": {"a": "b"}}))
    assert not d.allowed and d.outcome == "denied" and d.code == 403
    assert "clusters invalid" in d.message and "pci too low" in d.message
    assert d.event_reason == REASON_DENIED


def test_non_string_errors_are_rendered_canonically() -> None:
    d = decide(request(), True, OpaOutcome.ok({"errors": [{"b": 1, "a": 2}]}))
    assert '{"a":2,"b":1}' in d.message


def test_empty_errors_and_no_annotations_allow_without_patch() -> None:
    for result in ({}, {"errors": []}, {"annotations": {}}, {"errors": [], "annotations": {}, "patch": []}):
        d = decide(request(), True, OpaOutcome.ok(result))
        assert d.allowed and d.outcome == "allowed" and d.patch == [], result


def test_annotations_merge_policy_wins_others_kept() -> None:
    obj = rs({PREFS: "developer", "team": "a"})
    d = decide(request(obj), True, OpaOutcome.ok({"annotations": {PREFS: "policy", "new": "x"}}))
    assert d.outcome == "patched"
    out = applied(obj, d.patch)["metadata"]["annotations"]
    assert out == {PREFS: "policy", "team": "a", "new": "x"}


def test_escaping_of_tilde_and_slash() -> None:
    obj = rs({"x": "1"})
    d = decide(request(obj), True, OpaOutcome.ok({"annotations": {"a/b~c": "v"}}))
    assert d.patch == [{"op": "add", "path": "/metadata/annotations/a~1b~0c", "value": "v"}]
    assert applied(obj, d.patch)["metadata"]["annotations"]["a/b~c"] == "v"


def test_creates_annotations_map_when_absent() -> None:
    obj = rs()
    d = decide(request(obj), True, OpaOutcome.ok({"annotations": {PREFS: {"rebalance": True}}}))
    assert d.patch[0] == {"op": "add", "path": "/metadata/annotations", "value": {PREFS: '{"rebalance":true}'}}


def test_canonical_json_for_non_string_values() -> None:
    value = {"rebalance": True, "clusters": {"b": {"weight": 1}, "a": {"weight": 2}}}
    obj = rs({})
    d = decide(request(obj), True, OpaOutcome.ok({"annotations": {PREFS: value, "n": 3, "f": False}}))
    ann = applied(obj, d.patch)["metadata"]["annotations"]
    assert ann[PREFS] == '{"clusters":{"a":{"weight":2},"b":{"weight":1}},"rebalance":true}'
    assert ann["n"] == "3" and ann["f"] == "false"


def test_no_patch_when_value_already_canonical() -> None:
    obj = rs({PREFS: '{"rebalance":true}'})
    d = decide(request(obj), True, OpaOutcome.ok({"annotations": {PREFS: {"rebalance": True}}}))
    assert d.allowed and d.outcome == "allowed" and d.patch == []


def test_policy_patch_applied_after_annotations() -> None:
    obj = rs({"keep": "1"})
    result = {
        "annotations": {"a": "1"},
        "patch": [
            {"op": "test", "path": "/spec/replicas", "value": 2},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/metadata/labels", "value": {"placed": "yes"}},
            {"op": "replace", "path": "/metadata/annotations/a", "value": "overridden"},
        ],
    }
    d = decide(request(obj), True, OpaOutcome.ok(result))
    assert d.outcome == "patched"
    out = applied(obj, d.patch)
    assert out["spec"]["replicas"] == 3
    assert out["metadata"]["labels"] == {"placed": "yes"}
    assert out["metadata"]["annotations"] == {"keep": "1", "a": "overridden"}


def test_policy_patch_that_changes_nothing_gives_no_patch() -> None:
    obj = rs()
    d = decide(request(obj), True, OpaOutcome.ok({"patch": [{"op": "test", "path": "/spec/replicas", "value": 2}]}))
    assert d.allowed and d.patch == []


@pytest.mark.parametrize("ops,fragment", [
    ("x", "must be a list"),
    ([1], "must be an object"),
    ([{"op": "copy", "from": "/spec", "path": "/spec/a"}], "not allowed"),
    ([{"op": "add", "path": "spec/a", "value": 1}], "must start with '/'"),
    ([{"op": "add", "path": "/spec/a~2", "value": 1}], "not a valid JSON pointer"),
    ([{"op": "add", "path": "/spec/a"}], "needs a value"),
    ([{"op": "remove", "path": "/spec"}], "as a whole"),
    ([{"op": "replace", "path": "/metadata/name", "value": "x"}], "/metadata/name"),
    ([{"op": "add", "path": "/", "value": {}}], "outside"),
    ([{"op": "add", "path": "/spec/a", "value": 1, "from": "/x"}], "unexpected member"),
    ([{"op": "add", "path": 3, "value": 1}], "must be a string"),
])
def test_validate_policy_patch_rejects(ops: Any, fragment: str) -> None:
    with pytest.raises(InvalidPatch) as err:
        validate_policy_patch(ops)
    assert fragment in str(err.value)


def test_build_patch_rejects_patch_with_missing_parent() -> None:
    with pytest.raises(InvalidPatch):
        build_patch(rs(), None, [{"op": "add", "path": "/spec/template/metadata/labels/x", "value": "1"}])


def test_build_patch_rejects_replacing_missing_member() -> None:
    with pytest.raises(InvalidPatch):
        build_patch(rs(), None, [{"op": "replace", "path": "/spec/missing", "value": 1}])


def test_pack_patches_follow_annotations_and_patch_in_pack_name_order() -> None:
    """Packs contribute under their own key; the order is annotations, patch, then packs by name."""
    result = {"annotations": {"a": "1"},
              "patch": [{"op": "add", "path": "/spec/order", "value": ["patch"]}],
              "patches": {"zeta": [{"op": "add", "path": "/spec/order/-", "value": "zeta"}],
                          "alpha": [{"op": "add", "path": "/spec/order/-", "value": "alpha"}],
                          "empty": []}}
    d = decide(request(rs()), True, OpaOutcome.ok(result))
    assert d.outcome == "patched"
    out = applied(rs(), d.patch)
    assert out["spec"]["order"] == ["patch", "alpha", "zeta"]
    assert out["metadata"]["annotations"] == {"a": "1"}


def test_pack_patches_alone() -> None:
    d = decide(request(rs()), True, OpaOutcome.ok({"patches": {"p": [{"op": "add", "path": "/spec/x", "value": 1}]}}))
    assert d.outcome == "patched" and applied(rs(), d.patch)["spec"]["x"] == 1


# -- the review codec ----------------------------------------------------------------


def review(**request_fields: Any) -> bytes:
    req = {"uid": "abc", "operation": "CREATE", "kind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"},
           "namespace": "default", "object": rs(), **request_fields}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


@pytest.mark.parametrize("body,fragment", [
    (b"", "empty body"),
    (b"{not json", "not valid JSON"),
    (b"[1,2]", "must be a JSON object"),
    (b'{"apiVersion":"v1","kind":"AdmissionReview","request":{"uid":"a","operation":"CREATE","object":{}}}',
     "apiVersion"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"a"}}', "kind must be AdmissionReview"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}', "request is missing"),
    (review(uid=""), "request.uid"),
    (review(uid=None), "request.uid"),
    (review(operation="PATCH"), "request.operation"),
    (review(object=None), "request.object is required"),
    (review(object=[1]), "request.object must be an object"),
    (review(dryRun="yes"), "dryRun"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_parse_review_rejects(body: bytes, fragment: str) -> None:
    with pytest.raises(BadReview) as err:
        parse_review(body)
    assert err.value.status == 400
    assert fragment in err.value.message


def test_parse_review_delete_without_object() -> None:
    req = parse_review(review(operation="DELETE", object=None, oldObject=rs(), dryRun=True, name="nginx"))
    assert req.operation == "DELETE" and req.object is None and req.dry_run and req.name == "nginx"


def test_review_response_shapes() -> None:
    req = parse_review(review())
    ok = review_response(req, allowed=True)
    assert ok == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "response": {"uid": "abc", "allowed": True}}
    patch = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]
    patched = review_response(req, allowed=True, patch=patch)["response"]
    assert patched["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(patched["patch"])) == patch
    denied = review_response(req, allowed=False, message="no")["response"]
    assert denied["status"] == {"code": 403, "reason": "Forbidden", "message": "no"}
    assert "patch" not in denied and "patchType" not in denied


def test_review_v1beta1_is_echoed() -> None:
    body = json.loads(review())
    body["apiVersion"] = "admission.k8s.io/v1beta1"
    req = parse_review(json.dumps(body).encode())
    assert review_response(req, allowed=True)["apiVersion"] == "admission.k8s.io/v1beta1"
