"""OPA REST API conformance: status codes and body shapes, as OPA 1.x answers.

Written against the wire only (status codes, ``code`` / ``message`` /
``errors[].code`` / ``location`` keys, results), never against the engine's
internals, so they also pass against a real OPA
(``FEDPLACE_TEST_OPA_URL=http://127.0.0.1:8181``). Expected codes come from
OPA's ``v1/server/server.go``, ``v1/server/writer`` and ``v1/storage/inmem``.
"""

from __future__ import annotations

import json

import pytest

POLICY = """package fedtest.authz

allow if input.user == "alice"

deny contains msg if {
	some name, obj in data.fedtest.objects
	obj.bad
	msg := sprintf("%s is bad", [name])
}
"""

LIB = """package fedtest.lib

double(x) := x * 2
"""

USES_LIB = """package fedtest.user

import data.fedtest.lib

four := lib.double(2)
"""

JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def assert_error(body, code):
    assert isinstance(body, dict), body
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body


# -- policies -------------------------------------------------------------------------------------


async def test_policy_put_get_list_delete(opa):
    assert await opa.put_policy("fedtest/authz", POLICY) == (200, {})
    status, body = await opa.request("GET", "/v1/policies/fedtest/authz")
    assert status == 200
    assert body["result"]["id"] == "fedtest/authz" and body["result"]["raw"] == POLICY
    assert isinstance(body["result"]["ast"], dict)
    status, body = await opa.request("GET", "/v1/policies")
    assert status == 200 and "fedtest/authz" in [p["id"] for p in body["result"]]
    assert await opa.request("DELETE", "/v1/policies/fedtest/authz") == (200, {})
    status, body = await opa.request("GET", "/v1/policies/fedtest/authz")
    assert status == 404
    assert_error(body, "resource_not_found")
    assert "fedtest/authz" not in [p["id"] for p in (await opa.request("GET", "/v1/policies"))[1]["result"]]


async def test_policy_id_may_be_url_escaped(opa):
    assert (await opa.put_policy("ns%2Fcm%2Fkey.rego", "package fedtest.esc\n\nx := 1\n"))[0] == 200
    status, body = await opa.request("GET", "/v1/policies/ns/cm/key.rego")
    assert status == 200 and body["result"]["id"] == "ns/cm/key.rego"
    assert (await opa.request("DELETE", "/v1/policies/ns%2Fcm%2Fkey.rego"))[0] == 200
    assert (await opa.request("GET", "/v1/policies/ns/cm/key.rego"))[0] == 404


async def test_putting_the_same_policy_again_is_fine(opa):
    assert (await opa.put_policy("fedtest/authz", POLICY))[0] == 200
    assert await opa.put_policy("fedtest/authz", POLICY) == (200, {})
    assert (await opa.query("fedtest/authz/allow", {"user": "alice"}))[1]["result"] is True


async def test_missing_policy_get_and_delete_are_404(opa):
    for method in ("GET", "DELETE"):
        status, body = await opa.request(method, "/v1/policies/fedtest/nope")
        assert status == 404, method
        assert_error(body, "resource_not_found")


@pytest.mark.parametrize(
    "source, codes",
    [
        ("package fedtest.bad\n\nallow { true }\n", {"rego_parse_error"}),  # Rego v0 syntax is refused
        ("package fedtest.bad\n\nitems[x] { x := 1 }\n", {"rego_parse_error"}),  # v0 partial set
        ("package fedtest.bad\n\nallow if {\n", {"rego_parse_error"}),
        ("allow if true\n", {"rego_parse_error"}),  # no package
        ("package fedtest.bad\n\nallow if { y }\n", {"rego_unsafe_var_error"}),
        ("package fedtest.bad\n\nx := nosuchfunc(1)\n", {"rego_type_error"}),
    ],
    ids=["v0-rule-body", "v0-partial-set", "unterminated", "no-package", "unsafe-var", "undefined-function"],
)
async def test_compile_errors_are_400_in_opas_shape(opa, source, codes):
    status, body = await opa.put_policy("fedtest/bad.rego", source)
    assert status == 400, body
    assert body["code"] == "invalid_parameter"
    assert body["message"] == "error(s) occurred while compiling module(s)"
    assert body["errors"], body
    for err in body["errors"]:
        assert err["code"] in codes, err
        assert err["message"]
        loc = err["location"]
        assert loc["file"] == "fedtest/bad.rego" and loc["row"] >= 1 and "col" in loc
    assert (await opa.request("GET", "/v1/policies/fedtest/bad.rego"))[0] == 404


