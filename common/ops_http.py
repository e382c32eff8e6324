"""Operational endpoints every long-running component serves.

``/healthz`` answers 200 while the process is alive, ``/readyz`` 200 only when
``ready()`` is true (503 with the reason otherwise), ``/metrics`` Prometheus'
text format from the default registry (summed over the processes sharing a
``PROMETHEUS_MULTIPROC_DIR``, when one is set).
"""

from __future__ import annotations

import os
from typing import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

__all__ = ["add_ops_routes"]

ReadyCheck = Callable[[], tuple[bool, str]]


def _registry() -> CollectorRegistry:
    """The default registry, or, in processes sharing a Prometheus multiprocess directory
    (``PROMETHEUS_MULTIPROC_DIR``, e.g. ``fedplace-admission --workers``), their sums."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def add_ops_routes(app: web.Application, ready: ReadyCheck) -> None:
    """Add /healthz, /readyz and /metrics to ``app``.

    ``ready()`` returns ``(is_ready, reason)``; the reason is shown when not ready.
    """

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        ok, reason = ready()
        if ok:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"not ready: {reason}\n")

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(_registry())
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
