"""Item 4: the pack beside every policy the project ships, in one decision.

All of policies/ (tests left out) is loaded at once — the placement policy,
the SchedulingPolicy pack, whatever else ships — under OPA's evaluator and in
the devstack engine (in the order the sync would retry until all load). The
LimitRange pack's contribution must be what it is alone: its errors among the
decision's, its patch under its own key, no conflict with any other pack.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.limitrange import deployment, limitranges
from tests.packs.limitrange import harness
from tests.policies.suite import modules, put_in_dependency_order

NS = "shop"
DATA = {"kubernetes": {"limitranges": {NS: limitranges()}}}


def everything_opa(obj: dict[str, Any]) -> dict[str, Any]:
    from opa_bindings import OpaEngine

    engine = OpaEngine()
    for mid, src in modules(tests=False).items():
        engine.add_policy(mid, src)
    engine.add_data(DATA)
    return engine.eval_query("x := data.io.k8s.federation.admission", obj)[0]["x"]


def everything_engine(obj: dict[str, Any]) -> dict[str, Any]:
    from devstack.engine.state import EngineState, PolicyError

    state = EngineState()

    async def put(mid: str, src: str) -> tuple[int, str]:
        try:
            state.put_policy(mid, src)
        except PolicyError as exc:
            return exc.status, exc.message
        return 200, ""

    asyncio.run(put_in_dependency_order(put, modules(tests=False)))
    state.put_data(("kubernetes",), DATA["kubernetes"])
    return state.read(harness.DECISION, obj)


@pytest.mark.parametrize("evaluator, everything", [("opa", everything_opa), ("engine", everything_engine)])
@pytest.mark.parametrize("broken", [False, True], ids=["defaults", "violations"])
def test_same_contribution_beside_every_shipped_policy(evaluator: str, everything: Any, broken: bool):
    obj = deployment("web", broken=broken)
    alone = harness.decide(evaluator, obj, list(limitranges().values()))
    together = everything(obj)
    assert together["patches"]["limitrange"] == alone["patches"]["limitrange"]
    assert set(alone.get("errors") or []) <= set(together.get("errors") or [])
    assert len(alone.get("errors") or []) == (5 if broken else 0)
