"""The input analysis (insight/inputs.py) is sound: sharing decisions never changes one.

* Unit cases: what counts as reading input, on small modules parsed by OPA.
* Soundness: on generated objects (tests/policies/cases.py, every kind, odd
  metadata) over data sets with clusters, LimitRanges and SchedulingPolicies,
  the decisions ``decide_workloads`` shares are exactly the decisions OPA gives
  each object on its own — with every shipped policy loaded.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from fedplace.insight.evaluate import PARALLEL_FROM, WORKERS, BindingsEvaluator
from fedplace.insight.inputs import analyse, projection
from fedplace.insight.whatif import decide_workloads
from tests.packs.schedulingpolicy.helpers import everyone_may_use, policy, world
from tests.policies import cases
from tests.policies.suite import modules, parse

DECISION = ("io", "k8s", "federation", "admission")
SEED = 20260116


def paths_of(*sources: str, kind: str | None = "ReplicaSet") -> Any:
    asts = {f"m{i}.rego": parse(f"m{i}.rego", src) for i, src in enumerate(sources)}
    found = analyse(asts, DECISION).paths(kind)
    return None if found is None else sorted(found)


def test_references_count_by_their_constant_prefix():
    assert paths_of('package io.k8s.federation.admission\n'
                    'errors contains "x" if input.metadata.labels[k] == "a"\n'
                    'annotations["a"] := input.spec.replicas\n') == [("metadata", "labels"), ("spec", "replicas")]


def test_the_whole_input_when_it_is_used_whole():
    assert paths_of('package io.k8s.federation.admission\nerrors contains json.marshal(input) if true\n') is None
    assert paths_of('package io.k8s.federation.admission\nerrors contains k if some k, _ in input\n') is None


def test_object_get_with_a_constant_path_or_a_rule_of_constant_paths():
    assert paths_of('package io.k8s.federation.admission\n'
                    'a := object.get(input, ["metadata", "annotations"], {})\n'
                    'b := object.get(input, "kind", "")\n') == [("kind",), ("metadata", "annotations")]
    lib = ('package lib\np := ["spec"] if input.kind == "Pod"\np := ["spec", "template", "spec"] if input.kind == "X"\n'
           's := object.get(input, p, null)\n')
    use = 'package io.k8s.federation.admission\nimport data.lib\nerrors contains "x" if lib.s\n'
    assert paths_of(lib, use, kind="Pod") == [("kind",), ("spec",)]
    assert paths_of(lib, use, kind="X") == [("kind",), ("spec", "template", "spec")]
    assert paths_of(lib, use, kind="Other") == []  # p is undefined for it: s reads nothing
    assert paths_of('package io.k8s.federation.admission\nx(p) := object.get(input, p, 1)\n'
                    'errors contains "x" if x(["a"])\n') is None


def test_unreachable_rules_and_with_input_do_not_count():
    assert paths_of('package io.k8s.federation.admission\nerrors contains "x" if input.kind == "A"\n',
                    'package elsewhere\ny := input.secret\n', kind="A") == [("kind",)]
    assert paths_of('package lib\nv := input.spec\n',
                    'package io.k8s.federation.admission\nimport data.lib\n'
                    'errors contains "x" if { some o in data.objs; lib.v with input as o }\n') == []


def test_references_through_imports_data_and_the_own_package():
    lib = 'package a.b\nc := input.x\nd := input.y\n'
    assert paths_of(lib, 'package io.k8s.federation.admission\nimport data.a.b as z\nerrors contains z.c if true\n'
                    ) == [("x",)]
    assert paths_of(lib, 'package io.k8s.federation.admission\nerrors contains data.a.b.d if true\n') == [("y",)]
    assert paths_of(lib, 'package io.k8s.federation.admission\nerrors contains e if e := data.a[k].c\n') == \
        [("x",), ("y",)]
    assert paths_of('package io.k8s.federation.admission\nh := input.h\nerrors contains "x" if h\n') == [("h",)]


def test_kind_guards_prune_bodies_and_the_rules_they_leave_undefined():
    lib = ('package lib\napplies if input.kind == "SchedulingPolicy"\n'
           'errors contains input.spec.x if applies\n')
    use = 'package io.k8s.federation.admission\nerrors contains e if some e in data.lib.errors\n'
    assert paths_of(lib, use, kind="ReplicaSet") == []
    assert paths_of(lib, use, kind="SchedulingPolicy") == [("kind",), ("spec", "x")]
    assert paths_of('package io.k8s.federation.admission\n'
                    'errors contains input.a if input.kind in {"A", "B"}\n', kind="C") == []
    assert paths_of('package io.k8s.federation.admission\n'
                    'errors contains input.a if not input.kind == "A"\n', kind="C") == [("a",), ("kind",)]


# What the selector-placed kinds read; the static analysis cannot tell from the
# settings that a ReplicaSet never is one, so its projection holds them too. The same goes
# for Karmada templates (policies/karmada/): with control_plane "karmada" a ReplicaSet or a
# ConfigMap is one, and the pack reads its apiVersion (is it one of Karmada's own types?).
SELECTOR_KEYS = ("federation.alpha.kubernetes.io/cluster-selector", "fedplace.io/cluster-selector-source")


def test_shipped_policies_read_little_of_a_replicaset():
    asts = {mid: parse(mid, src) for mid, src in modules(tests=False).items()}
    found = analyse(asts, DECISION)
    annotations = {("metadata", "annotations", key) for key in (cases.EU_KEY, cases.PCI_KEY, cases.PREFS_KEY,
                                                               cases.SOURCE_KEY, *SELECTOR_KEYS)}
    # The placement rule sets read an object's annotations (the whole map: policies/rules-*) and its
    # namespace (the tenancy and residency sets read the Namespace object).
    assert found.paths("ReplicaSet") == {("apiVersion",), ("kind",), ("metadata", "namespace"),
                                          ("metadata", "annotations"), ("spec", "template", "spec"), *annotations}
    # ConfigMaps are placed through the cluster selector (policies/federation/selector.rego): the
    # constraint and selector annotations, not the replica-set-preferences ones.
    assert found.paths("ConfigMap") == {("apiVersion",), ("kind",), ("metadata", "namespace"),
                                        ("metadata", "annotations"),
                                        *{("metadata", "annotations", key)
                                          for key in (cases.EU_KEY, cases.PCI_KEY, *SELECTOR_KEYS)}}


def test_constant_keys_into_a_part_of_input_read_those_keys():
    lib = ('package lib\nann := object.get(input, ["metadata", "annotations"], {})\nk := "a/b"\n'
           'x if ann[k] == "1"\ny if ann["c"]\n')
    use = 'package io.k8s.federation.admission\nimport data.lib\nerrors contains "e" if { lib.x; lib.y }\n'
    assert paths_of(lib, use) == [("metadata", "annotations", "a/b"), ("metadata", "annotations", "c")]
    whole = 'package io.k8s.federation.admission\nimport data.lib\nerrors contains k if some k, _ in lib.ann\n'
    assert paths_of(lib, whole) == [("metadata", "annotations")]
    # a default that is not empty answers keys of its own: the whole part is read
    odd = lib.replace("{})", '{"c": 1})')
    assert paths_of(odd, use) == [("metadata", "annotations")]


def test_projection_tells_absent_from_null():
    paths = frozenset({("a",)})
    assert projection({"a": None}, paths) != projection({}, paths)
    assert projection({"a": 1, "b": 2}, paths) == projection({"a": 1, "b": 3}, paths)
    assert projection({"a": [1]}, frozenset({("a", 0)})) != projection({"a": [2]}, frozenset({("a", 0)}))


# -- soundness on generated cases ------------------------------------------------------------


def limitrange(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": namespace},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "default": {"cpu": "500m"}}]}}


def objects(rng: random.Random, names: list[str], count: int) -> list[dict[str, Any]]:
    """Generated admission inputs in a few shapes, each shape repeated under other names (so
    they share evaluations) with variations the policies must see."""
    out: list[dict[str, Any]] = []
    while len(out) < count:
        base = (cases.admission_input(rng, names) if rng.random() < 0.7 else cases.pod_bearing_input(rng))
        for i in range(rng.randint(1, 6)):
            obj = copy.deepcopy(base)
            meta = obj.get("metadata")
            if isinstance(meta, dict):
                meta["name"] = f"{meta.get('name')}-{i}"
                meta["uid"] = f"uid-{len(out)}"
                if rng.random() < 0.2:
                    meta["namespace"] = rng.choice(["shop", "other"])
                if rng.random() < 0.1 and isinstance(meta.get("annotations"), dict):
                    meta["annotations"][cases.PCI_KEY] = rng.choice(["1", "2", "3"])
            out.append(obj)
    return out[:count]


def schedulingpolicies() -> dict[str, Any]:
    """The SchedulingPolicy pack switched on: a policy and the RBAC granting it to everyone."""
    objects = [policy("restricted", {"allowed": {"schedulerNames": ["default-scheduler"]},
                                     "default": {"schedulerName": "default-scheduler"}}),
               *everyone_may_use("restricted")]
    return world(objects)


@pytest.mark.parametrize("data_set", range(6))
async def test_shared_decisions_are_the_per_object_decisions(data_set: int):
    """Data sets 0-5: the packs idle or not — LimitRanges in "shop" (even sets), and the
    SchedulingPolicy pack on (sets 3 and up)."""
    rng = random.Random(SEED + data_set)
    docs = cases.placement_data(rng, 6)
    data = copy.deepcopy(docs[data_set] if data_set >= 3 else docs[3]) or {}
    if data_set % 2 == 0:
        data["limitranges"] = {"shop": {"limits": limitrange("shop")}}
    if data_set >= 3:
        data.update(schedulingpolicies())
    names = list((data.get("clusters") or {}))
    inputs = objects(rng, names, 150)
    evaluator = BindingsEvaluator()
    try:
        assert await evaluator.load(modules(tests=False), "kubernetes", data) == {}
        shared, evaluations = await decide_workloads(evaluator, DECISION, inputs, await evaluator.parse())
        alone = await evaluator.decide(DECISION, inputs)
    finally:
        await evaluator.close()
    assert evaluations < len(inputs)
    for obj, a, b in zip(inputs, shared, alone, strict=True):
        assert (a.value, a.error is None) == (b.value, b.error is None), obj


async def test_idle_packs_read_nothing():
    """Without LimitRanges or SchedulingPolicies replicated, the evaluator says the packs' guards
    are undefined: a ReplicaSet's decision then reads its kind and annotations and the clusters."""
    async def analysed(data: dict[str, Any]) -> Any:
        evaluator = BindingsEvaluator()
        try:
            await evaluator.load(modules(tests=False), "kubernetes", data)
            found = analyse(await evaluator.parse(), DECISION)
            guards = found.guards()
            found.known = await evaluator.values(guards, found.data_reads([], guards))
            return found, found.data_reads(["ReplicaSet"], guards)
        finally:
            await evaluator.close()

    annotations = {("metadata", "annotations", key) for key in (cases.EU_KEY, cases.PCI_KEY, cases.PREFS_KEY,
                                                               cases.SOURCE_KEY, *SELECTOR_KEYS)}
    idle, reads = await analysed({"clusters": {}})
    assert idle.paths("ReplicaSet") == {("kind",), ("metadata", "namespace"), ("metadata", "annotations"),
                                        *annotations}
    assert ("kubernetes", "clusters") in reads and ("kubernetes",) not in reads
    assert ("kubernetes", "replicasets") not in reads
    busy, reads = await analysed({"clusters": {}, "limitranges": {"shop": {"limits": limitrange("shop")}},
                                  **schedulingpolicies()})
    assert busy.paths("ReplicaSet") == {("kind",), ("metadata", "namespace"), ("metadata", "annotations"),
                                        ("spec", "template", "spec"), *annotations}


