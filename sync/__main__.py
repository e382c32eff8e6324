"""``opa-kube-sync`` / ``python -m sync``: run until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal

from common.logs import configure_logging
from sync.service import SyncService
from sync.settings import SyncSettings, parse_settings

log = logging.getLogger("sync")


async def run(settings: SyncSettings) -> int:
    service = SyncService(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    await stop.wait()
    log.info("shutting down")
    await service.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_settings(argv)
    configure_logging("opa-kube-sync", settings.log_level)
    return asyncio.run(run(settings))


if __name__ == "__main__":
    raise SystemExit(main())
