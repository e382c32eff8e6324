"""OPA REST API conformance: status codes and body shapes, as OPA 1.x answers.

Written against the API only, so they pass against a real OPA too
(FEDPLACE_TEST_OPA_URL); the /_devstack tests are marked devstack_only.
"""

from __future__ import annotations

import time

import aiohttp
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


def assert_error(body, code):
    assert isinstance(body, dict), body
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body


# -- policies ---------------------------------------------------------------------


async def test_policy_put_get_list_delete(opa):
    status, body = await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY,
                                     headers={"Content-Type": "text/plain"})
    assert (status, body) == (200, {})
    status, body = await opa.request("GET", "/v1/policies/fedtest/authz")
    assert status == 200
    assert body["result"]["id"] == "fedtest/authz" and body["result"]["raw"] == POLICY
    assert "ast" in body["result"]
    status, body = await opa.request("GET", "/v1/policies")
    assert status == 200 and "fedtest/authz" in [p["id"] for p in body["result"]]
    status, body = await opa.request("DELETE", "/v1/policies/fedtest/authz")
    assert (status, body) == (200, {})
    status, body = await opa.request("GET", "/v1/policies/fedtest/authz")
    assert status == 404
    assert_error(body, "resource_not_found")


async def test_delete_missing_policy_is_404(opa):
    status, body = await opa.request("DELETE", "/v1/policies/fedtest/nope")
    assert status == 404
    assert_error(body, "resource_not_found")


@pytest.mark.parametrize(
    "source, codes",
    [
        ("package fedtest.bad\n\nallow { true }\n", {"rego_parse_error"}),  # Rego v0 syntax is refused
        ("package fedtest.bad\n\nallow if {\n", {"rego_parse_error"}),
        ("package fedtest.bad\n\nallow if { y }\n", {"rego_unsafe_var_error", "rego_compile_error"}),
        ("package fedtest.bad\n\nx := nosuchfunc(1)\n", {"rego_type_error", "rego_compile_error"}),
    ],
    ids=["v0-syntax", "unterminated", "unsafe-var", "undefined-function"],
)
async def test_compile_errors_are_400_in_opas_shape(opa, source, codes):
    status, body = await opa.request("PUT", "/v1/policies/fedtest/bad.rego", data=source)
    assert status == 400, body
    assert body["code"] == "invalid_parameter"
    assert body["message"] == "error(s) occurred while compiling module(s)"
    assert body["errors"], body
    for err in body["errors"]:
        assert err["code"] in codes, err
        assert err["message"]
        loc = err["location"]
        assert loc["file"] == "fedtest/bad.rego" and loc["row"] >= 1 and "col" in loc


async def test_rego_v1_import_is_accepted(opa):
    src = "package fedtest.v1\n\nimport rego.v1\n\nok if true\n"
    status, _ = await opa.request("PUT", "/v1/policies/fedtest/v1", data=src)
    assert status == 200
    status, body = await opa.request("GET", "/v1/data/fedtest/v1/ok")
    assert body == {"result": True}


async def test_broken_module_leaves_loaded_ones_alone(opa):
    assert (await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY))[0] == 200
    broken = POLICY.replace('allow if input.user == "alice"', "allow if {")
    status, _ = await opa.request("PUT", "/v1/policies/fedtest/authz", data=broken)
    assert status == 400
    status, body = await opa.request("POST", "/v1/data/fedtest/authz/allow", json_body={"input": {"user": "alice"}})
    assert body == {"result": True}
    status, body = await opa.request("GET", "/v1/policies/fedtest/authz")
    assert body["result"]["raw"] == POLICY


async def test_delete_of_module_others_depend_on_is_400(opa):
    assert (await opa.request("PUT", "/v1/policies/fedtest/lib", data=LIB))[0] == 200
    assert (await opa.request("PUT", "/v1/policies/fedtest/user", data=USES_LIB))[0] == 200
    assert (await opa.request("GET", "/v1/data/fedtest/user/four"))[1] == {"result": 4}
    status, body = await opa.request("DELETE", "/v1/policies/fedtest/lib")
    assert status == 400
    assert_error(body, "invalid_parameter")
    assert (await opa.request("GET", "/v1/data/fedtest/user/four"))[1] == {"result": 4}
    assert (await opa.request("DELETE", "/v1/policies/fedtest/user"))[0] == 200
    assert (await opa.request("DELETE", "/v1/policies/fedtest/lib"))[0] == 200


