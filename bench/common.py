"""What the benchmarks share: percentiles and concurrent creation over plain HTTP."""

from __future__ import annotations

import asyncio

import aiohttp

__all__ = ["pct", "post_all"]


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def post_all(session: aiohttp.ClientSession, base: str, items: list[tuple[str, dict]], conc: int = 64) -> None:
    """POST every (path, body) with ``conc`` workers; each must answer 201."""
    queue = list(items)

    async def worker() -> None:
        while queue:
            path, body = queue.pop()
            async with session.post(base + path, json=body) as r:
                assert r.status == 201, await r.text()

    await asyncio.gather(*(worker() for _ in range(conc)))
