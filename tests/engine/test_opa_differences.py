"""What still differs between the devstack engine and an OPA server, one pinning test per difference.

docs/devstack.md ("Known differences from OPA") lists each difference with the
test here that pins it. The engine's answer is asserted against a devstack
engine of the test's own (``engine``, tests/engine/conftest.py); OPA's answer
next to it when the session's OPA is a real one (``FEDPLACE_TEST_OPA_URL``),
and is skipped otherwise. A failure here means a difference is gone (or
changed): update the docs with the test.
"""

from __future__ import annotations

import aiohttp
import pytest

BUILTIN_ERRORS = {
    "to_number": ('to_number("abc")', "eval_builtin_error"),
    "to_number-spaces": ("to_number(input.s)", "eval_builtin_error"),
    "regex.match": ('regex.match("[", "a")', "eval_builtin_error"),
    "json.unmarshal": ('json.unmarshal("{")', "eval_builtin_error"),
    "units.parse": ('units.parse("garbage")', "eval_builtin_error"),
    "operand-type": ("count(input.n)", "eval_type_error"),
}
BUILTIN_INPUT = {"n": 5, "s": " 1"}


def real_opa(opa):
    """The session's OPA when it is a real one, else skip (the engine's half has run)."""
    if not opa.external:
        pytest.skip("OPA's half needs a real OPA (FEDPLACE_TEST_OPA_URL)")
    return opa


async def raw(server, path: str) -> str:
    """The body of ``GET <path>`` as sent (numbers exactly as written)."""
    async with aiohttp.ClientSession() as s, s.get(server.url + path, headers=server.headers()) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.text()


@pytest.mark.parametrize("call, code", BUILTIN_ERRORS.values(), ids=BUILTIN_ERRORS.keys())
async def test_known_difference_builtin_errors_are_errors_not_undefined(engine, opa, call, code):
    """The engine answers as OPA's server does with ``?strict-builtin-errors=true`` (500, for
    the rule and every document containing it); OPA's server by default makes the failing
    expression undefined: ``x`` is, and the rest of the package still answers."""
    source = f"package fedtest.builtin\n\nx := {call}\n\ny := 1\n"
    assert (await engine.put_policy("fedtest/builtin", source))[0] == 200
    status, body = await engine.query("fedtest/builtin/x", BUILTIN_INPUT)
    assert status == 500 and body["code"] == "internal_error", body
    assert [(e["code"], e["location"]["row"]) for e in body["errors"]] == [(code, 3)], body
    assert (await engine.query("fedtest/builtin", BUILTIN_INPUT))[0] == 500
    opa = real_opa(opa)
    assert (await opa.put_policy("fedtest/builtin", source))[0] == 200
    assert await opa.query("fedtest/builtin/x", BUILTIN_INPUT) == (200, {})
    assert await opa.query("fedtest/builtin", BUILTIN_INPUT) == (200, {"result": {"y": 1}})


async def test_known_difference_evaluation_error_column_is_1(engine, opa):
    """OPA's bindings report an evaluation error as ``file:row`` text: no column."""
    source = "package fedtest.col\n\n  x := 1\n\n  x := 2\n"
    assert (await engine.put_policy("fedtest/col", source))[0] == 200
    _, body = await engine.request("GET", "/v1/data/fedtest/col/x")
    assert [(e["code"], e["location"]) for e in body["errors"]] == [
        ("eval_conflict_error", {"file": "fedtest/col", "row": 5, "col": 1})]
    opa = real_opa(opa)
    assert (await opa.put_policy("fedtest/col", source))[0] == 200
    _, body = await opa.request("GET", "/v1/data/fedtest/col/x")
    assert [e["location"] for e in body["errors"]] == [{"file": "fedtest/col", "row": 5, "col": 3}]


async def test_known_difference_type_errors_carry_no_details(engine, opa):
    """OPA's REST error for a type error has ``details`` (typed have/want); the bindings only give text."""
    source = 'package fedtest.bad\n\nx := 1 + "a"\n'
    _, body = await engine.put_policy("fedtest/bad", source)
    [err] = body["errors"]
    assert err["code"] == "rego_type_error" and "details" not in err
    opa = real_opa(opa)
    _, body = await opa.put_policy("fedtest/bad", source)
    assert set(body["errors"][0]["details"]) == {"have", "want"}


AST_SOURCE = "package fedtest.ast\n\nx := 1\n\nf(a) := b if { b := a + 1 }\n"


async def test_known_difference_policy_ast_is_the_parsed_module(engine, opa):
    """The engine's ``ast`` is OPA's parse of the module (``rego.parse_module``); OPA's server
    shows the compiled module, whose local variables are rewritten (``__local0__``)."""
    assert (await engine.put_policy("fedtest/ast", AST_SOURCE))[0] == 200
    ast = (await engine.request("GET", "/v1/policies/fedtest/ast"))[1]["result"]["ast"]
    assert [r["head"]["name"] for r in ast["rules"]] == ["x", "f"]
    assert ast["rules"][1]["head"]["args"] == [{"type": "var", "value": "a"}]
    opa = real_opa(opa)
    assert (await opa.put_policy("fedtest/ast", AST_SOURCE))[0] == 200
    compiled = (await opa.request("GET", "/v1/policies/fedtest/ast"))[1]["result"]["ast"]
    assert compiled["package"] == ast["package"] and compiled["rules"][0] == ast["rules"][0]  # no locals: alike
    assert compiled["rules"][1]["head"]["args"] == [{"type": "var", "value": "__local0__"}]


NUMBERS = "package fedtest.num\n\nprecise := 1.00000000000000000001\n\nhuge := 1e400\n"


async def test_known_difference_evaluated_numbers_are_64_bit_floats(engine, opa):
    """The bindings hand results over as JSON that Python parses: integers stay exact, other
    numbers become 64-bit floats (beyond their range: infinite, sent as null). OPA keeps them
    exact."""
    assert (await engine.put_policy("fedtest/num", NUMBERS))[0] == 200
    assert await raw(engine, "/v1/data/fedtest/num") == '{"result":{"huge":null,"precise":1.0}}'
    assert (await engine.put_policy("fedtest/whole", "package fedtest.whole\n\nx := 12345678901234567890123\n"))[0] == 200
    assert await raw(engine, "/v1/data/fedtest/whole") == '{"result":{"x":12345678901234567890123}}'
    opa = real_opa(opa)
    assert (await opa.put_policy("fedtest/num", NUMBERS))[0] == 200
    assert (await raw(opa, "/v1/data/fedtest/num")).replace(" ", "").replace("\n", "") == (
        '{"result":{"huge":1e400,"precise":1.00000000000000000001}}')
