"""common.opa_http (the webhook's lean OPA transport) against small local servers, and
OpaClient(lean_http=True) giving the same answers and typed errors as with aiohttp."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
import trustme
from aiohttp import web

from devstack.launch import free_port
from fedplace.common.opa_client import (
    OpaClient,
    OpaMalformedResponse,
    OpaRequestError,
    OpaSettings,
    OpaTimeout,
    OpaUnavailable,
)
from fedplace.common.opa_http import OpaConnectionPool

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context).start()
    return runner, f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"


@pytest.fixture
async def server() -> AsyncIterator[Callable[..., Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> str:
        runner, url = await serve(handler, ssl_context)
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response({"method": request.method, "path": request.path_qs, "body": body.decode(),
                              "auth": request.headers.get("Authorization", ""),
                              "peer": request.transport.get_extra_info("peername")[1]})  # type: ignore[union-attr]


async def test_keep_alive_one_connection_for_sequential_requests(server: Any) -> None:
    url = await server(echo)
    pool = OpaConnectionPool(url + "/prefix/")
    peers = set()
    for i in range(5):
        answer = await pool.request("POST", f"/v1/data/x?i={i}", b'{"input":1}', {"Content-Type": "application/json"})
        assert answer.status == 200 and answer.headers["content-type"].startswith("application/json")
        doc = __import__("json").loads(answer.body)
        assert doc["path"] == f"/prefix/v1/data/x?i={i}" and doc["body"] == '{"input":1}'
        peers.add(doc["peer"])
    assert len(peers) == 1 and pool.connections == 1
    pool.close()
    assert pool.connections == 0


async def test_chunked_close_delimited_and_connection_close_answers(server: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        kind = request.query["kind"]
        if kind == "chunked":
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for part in (b'{"result":', b'"' + b"x" * 70000 + b'"', b"}"):
                await resp.write(part)
            await resp.write_eof()
            return resp
        resp = web.Response(body=b'{"result":"closed"}')
        resp.force_close()
        return resp

    url = await server(handler)
    pool = OpaConnectionPool(url)
    chunked = await pool.request("GET", "/?kind=chunked")
    assert chunked.status == 200 and len(chunked.body) == len(b'{"result":""}') + 70000
    assert pool.connections == 1  # kept
    closed = await pool.request("GET", "/?kind=close")
    assert closed.body == b'{"result":"closed"}' and pool.connections == 0  # the server said close
    assert (await pool.request("GET", "/?kind=chunked")).status == 200  # a new connection
    pool.close()


async def test_a_connection_the_server_closed_while_idle_is_not_reused(server: Any) -> None:
    url = await server(echo)
    pool = OpaConnectionPool(url)
    first = await pool.request("GET", "/")
    conn = pool._idle[0]
    assert conn.transport is not None
    conn.transport.close()  # as if the server had closed it
    await asyncio.sleep(0.05)
    second = await pool.request("GET", "/")
    assert first.status == second.status == 200
    pool.close()


def held_until(release: asyncio.Event) -> Handler:
    """A handler answering ``?n=`` with its value; with ``?slow=1``, only once ``release`` is set."""

    async def slow(request: web.Request) -> web.Response:
        if request.query.get("slow"):
            await release.wait()
        return web.Response(text=request.query.get("n", ""))

    return slow


async def test_a_cancelled_request_leaves_no_connection_behind(server: Any) -> None:
    release = asyncio.Event()
    url = await server(held_until(release))
    pool = OpaConnectionPool(url)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await pool.request("GET", "/?slow=1&n=late")
    assert pool.connections == 0  # dropped: its late answer can never be read as another's
    release.set()
    assert (await pool.request("GET", "/?n=next")).body == b"next"
    pool.close()


async def test_the_timeout_bounds_the_answer_the_wait_for_a_slot_and_the_connect(server: Any) -> None:
    release = asyncio.Event()
    url = await server(held_until(release))
    pool = OpaConnectionPool(url, limit=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):  # the answer never comes
        await pool.request("GET", "/?slow=1&n=late", timeout=0.2)
    assert 0.2 <= loop.time() - started < 2
    assert pool.connections == 0  # dropped: its late answer can never be read as another's

    hanging = asyncio.create_task(pool.request("GET", "/?slow=1&n=first"))
    await asyncio.sleep(0.05)
    with pytest.raises(TimeoutError):  # the only slot is taken
        await pool.request("GET", "/?n=second", timeout=0.1)
    assert not hanging.done()
    release.set()
    assert (await hanging).body == b"first"
    assert (await pool.request("GET", "/?n=next", timeout=1)).body == b"next"  # a timer cancelled, not fired
    await asyncio.sleep(0.05)
    assert pool.connections == 1
    pool.close()

    # a listener that never accepts: connecting does not end before the timeout
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        host, port = sock.getsockname()
        stuck = OpaConnectionPool(f"https://{host}:{port}")  # the TLS handshake never gets an answer
        with pytest.raises(TimeoutError):
            await stuck.request("GET", "/", timeout=0.2)
        assert stuck.connections == 0
        stuck.close()


async def test_at_most_limit_connections(server: Any) -> None:
    busy = 0
    most = 0

    async def counting(request: web.Request) -> web.Response:
        nonlocal busy, most
        busy += 1
        most = max(most, busy)
        await asyncio.sleep(0.02)
        busy -= 1
        return web.Response(text="ok")

    url = await server(counting)
    pool = OpaConnectionPool(url, limit=3)
    answers = await asyncio.gather(*(pool.request("GET", "/") for _ in range(12)))
    assert all(a.body == b"ok" for a in answers)
    assert most <= 3 and pool.connections <= 3
    pool.close()


async def test_answers_over_the_limit_and_garbage_are_errors(server: Any) -> None:
    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    url = await server(big)
    pool = OpaConnectionPool(url, max_body=1000)
    with pytest.raises(ConnectionError, match="exceeds the limit"):
        await pool.request("GET", "/")
    assert pool.connections == 0

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SPDY/9 what\r\n\r\n")
        await writer.drain()

    srv = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    pool = OpaConnectionPool(f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectionError, match="status line"):
        await pool.request("GET", "/")
    srv.close()


async def test_tls_verified_with_the_given_ca(server: Any) -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    url = await server(echo, server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    pool = OpaConnectionPool(url, client_ctx)
    assert (await pool.request("GET", "/")).status == 200
    pool.close()
    with pytest.raises(ssl.SSLError):
        await OpaConnectionPool(url, ssl.create_default_context()).request("GET", "/")  # not trusted


async def test_opa_client_answers_and_errors_are_those_of_aiohttp(server: Any) -> None:
    async def opa(request: web.Request) -> web.Response:
        kind = request.path.rsplit("/", 1)[-1]
        if kind == "ok":
            return web.json_response({"result": {"auth": request.headers.get("Authorization"),
                                                 "encoding": request.headers.get("Accept-Encoding")}})
        if kind == "busy":
            return web.json_response({"code": "internal_error", "message": "busy"}, status=503,
                                     headers={"Retry-After": "2"})
        if kind == "missing":
            return web.json_response({"code": "resource_not_found", "message": "no"}, status=404)
        if kind == "slow":
            await asyncio.sleep(2)
        return web.Response(body=b"{not json", content_type="application/json")

    url = await server(opa)
    closed = f"http://127.0.0.1:{free_port()}"
    for lean in (False, True):
        async with OpaClient(OpaSettings(url=url, token="t0k", lean_http=lean)) as c:
            # no Accept-Encoding: OPA would gzip every answer over 1 KiB (its CPU and ours)
            assert await c.query("x/ok", {"a": 1}) == {"auth": "Bearer t0k", "encoding": None}
            with pytest.raises(OpaUnavailable) as busy:
                await c.query("x/busy", {})
            assert busy.value.status == 503 and busy.value.retry_after == 2.0 and "busy" in busy.value.message
            with pytest.raises(OpaRequestError) as missing:
                await c.query("x/missing", {})
            assert missing.value.status == 404
            with pytest.raises(OpaMalformedResponse):
                await c.query("x/bad", {})
            # No answer in time: a timeout, told apart by its type (transient, as every OpaUnavailable).
            with pytest.raises(OpaTimeout):
                await c.query("x/slow", {}, timeout=0.2)
            assert not isinstance(busy.value, OpaTimeout) and not isinstance(missing.value, OpaTimeout)
        async with OpaClient(OpaSettings(url=closed, lean_http=lean, timeout=1)) as c:
            with pytest.raises(OpaUnavailable) as refused:
                await c.query("x/ok", {})
            assert not isinstance(refused.value, OpaTimeout)
