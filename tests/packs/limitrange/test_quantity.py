"""Quantities: the Rego parser against Kubernetes' grammar and values, under both evaluators.

The oracle is k8s_quantity.py (resource.ParseQuantity re-stated with exact
fractions). Every value — the issue's examples, edge cases, and a few
thousand generated strings (fixed seed) mixing signs, leading zeros, decimals,
valid and invalid suffixes and exponents — must parse to the same
(whole units, nanounits), or be refused, under OPA's evaluator in process and
under the ``opa`` fixture's server (the devstack engine, or a real OPA) alike; Value() and MilliValue() must match too. A refused
value is never an evaluation error.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.packs.limitrange.harness import Evaluator
from tests.packs.limitrange.k8s_quantity import MAX_MILLI_VALUE, Invalid, milli_value, parse, value

EXAMPLES = ["250m", "0.5", "1Gi", "1G", "1e3", "129e6", "1Ki", "100M", "1", "0", "-0", "+1", ".5", "1.", ".", "+",
            "1.5Gi", "0.1Ki", "1K", "1ki", "1mi", "1Mi", "abc", "", " 1Gi ", "1E", "1E5", "1e-3", "1e-12", "1n", "1u",
            "100n", "1.0000000001", "12345678901234567890123456789", "9223372036854775807", "9223372036854775808",
            "1e18", "1e19", "1e30", "1e99999999", "1e-99999999", "8Ei", "7.999Ei", "-1", "-1m", "1.5.5", "1Gi1",
            "1 Gi", "0.000000001", "0.0000000001", "1234567890123456789Ki", "12345678901234567890Ki", "2.5e-3",
            "1E-2", "1e+3", "0001", "00.100", "3m", "1.1m", "999999999n", "1.999999999999", "5e-10", "e3", "1e",
            "0.123456m", "999999999999999Ti", "999999999999999.999999Ti", "4030m", "1.123456Gi",
            "876543210987654.321987m", "999999999999999.999999m", "123456789012345.123456k", "123456789012345.123456Ki",
            "12345678901234.12345Mi"]

SUFFIXES = ["", "", "", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "K", "mi", "ki", "KI", "i", "b", "Gb", "e", "E", "e3", "e-3", "E+6", "e20", "e-20", "e+", "m3", " "]


def generated(n: int = 3000, seed: int = 1302) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.05:
            out.append("".join(rng.choice("0123456789.+-eEmkKiGM ") for _ in range(rng.randint(0, 8))))
            continue
        digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([0, 1, 1, 2, 3, 4, 7, 12, 16, 19, 24])))
        if rng.random() < 0.2:
            digits = "0" * rng.randint(1, 3) + digits
        frac = ""
        if rng.random() < 0.35:
            frac = "." + "".join(rng.choice("0123456789") for _ in range(rng.choice([0, 1, 2, 3, 6, 9, 12])))
        sign = rng.choice(["", "", "", "+", "-"])
        out.append(sign + digits + frac + rng.choice(SUFFIXES))
    return out


def expected(v: Any) -> dict[str, Any]:
    try:
        q = parse(str(v) if not isinstance(v, str) else v)
    except Invalid:
        return {"ok": False}
    out = {"ok": True, "whole": q[0], "nano": q[1], "units": value(q), "small": value(q) <= MAX_MILLI_VALUE}
    if out["small"]:
        out["milli"] = milli_value(q)
    return out


def comparable(q: dict[str, Any]) -> dict[str, Any]:
    return {k: q[k] for k in ("ok", "whole", "nano", "units", "small", "milli") if k in q}


@pytest.mark.parametrize("values", [EXAMPLES, generated()], ids=["examples", "generated"])
async def test_parser_matches_kubernetes(evaluator: Evaluator, values: list[str]):
    got = await evaluator.parse_all(values)
    wrong = [(v, comparable(g), expected(v)) for v, g in zip(values, got, strict=True) if comparable(g) != expected(v)]
    assert not wrong, f"{len(wrong)} of {len(values)} differ, e.g. {wrong[:5]}"


def test_generated_values_cover_both_paths_and_refusals():
    values = generated()
    outcomes = [expected(v) for v in values]
    assert sum(o["ok"] for o in outcomes) > 1000
    assert sum(not o["ok"] for o in outcomes) > 500
    assert any(o["ok"] and not o["small"] for o in outcomes)
    assert any(o["ok"] and o["nano"] % 1000000 for o in outcomes)


async def test_json_values(evaluator: Evaluator):
    got = await evaluator.parse_all([2, 0.25, None, True, {"a": 1}, [1], 1e-3])
    assert [comparable(g) for g in got] == [
        expected("2"), expected("0.25"), expected("0"), {"ok": False}, {"ok": False}, {"ok": False},
        expected("0.001")]
    assert got[4]["text"] == '{"a":1}'


async def test_refusals_say_why(evaluator: Evaluator):
    bad, negative, long_binary = await evaluator.parse_all(["1K", "-2Gi", "12345678901234567890Ki"])
    assert bad == {"ok": False, "text": "1K", "error": "is not a valid quantity"}
    assert negative == {"ok": False, "text": "-2Gi", "error": "must not be negative"}
    assert long_binary["error"] == "has more than 19 significant digits before a binary suffix"
