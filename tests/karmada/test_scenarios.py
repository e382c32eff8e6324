"""The Karmada scenarios (scenarios.py) against whichever Karmada the session has — the stand-ins
on a fresh machine, real Karmada in the conformance stage's Karmada run — each with the outcome
real Karmada gives; and, where both can run, every scenario on both, compared."""

from __future__ import annotations

import pytest

from tests.fixtures.karmada import Karmada

from .scenarios import SCENARIOS

pytestmark = pytest.mark.karmada


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario(karmada: Karmada, name: str) -> None:
    scenario, expected = SCENARIOS[name]
    assert await scenario(karmada) == expected


@pytest.mark.karmada_real
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_standins_agree_with_real_karmada(karmada: Karmada, standin_karmada: Karmada, name: str) -> None:
    """The same scenario on real Karmada and on the stand-ins (a devstack API server): the same
    outcome."""
    scenario, _ = SCENARIOS[name]
    assert karmada.real and not standin_karmada.real
    assert await scenario(standin_karmada) == await scenario(karmada)