async def test_what_if_decides_with_the_indexes_the_sync_would_keep():
    """The evaluator holds, beside the copied mirror, the indexes opa-kube-sync derives from it
    (so placement reads the cluster index as in production), recomputed when the copy changes:
    a proposed label change moves the cluster in the index too."""
    def cluster(name: str, level: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"pci-compliance-level": level}}, "status": {"region": "eu-west-1"}}

    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "shop", "annotations": {
        "policy.federation.alpha.kubernetes.io/pci-compliance-level": "3"}}}
    ready = ("io", "k8s", "federation", "placement", "cluster_index_ready")
    eligible = ("io", "k8s", "federation", "placement", "eligible_clusters")
    evaluator = BindingsEvaluator()
    try:
        assert await evaluator.load(modules(tests=False), "kubernetes",
                                    {"clusters": {"a": cluster("a", "1"), "b": cluster("b", "3")}}) == {}
        assert (await evaluator.values([ready]))[ready] is True
        assert (await evaluator.decide(eligible, [rs]))[0].value == ["b"]
        await evaluator.set_data("kubernetes", {"clusters": {"a": cluster("a", "3"), "b": cluster("b", "3")}})
        assert (await evaluator.values([ready]))[ready] is True
        assert (await evaluator.decide(eligible, [rs]))[0].value == ["a", "b"]
    finally:
        await evaluator.close()


async def test_many_decisions_shared_out_over_engines_are_each_the_decision_alone():
    """From PARALLEL_FROM inputs on, the in-process evaluator shares the decisions out over
    several engines evaluating at once: they come back in order, each the input's own."""
    if WORKERS < 2:
        pytest.skip("one core: decisions are not shared out")
    rng = random.Random(SEED + 9)
    data = copy.deepcopy(cases.placement_data(rng, 4)[3]) or {}
    inputs = objects(rng, list(data.get("clusters") or {}), PARALLEL_FROM + 37)
    evaluator = BindingsEvaluator()
    try:
        assert await evaluator.load(modules(tests=False), "kubernetes", data) == {}
        together = await evaluator.decide(DECISION, inputs)
        alone = [(await evaluator.decide(DECISION, [obj]))[0] for obj in inputs]
    finally:
        await evaluator.close()
    assert len(together) == len(inputs)
    assert [(d.value, d.error is None) for d in together] == [(d.value, d.error is None) for d in alone]
    assert len({json.dumps(d.value, sort_keys=True) for d in together}) > 5  # not all alike
