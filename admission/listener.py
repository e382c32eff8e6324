"""The webhook's listener: aiohttp with every part of reading a request bounded in time,
and client mistakes logged as what they are.

aiohttp bounds the body size but not the time a client may take: a
connection that sends half a request head, or a body one byte a minute, is
kept for as long as the client likes (its keep-alive timer only closes
connections that sent nothing). Here:

* **request head**: from its first byte, a request's head (request line and
  headers) must be complete within ``read_timeout``, else the connection is
  closed (:class:`BoundedRequestHandler`, armed on data, disarmed by
  :func:`head_received` when the application sees the request);
* **body**: read by the handler within ``read_timeout`` (408 otherwise, see
  ``admission.handler.read_bounded``);
* **TLS handshake**: ``read_timeout`` too, and so is the time the rest of a
  body not read (after a 408, 413 or 400) is drained so the client sees the
  answer (aiohttp's ``lingering_time``, 10 s by default);
* **idle keep-alive connections** (nothing sent): closed after
  ``idle_timeout``, longer than the API server's own idle timeout (90 s) so
  it is the client that closes them, without racing a new request.

Malformed HTTP, which aiohttp answers 400 itself and logs at ERROR with a
traceback, goes through :class:`ServerLog` instead: one WARNING line without
traceback, counted in ``fedplace_admission_bad_http_total``. Genuine
server errors keep their traceback.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from typing import Any

from aiohttp import http_exceptions, web

from fedplace.admission import metrics

__all__ = ["BoundedRequestHandler", "ServerLog", "listen", "timing_middleware"]

log = logging.getLogger("fedplace.admission.http")

_CLIENT_ERRORS = (http_exceptions.HttpProcessingError, web.RequestPayloadError, ConnectionError, asyncio.TimeoutError)


class ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger: client errors become one WARNING line, no traceback."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:  # type: ignore[override]
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(exc, _CLIENT_ERRORS):
            metrics.BAD_HTTP.inc()
            remote = args[0] if args else ""
            log.warning("bad HTTP request", extra={"remote": str(remote), "error": f"{type(exc).__name__}: {exc}"})
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)


class BoundedRequestHandler(web.RequestHandler):
    """aiohttp's per-connection protocol with a deadline for each request head."""

    def __init__(self, manager: web.Server, *, loop: asyncio.AbstractEventLoop, head_timeout: float,
                 **kwargs: Any) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self.event_loop = loop
        self.head_timeout = head_timeout
        self.awaiting_head = True
        self.head_timer: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        if self.awaiting_head and self.head_timer is None and data:
            self.head_timer = self.event_loop.call_later(self.head_timeout, self._head_late)
        super().data_received(data)

    def head_received(self) -> None:
        self.awaiting_head = False
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def request_done(self) -> None:
        self.awaiting_head = True

    def _head_late(self) -> None:
        self.head_timer = None
        if not self.awaiting_head:
            return
        metrics.REQUESTS.labels("aborted").inc()
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        log.warning("request head not complete in time: connection closed",
                    extra={"remote": str(peer[0] if peer else ""), "timeout_s": self.head_timeout})
        self.force_close()
        if self.transport is not None:
            self.transport.close()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """A request the HTTP layer refused (malformed head, a body it cannot decode — e.g.
        ``Content-Encoding: br`` without a decoder): the webhook's JSON error, not aiohttp's
        plain text. Anything else keeps aiohttp's answer."""
        if status != 400 or not isinstance(exc, http_exceptions.HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        if request.writer.output_size > 0:  # an answer has begun: nothing more can be said
            raise ConnectionError("response is sent already, cannot send another with the error")
        text = exc.message or type(exc).__name__
        resp = web.json_response({"error": f"bad HTTP request: {text}", "code": 400}, status=400)
        resp.force_close()
        return resp

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        super().connection_lost(exc)


@web.middleware
async def timing_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """The application has the request, so its head arrived in time; once answered, the next
    request's head is timed from its first byte."""
    proto = request.protocol
    bounded = isinstance(proto, BoundedRequestHandler)
    if bounded:
        proto.head_received()
    try:
        return await handler(request)
    finally:
        if bounded:
            proto.request_done()


async def listen(runner: web.AppRunner, host: str, port: int, *, ssl_context: ssl.SSLContext | None,
                 read_timeout: float, idle_timeout: float, reuse_port: bool = False) -> asyncio.AbstractServer:
    """Listen on ``host:port`` with :class:`BoundedRequestHandler` for the set-up ``runner``
    (``reuse_port``: alongside the other processes of ``--workers``, SO_REUSEPORT).

    Close the returned server before ``runner.cleanup()``, which then lets in-flight requests
    finish (the handlers register with the runner's server)."""
    server = runner.server
    assert server is not None, "runner.setup() first"
    loop = asyncio.get_running_loop()

    def protocol() -> BoundedRequestHandler:
        # lingering_time: after an answer that did not read the whole body (408, 413, 400), the rest is
        # read and dropped for at most read_timeout more, so the client sees the answer.
        return BoundedRequestHandler(server, loop=loop, head_timeout=read_timeout, keepalive_timeout=idle_timeout,
                                     lingering_time=read_timeout, access_log=None,
                                     logger=ServerLog())  # type: ignore[arg-type]

    return await loop.create_server(protocol, host, port, ssl=ssl_context, reuse_port=reuse_port or None,
                                    ssl_handshake_timeout=read_timeout if ssl_context is not None else None)
