"""The plugin's side of the protocol: serve one decision function as any of the three types.

A plugin is an ``async def handler(pod: dict) -> AdmitResult``. These helpers
put it behind the transports the manager speaks (:mod:`fedplace.nodeadmit.plugins`):

* :func:`run_shell` — read the pod from stdin, write the AdmitResult to stdout;
* :func:`serve_socket` — a Unix domain socket server, one pod per connection
  (read to EOF, answer, close); the socket file is created mode 0660 and a
  stale one is replaced;
* :func:`serve_grpc` — ``PodAdmissionPlugin/Admit`` on a local port.

A request that is not a JSON object is answered with a rejection
(:data:`REASON_BAD_REQUEST`); a handler that raises is answered with a
rejection (:data:`REASON_PLUGIN_ERROR`) — a plugin fails closed too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any, Awaitable, BinaryIO, Callable

from fedplace.nodeadmit.plugins import MAX_ANSWER, read_capped
from fedplace.nodeadmit.result import AdmitResult

__all__ = ["Handler", "REASON_BAD_REQUEST", "REASON_PLUGIN_ERROR", "answer", "run_shell", "serve_grpc",
           "serve_socket"]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[AdmitResult]]

REASON_BAD_REQUEST = "InvalidPodAdmissionRequest"
REASON_PLUGIN_ERROR = "PodAdmissionPluginError"
MAX_REQUEST = 16 << 20  # bytes of an encoded pod accepted


async def answer(handler: Handler, raw: bytes) -> AdmitResult:
    """Decode the request and run the handler; never raises."""
    try:
        pod = json.loads(raw)
    except ValueError as exc:
        return AdmitResult.reject(REASON_BAD_REQUEST, f"the request is not JSON: {exc}")
    if not isinstance(pod, dict):
        return AdmitResult.reject(REASON_BAD_REQUEST, "the request is not a JSON object (a Pod)")
    try:
        return await handler(pod)
    except Exception as exc:  # noqa: BLE001 - fail closed
        log.exception("pod admission handler failed")
        return AdmitResult.reject(REASON_PLUGIN_ERROR, f"{exc.__class__.__name__}: {exc}")


async def run_shell(handler: Handler, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """The shell type: one pod from stdin, its AdmitResult on stdout; returns the exit status (0)."""
    raw = (stdin or sys.stdin.buffer).read(MAX_REQUEST + 1)
    if len(raw) > MAX_REQUEST:
        result = AdmitResult.reject(REASON_BAD_REQUEST, f"the request is larger than {MAX_REQUEST} bytes")
    else:
        result = await answer(handler, raw)
    out = stdout or sys.stdout.buffer
    out.write(result.encode() + b"\n")
    out.flush()
    return 0


async def serve_socket(handler: Handler, path: str | Path, mode: int = 0o660) -> asyncio.AbstractServer:
    """Listen on the Unix socket ``path`` (started; close it to stop)."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise FileExistsError(f"{path} exists and is not a socket")
        path.unlink()  # stale, from an earlier run
    path.parent.mkdir(parents=True, exist_ok=True)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw, overflow = await read_capped(reader, MAX_REQUEST)
            if overflow:
                result = AdmitResult.reject(REASON_BAD_REQUEST, f"the request is larger than {MAX_REQUEST} bytes")
            else:
                result = await answer(handler, raw)
            writer.write(result.encode())
            await writer.drain()
        except OSError as exc:
            log.info("socket client went away", extra={"error": str(exc)})
        finally:
            writer.close()

    server = await asyncio.start_unix_server(on_connection, str(path), limit=MAX_ANSWER)
    os.chmod(path, mode)
    return server


async def serve_grpc(handler: Handler, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``PodAdmissionPlugin/Admit`` on ``host:port`` (a started ``grpc.aio.Server``;
    ``await server.stop(grace)`` to stop). ``port`` 0 picks a free port: read it from
    the ``bound_port`` attribute set on the returned server."""
    import grpc

    from fedplace.nodeadmit.api import podadmission_pb2 as pb
    from fedplace.nodeadmit.api import podadmission_pb2_grpc as pb_grpc

    class Servicer(pb_grpc.PodAdmissionPluginServicer):
        async def Admit(self, request: Any, context: Any) -> Any:  # noqa: N802 - the RPC's name
            result = await answer(handler, request.pod)
            return pb.AdmitResult(admit=result.admit, reason=result.reason, message=result.message)

    server = grpc.aio.server(options=(("grpc.max_receive_message_length", MAX_REQUEST),))
    pb_grpc.add_PodAdmissionPluginServicer_to_server(Servicer(), server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # grpcio raises where older versions returned 0
        raise OSError(f"cannot listen on {host}:{port}: {exc}") from exc
    if not bound:
        raise OSError(f"cannot listen on {host}:{port}")
    await server.start()
    server.bound_port = bound  # type: ignore[attr-defined]
    return server
