"""Graceful shutdown on SIGTERM/SIGINT, shared by every long-running process."""

from __future__ import annotations

import asyncio
import signal

__all__ = ["stop_on_signals"]


def stop_on_signals() -> asyncio.Event:
    """An Event set by the first SIGTERM or SIGINT; call from inside the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
