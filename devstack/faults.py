"""Fault injection shared by the devstack servers.

Real OPA and kube-apiserver have no such thing: it lives under an admin prefix
(``/_devstack``) that tests use to make a server misbehave over plain HTTP.

Admin API (JSON bodies):

``POST /_devstack/faults``
    ``{"latency": 0.5}`` — delay every non-admin request by that many seconds
    (0 removes it). And/or ``{"fail": {...}}`` — answer the next ``count``
    requests whose path starts with ``path`` (and, if given, whose method is
    ``method``) with ``status``; optional ``retry_after`` (seconds, sent as the
    Retry-After header), optional ``body`` (a raw string sent instead of the
    server's error body, e.g. malformed JSON with status 200), optional
    ``delay`` (seconds to wait before answering, e.g. longer than a client
    timeout). ``count`` defaults to 1; ``-1`` means every request until cleared.
    Answers 200 ``{"latency": …, "rules": […]}``.
``GET /_devstack/faults``
    The current settings, plus ``max_in_flight``: for each ``"METHOD path"``
    seen since the last clear, the most requests that were being served at
    once (a request counts until its handler returns, also after its client
    gave up — as a real server keeps working on it).
``DELETE /_devstack/faults``
    Clear every fault and the request counts (200).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from typing import Any, Awaitable, Callable

from aiohttp import web

ADMIN_PREFIX = "/_devstack"

ErrorBody = Callable[[int, str], dict[str, Any]]


@dataclass
class FailRule:
    """Answer matching requests with ``status`` until ``count`` runs out."""

    path: str
    status: int
    count: int = 1
    method: str | None = None
    retry_after: float | None = None
    body: str | None = None
    delay: float = 0.0

    def matches(self, request: web.Request) -> bool:
        if self.count == 0:
            return False
        if self.method and self.method.upper() != request.method:
            return False
        return request.path.startswith(self.path)


class FaultInjector:
    """Holds the active faults and applies them as an aiohttp middleware.

    ``error_body(status, message)`` builds the server's own error document
    (OPA's ``{"code","message"}`` or a Kubernetes ``Status``), so injected
    failures look like the real server's.
    """

    def __init__(self, error_body: ErrorBody) -> None:
        self._error_body = error_body
        self.latency = 0.0
        self.rules: list[FailRule] = []
        self.in_flight: dict[str, int] = {}
        self.max_in_flight: dict[str, int] = {}

    def clear(self) -> None:
        self.latency = 0.0
        self.rules.clear()
        self.max_in_flight.clear()

    def _take(self, request: web.Request) -> FailRule | None:
        for rule in self.rules:
            if rule.matches(request):
                if rule.count > 0:
                    rule.count -= 1
                return rule
        return None

    @web.middleware
    async def middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if request.path.startswith(ADMIN_PREFIX):
            return await handler(request)
        key = f"{request.method} {request.path}"
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.max_in_flight[key] = max(self.max_in_flight.get(key, 0), self.in_flight[key])
        try:
            return await self._serve(request, handler)
        finally:
            self.in_flight[key] -= 1
            if not self.in_flight[key]:
                del self.in_flight[key]

    async def _serve(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        rule = self._take(request)
        if rule is None:
            return await handler(request)
        if rule.delay > 0:
            await asyncio.sleep(rule.delay)
        headers = {}
        if rule.retry_after is not None:
            headers["Retry-After"] = str(int(rule.retry_after) if float(rule.retry_after).is_integer() else rule.retry_after)
        if rule.body is not None:
            return web.Response(status=rule.status, text=rule.body, headers=headers, content_type="application/json")
        body = self._error_body(rule.status, f"injected fault: status {rule.status}")
        return web.json_response(body, status=rule.status, headers=headers)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post(f"{ADMIN_PREFIX}/faults", self._post)
        app.router.add_get(f"{ADMIN_PREFIX}/faults", self._get)
        app.router.add_delete(f"{ADMIN_PREFIX}/faults", self._delete)

    def _state(self) -> dict[str, Any]:
        return {"latency": self.latency, "rules": [asdict(r) for r in self.rules],
                "max_in_flight": dict(self.max_in_flight)}

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response(self._state())

    async def _delete(self, request: web.Request) -> web.Response:
        self.clear()
        return web.json_response(self._state())

    async def _post(self, request: web.Request) -> web.Response:
        try:
            spec = json.loads(await request.text() or "{}")
            if not isinstance(spec, dict):
                raise ValueError("body must be a JSON object")
            if "latency" in spec:
                self.latency = max(0.0, float(spec["latency"]))
            if "fail" in spec:
                fail = spec["fail"]
                if not isinstance(fail, dict) or "status" not in fail:
                    raise ValueError("fail needs at least a status")
                self.rules.append(
                    FailRule(
                        path=str(fail.get("path", "/")),
                        status=int(fail["status"]),
                        count=int(fail.get("count", 1)),
                        method=fail.get("method"),
                        retry_after=fail.get("retry_after"),
                        body=fail.get("body"),
                        delay=float(fail.get("delay", 0.0)),
                    )
                )
        except (ValueError, TypeError, KeyError) as exc:
            return web.json_response({"error": f"bad fault spec: {exc}"}, status=400)
        return web.json_response(self._state())
