"""The view behind ``fedplace-limits`` (policies/limitrange/view.rego), in process and on the server."""

from __future__ import annotations

from tests.packs.limitrange.harness import Evaluator
from tests.packs.limitrange.reference import container, item, lr


def ranges() -> dict:
    a = lr("a", item("Container", default={"cpu": "500m"}))
    b = lr("b", item("Container", max={"cpu": "2", "memory": "1Gi"}, min={"memory": "64Mi"}),
           item("Pod", max={"memory": "2Gi"}), item("PersistentVolumeClaim", max={"storage": "1Gi"}))
    return {"shop": {"a": a, "b": b}}


def rs(name: str, **resources: dict) -> dict:
    return {"kind": "ReplicaSet", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [container("app", **resources)]}}}}


DATA = {"limitranges": ranges(),
        "replicasets": {"shop": {"big": rs("big", limits={"cpu": "1", "memory": "4Gi"}),
                                 "ok": rs("ok", limits={"cpu": "1", "memory": "128Mi"}),
                                 "bare": rs("bare")},
                        "other": {"x": rs("x", limits={"memory": "9Gi"})}}}


async def test_effective_limits(evaluator: Evaluator):
    r = await evaluator.view({"namespace": "shop", "resources": ["replicasets"]}, DATA)
    assert r["namespace"] == "shop" and r["limitRanges"] == ["a", "b"] and r["errors"] == []
    rows = {(x["limitRange"], x["type"], x["resource"]): x for x in r["limits"]}
    assert set(rows) == {("a", "Container", "cpu"), ("b", "Container", "cpu"), ("b", "Container", "memory"),
                         ("b", "Pod", "memory")}  # PersistentVolumeClaim items concern no pod
    a_cpu = rows["a", "Container", "cpu"]
    assert (a_cpu["default"], a_cpu["defaultRequest"], a_cpu["defaultRequestFrom"]) == ("500m", "500m", "default")
    assert a_cpu["defaultApplies"] and a_cpu["defaultRequestApplies"]
    b_cpu = rows["b", "Container", "cpu"]
    assert (b_cpu["default"], b_cpu["defaultFrom"], b_cpu["defaultApplies"]) == ("2", "max", False)
    b_mem = rows["b", "Container", "memory"]
    assert (b_mem["min"], b_mem["max"], b_mem["defaultRequest"], b_mem["defaultRequestFrom"]) == \
        ("64Mi", "1Gi", "1Gi", "max")
    assert b_mem["defaultApplies"] and b_mem["defaultRequestApplies"]
    b_pod = rows["b", "Pod", "memory"]
    assert (b_pod["max"], b_pod["default"], b_pod["defaultFrom"], b_pod["defaultApplies"]) == ("2Gi", "", "", False)


async def test_workloads_checked_now(evaluator: Evaluator):
    r = await evaluator.view({"namespace": "shop", "resources": ["replicasets", "pods"]}, DATA)
    assert [(w["kind"], w["name"]) for w in r["workloads"]] == [("ReplicaSet", "bare"), ("ReplicaSet", "big"),
                                                                ("ReplicaSet", "ok")]
    bare, big, ok = r["workloads"]
    assert big["violations"] == [
        'container "app": memory limit 4Gi exceeds max 1Gi (LimitRange "b" in "shop")',
        'pod: memory limit total 4Gi exceeds max 2Gi (LimitRange "b" in "shop")']
    assert ok == {"resource": "replicasets", "kind": "ReplicaSet", "name": "ok", "violations": [], "defaults": []}
    assert bare["violations"] == [] and bare["defaults"] == [
        'container "app": cpu request 500m (LimitRange "a")', 'container "app": memory request 1Gi (LimitRange "b")',
        'container "app": cpu limit 500m (LimitRange "a")', 'container "app": memory limit 1Gi (LimitRange "b")']


async def test_malformed_and_missing(evaluator: Evaluator):
    data = {"limitranges": {"shop": {"bad": lr("bad", item("Container", max={"cpu": "lots"}))}}}
    r = await evaluator.view({"namespace": "shop"}, data)
    assert r["errors"] == ['LimitRange "bad" in "shop": spec.limits[0].max[cpu] "lots" is not a valid quantity']
    assert r["limits"][0]["max"] == "lots"
    r = await evaluator.view({"namespace": "empty"}, data)
    assert (r["limitRanges"], r["limits"], r["workloads"], r["errors"]) == ([], [], [], [])