async def test_empty_module_is_400(opa):
    status, body = await opa.put_policy("fedtest/empty", "# nothing here\n")
    assert status == 400
    assert_error(body, "invalid_parameter")
    assert body["message"] == "fedtest/empty:0: rego_parse_error: empty module"  # OPA's error text, not a list


# What OPA's compiler refuses at PUT: (source, code of every error, a row that must be reported).
RECURSIVE_REMEDIATION = """package io.k8s.federation.remediation
root := input.root if input.root
else := "kubernetes"
stored(plural, name) := data[root][plural][name]
notifications contains n if { some n in input.x; stored("a", n) }
"""
REFUSED = {
    "plus-number-string": ('package fedtest.bad\n\nx := 1 + "a"\n', "rego_type_error", 3),
    "wrong-arity": ("package fedtest.bad\n\nx := count([1], [2])\n", "rego_type_error", 3),
    "startswith-number": ('package fedtest.bad\n\nx := startswith(1, "a")\n', "rego_type_error", 3),
    "rule-and-function": ("package fedtest.bad\n\nf := 1\n\nf(x) := x\n", "rego_type_error", 3),
    "two-defaults": ("package fedtest.bad\n\ndefault p := 1\n\ndefault p := 2\n\np if input.x\n",
                     "rego_type_error", 1),
    "unsafe-var": ("package fedtest.bad\n\nallow if { y }\n", "rego_unsafe_var_error", 3),
    "mutual-recursion": ("package fedtest.bad\n\np if q\n\nq if p\n", "rego_recursion_error", 3),
    # a dynamic data[...] reference that can reach the package's own rules
    "dynamic-data-ref": (RECURSIVE_REMEDIATION, "rego_recursion_error", 4),
}


@pytest.mark.parametrize("source, code, row", REFUSED.values(), ids=REFUSED.keys())
async def test_opas_compiler_refuses_at_put_with_its_code_and_row(opa, source, code, row):
    status, body = await opa.put_policy("fedtest/bad.rego", source)
    assert status == 400, body
    assert body["code"] == "invalid_parameter" and body["message"] == "error(s) occurred while compiling module(s)"
    assert {e["code"] for e in body["errors"]} == {code}, body
    assert all(e["location"]["file"] == "fedtest/bad.rego" and isinstance(e["location"]["col"], int)
               for e in body["errors"]), body
    assert row in {e["location"]["row"] for e in body["errors"]}, body
    assert (await opa.request("GET", "/v1/policies/fedtest/bad.rego"))[0] == 404


async def test_compile_errors_carry_opas_message_and_column(opa):
    _, body = await opa.put_policy("fedtest/bad.rego", 'package fedtest.bad\n\nx := 1 + "a"\n')
    # a type error's typed have/want ``details`` are OPA's server's only (the engine's compiler gives text)
    assert [{k: v for k, v in e.items() if k != "details"} for e in body["errors"]] == [
        {"code": "rego_type_error", "message": "plus: invalid argument(s)",
         "location": {"file": "fedtest/bad.rego", "row": 3, "col": 6}}]
    _, body = await opa.put_policy("fedtest/bad.rego", "package fedtest.bad\n\nallow if {\n\tinput.x ==\n}\n")
    [err] = body["errors"]
    assert (err["code"], err["location"]) == ("rego_parse_error", {"file": "fedtest/bad.rego", "row": 5, "col": 1})
    assert err["details"] == {"line": "}", "idx": 0}
    _, body = await opa.put_policy("fedtest/bad.rego", "package fedtest.bad\n\nallow if { y }\n")
    assert body["errors"] == [{"code": "rego_unsafe_var_error", "message": "var y is unsafe",
                               "location": {"file": "fedtest/bad.rego", "row": 3, "col": 12}}]


