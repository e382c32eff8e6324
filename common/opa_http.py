"""A lean HTTP/1.1 keep-alive client for one OPA: the webhook's transport for decisions.

aiohttp's client costs ~0.1–0.15 ms of CPU per request (request and response
objects, a writer task, timers, stream readers), as much as everything else
the webhook does per AdmissionReview. Asking OPA needs none of it: one origin,
small JSON bodies with a ``Content-Length``, persistent connections. Here a
request is one write of head and body on an idle connection of the pool, and
the answer is parsed from what ``data_received`` gets (usually in one piece).

What it does, and what it does not:

* HTTP/1.1 with keep-alive; connections are reused last-in first-out, at most
  ``limit`` at a time (more callers wait for one); a connection the server
  closed while idle is noticed (``connection_lost``) and never reused;
* answers framed by ``Content-Length``, ``Transfer-Encoding: chunked`` or the
  end of the connection; ``1xx`` heads skipped; ``Connection: close`` and
  HTTP/1.0 honoured; heads up to 64 KiB and bodies up to ``max_body`` bytes,
  else the connection is dropped with an error;
* TLS through the given ``ssl.SSLContext`` (server name = the URL's host);
* no proxies (aiohttp's session did not read the environment either), no
  redirects, no compression (no ``Accept-Encoding`` is sent);
* ``timeout`` bounds a whole request (waiting for a connection slot,
  connecting, the exchange) and fails it with :class:`TimeoutError`; the
  usual case, an idle connection and a free slot, pays one timer on the
  answer instead of ``asyncio.timeout``'s task machinery (~5 µs of the
  webhook's CPU per decision). A request that times out, is cancelled or
  fails leaves its connection closed, so a late answer is never read as the
  next request's.

Errors are :class:`ConnectionError` (or :class:`OSError`, :class:`ssl.SSLError`
from connecting); :class:`~fedplace.common.opa_client.OpaClient` maps them onto
:class:`~fedplace.common.opa_client.OpaUnavailable` as it does aiohttp's.

Why it stays beside aiohttp's client (a hand-written piece earns its place by a
same-run A/B against the library's way): the webhook with it, against the
webhook asking the real OPA 1.9 server through aiohttp's client, saved 0.11 to
0.55 ms p50 at one request in flight in four runs and 5 % to 28 % throughput at
64 in three (``bench/admission.py --speedup-ab``; docs/benchmarks.md). Switched off by
the webhook's ``--speedups`` without ``lean-http``.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HttpAnswer", "OpaConnectionPool", "ProtocolError"]

MAX_HEAD = 64 * 1024
DEFAULT_MAX_BODY = 256 * 1024 * 1024
MAX_HEADS = 256  # request heads kept encoded (see OpaConnectionPool._head)


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.1 as this client reads it (or is too large)."""


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]  # lower-cased names; a repeated header keeps its last value
    body: bytes


