"""What still differs between the engine and OPA 1.x, one pinning test per difference.

docs/devstack.md ("Known differences from OPA") lists each difference with the
test here that pins it. Each test shows the engine's HTTP answer next to OPA's:
from OPA's own evaluator (``opa_bindings``, OPA 1.20 in-process — it evaluates
with strict builtin errors, as OPA's server does with
``?strict-builtin-errors=true``) or, where the library cannot show it, from
OPA's documented server behaviour. A failure here means a difference is gone
(or changed): update the docs with the test.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from opa_bindings.engine import OpaEngine, OpaError

pytestmark = pytest.mark.devstack_only

_TOPDOWN_CODE = re.compile(r"\b(eval_[a-z_]+_error)\b")


def opa_document(source: str, path: str, input_doc: Any = None) -> Any:
    """``data.<path>`` evaluated by OPA's evaluator over ``source`` (raises ``OpaError`` when it fails)."""
    with OpaEngine() as engine:
        engine.add_policy("fedtest.rego", source)
        return engine.eval_document(path, input_doc)


def opa_error(source: str, path: str, input_doc: Any = None) -> tuple[str, str]:
    """(topdown code, message) of OPA's evaluation error for ``data.<path>``."""
    with pytest.raises(OpaError) as info:
        opa_document(source, path, input_doc)
    m = _TOPDOWN_CODE.search(info.value.message)
    assert m is not None, info.value.message
    return m.group(1), info.value.message[m.end() + 2:]


BUILTIN_ERRORS = {
    "to_number": ('to_number("abc")', "eval_builtin_error"),
    "regex.match": ('regex.match("[", "a")', "eval_builtin_error"),
    "json.unmarshal": ('json.unmarshal("{")', "eval_builtin_error"),
    "units.parse": ('units.parse("garbage")', "eval_builtin_error"),
    "operand-type": ("count(input.n)", "eval_type_error"),
}


@pytest.mark.parametrize("call, code", BUILTIN_ERRORS.values(), ids=BUILTIN_ERRORS.keys())
async def test_known_difference_builtin_errors_are_errors_not_undefined(opa, call, code):
    """OPA's server (not strict): the failing expression is undefined, so ``x`` is and ``y`` still answers.

    The engine answers as OPA's server does with ``?strict-builtin-errors=true``
    (500, the same topdown code as OPA's strict evaluator), for the rule and
    for every document that contains it.
    """
    source = f"package fedtest.builtin\n\nx := {call}\n\ny := 1\n"
    assert (await opa.put_policy("fedtest/builtin", source))[0] == 200
    status, body = await opa.query("fedtest/builtin/x", {"n": 5})
    assert status == 500 and body["code"] == "internal_error", body
    assert body["errors"][0]["code"] == code == opa_error(source, "fedtest.builtin.x", {"n": 5})[0]
    assert (await opa.query("fedtest/builtin", {"n": 5}))[0] == 500  # OPA's server: {"result": {"y": 1}}


async def test_known_difference_numbers_are_64_bit_floats(opa):
    """regorus computes with binary floats; OPA with exact decimals, and keeps a literal's text."""
    source = "package fedtest.num\n\na := 0.1 + 0.2\n\nb := 12345678901234567890 * 10\n\nc := 1.0\n"
    assert (await opa.put_policy("fedtest/num", source))[0] == 200
    status, body = await opa.request("GET", "/v1/data/fedtest/num")
    assert status == 200
    engine = body["result"]
    opa_result = opa_document(source, "fedtest.num")
    assert (engine["a"], opa_result["a"]) == (0.30000000000000004, 0.3)
    assert (engine["b"], opa_result["b"]) == (1.2345678901234568e20, 123456789012345678900)
    assert (repr(engine["c"]), repr(opa_result["c"])) == ("1", "1.0")


async def test_known_difference_regorus_refuses_what_opa_accepts(opa):
    """OPA's compiler accepts ``1e400`` (an arbitrary-precision number); regorus cannot hold it."""
    source = "package fedtest.big\n\nx := 1e400\n"
    assert opa_document(source, "fedtest.big.x") is not None  # OPA: compiles and evaluates
    status, body = await opa.put_policy("fedtest/big", source)
    assert status == 400 and body["code"] == "invalid_parameter", body
    [err] = body["errors"]
    assert err["code"] == "rego_parse_error" and "out of range" in err["message"]  # regorus' words
    assert err["location"] == {"file": "fedtest/big", "row": 3, "col": 6}


async def test_known_difference_evaluation_messages_and_locations_are_regorus(opa):
    """Codes follow OPA; the text and location of an evaluation error are regorus'."""
    source = "package fedtest.msg\n\nn := count(input.n)\n\nf(_) := 1\n\nf(_) := 2\n\ny := f(0)\n"
    assert (await opa.put_policy("fedtest/msg", source))[0] == 200
    _, body = await opa.query("fedtest/msg/n", {"n": 5})
    [err] = body["errors"]
    assert err["code"] == "eval_type_error" and err["message"].startswith("`count` requires")
    assert opa_error(source, "fedtest.msg.n", {"n": 5}) == (
        "eval_type_error", "count: operand 1 must be one of {array, object, set, string} but got number")
    _, body = await opa.query("fedtest/msg/y", {})
    assert body["errors"][0]["location"]["row"] == 9  # the call; OPA: the second definition, row 7
    with pytest.raises(OpaError, match="fedtest.rego:7: eval_conflict_error"):
        opa_document(source, "fedtest.msg.y")


async def test_known_difference_type_errors_carry_no_details(opa):
    """OPA's REST error for a type error has ``details`` (typed have/want); the bindings only give text."""
    _, body = await opa.put_policy("fedtest/bad", 'package fedtest.bad\n\nx := 1 + "a"\n')
    [err] = body["errors"]
    assert err["code"] == "rego_type_error" and "details" not in err


async def test_known_difference_policy_ast_is_minimal(opa):
    """OPA returns its full module AST; the engine the package path and rule heads with locations."""
    assert (await opa.put_policy("fedtest/ast", "package fedtest.ast\n\nx := 1\n"))[0] == 200
    _, body = await opa.request("GET", "/v1/policies/fedtest/ast")
    ast = body["result"]["ast"]
    assert set(ast) == {"package", "rules"}
    assert ast["rules"] == [{"head": {"ref": [{"type": "var", "value": "data"}, {"type": "string", "value": "fedtest"},
                                              {"type": "string", "value": "ast"}, {"type": "string", "value": "x"}]},
                             "location": {"file": "fedtest/ast", "row": 3, "col": 1}}]


async def test_known_difference_numeric_segment_matches_string_key_under_a_package(opa):
    """A numeric URL segment is a number: OPA never matches it to the key "0"; regorus does for rules."""
    source = 'package fedtest.seg\n\no := {"0": "zero"}\n'
    assert (await opa.put_policy("fedtest/seg", source))[0] == 200
    assert await opa.request("GET", "/v1/data/fedtest/seg/o/0") == (200, {"result": "zero"})
    with OpaEngine() as engine:
        engine.add_policy("fedtest.rego", source)
        assert engine.eval_query("x := data.fedtest.seg.o[input.i]", {"i": 0}) == []  # undefined
        assert engine.eval_query("x := data.fedtest.seg.o[input.i]", {"i": "0"}) == [{"x": "zero"}]