async def test_refused_replacement_keeps_the_loaded_module(opa):
    good = "package fedtest.keep\n\nx := 1\n"
    assert (await opa.put_policy("fedtest/keep", good))[0] == 200
    for broken in ('package fedtest.keep\n\nx := 1 + "a"\n', "package fedtest.keep\n\nx := 1 +\n"):
        assert (await opa.put_policy("fedtest/keep", broken))[0] == 400
    assert (await opa.request("GET", "/v1/policies/fedtest/keep"))[1]["result"]["raw"] == good
    assert await opa.request("GET", "/v1/data/fedtest/keep/x") == (200, {"result": 1})


async def test_rego_v1_import_is_accepted(opa):
    src = "package fedtest.v1\n\nimport rego.v1\n\nok if true\n"
    assert (await opa.put_policy("fedtest/v1", src))[0] == 200
    assert await opa.request("GET", "/v1/data/fedtest/v1/ok") == (200, {"result": True})


async def test_broken_module_leaves_loaded_ones_alone(opa):
    assert (await opa.put_policy("fedtest/authz", POLICY))[0] == 200
    broken = POLICY.replace('allow if input.user == "alice"', "allow if {")
    assert (await opa.put_policy("fedtest/authz", broken))[0] == 400
    assert (await opa.put_policy("fedtest/other", "package fedtest.other\n\nz if { q }\n"))[0] == 400
    assert (await opa.query("fedtest/authz/allow", {"user": "alice"}))[1]["result"] is True
    assert (await opa.request("GET", "/v1/policies/fedtest/authz"))[1]["result"]["raw"] == POLICY
    ids = [p["id"] for p in (await opa.request("GET", "/v1/policies"))[1]["result"]]
    assert "fedtest/other" not in ids


async def test_delete_of_module_others_depend_on_is_400(opa):
    assert (await opa.put_policy("fedtest/lib", LIB))[0] == 200
    assert (await opa.put_policy("fedtest/user", USES_LIB))[0] == 200
    assert await opa.request("GET", "/v1/data/fedtest/user/four") == (200, {"result": 4})
    status, body = await opa.request("DELETE", "/v1/policies/fedtest/lib")
    assert status == 400
    assert_error(body, "invalid_operation")  # OPA: CodeInvalidOperation + compile errors
    assert body["message"] == "error(s) occurred while compiling module(s)"
    assert [(e["code"], e["location"]["file"], e["location"]["row"]) for e in body["errors"]] == [
        ("rego_type_error", "fedtest/user", 5)]
    assert "fedtest.lib.double" in body["errors"][0]["message"]
    assert await opa.request("GET", "/v1/data/fedtest/user/four") == (200, {"result": 4})
    assert (await opa.request("GET", "/v1/policies/fedtest/lib"))[0] == 200
    assert (await opa.request("DELETE", "/v1/policies/fedtest/user"))[0] == 200
    assert (await opa.request("DELETE", "/v1/policies/fedtest/lib"))[0] == 200


async def test_policy_whose_rule_collides_with_data_is_400(opa):
    assert (await opa.request("PUT", "/v1/data/fedtest/clash/allow", json_body=True))[0] == 204
    status, body = await opa.put_policy("fedtest/clash", "package fedtest.clash\n\nallow if true\n")
    assert status == 400
    assert_error(body, "invalid_parameter")
    assert body["errors"] == [{"code": "rego_compile_error",
                               "message": "conflicting rule for data path fedtest/clash/allow found",
                               "location": {"file": "fedtest/clash", "row": 3, "col": 1}}]


async def test_data_collisions_are_found_in_opas_compile_stage_order(opa):
    await opa.request("PUT", "/v1/data/fedtest/clash", json_body=5)  # a scalar above every rule of the package
    # checked before types: only the collisions are reported ...
    _, body = await opa.put_policy("fedtest/clash", 'package fedtest.clash\n\nallow if true\n\ny := 1 + "a"\n')
    assert sorted((e["code"], e["location"]["row"]) for e in body["errors"]) == [
        ("rego_compile_error", 3), ("rego_compile_error", 5)]
    # ... but after local variables are rewritten: that error alone is reported
    _, body = await opa.put_policy("fedtest/clash", "package fedtest.clash\n\nallow if { x := 1; x := 2 }\n")
    assert [(e["code"], e["message"]) for e in body["errors"]] == [("rego_compile_error", "var x assigned above")]


# -- data: queries ------------------------------------------------------------------------------------


