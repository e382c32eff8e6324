"""``opa-kube-sync`` / ``python -m fedplace.sync``: run until SIGTERM or SIGINT.

kubernetes_asyncio is loaded slim (:mod:`fedplace.common.kube_slim`: no generated API
and model classes, ~35 MB less): the sync talks raw JSON only.
"""

from __future__ import annotations

from fedplace.common import kube_slim

kube_slim.install()  # before anything imports kubernetes_asyncio

import asyncio  # noqa: E402
import gc  # noqa: E402

from fedplace.common.logs import configure_logging  # noqa: E402
from fedplace.common.shutdown import stop_on_signals  # noqa: E402
from fedplace.sync.app import run  # noqa: E402
from fedplace.sync.config import SyncConfig, parse_args  # noqa: E402


async def _main(config: SyncConfig) -> int:
    stop = stop_on_signals()
    await run(config, stop)
    return 0


def tune_gc(config: SyncConfig) -> None:
    """Collect the youngest garbage generation every ``config.gc_threshold`` allocations
    (``--gc-threshold``); the older generations keep Python's thresholds."""
    gc.set_threshold(config.gc_threshold)


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)  # exits 2 on a bad flag
    configure_logging("opa-kube-sync", config.log_level)
    tune_gc(config)
    return asyncio.run(_main(config))


if __name__ == "__main__":
    raise SystemExit(main())
