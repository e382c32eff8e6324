"""Which event loop a service runs on: uvloop or asyncio's own.

uvloop (libuv, with its TLS transport written in Cython rather than asyncio's
pure-Python ``sslproto``) takes ~0.05 ms off every request the admission
webhook answers over TLS (docs/benchmarks.md). It is a dependency on Linux;
``auto`` falls back to asyncio's loop where it is not installed.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine

__all__ = ["EVENT_LOOPS", "loop_name", "run"]

EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def _factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory for ``kind`` (None: asyncio's default). ``uvloop`` raises ImportError
    when it is not installed; ``auto`` then uses asyncio's."""
    if kind not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {kind!r}: expected one of {', '.join(EVENT_LOOPS)}")
    if kind == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if kind == "uvloop":
            raise
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, Any], kind: str = "auto") -> Any:
    """``asyncio.run(main)`` on the loop ``kind`` names (see :data:`EVENT_LOOPS`)."""
    try:
        factory = _factory(kind)
    except BaseException:
        main.close()  # never awaited: say nothing about it
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``"uvloop"`` or ``"asyncio"``: what ``loop`` is, for logs."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