async def test_query_with_input_and_undefined(opa):
    await opa.put_policy("fedtest/authz", POLICY)
    assert await opa.query("fedtest/authz/allow", {"user": "alice"}) == (200, {"result": True})
    assert await opa.query("fedtest/authz/allow", {"user": "bob"}) == (200, {})  # undefined: no "result"
    assert await opa.request("GET", "/v1/data/fedtest/nothing/here") == (200, {})
    status, body = await opa.request("GET", '/v1/data/fedtest/authz/allow?input={"user":"alice"}')
    assert (status, body) == (200, {"result": True})


async def test_post_without_input_warns(opa):
    await opa.put_policy("fedtest/authz", POLICY)
    status, body = await opa.request("POST", "/v1/data/fedtest/authz/deny", json_body={})
    assert status == 200 and body["result"] == []
    assert body["warning"]["code"] == "api_usage_warning"
    _, body = await opa.query("fedtest/authz/deny", {"user": "x"})
    assert "warning" not in body


async def test_package_and_root_combine_base_and_virtual_documents(opa):
    await opa.put_policy("fedtest/authz", POLICY)
    await opa.request("PUT", "/v1/data/fedtest/objects", json_body={"o1": {"bad": True}})
    await opa.request("PUT", "/v1/data/fedtest/authz/note", json_body="base doc next to rules")
    status, body = await opa.query("fedtest/authz", {"user": "alice"})
    assert status == 200
    assert body["result"] == {"allow": True, "deny": ["o1 is bad"], "note": "base doc next to rules"}
    status, body = await opa.request("GET", "/v1/data")
    assert status == 200
    fedtest = body["result"]["fedtest"]
    assert fedtest["objects"] == {"o1": {"bad": True}}
    assert fedtest["authz"]["deny"] == ["o1 is bad"] and "allow" not in fedtest["authz"]


@pytest.mark.parametrize("order", [("plain", "importing"), ("importing", "plain")])
async def test_package_split_over_modules_with_imports(opa, order):
    """Packs put rules into one package from several modules, some with imports: the
    package document holds every module's rules, whatever the load order."""
    modules = {
        "plain": 'package fedtest.decision\n\nerrors contains "from plain"\n\npatches["plain"] := [1]\n',
        "importing": ('package fedtest.decision\n\nimport data.fedtest.lib\n\n'
                      'errors contains "from importing" if lib.two == 2\n\n'
                      'patches["importing"] := [lib.double(1)]\n\nfour := lib.double(lib.two)\n'),
    }
    assert (await opa.put_policy("fedtest/lib", LIB + "\ntwo := 2\n"))[0] == 200
    for name in order:
        assert (await opa.put_policy(f"fedtest/{name}", modules[name]))[0] == 200
    status, body = await opa.query("fedtest/decision", {})
    assert status == 200
    assert body["result"] == {"errors": ["from importing", "from plain"], "four": 4,
                              "patches": {"importing": [2], "plain": [1]}}
    status, body = await opa.query("fedtest", {})
    assert status == 200 and body["result"]["decision"]["four"] == 4 and body["result"]["lib"] == {"two": 2}


async def test_undefined_ref_head_rules_leave_their_parent_an_empty_object(opa):
    assert (await opa.put_policy("fedtest/heads", 'package fedtest.heads\n\npatches["a"] := 1 if false\n\n'
                                                 's contains 1 if false\n\ndeep.er.x := 1 if false\n'))[0] == 200
    status, body = await opa.query("fedtest/heads", {})
    assert status == 200 and body["result"] == {"patches": {}, "s": [], "deep": {"er": {}}}


async def test_malformed_query_bodies_are_400(opa):
    for raw in ("{not json", "[1, 2]"):
        status, body = await opa.request("POST", "/v1/data/fedtest", data=raw,
                                         headers={"Content-Type": "application/json"})
        assert status == 400, raw
        assert_error(body, "invalid_parameter")
    status, body = await opa.request("GET", "/v1/data/fedtest?input={oops")
    assert status == 400
    assert_error(body, "invalid_parameter")


async def test_conflicting_outputs_are_an_evaluation_error(opa):
    src = "package fedtest.conflict\n\nx = input.a if input.a\n\nx = input.b if input.b\n"
    assert (await opa.put_policy("fedtest/conflict", src))[0] == 200
    assert (await opa.query("fedtest/conflict/x", {"a": 1}))[1] == {"result": 1}
    status, body = await opa.query("fedtest/conflict/x", {"a": 1, "b": 2})
    assert status == 500
    assert_error(body, "internal_error")
    assert body["message"] == "error(s) occurred while evaluating query"
    assert body["errors"][0]["code"] == "eval_conflict_error"


