"""The engine's devstack-only behaviour: fault injection, reset, restarts, auth, CLI.

Everything here needs the devstack engine (``/_devstack`` admin routes, its own
processes); it is skipped when ``FEDPLACE_TEST_OPA_URL`` points at a real OPA.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from devstack.engine.server import make_app
from devstack.engine.state import EngineState
from devstack.launch import ServerProcess, free_port

pytestmark = pytest.mark.devstack_only

POLICY = "package fedtest.count\n\nn := count(data.fedtest.objs)\n"


def assert_error(body, code):
    assert isinstance(body, dict) and body["code"] == code and body["message"], body


# -- fault injection ------------------------------------------------------------------------------


async def test_fault_503_with_retry_after_then_recovers(opa):
    await opa.set_faults({"fail": {"path": "/v1/data", "status": 503, "count": 2, "retry_after": 1}})
    async with aiohttp.ClientSession() as s:
        for _ in range(2):
            async with s.post(opa.url + "/v1/data/x", json={}) as resp:
                assert resp.status == 503 and resp.headers["Retry-After"] == "1"
                assert_error(await resp.json(), "internal_error")
    assert (await opa.request("POST", "/v1/data/x", json_body={}))[0] == 200


async def test_fault_429_uses_opa_error_shape_and_method_filter(opa):
    await opa.set_faults({"fail": {"path": "/v1/data", "status": 429, "count": -1, "method": "PUT"}})
    status, body = await opa.request("PUT", "/v1/data/fedtest/x", json_body=1)
    assert status == 429
    assert_error(body, "too_many_requests")
    assert (await opa.request("GET", "/v1/data/fedtest/x"))[0] == 200  # GETs are untouched
    await opa.clear_faults()
    assert (await opa.request("PUT", "/v1/data/fedtest/x", json_body=1))[0] == 204


async def test_fault_latency_delay_and_malformed_body(opa):
    await opa.set_faults({"latency": 0.3})
    start = time.monotonic()
    await opa.request("GET", "/v1/data")
    assert time.monotonic() - start >= 0.3
    await opa.clear_faults()
    await opa.set_faults({"fail": {"path": "/v1/data", "status": 200, "body": "{oops"}})
    status, body = await opa.request("GET", "/v1/data")
    assert status == 200 and body is None
    await opa.set_faults({"fail": {"path": "/v1/data", "status": 500, "delay": 0.5}})
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as s:
        with pytest.raises(asyncio.TimeoutError):
            async with s.get(opa.url + "/v1/data"):
                pass


async def test_reset_loses_everything_like_a_restart(opa):
    await opa.put_policy("fedtest/count", POLICY)
    await opa.request("PUT", "/v1/data/fedtest/objs/a", json_body=1)
    await opa.set_faults({"latency": 0.01})
    await opa.wipe()
    assert await opa.request("GET", "/v1/policies") == (200, {"result": []})
    assert await opa.request("GET", "/v1/data/fedtest") == (200, {})
    assert (await opa.request("GET", "/_devstack/faults"))[1]["latency"] == 0


async def test_process_restart_on_same_port(opa_process):
    await opa_process.request("PUT", "/v1/data/fedtest/x", json_body=1)
    opa_process.process.kill()
    with pytest.raises(aiohttp.ClientConnectionError):
        await opa_process.request("GET", "/health")
    opa_process.process.start()
    assert await opa_process.request("GET", "/v1/data/fedtest/x") == (200, {})


# -- incremental data sync ------------------------------------------------------------------------------


async def test_single_object_writes_are_incremental(opa):
    """Writes interleaved with queries must not reload every object into the interpreter."""
    await opa.put_policy("fedtest/count", POLICY)
    await opa.request("PUT", "/v1/data/fedtest/objs", json_body={f"o{i}": {"i": i} for i in range(3000)})
    assert (await opa.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 3000}
    before = (await opa.devstack_state())["mirror"]
    for i in range(60):
        await opa.request("PUT", f"/v1/data/fedtest/objs/o{i}", json_body={"i": -i})
        await opa.request("PUT", f"/v1/data/fedtest/objs/new{i}", json_body={"i": i})
        await opa.request("DELETE", f"/v1/data/fedtest/objs/o{1000 + i}")
        assert (await opa.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 3000}
    after = (await opa.devstack_state())["mirror"]
    assert after["rebuilds"] - before["rebuilds"] <= 2, after
    assert after["merges"] > before["merges"] and after["overlays"] > before["overlays"], after


async def test_pending_reload_runs_when_idle(opa):
    await opa.put_policy("fedtest/count", POLICY)
    await opa.request("PUT", "/v1/data/fedtest/objs", json_body={f"o{i}": {"i": i} for i in range(3000)})
    assert (await opa.devstack_state())["mirror"]["stale"] is True  # a 6,000-node replacement: reload
    for _ in range(40):
        await asyncio.sleep(0.1)
        if not (await opa.devstack_state())["mirror"]["stale"]:
            break
    assert (await opa.devstack_state())["mirror"]["stale"] is False
    assert (await opa.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 3000}


# -- the OPA evaluator (--evaluator opa) ----------------------------------------------------------------------


async def test_opa_evaluator_answers_with_opas_own_evaluation(opa_evaluator_server):
    """The engine started with ``--evaluator opa`` names it, and its evaluation errors are
    OPA's own (regorus words the same failure differently: test_opa_differences.py)."""
    opa = opa_evaluator_server
    await opa.reset_state()
    assert (await opa.devstack_state())["evaluator"] == "opa"
    assert (await opa.put_policy("fedtest/bad", "package fedtest.bad\n\nn := count(input.five)\n"))[0] == 200
    status, body = await opa.query("fedtest/bad/n", {"five": 5})
    assert status == 500 and body["message"] == "error(s) occurred while evaluating query", body
    assert body["errors"] == [{"code": "eval_type_error",
                               "message": "count: operand 1 must be one of {array, object, set, string} but got number",
                               "location": {"file": "fedtest/bad", "row": 3, "col": 1}}]