# -- data: queries --------------------------------------------------------------------


async def test_query_with_input_and_undefined(opa):
    await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY)
    status, body = await opa.request("POST", "/v1/data/fedtest/authz/allow", json_body={"input": {"user": "alice"}})
    assert (status, body) == (200, {"result": True})
    status, body = await opa.request("POST", "/v1/data/fedtest/authz/allow", json_body={"input": {"user": "bob"}})
    assert (status, body) == (200, {})  # undefined: no "result"
    status, body = await opa.request("GET", "/v1/data/fedtest/nothing/here")
    assert (status, body) == (200, {})


async def test_package_query_combines_rules(opa):
    await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY)
    status, body = await opa.request("POST", "/v1/data/fedtest/authz", json_body={"input": {"user": "alice"}})
    assert status == 200
    assert body["result"]["allow"] is True and body["result"]["deny"] == []


async def test_malformed_query_body_is_400(opa):
    status, body = await opa.request("POST", "/v1/data/fedtest", data="{not json",
                                     headers={"Content-Type": "application/json"})
    assert status == 400
    assert_error(body, "invalid_parameter")


async def test_read_your_writes(opa):
    await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY)
    for i in range(5):
        status, _ = await opa.request("PUT", f"/v1/data/fedtest/objects/o{i}", json_body={"bad": i % 2 == 1})
        assert status == 204
        _, body = await opa.request("GET", "/v1/data/fedtest/authz/deny")
        assert sorted(body["result"]) == [f"o{j} is bad" for j in range(i + 1) if j % 2 == 1]


# -- data: writes -----------------------------------------------------------------------


async def test_put_creates_parents_and_overwrites(opa):
    assert (await opa.request("PUT", "/v1/data/fedtest/a/b/c", json_body={"x": 1}))[0] == 204
    assert (await opa.request("GET", "/v1/data/fedtest/a"))[1] == {"result": {"b": {"c": {"x": 1}}}}
    assert (await opa.request("PUT", "/v1/data/fedtest/a/b", json_body=[1, 2]))[0] == 204
    assert (await opa.request("GET", "/v1/data/fedtest/a/b"))[1] == {"result": [1, 2]}


async def test_put_under_non_object_is_404(opa):
    await opa.request("PUT", "/v1/data/fedtest/scalar", json_body=5)
    status, body = await opa.request("PUT", "/v1/data/fedtest/scalar/x", json_body=1)
    assert status == 404
    assert_error(body, "resource_not_found")


async def test_if_none_match_star(opa):
    assert (await opa.request("PUT", "/v1/data/fedtest/once", json_body=1, headers={"If-None-Match": "*"}))[0] == 204
    status, _ = await opa.request("PUT", "/v1/data/fedtest/once", json_body=2, headers={"If-None-Match": "*"})
    assert status == 304
    assert (await opa.request("GET", "/v1/data/fedtest/once"))[1] == {"result": 1}


async def test_escaped_segments_stay_one_key(opa):
    assert (await opa.request("PUT", "/v1/data/fedtest/keys/a%2Fb", json_body=1))[0] == 204
    assert (await opa.request("GET", "/v1/data/fedtest/keys"))[1] == {"result": {"a/b": 1}}
    assert (await opa.request("GET", "/v1/data/fedtest/keys/a%2Fb"))[1] == {"result": 1}
    assert (await opa.request("DELETE", "/v1/data/fedtest/keys/a%2Fb"))[0] == 204


async def test_delete_and_missing_delete(opa):
    await opa.request("PUT", "/v1/data/fedtest/gone", json_body=1)
    assert (await opa.request("DELETE", "/v1/data/fedtest/gone"))[0] == 204
    status, body = await opa.request("DELETE", "/v1/data/fedtest/gone")
    assert status == 404
    assert_error(body, "resource_not_found")


