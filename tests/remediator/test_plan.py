"""Planning a remediation pass: pure, no servers."""

import argparse

import pytest

from fedplace.remediator.config import add_arguments, settings_from_args
from fedplace.remediator.coverage import outstanding
from fedplace.remediator.plan import Notification, chunks, guard_verdict, parse_notifications, plan_pass

PREFS = "federation.kubernetes.io/replica-set-preferences"


def live_from(objects):
    def get(resource, namespace, name):
        return objects.get((resource, namespace, name))

    return get


def rs(annotations):
    return {"kind": "ReplicaSet", "metadata": {"annotations": annotations}}


def test_only_differences_are_planned_through_the_canonical_form():
    objects = {
        ("replicasets", "a", "same"): rs({PREFS: '{"clusters":{"x":{"weight":1}},"rebalance":true}'}),
        ("replicasets", "a", "drift"): rs({PREFS: '{"clusters":{"y":{"weight":1}}}', "team": "web"}),
        ("replicasets", "a", "bare"): {"kind": "ReplicaSet", "metadata": {}},
    }
    desired = {PREFS: {"rebalance": True, "clusters": {"x": {"weight": 1}}}}
    ns = [Notification("replicasets", "a", n, desired) for n in ("same", "drift", "bare", "gone")]
    plan = plan_pass(ns, live_from(objects), total_objects=10, max_fraction=0.5)
    assert plan.in_sync == 1
    assert plan.missing == 1
    assert sorted(a.name for a in plan.actions) == ["bare", "drift"]
    drift = next(a for a in plan.actions if a.name == "drift")
    assert drift.changes == {PREFS: '{"clusters":{"x":{"weight":1}},"rebalance":true}'}
    assert drift.old == {PREFS: '{"clusters":{"y":{"weight":1}}}'}
    assert "team" not in drift.changes


def test_guard_trips_above_max_fraction_and_plans_nothing():
    objects = {("replicasets", "a", str(i)): rs({}) for i in range(10)}
    ns = [Notification("replicasets", "a", str(i), {"k": "v"}) for i in range(6)]
    plan = plan_pass(ns, live_from(objects), total_objects=10, max_fraction=0.5)
    assert plan.guard_tripped and plan.actions == [] and plan.would_patch == 6
    plan = plan_pass(ns[:5], live_from(objects), total_objects=10, max_fraction=0.5)
    assert not plan.guard_tripped and len(plan.actions) == 5


def test_errors_are_reported_as_unsatisfiable():
    n = Notification("replicasets", "a", "x", {}, ("no cluster satisfies the placement policy",))
    plan = plan_pass([n], live_from({("replicasets", "a", "x"): rs({})}), 1, 1.0)
    assert plan.unsatisfiable == [n] and plan.actions == []


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"x": 1}, "JSON array"),
        ([1], "not an object"),
        ([{"resource": "replicasets"}], "'name'"),
        ([{"resource": "replicasets", "name": "x", "annotations": []}], "'annotations'"),
        ([{"resource": "replicasets", "name": "x", "namespace": 3}], "'namespace'"),
    ],
)
def test_bad_notifications_are_refused_with_the_reason(doc, message):
    with pytest.raises(ValueError, match=message):
        parse_notifications(doc)


def test_notifications_accept_list_or_wrapped():
    item = {"resource": "replicasets", "namespace": "a", "name": "x", "annotations": {"k": "v"}}
    assert parse_notifications([item]) == parse_notifications({"notifications": [item]})


