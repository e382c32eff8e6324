"""Known differences between the devstack engine (regorus) and OPA 1.20, pinned as they are today.

Each case is a minimal module and input on which the engine (over HTTP, the
``opa`` fixture) and OPA's evaluator (``opa_bindings``) answer differently; the
test asserts both current answers, so a fix on either side shows up here (then
update or drop the pin). The generator of the differential test
(tests/policies/cases.py) avoids these inputs; the case ids name the difference.

Expected answers: a JSON text (compared exactly, so ``1`` is not ``1.0``),
:data:`UNDEFINED`, or :class:`Raises` (an evaluation error, optionally with a
fragment of its message).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from tests.policies.differential import UNDEFINED, EngineSide, OpaSide, Outcome

QUERY = ("p", "x")


@dataclass(frozen=True)
class Raises:
    """An evaluation error whose message contains ``fragment``."""

    fragment: str = ""


@dataclass(frozen=True)
class Pin:
    """One difference: ``modules`` (id → Rego), ``input``, and each side's current answer to ``data.p.x``."""

    id: str
    modules: dict[str, str]
    input: Any
    engine: Any
    opa: Any


def p(body: str) -> dict[str, str]:
    """A one-module policy ``package p`` with ``body``."""
    return {"p.rego": "package p\n\n" + body + "\n"}


IMPORTED = {
    "q.rego": 'package q\n\na := 1\n\nb := object.get(input.v, "k", 1)\n',
    "p.rego": "package p\n\nimport data.q\n\nx := q.a\n",
}

PINS = [
    Pin("engine_evaluates_every_rule_of_an_imported_package", IMPORTED, {"v": None},
        engine=Raises("`object.get` expects object argument"), opa="1"),
    Pin("engine_to_number_rejects_leading_zeros", p("x := to_number(input.s) == 7"), {"s": "007"},
        engine=Raises("could not parse string as number"), opa="true"),
    Pin("engine_to_number_accepts_surrounding_spaces", p("x := to_number(input.s)"), {"s": " 1"},
        engine="1", opa=Raises("invalid syntax")),
    Pin("engine_to_number_rounds_beyond_64_bits", p('x := to_number(input.a) >= to_number(input.b)'),
        {"a": "18446744073709551616", "b": "18446744073709551617"}, engine="true", opa="false"),
    Pin("engine_sprintf_d_rounds_beyond_64_bits", p('x := sprintf("%d", [to_number(input.s)])'),
        {"s": "18446744073709551616"}, engine='"18446744073709552000"', opa='"18446744073709551616"'),
    Pin("engine_json_numbers_round_beyond_64_bits", p("x := input.v"), {"v": 12345678901234567890123},
        engine="1.2345678901234568e+22", opa="12345678901234567890123"),
    Pin("engine_writes_1_0_as_1", p("x := input.v"), {"v": 1.0}, engine="1", opa="1.0"),
    Pin("engine_json_is_valid_rejects_numbers_beyond_float_range", p("x := json.is_valid(input.s)"),
        {"s": "1e400"}, engine="false", opa="true"),
    Pin("engine_json_is_valid_raises_on_non_strings", p("x := json.is_valid(input.v)"), {"v": 5},
        engine=Raises("`json.is_valid` expects string argument"), opa="false"),
    Pin("engine_some_in_raises_on_null", p("x if { some _ in input.v }"), {"v": None},
        engine=Raises("`some .. in collection` expects array/set/object"), opa=UNDEFINED),
    Pin("engine_some_in_raises_on_a_string", p("x if { some _, _ in input.v }"), {"v": "ab"},
        engine=Raises("`some .. in collection` expects array/set/object"), opa=UNDEFINED),
    Pin("engine_sprintf_q_raises_on_numbers", p('x := sprintf("%q", [input.v])'), {"v": 65},
        engine=Raises("number specified for format verb q"), opa=json.dumps("'A'")),
    Pin("engine_sprintf_q_raises_on_booleans", p('x := sprintf("%q", [input.v])'), {"v": True},
        engine=Raises("are not supported"), opa=json.dumps('"true"')),
    Pin("engine_rule_compared_with_rule_under_with_is_undefined",
        p('ps := {"c": []}\n\nid := input.spec\n\nx if { id == ps with input as {"spec": ps} }'), None,
        engine=UNDEFINED, opa="true"),
]


def matches(outcome: Outcome, expected: Any) -> bool:
    """Whether ``outcome`` is ``expected`` (JSON text, UNDEFINED or Raises)."""
    if isinstance(expected, Raises):
        return outcome.error is not None and expected.fragment in outcome.error
    if expected is UNDEFINED or outcome.value is UNDEFINED or outcome.error is not None:
        return outcome.error is None and outcome.value is expected
    return json.dumps(outcome.value) == expected


@pytest.mark.parametrize("pin", PINS, ids=[pin.id for pin in PINS])
async def test_engine_divergence(opa, pin: Pin):
    async with aiohttp.ClientSession() as session:
        engine = EngineSide(opa, session)
        await engine.load_modules(pin.modules)
        answer = await engine.evaluate(QUERY, pin.input)
    with OpaSide(pin.modules, None) as reference:
        expected = reference.evaluate(QUERY, pin.input)
    assert matches(answer, pin.engine), f"{pin.id}: the engine now answers {answer} (pinned: {pin.engine})"
    assert matches(expected, pin.opa), f"{pin.id}: OPA now answers {expected} (pinned: {pin.opa})"
