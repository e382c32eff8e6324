"""The pack on malformed objects and malformed replicated data: OPA 1.20's own
evaluator in process never raises (the bindings evaluate with strict builtin
errors, where a production OPA would make the rule undefined and decide
differently), and the OPA server behind the ``opa`` fixture (the devstack
engine, or a real OPA with ``FEDPLACE_TEST_OPA_URL``), asked over HTTP with the
same data, decides exactly as it does.

Cases are drawn from a fixed seed: valid shapes with fields replaced by values
of other types, so every guard of the pack is crossed.
"""

from __future__ import annotations

import copy
import functools
import random
from typing import Any

import pytest

from devstack.schedulingpolicy import modules
from tests.packs.schedulingpolicy.helpers import RK, everyone_may_use, policy, workload, world
from tests.policies.suite import opa_engine

SEED = 20251123
CASES = 200
ODD = [None, True, 0, 7.5, "", "text", [], ["x"], [1, None], {}, {"k": "v"}, {"k": [1]}]

GOOD_SPEC = {
    "required": {"schedulerNames": ["s"], "nodeSelectors": {"arch": ["amd64"]}, "priorityClasseNames": ["p"],
                 "tolerations": [{"keys": ["k"]}],
                 "affinities": {"nodeAffinities": {RK: {"nodeSelectorTerms": [{"matchExpressions": [{"keys": ["zone"]}]}]}}}},
    "allowed": {"schedulerNames": [], "priorityClassNames": ["q"], "nodeSelectors": {"disk": []},
                "tolerations": [{"keys": ["k"], "operators": ["Exists"], "values": [], "effects": ["NoSchedule"]}],
                "affinities": {"podAntiAffinities": {RK: {"podAffinityTerms": [{"topologyKeys": ["h"],
                                                                                "matchExpressions": [{"keys": ["app"]}]}]}}}},
    "default": {"schedulerName": "s", "priorityClassName": "p", "nodeSelector": {"arch": "amd64"},
                "tolerations": [{"key": "k", "operator": "Equal", "values": ["a", "b"], "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {RK: {"nodeSelectorTerms": [{"matchExpressions": [
                    {"keys": ["zone"], "operators": ["In"], "values": ["z"]}]}]}}}},
}

GOOD_POD = {
    "schedulerName": "s", "priorityClassName": "p", "serviceAccountName": "web",
    "nodeSelector": {"arch": "amd64", "disk": "ssd"},
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}],
    "affinity": {"nodeAffinity": {RK: {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}],
                                                              "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}},
                 "podAntiAffinity": {RK: [{"topologyKey": "h", "labelSelector": {"matchLabels": {"app": "a"},
                                                                                  "matchExpressions": [{"key": "app", "operator": "Exists"}]}}]}},
}


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (object keys and list indexes)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, prefix + (i,))
    return out


def mutate(doc: Any, rng: random.Random, n: int) -> Any:
    """``doc`` with ``n`` values (the root excepted) replaced by odd ones."""
    doc = copy.deepcopy(doc)
    for _ in range(n):
        candidates = [p for p in paths(doc) if p]
        if not candidates:
            break
        path = rng.choice(candidates)
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = copy.deepcopy(rng.choice(ODD))
    return doc


def case(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the object, data.kubernetes) of case ``i``."""
    rng = random.Random(SEED + i)
    kind = rng.choice(["Pod", "Deployment", "CronJob"])
    pod = {k: v for k, v in GOOD_POD.items() if rng.random() < 0.5}  # some components unset: defaults
    obj = workload(kind, mutate(pod, rng, rng.randint(0, 3)), "team-a")
    if rng.random() < 0.2:  # a malformed SchedulingPolicy being admitted
        obj = policy("p", mutate(GOOD_SPEC, rng, rng.randint(1, 4)))
    specs = [mutate(GOOD_SPEC, rng, rng.randint(0, 3)) for _ in range(rng.randint(0, 3))]
    rbac = everyone_may_use()
    if rng.random() < 0.3:  # odd rules, roleRefs or subjects (kind and name kept: they place the object)
        rbac = [{**mutate(o, rng, 1), "kind": o["kind"], "metadata": o["metadata"]} for o in rbac]
    return obj, world([policy(f"p{j}", s) for j, s in enumerate(specs)] + rbac)


@functools.cache
def opa() -> Any:
    return opa_engine(modules())


def decide_opa(obj: Any, data: dict[str, Any], settings: Any = None) -> Any:
    query = "x := data.io.k8s.federation.admission with input as input.obj with data.kubernetes as input.data"
    if settings is not None:
        query += " with data.io.k8s.federation.schedulingpolicy.settings as input.settings"
    rs = opa().eval_query(query, {"obj": obj, "data": data, "settings": settings})
    return rs[0]["x"] if rs else None


async def decide_server(server: Any, obj: Any, data: dict[str, Any]) -> Any:
    """The decision of the OPA server over HTTP, with ``data`` as data.kubernetes (None: undefined)."""
    status, body = await server.request("PUT", "/v1/data/kubernetes", json_body=data)
    assert status == 204, body
    status, body = await server.query("io/k8s/federation/admission", obj)
    assert status == 200, body
    return body.get("result")


def normal(decision: Any) -> Any:
    if not isinstance(decision, dict):
        return decision
    return {**decision, "errors": sorted(decision.get("errors") or [])}


@pytest.fixture
async def server(opa: Any) -> Any:
    """The OPA server holding the pack's modules."""
    for mid, src in modules().items():
        status, body = await opa.put_policy(mid, src)
        assert status == 200, (mid, body)
    return opa


@pytest.mark.parametrize("i", range(0, CASES, 20))
async def test_opa_never_raises_and_the_server_agrees(server: Any, i: int) -> None:
    for j in range(i, i + 20):
        obj, data = case(j)
        expected = decide_opa(obj, data)  # OpaError would fail the test: strict builtin errors
        assert normal(await decide_server(server, obj, data)) == normal(expected), (j, obj, data)


def test_the_cases_reach_both_outcomes() -> None:
    """The generator is not degenerate: some cases are admitted with defaults, some denied."""
    outcomes = [decide_opa(*case(j)) for j in range(CASES)]
    assert sum(1 for o in outcomes if o and o.get("errors")) > CASES // 10
    assert sum(1 for o in outcomes if o and not o.get("errors") and (o.get("patches") or {}).get("schedulingpolicy")) > 3


@pytest.mark.parametrize("settings", [{"merge": 5}, {"merge": ["smart"]}, {"exempt_tolerations": "all"},
                                      {"exempt_tolerations": [1, {"keys": 3}]}])
def test_odd_settings_never_raise(settings: dict[str, Any]) -> None:
    obj = workload("Pod", GOOD_POD, "team-a")
    data = world([policy("p", GOOD_SPEC), *everyone_may_use()])
    decision = decide_opa(obj, data, settings)
    assert isinstance(decision, dict)
    if "merge" in settings:
        assert any("setting merge" in e for e in decision["errors"])