CONFLICTS = {
    "complete-constants": ("x := 1\n\nx := 2\n", "x", "complete rules must not produce multiple outputs"),
    "complete-one-rule": ("x := y if { some y in [1, 2] }\n", "x", "complete rules must not produce multiple outputs"),
    "object-keys": ('o[k] := v if { some v in [1, 2]; k := "a" }\n', "o", "object keys must be unique"),
    "object-keys-two-rules": ('o["a"] := 1\n\no[k] := 2 if k := "a"\n', "o", "object keys must be unique"),
    "object-keys-two-rules-rev": ('o[k] := 2 if k := "a"\n\no["a"] := 1\n', "o", "object keys must be unique"),
    "function": ("f(_) := 1\n\nf(_) := 2\n\ny := f(0)\n", "y",
                 "functions must not produce multiple outputs for same inputs"),
}


@pytest.mark.parametrize("rules, doc, message", CONFLICTS.values(), ids=CONFLICTS.keys())
async def test_conflicts_load_and_fail_at_evaluation_with_opas_message(opa, rules, doc, message):
    assert (await opa.put_policy("fedtest/conflict", "package fedtest.conflict\n\n" + rules))[0] == 200
    status, body = await opa.request("GET", "/v1/data/fedtest/conflict/" + doc)
    assert status == 500, body
    assert [(e["code"], e["message"]) for e in body["errors"]] == [("eval_conflict_error", message)]


async def test_read_your_writes(opa):
    await opa.put_policy("fedtest/authz", POLICY)
    await opa.request("PUT", "/v1/data/fedtest/objects", json_body={})
    for i in range(6):
        assert (await opa.request("PUT", f"/v1/data/fedtest/objects/o{i}", json_body={"bad": i % 2 == 1}))[0] == 204
        _, body = await opa.request("GET", "/v1/data/fedtest/authz/deny")
        assert sorted(body["result"]) == [f"o{j} is bad" for j in range(i + 1) if j % 2 == 1]
    assert (await opa.request("DELETE", "/v1/data/fedtest/objects/o1"))[0] == 204
    assert (await opa.request("GET", "/v1/data/fedtest/authz/deny"))[1]["result"] == ["o3 is bad", "o5 is bad"]
    ops = [{"op": "replace", "path": "/o3/bad", "value": False}]
    assert (await opa.request("PATCH", "/v1/data/fedtest/objects", json_body=ops, headers=JSON_PATCH))[0] == 204
    assert (await opa.request("GET", "/v1/data/fedtest/authz/deny"))[1]["result"] == ["o5 is bad"]
    # policy writes too
    await opa.put_policy("fedtest/authz", POLICY.replace('"alice"', '"carol"'))
    assert (await opa.query("fedtest/authz/allow", {"user": "carol"}))[1] == {"result": True}
    await opa.request("DELETE", "/v1/policies/fedtest/authz")
    assert (await opa.query("fedtest/authz/allow", {"user": "carol"}))[1] == {}


INPUT_ECHO = """package fedtest.echo

given if input

user := input.user

seen contains name if {
	some name, obj in data.fedtest.objects
	obj.owner == input.user
}
"""


async def test_input_never_outlives_its_query_and_queries_with_input_see_every_write(opa):
    """Each query sees its own input only (none when it sends none), and the data as written
    just before it — whatever the engine reuses between queries."""
    await opa.put_policy("fedtest/echo", INPUT_ECHO)
    await opa.request("PUT", "/v1/data/fedtest/objects", json_body={"a": {"owner": "alice"}})
    for user in ("alice", "bob", "alice"):
        assert (await opa.query("fedtest/echo/user", {"user": user}))[1] == {"result": user}
        assert await opa.request("GET", "/v1/data/fedtest/echo/given") == (200, {})
        assert await opa.request("GET", "/v1/data/fedtest/echo/user") == (200, {})
    assert (await opa.query("fedtest/echo/seen", {"user": "bob"}))[1] == {"result": []}
    assert (await opa.request("PUT", "/v1/data/fedtest/objects/b", json_body={"owner": "bob"}))[0] == 204
    assert (await opa.query("fedtest/echo/seen", {"user": "bob"}))[1] == {"result": ["b"]}
    assert (await opa.request("PUT", "/v1/data/fedtest/objects/b", json_body={"owner": "carol"}))[0] == 204
    assert (await opa.query("fedtest/echo/seen", {"user": "bob"}))[1] == {"result": []}
    assert (await opa.query("fedtest/echo/seen", {"user": "alice"}))[1] == {"result": ["a"]}
    assert (await opa.request("DELETE", "/v1/data/fedtest/objects/a"))[0] == 204
    assert (await opa.query("fedtest/echo/seen", {"user": "alice"}))[1] == {"result": []}
    assert (await opa.request("POST", "/v1/data/fedtest/echo/user", json_body={"input": None}))[1].get("result") \
        is None


