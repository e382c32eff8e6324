"""Planning a remediation pass: pure, no servers."""

import argparse

import pytest

from remediator.config import add_arguments, settings_from_args
from remediator.plan import Notification, parse_notifications, plan_pass

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
