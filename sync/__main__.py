"""``opa-kube-sync`` / ``python -m sync``: run until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal

from common.logs import configure_logging
from sync.app import run
from sync.config import SyncConfig, parse_args


async def _main(config: SyncConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run(config, stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)  # exits 2 on a bad flag
    configure_logging("opa-kube-sync", config.log_level)
    return asyncio.run(_main(config))


if __name__ == "__main__":
    raise SystemExit(main())
