"""``opa-kube-sync`` / ``python -m sync``: run until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio

from common.logs import configure_logging
from common.shutdown import stop_on_signals
from sync.app import run
from sync.config import SyncConfig, parse_args


async def _main(config: SyncConfig) -> int:
    stop = stop_on_signals()
    await run(config, stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)  # exits 2 on a bad flag
    configure_logging("opa-kube-sync", config.log_level)
    return asyncio.run(_main(config))


if __name__ == "__main__":
    raise SystemExit(main())
