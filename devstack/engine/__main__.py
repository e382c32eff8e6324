"""``fedplace-engine`` / ``python -m devstack.engine``: serve the engine until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from aiohttp import web

from common.logs import configure_logging
from devstack.engine.server import make_app

log = logging.getLogger("devstack.engine")


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedplace-engine",
                                     description="OPA-REST-compatible policy engine (devstack).")
    parser.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 8181), metavar="HOST:PORT")
    parser.add_argument("--token-file", help="require this bearer token (file content, stripped)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    os.environ.setdefault("RUST_BACKTRACE", "0")
    configure_logging("fedplace-engine", args.log_level)
    token = None
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            print(f"fedplace-engine: --token-file: {exc}", file=sys.stderr)
            return 2
        if not token:
            print("fedplace-engine: --token-file is empty", file=sys.stderr)
            return 2
    return asyncio.run(serve(args.listen, token))


async def serve(listen: tuple[str, int], token: str | None) -> int:
    runner = web.AppRunner(make_app(token), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, listen[0], listen[1])
    await site.start()
    log.info("serving", extra={"listen": f"{listen[0]}:{listen[1]}", "auth": "token" if token else "none"})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