async def test_patch_semantics(opa):
    await opa.request("PUT", "/v1/data/fedtest/doc", json_body={"list": [1], "m": {"k": 1}})
    ops = [{"op": "add", "path": "/list/-", "value": 2}, {"op": "replace", "path": "/m/k", "value": 3},
           {"op": "add", "path": "/n", "value": "x"}]
    status, _ = await opa.request("PATCH", "/v1/data/fedtest/doc", json_body=ops,
                                  headers={"Content-Type": "application/json-patch+json"})
    assert status == 204
    assert (await opa.request("GET", "/v1/data/fedtest/doc"))[1] == {"result": {"list": [1, 2], "m": {"k": 3}, "n": "x"}}
    for bad in ([{"op": "add", "path": "/missing/child", "value": 1}],
                [{"op": "remove", "path": "/nope"}],
                [{"op": "replace", "path": "/nope", "value": 1}]):
        status, body = await opa.request("PATCH", "/v1/data/fedtest/doc", json_body=bad,
                                         headers={"Content-Type": "application/json-patch+json"})
        assert status == 404, (bad, body)
        assert_error(body, "resource_not_found")
    assert (await opa.request("GET", "/v1/data/fedtest/doc"))[1]["result"]["n"] == "x"


async def test_write_where_a_policy_defines_the_document_is_refused(opa):
    await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY)
    status, body = await opa.request("PUT", "/v1/data/fedtest/authz/allow", json_body=False)
    assert status in (400, 404), body  # OPA refuses writes that conflict with a policy's document
    assert "code" in body and "message" in body
    _, body = await opa.request("POST", "/v1/data/fedtest/authz/allow", json_body={"input": {"user": "alice"}})
    assert body == {"result": True}


async def test_health(opa):
    assert await opa.request("GET", "/health") == (200, {})


# -- auth ---------------------------------------------------------------------------------


async def test_token_auth(opa_auth):
    for path in ("/health", "/v1/data", "/v1/policies"):
        async with aiohttp.ClientSession() as s:
            async with s.get(opa_auth.url + path) as resp:
                assert resp.status == 401
                assert_error(await resp.json(), "unauthorized")
            async with s.get(opa_auth.url + path, headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401
    assert (await opa_auth.request("GET", "/v1/data"))[0] == 200


# -- fault injection (devstack only) ------------------------------------------------------------


@pytest.mark.devstack_only
async def test_fault_503_with_retry_after_then_recovers(opa):
    await opa.set_faults({"fail": {"path": "/v1/data", "status": 503, "count": 2, "retry_after": 1}})
    async with aiohttp.ClientSession() as s:
        for _ in range(2):
            async with s.post(opa.url + "/v1/data/x", json={}) as resp:
                assert resp.status == 503 and resp.headers["Retry-After"] == "1"
                assert_error(await resp.json(), "internal_error")
    assert (await opa.request("POST", "/v1/data/x", json_body={}))[0] == 200


@pytest.mark.devstack_only
async def test_fault_latency_and_malformed_body(opa):
    await opa.set_faults({"latency": 0.3})
    start = time.monotonic()
    await opa.request("GET", "/v1/data")
    assert time.monotonic() - start >= 0.3
    await opa.clear_faults()
    await opa.set_faults({"fail": {"path": "/v1/data", "status": 200, "body": "{oops"}})
    status, body = await opa.request("GET", "/v1/data")
    assert status == 200 and body is None


@pytest.mark.devstack_only
async def test_wipe_loses_everything_like_a_restart(opa):
    await opa.request("PUT", "/v1/policies/fedtest/authz", data=POLICY)
    await opa.request("PUT", "/v1/data/fedtest/x", json_body=1)
    await opa.wipe()
    assert (await opa.request("GET", "/v1/policies"))[1] == {"result": []}
    assert (await opa.request("GET", "/v1/data/fedtest"))[1] == {}


@pytest.mark.devstack_only
async def test_process_restart_on_same_port(opa_process):
    await opa_process.request("PUT", "/v1/data/fedtest/x", json_body=1)
    opa_process.process.kill()
    opa_process.process.start()
    assert (await opa_process.request("GET", "/v1/data/fedtest/x"))[1] == {}
