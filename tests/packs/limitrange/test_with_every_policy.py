"""Item 4: the pack beside every policy the project ships, in one decision.

All of policies/ (tests left out) is loaded at once — the placement policy,
the SchedulingPolicy pack, whatever else ships — under OPA's evaluator in
process and on the ``opa`` fixture's server (the devstack engine, or a real
OPA; loaded in the order the sync would retry until all load). The LimitRange
pack's contribution must be what it is alone: its errors among the
decision's, its patch under its own key, no conflict with any other pack.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from bench.limitrange import deployment, limitranges
from tests.fixtures.opa import OpaServer
from tests.packs.limitrange.conftest import pack_modules
from tests.policies.differential import EngineSide, OpaSide
from tests.policies.suite import modules

DECISION = ("io", "k8s", "federation", "admission")
KUBERNETES = {"limitranges": {"shop": limitranges()}}


def assert_same_contribution(alone: dict[str, Any], together: dict[str, Any], broken: bool) -> None:
    assert together["patches"]["limitrange"] == alone["patches"]["limitrange"]
    assert set(alone.get("errors") or []) <= set(together.get("errors") or [])
    assert len(alone.get("errors") or []) == (5 if broken else 0)


@pytest.mark.parametrize("broken", [False, True], ids=["defaults", "violations"])
def test_in_process(broken: bool):
    obj = deployment("web", broken=broken)
    with OpaSide(pack_modules(), KUBERNETES) as alone, OpaSide(modules(tests=False), KUBERNETES) as together:
        assert_same_contribution(alone.evaluate(DECISION, obj).value, together.evaluate(DECISION, obj).value, broken)


@pytest.mark.parametrize("broken", [False, True], ids=["defaults", "violations"])
async def test_on_the_server(opa: OpaServer, broken: bool):
    obj = deployment("web", broken=broken)
    async with aiohttp.ClientSession() as session:
        server = EngineSide(opa, session)
        await server.load_data(KUBERNETES)
        await server.load_modules(pack_modules())
        alone = (await server.evaluate(DECISION, obj)).value
        await server.load_modules(modules(tests=False))
        together = (await server.evaluate(DECISION, obj)).value
    assert_same_contribution(alone, together, broken)