async def test_opa_evaluator_merges_additions_and_reloads_after_replacements(opa_evaluator_server):
    """OPA's bindings only merge data: a new document is merged into the loaded engine, a
    replaced or deleted one makes the next query reload — and every query sees every write."""
    opa = opa_evaluator_server
    await opa.reset_state()
    await opa.put_policy("fedtest/count", POLICY.replace("count(data.fedtest.objs)",
                                                         "sum([o.i | some o in data.fedtest.objs])"))
    await opa.request("PUT", "/v1/data/fedtest/objs", json_body={f"o{i}": {"i": 1} for i in range(100)})
    assert (await opa.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 100}
    before = (await opa.devstack_state())["mirror"]
    for i in range(5):  # additions: merged, no reload
        await opa.request("PUT", f"/v1/data/fedtest/objs/new{i}", json_body={"i": 10})
        assert (await opa.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 100 + 10 * (i + 1)}
    merged = (await opa.devstack_state())["mirror"]
    assert merged["merges"] - before["merges"] == 5 and merged["rebuilds"] == before["rebuilds"], merged
    await opa.request("PUT", "/v1/data/fedtest/objs/o0", json_body={"i": 1000})  # a replacement
    await opa.request("DELETE", "/v1/data/fedtest/objs/o1")
    assert (await opa.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 150 - 2 + 1000}
    # one reload (two if the machine stalled long enough for the idle reload in between)
    assert (await opa.devstack_state())["mirror"]["rebuilds"] > merged["rebuilds"]


def test_cli_rejects_an_unknown_evaluator():
    proc = subprocess.run(_engine_cmd("--evaluator", "wasm"), capture_output=True, text=True, timeout=20)
    assert proc.returncode == 2 and "--evaluator" in proc.stderr


# -- auth --------------------------------------------------------------------------------------------------


async def test_token_auth_guards_every_path(opa_auth):
    async with aiohttp.ClientSession() as s:
        for method, path in (("GET", "/health"), ("GET", "/v1/data"), ("POST", "/v1/data/x"),
                             ("PUT", "/v1/data/x"), ("GET", "/v1/policies"), ("PUT", "/v1/policies/p"),
                             ("GET", "/_devstack/faults"), ("POST", "/_devstack/reset")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {opa_auth.token}"}):
                async with s.request(method, opa_auth.url + path, headers=headers, data="1") as resp:
                    assert resp.status == 401, (method, path, headers)
                    assert await resp.json() == {"code": "unauthorized",
                                                 "message": "request rejected by administrative policy"}
    assert await opa_auth.request("GET", "/health") == (200, {})
    assert (await opa_auth.request("GET", "/v1/data"))[0] == 200
    log = opa_auth.process.log_path.read_text()
    assert opa_auth.token not in log


# -- robustness -------------------------------------------------------------------------------------------


async def test_unexpected_exception_is_a_500_without_traceback(aiohttp_client, monkeypatch):
    state = EngineState()
    client = await aiohttp_client(make_app(state=state))

    def boom(*_a, **_k):
        raise KeyError("secret internals")

    monkeypatch.setattr(state, "read", boom)
    resp = await client.get("/v1/data/x")
    assert resp.status == 500
    body = await resp.json()
    assert body["code"] == "internal_error" and "Traceback" not in body["message"]
    assert "secret internals" not in body["message"]


async def test_bad_url_escape_is_400(aiohttp_client):
    client = await aiohttp_client(make_app())
    resp = await client.put("/v1/data/a%ff", data="1")
    assert resp.status == 400
    assert_error(await resp.json(), "invalid_parameter")


def _engine_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "devstack.engine", *args]


def test_cli_rejects_bad_flags(tmp_path: Path):
    empty = tmp_path / "empty.token"
    empty.write_text("  \n")
    for args in (["--listen", "nope"], ["--token-file", str(tmp_path / "missing")], ["--token-file", str(empty)]):
        proc = subprocess.run(_engine_cmd(*args), capture_output=True, text=True, timeout=20)
        assert proc.returncode == 2, (args, proc.stderr)


def test_ready_fast_json_logs_and_graceful_sigterm(tmp_path: Path):
    port = free_port()
    server = ServerProcess("engine-cli", ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}",
                                         "--log-level", "debug"], "/health", tmp_path, port=port)
    start = time.monotonic()
    server.start(timeout=10)
    ready = time.monotonic() - start
    assert ready < 5, ready  # typically ~0.3 s; generous for loaded CI machines
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(10) == 0
    lines = [ln for ln in server.log_path.read_text().splitlines() if ln.startswith("{")]
    assert any('"msg":"serving"' in ln for ln in lines) and any('"msg":"shutting down"' in ln for ln in lines)
