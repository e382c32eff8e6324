"""``fedplace-engine`` / ``python -m devstack.engine``: serve the engine until SIGTERM/SIGINT.

Flags: ``--listen HOST:PORT`` (default 127.0.0.1:8181), ``--token-file PATH``
(require ``Authorization: Bearer <file content, stripped>``; the token is never
logged), ``--log-level``. Logs are JSON lines on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from aiohttp import web

from devstack.engine.server import make_app
from fedplace.common.logs import configure_logging
from fedplace.common.shutdown import stop_on_signals

log = logging.getLogger("devstack.engine")


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def read_token(path: str) -> str:
    """The bearer token in ``path`` (stripped); raises ValueError when empty."""
    with open(path, encoding="utf-8") as fh:
        token = fh.read().strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedplace-engine",
                                     description="OPA-REST-compatible policy engine (devstack).")
    parser.add_argument("--listen", type=parse_listen, default=("127.0.0.1", 8181), metavar="HOST:PORT")
    parser.add_argument("--token-file", help="require this bearer token (file content, stripped)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    configure_logging("fedplace-engine", args.log_level)
    token = None
    if args.token_file:
        try:
            token = read_token(args.token_file)
        except (OSError, ValueError) as exc:
            print(f"fedplace-engine: --token-file: {exc}", file=sys.stderr)
            return 2
    try:
        return asyncio.run(serve(args.listen, token))
    except OSError as exc:
        log.error("cannot listen", extra={"listen": f"{args.listen[0]}:{args.listen[1]}", "error": str(exc)})
        return 1


async def serve(listen: tuple[str, int], token: str | None) -> int:
    runner = web.AppRunner(make_app(token), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, listen[0], listen[1], reuse_address=True)
    await site.start()
    log.info("serving", extra={"listen": f"{listen[0]}:{listen[1]}", "auth": "token" if token else "none"})
    stop = stop_on_signals()
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
