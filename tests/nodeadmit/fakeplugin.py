"""A pod admission plugin with a chosen behaviour, served as a real socket or gRPC process.

    python -m tests.nodeadmit.fakeplugin --socket PATH --behaviour reject
    python -m tests.nodeadmit.fakeplugin --grpc-port PORT --behaviour sleep:1

Behaviours:

* ``admit`` / ``reject`` — a valid AdmitResult (reject: reason ``FakeRejected``,
  the pod's name in the message, so tests see the pod arrived);
* ``sleep:S`` — admit after S seconds (``hang`` sleeps for an hour);
* ``garbage`` — bytes that are no AdmitResult (socket: text; gRPC: bytes that are
  no protobuf message);
* ``incomplete`` — a result without ``admit``;
* ``crash`` — the process exits in the middle of the request;
* ``error`` — socket: close without an answer; gRPC: the call fails with INTERNAL.

Valid answers go through :mod:`fedplace.nodeadmit.serve` (the plugin library); the broken
ones are written by hand. The process writes ``ready`` to stdout once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from fedplace.nodeadmit.result import AdmitResult
from fedplace.nodeadmit.serve import serve_grpc, serve_socket

INVALID = {"garbage", "incomplete", "crash", "error"}


def handler_for(behaviour: str):  # type: ignore[no-untyped-def]
    async def handler(pod: dict[str, Any]) -> AdmitResult:
        name = (pod.get("metadata") or {}).get("name", "?")
        if behaviour == "reject":
            return AdmitResult.reject("FakeRejected", f"pod {name} is not welcome")
        if behaviour.startswith("sleep:"):
            await asyncio.sleep(float(behaviour.split(":", 1)[1]))
        elif behaviour == "hang":
            await asyncio.sleep(3600)
        return AdmitResult(True, message=f"pod {name} is fine")

    return handler


async def broken_socket(path: str, behaviour: str) -> asyncio.AbstractServer:
    if os.path.exists(path):
        os.unlink(path)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        if behaviour == "crash":
            os._exit(7)
        if behaviour == "garbage":
            writer.write(b"<html>502 Bad Gateway</html>")
        elif behaviour == "incomplete":
            writer.write(b'{"reason": "Whatever", "message": "no verdict"}')
        await writer.drain()
        writer.close()

    return await asyncio.start_unix_server(on_connection, path)


async def broken_grpc(port: int, behaviour: str) -> Any:
    import grpc

    from fedplace.nodeadmit.plugins import admit_method_path

    async def admit(request: bytes, context: Any) -> bytes:
        if behaviour == "crash":
            os._exit(7)
        if behaviour == "error":
            await context.abort(grpc.StatusCode.INTERNAL, "the plugin broke")
        if behaviour == "incomplete":
            return b"\x12\x08Whatever"  # field 2 (reason) only: no admit
        return b"\xff\xff\xff\xff"  # not a protobuf message

    service, method = admit_method_path().strip("/").split("/")
    rpc = grpc.unary_unary_rpc_method_handler(admit)  # raw bytes in and out
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {method: rpc}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--socket")
    p.add_argument("--grpc-port", type=int)
    p.add_argument("--behaviour", default="admit")
    args = p.parse_args()
    broken = args.behaviour in INVALID
    if args.socket:
        server = await (broken_socket(args.socket, args.behaviour) if broken
                        else serve_socket(handler_for(args.behaviour), args.socket))
    else:
        server = await (broken_grpc(args.grpc_port, args.behaviour) if broken
                        else serve_grpc(handler_for(args.behaviour), args.grpc_port))
    print("ready", flush=True)
    await asyncio.Event().wait()
    del server


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