class _Connection(asyncio.Protocol):
    """One connection; reads one answer at a time (the pool never pipelines)."""

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.buffer = bytearray()
        self.waiter: asyncio.Future[HttpAnswer] | None = None
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.keep_alive = True
        self.framing = ""  # "", "length", "chunked", "close"
        self.remaining = 0
        self.chunks: list[bytes] = []
        self.size = 0

    # -- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            self._fail(ProtocolError("data received while no request was waiting for an answer"))
            return
        self.buffer += data
        try:
            answer = self._parse()
        except ProtocolError as exc:
            self._fail(exc)
            return
        if answer is not None:
            if self.buffer:  # nothing may follow an answer: no request was pipelined
                self.keep_alive = False
            self.waiter.set_result(answer)

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            if self.framing == "close" and exc is None:  # the body ran to the end of the connection
                waiter.set_result(HttpAnswer(self.status, self.headers, b"".join(self.chunks)))
            else:
                cause = f": {exc}" if exc else ""
                waiter.set_exception(ConnectionError(f"connection closed before the answer was complete{cause}"))

    # -- one exchange -------------------------------------------------------------------

    async def exchange(self, request: bytes, deadline: float | None = None) -> HttpAnswer:
        """Send ``request`` and read its answer; :class:`TimeoutError` at ``deadline`` (the
        loop's clock), after which the connection is closed."""
        assert self.transport is not None
        self._reset()
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        timer = loop.call_at(deadline, self._expired, waiter) if deadline is not None else None
        self.transport.write(request)
        try:
            return await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    def _expired(self, waiter: asyncio.Future[HttpAnswer]) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError("no answer before the deadline"))
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.close()

    # -- parsing --------------------------------------------------------------------------

    def _parse(self) -> HttpAnswer | None:
        buf = self.buffer
        while not self.framing:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError(f"answer head larger than {MAX_HEAD} bytes")
                return None
            self._head(bytes(buf[:end]))
            del buf[:end + 4]
        if self.framing == "length":
            if len(buf) < self.remaining:
                return None
            body = bytes(buf[:self.remaining])
            del buf[:self.remaining]
            return HttpAnswer(self.status, self.headers, body)
        if self.framing == "chunked":
            return self._chunks()
        self._take(bytes(buf))  # "close": everything up to the end of the connection
        buf.clear()
        return None

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise ProtocolError(f"malformed header line: {line[:80]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        if 100 <= status < 200:
            return  # an interim answer (100 Continue…): the real head follows
        self.status, self.headers = status, headers
        connection = headers.get("connection", "").lower()
        self.keep_alive = ("close" not in connection if parts[0] == b"HTTP/1.1" else "keep-alive" in connection)
        if status in (204, 304):
            self.framing, self.remaining = "length", 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self.framing = "chunked"
        elif "content-length" in headers:
            value = headers["content-length"]
            if not value.isdigit():
                raise ProtocolError(f"bad Content-Length {value[:40]!r}")
            self.framing, self.remaining = "length", int(value)
            if self.remaining > self.max_body:
                raise ProtocolError(f"answer of {self.remaining} bytes exceeds the limit of {self.max_body}")
        else:
            self.framing, self.keep_alive = "close", False

    def _take(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.max_body:
            raise ProtocolError(f"answer exceeds the limit of {self.max_body} bytes")
        self.chunks.append(data)

    def _chunks(self) -> HttpAnswer | None:
        buf = self.buffer
        while True:
            if self.remaining:  # inside a chunk: its data, then CRLF
                if len(buf) < self.remaining + 2:
                    return None
                if buf[self.remaining:self.remaining + 2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                self._take(bytes(buf[:self.remaining]))
                del buf[:self.remaining + 2]
                self.remaining = 0
            end = buf.find(b"\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError("chunk size line too long")
                return None
            size_text = bytes(buf[:end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_text[:40]!r}") from None
            if size:
                del buf[:end + 2]
                self.remaining = size
                continue
            # last chunk: optional trailers, then an empty line
            if buf[end:end + 4] == b"\r\n\r\n":
                del buf[:end + 4]
            else:
                trailer_end = buf.find(b"\r\n\r\n", end)
                if trailer_end < 0:
                    return None
                del buf[:trailer_end + 4]
            return HttpAnswer(self.status, self.headers, b"".join(self.chunks))


class OpaConnectionPool:
    """Keep-alive connections to the origin of ``base_url``; see the module docstring.

    Bound to the event loop it is first used in."""

    def __init__(self, base_url: str, ssl_context: ssl.SSLContext | None = None, *, limit: int = 64,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = (ssl_context or ssl.create_default_context()) if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        host_header = parts.netloc.rpartition("@")[2]
        self._host_line = f"Host: {host_header}\r\n".encode()
        self.max_body = max_body
        self.limit = limit
        self.loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], bytes] = {}

    @property
    def connections(self) -> int:
        """Connections open now (idle or busy)."""
        return len(self._open)

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None, timeout: float | None = None) -> HttpAnswer:
        """Send one request (``path`` under the URL's path) and read its answer, all within
        ``timeout`` seconds if given (:class:`TimeoutError` otherwise)."""
        request = b"".join((self._head(method, path, headers), b"Content-Length: %d\r\n\r\n" % len(body or b""),
                            body or b""))
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self.loop = loop
            self._slots = asyncio.Semaphore(self.limit)
        slots = self._slots
        deadline = None if timeout is None else loop.time() + timeout
        if slots.locked():  # every slot busy: wait for one, within the deadline
            async with asyncio.timeout_at(deadline):
                await slots.acquire()
        else:
            await slots.acquire()  # free: taken without suspending
        try:
            conn = self._idle_connection()
            if conn is None:
                async with asyncio.timeout_at(deadline):
                    conn = await self._connect()
            try:
                answer = await conn.exchange(request, deadline)
            except BaseException:
                self._drop(conn)
                raise
            if conn.keep_alive and not conn.closed:
                self._idle.append(conn)
            else:
                self._drop(conn)
            return answer
        finally:
            slots.release()

    def _head(self, method: str, path: str, headers: dict[str, str] | None) -> bytes:
        """The request line, Host and ``headers`` (without Content-Length), encoded once per
        distinct request: the decision queries of a webhook are all the same."""
        key = (method, path, tuple(headers.items()) if headers else ())
        head = self._heads.get(key)
        if head is None:
            lines = [f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode(), self._host_line]
            for name, value in (headers or {}).items():
                if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                    raise ValueError(f"line break in the value of header {name}")
                lines.append(f"{name}: {value}\r\n".encode())
            head = b"".join(lines)
            if len(self._heads) >= MAX_HEADS:
                self._heads.clear()
            self._heads[key] = head
        return head

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._open.discard(conn)
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: _Connection(self.max_body), self.host, self.port,
                                               ssl=self.ssl, server_hostname=self.host if self.ssl else None)
        self._open.add(conn)
        return conn

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._open.discard(conn)

    def close(self) -> None:
        """Close every connection; requests in flight fail with :class:`ConnectionError`."""
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