async def test_numeric_segments_index_arrays(opa):
    await opa.request("PUT", "/v1/data/fedtest/list", json_body=["a", "b", "c"])
    assert await opa.request("GET", "/v1/data/fedtest/list/1") == (200, {"result": "b"})
    assert await opa.request("GET", "/v1/data/fedtest/list/7") == (200, {})


# -- data: writes -------------------------------------------------------------------------------------


async def test_put_creates_parents_and_overwrites(opa):
    assert (await opa.request("PUT", "/v1/data/fedtest/a/b/c", json_body={"x": 1}))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest/a") == (200, {"result": {"b": {"c": {"x": 1}}}})
    assert (await opa.request("PUT", "/v1/data/fedtest/a/b", json_body=[1, 2]))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest/a/b") == (200, {"result": [1, 2]})


async def test_put_root_replaces_all_data(opa):
    await opa.request("PUT", "/v1/data/fedtest/old", json_body=1)
    assert (await opa.request("PUT", "/v1/data", json_body={"fedtest": {"new": 2}}))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest") == (200, {"result": {"new": 2}})
    status, body = await opa.request("PUT", "/v1/data", json_body=[1])
    assert status == 400
    assert_error(body, "invalid_parameter")


async def test_put_under_non_object_is_404(opa):
    await opa.request("PUT", "/v1/data/fedtest/scalar", json_body=5)
    for path in ("/v1/data/fedtest/scalar/x", "/v1/data/fedtest/scalar/x/y"):
        status, body = await opa.request("PUT", path, json_body=1)
        assert status == 404, path
        assert_error(body, "resource_conflict")  # storage_write_conflict_error (MakeDir)
    assert await opa.request("GET", "/v1/data/fedtest/scalar") == (200, {"result": 5})


async def test_malformed_put_body_is_400(opa):
    status, body = await opa.request("PUT", "/v1/data/fedtest/x", data="{nope",
                                     headers={"Content-Type": "application/json"})
    assert status == 400
    assert_error(body, "invalid_parameter")


async def test_if_none_match_star(opa):
    inm = {"If-None-Match": "*"}
    assert (await opa.request("PUT", "/v1/data/fedtest/once", json_body=1, headers=inm))[0] == 204
    assert (await opa.request("PUT", "/v1/data/fedtest/once", json_body=2, headers=inm))[0] == 304
    assert await opa.request("GET", "/v1/data/fedtest/once") == (200, {"result": 1})
    assert (await opa.request("PUT", "/v1/data/fedtest/once", json_body=3))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest/once") == (200, {"result": 3})


async def test_escaped_segments_stay_one_key(opa):
    assert (await opa.request("PUT", "/v1/data/fedtest/keys/a%2Fb", json_body=1))[0] == 204
    assert (await opa.request("PUT", "/v1/data/fedtest/keys/c%20d", json_body=2))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest/keys") == (200, {"result": {"a/b": 1, "c d": 2}})
    assert await opa.request("GET", "/v1/data/fedtest/keys/a%2Fb") == (200, {"result": 1})
    assert await opa.request("GET", "/v1/data/fedtest/keys/a/b") == (200, {})
    assert (await opa.request("DELETE", "/v1/data/fedtest/keys/a%2Fb"))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest/keys") == (200, {"result": {"c d": 2}})


