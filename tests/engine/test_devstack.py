"""The engine's devstack-only behaviour: fault injection, reset, restarts, auth, CLI,
how data reaches OPA's evaluator.

Each test runs against a devstack engine of its own (tests/engine/conftest.py),
whichever OPA the session uses.
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

POLICY = "package fedtest.count\n\nn := count(data.fedtest.objs)\n"


def assert_error(body, code):
    assert isinstance(body, dict) and body["code"] == code and body["message"], body


# -- fault injection ------------------------------------------------------------------------------


async def test_fault_503_with_retry_after_then_recovers(engine):
    await engine.set_faults({"fail": {"path": "/v1/data", "status": 503, "count": 2, "retry_after": 1}})
    async with aiohttp.ClientSession() as s:
        for _ in range(2):
            async with s.post(engine.url + "/v1/data/x", json={}) as resp:
                assert resp.status == 503 and resp.headers["Retry-After"] == "1"
                assert_error(await resp.json(), "internal_error")
    assert (await engine.request("POST", "/v1/data/x", json_body={}))[0] == 200


async def test_fault_429_uses_opa_error_shape_and_method_filter(engine):
    await engine.set_faults({"fail": {"path": "/v1/data", "status": 429, "count": -1, "method": "PUT"}})
    status, body = await engine.request("PUT", "/v1/data/fedtest/x", json_body=1)
    assert status == 429
    assert_error(body, "too_many_requests")
    assert (await engine.request("GET", "/v1/data/fedtest/x"))[0] == 200  # GETs are untouched
    await engine.clear_faults()
    assert (await engine.request("PUT", "/v1/data/fedtest/x", json_body=1))[0] == 204


async def test_fault_latency_delay_and_malformed_body(engine):
    await engine.set_faults({"latency": 0.3})
    start = time.monotonic()
    await engine.request("GET", "/v1/data")
    assert time.monotonic() - start >= 0.3
    await engine.clear_faults()
    await engine.set_faults({"fail": {"path": "/v1/data", "status": 200, "body": "{oops"}})
    status, body = await engine.request("GET", "/v1/data")
    assert status == 200 and body is None
    await engine.set_faults({"fail": {"path": "/v1/data", "status": 500, "delay": 0.5}})
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as s:
        with pytest.raises(asyncio.TimeoutError):
            async with s.get(engine.url + "/v1/data"):
                pass


async def test_reset_loses_everything_like_a_restart(engine):
    await engine.put_policy("fedtest/count", POLICY)
    await engine.request("PUT", "/v1/data/fedtest/objs/a", json_body=1)
    await engine.set_faults({"latency": 0.01})
    await engine.wipe()
    assert await engine.request("GET", "/v1/policies") == (200, {"result": []})
    assert await engine.request("GET", "/v1/data/fedtest") == (200, {})
    assert (await engine.request("GET", "/_devstack/faults"))[1]["latency"] == 0


async def test_process_restart_on_same_port(engine_process):
    await engine_process.request("PUT", "/v1/data/fedtest/x", json_body=1)
    engine_process.process.kill()
    with pytest.raises(aiohttp.ClientConnectionError):
        await engine_process.request("GET", "/health")
    engine_process.process.start()
    assert await engine_process.request("GET", "/v1/data/fedtest/x") == (200, {})


# -- how data reaches OPA's evaluator --------------------------------------------------------------

SUM = "package fedtest.count\n\nn := sum([o.i | some o in data.fedtest.objs])\n"


async def counters(engine) -> dict:
    return (await engine.devstack_state())["evaluator"]


async def test_new_documents_are_merged_and_other_changes_rebuild(engine):
    """OPA's bindings only merge data: a document at a new path is merged into the loaded
    engine, a replaced or deleted one makes the next query build a new engine, a document
    written as it was changes nothing — and every query sees every write."""
    await engine.put_policy("fedtest/count", SUM)
    await engine.request("PUT", "/v1/data/fedtest/objs", json_body={f"o{i}": {"i": 1} for i in range(100)})
    assert (await engine.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 100}
    before = await counters(engine)
    for i in range(5):
        await engine.request("PUT", f"/v1/data/fedtest/objs/new{i}", json_body={"i": 10})
        assert (await engine.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 100 + 10 * (i + 1)}
    ops = [{"op": "add", "path": "/new9", "value": {"i": 5}}, {"op": "add", "path": "/new8", "value": {"i": 5}}]
    assert (await engine.request("PATCH", "/v1/data/fedtest/objs", json_body=ops))[0] == 204
    await engine.request("PUT", "/v1/data/fedtest/objs/o0", json_body={"i": 1})  # as it was
    assert (await engine.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 160}
    merged = await counters(engine)
    assert (merged["merges"] - before["merges"], merged["builds"], merged["drops"]) == (
        7, before["builds"], before["drops"]), merged
    await engine.request("PUT", "/v1/data/fedtest/objs/o0", json_body={"i": 1000})  # a replacement
    await engine.request("DELETE", "/v1/data/fedtest/objs/o1")
    assert (await counters(engine))["loaded"] is False
    assert (await engine.request("GET", "/v1/data/fedtest/count/n"))[1] == {"result": 160 - 2 + 1000}
    after = await counters(engine)
    # one new engine (two if the machine stalled long enough for the idle warm-up in between)
    assert after["builds"] > merged["builds"] and after["drops"] > merged["drops"], after


async def test_engine_is_built_and_its_queries_prepared_when_idle(engine):
    await engine.put_policy("fedtest/count", SUM)
    await engine.request("PUT", "/v1/data/fedtest/objs", json_body={f"o{i}": {"i": 1} for i in range(3000)})
    assert (await engine.query("fedtest/count/n", {}))[1] == {"result": 3000}
    await engine.request("PUT", "/v1/data/fedtest/objs/o0", json_body={"i": 2})
    assert (await counters(engine))["loaded"] is False
    for _ in range(40):
        await asyncio.sleep(0.1)
        state = await counters(engine)
        if state["loaded"] and state["prepared"]:
            break
    assert state["loaded"] and state["prepared"], state
    assert (await engine.query("fedtest/count/n", {}))[1] == {"result": 3001}
    assert (await counters(engine))["builds"] == state["builds"]


# -- auth --------------------------------------------------------------------------------------------------


async def test_token_auth_guards_every_path(engine_auth):
    async with aiohttp.ClientSession() as s:
        for method, path in (("GET", "/health"), ("GET", "/v1/data"), ("POST", "/v1/data/x"),
                             ("PUT", "/v1/data/x"), ("GET", "/v1/policies"), ("PUT", "/v1/policies/p"),
                             ("GET", "/_devstack/faults"), ("POST", "/_devstack/reset")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {engine_auth.token}"}):
                async with s.request(method, engine_auth.url + path, headers=headers, data="1") as resp:
                    assert resp.status == 401, (method, path, headers)
                    assert await resp.json() == {"code": "unauthorized",
                                                 "message": "request rejected by administrative policy"}
    assert await engine_auth.request("GET", "/health") == (200, {})
    assert (await engine_auth.request("GET", "/v1/data"))[0] == 200
    log = engine_auth.process.log_path.read_text()
    assert engine_auth.token not in log


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
