"""``fedplace-engine`` / ``python -m devstack.engine``: serve the engine until SIGTERM/SIGINT.

Flags: ``--listen HOST:PORT`` (default 127.0.0.1:8181), ``--token-file PATH``
(require ``Authorization: Bearer <file content, stripped>``; the token is never
logged), ``--log-level``, ``--data-sync incremental|reload`` (benchmark knob),
``--evaluator regorus|opa`` (what evaluates queries; OPA's compiler decides
what loads either way).
Logs are JSON lines on stderr.
"""

from __future__ import annotations

import os

os.environ.setdefault("RUST_BACKTRACE", "0")  # regorus errors would otherwise carry a Rust backtrace

import argparse  # noqa: E402
import asyncio  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402

from aiohttp import web  # noqa: E402

from common.logs import configure_logging  # noqa: E402
from common.shutdown import stop_on_signals  # noqa: E402
from devstack.engine.evaluator import EVALUATORS  # noqa: E402
from devstack.engine.server import make_app  # noqa: E402
from devstack.engine.state import EngineState  # noqa: E402

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
    parser.add_argument("--data-sync", default="incremental", choices=["incremental", "reload"],
                        help="how writes reach the interpreter: incremental (default) or a full reload at the "
                             "next query after any write (the naive baseline, for benchmarks)")
    parser.add_argument("--evaluator", default="regorus", choices=EVALUATORS,
                        help="what evaluates queries: regorus (default; fast, incremental data) or opa (OPA 1.20's "
                             "own evaluator, in process: OPA's evaluation cost, data reloaded after writes)")
    parser.add_argument("--per-query-clone", action="store_true",
                        help="regorus: evaluate every query with input on a fresh clone of the engine instead of "
                             "one reused clone (the old way, a benchmark baseline)")
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
        return asyncio.run(serve(args.listen, token, args.data_sync == "incremental", args.evaluator,
                                 reuse=not args.per_query_clone))
    except OSError as exc:
        log.error("cannot listen", extra={"listen": f"{args.listen[0]}:{args.listen[1]}", "error": str(exc)})
        return 1


async def serve(listen: tuple[str, int], token: str | None, incremental: bool = True,
                evaluator: str = "regorus", reuse: bool = True) -> int:
    runner = web.AppRunner(make_app(token, EngineState(incremental, evaluator, reuse)), access_log=None,
                           handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, listen[0], listen[1], reuse_address=True)
    await site.start()
    log.info("serving", extra={"listen": f"{listen[0]}:{listen[1]}", "auth": "token" if token else "none",
                               "evaluator": evaluator})
    stop = stop_on_signals()
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