def parse(argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return settings_from_args(p.parse_args(argv))


def test_flags():
    s = parse(["--remediate", "enforce", "--remediate-resource", "apps/v1/replicasets",
               "--remediate-resource-cluster", "federation.fedplace.io/v1beta1/clusters",
               "--remediate-max-fraction", "0.25"])
    assert s.enabled and not s.dry_run and s.max_fraction == 0.25
    assert [(r.plural, r.namespaced) for r in s.resources] == [("replicasets", True), ("clusters", False)]
    assert parse([]).mode == "off"
    with pytest.raises(ValueError, match="max-fraction"):
        parse(["--remediate-max-fraction", "0"])


def test_chunk_flags():
    s = parse(["--remediate-chunk", "10", "--remediate-max-chunk", "40"])
    assert (s.chunk, s.max_chunk) == (10, 40)
    assert (parse([]).chunk, parse([]).max_chunk) == (250, 2000)
    for argv, flag in ((["--remediate-chunk", "0"], "--remediate-chunk"),
                       (["--remediate-chunk", "50", "--remediate-max-chunk", "10"], "--remediate-max-chunk")):
        with pytest.raises(ValueError, match=flag):
            parse(argv)


def test_concurrency_flag():
    assert parse([]).concurrency == 16
    assert parse(["--remediate-concurrency", "4"]).concurrency == 4
    with pytest.raises(ValueError, match="--remediate-concurrency"):
        parse(["--remediate-concurrency", "0"])


def test_lease_duration_flag():
    assert parse([]).lease_duration == 15.0
    assert parse(["--leader-election-lease-duration", "2.5"]).lease_duration == 2.5
    for value, message in (("0", "must be positive"), ("-3", "must be positive"), ("nan", "must be positive"),
                           ("0.5", "must be at least 1 s"), ("inf", "must be a finite")):
        with pytest.raises(ValueError, match=f"^--leader-election-lease-duration {message}") as err:
            parse(["--leader-election-lease-duration", value])
        assert "\n" not in str(err.value)


# -- a pass in chunks (remediator/plan.py, remediator/coverage.py) --------------------------------


def test_chunks_start_small_and_double_up_to_the_largest():
    assert [len(c) for c in chunks(list(range(5000)), 250, 2000)] == [250, 500, 1000, 2000, 1250]
    assert [list(c) for c in chunks([1, 2, 3], 1, 1)] == [[1], [2], [3]]
    assert list(chunks([], 250, 2000)) == []
    assert [x for c in chunks(list(range(37)), 3, 8) for x in c] == list(range(37))  # all, in order, once


@pytest.mark.parametrize("planned, unevaluated, verdict", [
    (0, 5, "release"),   # 10 objects, at most 5 may change: even if all five left do, no trip
    (3, 3, "hold"),      # 3 planned + 3 possible > 5: wait
    (5, 0, "release"),
    (6, 0, "trip"),
    (6, 10, "trip"),     # already over: the rest cannot help
])
def test_guard_verdict(planned, unevaluated, verdict):
    assert guard_verdict(planned, unevaluated, total=10, max_fraction=0.5) == verdict


def test_a_full_request_after_a_full_pass_keeps_only_objects_evaluated_before_it():
    evaluated = {"a": 1, "b": 1, "c": 4, "d": 7}
    assert outstanding(4, {}, evaluated, pass_was_full=True) == (None, {"a": 4, "b": 4})
    # a targeted pass covers nothing of a full request
    assert outstanding(4, {"x": 2}, {"a": 9}, pass_was_full=False) == (4, {"x": 2})


def test_targets_are_covered_once_evaluated_at_or_after_their_change():
    evaluated = {"a": 2, "b": 5}
    left = outstanding(None, {"a": 3, "b": 5, "new": 4}, evaluated, pass_was_full=False)
    assert left == (None, {"a": 3, "new": 4})  # b was evaluated after its change; new was not evaluated
    assert outstanding(6, {"a": 9}, evaluated, pass_was_full=True) == (None, {"a": 9, "b": 6})


STUCK = {"targets": ["us-1"], "reason": "PlacementStuck", "message": "kept us-1",
         "related": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web", "uid": "u"}]}


def test_stuck_objects_are_planned_apart_from_patches():
    [n] = parse_notifications([{"resource": "resourcebindings", "namespace": "shop", "name": "web-deployment",
                                "annotations": {"a": "1"}, "stuck": STUCK}])
    assert n.stuck is not None and n.stuck.targets == ("us-1",) and n.stuck.related[0]["kind"] == "Deployment"
    live = live_from({("resourcebindings", "shop", "web-deployment"): {"metadata": {"annotations": {"a": "1"}}}})
    plan = plan_pass([n], live, 1, 1.0)
    assert plan.stuck == [n] and plan.actions == [] and plan.in_sync == 1
    assert parse_notifications([{"resource": "r", "name": "n"}])[0].stuck is None


@pytest.mark.parametrize("stuck, message", [
    ([], "'stuck' must be an object"),
    ({**STUCK, "targets": []}, "'stuck.targets' must be a non-empty array of strings"),
    ({**STUCK, "reason": ""}, "'stuck.reason' must be a non-empty string"),
    ({**STUCK, "related": [{"kind": "Deployment"}]}, "'stuck.related' must be an array of object references"),
])
def test_bad_stuck_is_refused_with_the_reason(stuck, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_notifications([{"resource": "r", "name": "n", "stuck": stuck}])