async def test_delete_and_missing_delete(opa):
    await opa.request("PUT", "/v1/data/fedtest/gone", json_body=1)
    assert (await opa.request("DELETE", "/v1/data/fedtest/gone"))[0] == 204
    status, body = await opa.request("DELETE", "/v1/data/fedtest/gone")
    assert status == 404
    assert_error(body, "resource_not_found")
    status, body = await opa.request("DELETE", "/v1/data/fedtest/never/there")
    assert status == 404
    assert_error(body, "resource_not_found")


async def test_patch_semantics(opa):
    await opa.request("PUT", "/v1/data/fedtest/doc", json_body={"list": [1, 3], "m": {"k": 1, "gone": 0}})
    ops = [{"op": "add", "path": "/list/-", "value": 4},
           {"op": "add", "path": "/list/1", "value": 2},
           {"op": "replace", "path": "/m/k", "value": 3},
           {"op": "remove", "path": "/m/gone"},
           {"op": "add", "path": "/n", "value": "x"},
           {"op": "add", "path": "/m/a~1b", "value": "slash"}]
    assert (await opa.request("PATCH", "/v1/data/fedtest/doc", json_body=ops, headers=JSON_PATCH))[0] == 204
    assert await opa.request("GET", "/v1/data/fedtest/doc") == (
        200, {"result": {"list": [1, 2, 3, 4], "m": {"k": 3, "a/b": "slash"}, "n": "x"}})
    # op paths are relative to the URL path, here the root
    ops = [{"op": "add", "path": "/fedtest/doc/n", "value": "y"}]
    assert (await opa.request("PATCH", "/v1/data", json_body=ops, headers=JSON_PATCH))[0] == 204
    assert (await opa.request("GET", "/v1/data/fedtest/doc/n"))[1] == {"result": "y"}


@pytest.mark.parametrize("ops", [
    [{"op": "add", "path": "/missing/child", "value": 1}],
    [{"op": "remove", "path": "/nope"}],
    [{"op": "replace", "path": "/nope", "value": 1}],
    [{"op": "add", "path": "/list/9", "value": 1}],
    [{"op": "add", "path": "/n", "value": 1}, {"op": "remove", "path": "/nope"}],  # all or nothing
], ids=["missing-parent", "remove-missing", "replace-missing", "index-out-of-range", "atomic"])
async def test_patch_404_rules(opa, ops):
    await opa.request("PUT", "/v1/data/fedtest/doc", json_body={"list": [1], "m": {}})
    status, body = await opa.request("PATCH", "/v1/data/fedtest/doc", json_body=ops, headers=JSON_PATCH)
    assert status == 404, body
    assert_error(body, "resource_not_found")
    assert await opa.request("GET", "/v1/data/fedtest/doc") == (200, {"result": {"list": [1], "m": {}}})


async def test_patch_bad_operation_is_400(opa):
    await opa.request("PUT", "/v1/data/fedtest/doc", json_body={})
    for ops in ([{"op": "move", "path": "/a", "from": "/b"}], {"op": "add"}):
        status, body = await opa.request("PATCH", "/v1/data/fedtest/doc", json_body=ops, headers=JSON_PATCH)
        assert status == 400, ops
        assert_error(body, "invalid_parameter")


async def test_write_where_a_policy_defines_the_document_is_refused(opa):
    await opa.put_policy("fedtest/authz", POLICY)
    assert (await opa.request("PUT", "/v1/data/fedtest/other", json_body=1))[0] == 204  # beside it: fine
    for method, path, body in (("PUT", "/v1/data/fedtest/authz/allow", False),
                               ("PUT", "/v1/data/fedtest/authz", {"allow": False}),
                               ("PUT", "/v1/data/fedtest", {"authz": 1}),
                               ("PATCH", "/v1/data/fedtest",
                                [{"op": "add", "path": "/authz", "value": {"allow": False}}])):
        status, resp = await opa.request(method, path, json_body=body)
        assert status == 400, (method, path, resp)
        assert_error(resp, "invalid_parameter")
    assert (await opa.query("fedtest/authz/allow", {"user": "alice"}))[1] == {"result": True}
    assert await opa.request("GET", "/v1/data/fedtest/other") == (200, {"result": 1})


async def test_health(opa):
    assert await opa.request("GET", "/health") == (200, {})


async def test_error_bodies_are_json_objects(opa):
    status, body = await opa.request("GET", "/v1/policies/fedtest/none")
    assert status == 404 and set(body) >= {"code", "message"}
    json.dumps(body)
