"""fedplace-engine's HTTP layer: the subset of OPA's REST API (v1) fedplace uses.

Status codes and bodies follow OPA 1.x (``v1/server/server.go``); the
semantics live in :mod:`devstack.engine.state`, this module only decodes
requests and encodes answers. Every error body is ``{"code", "message"}``
(plus ``errors`` where OPA adds them); no traceback ever reaches a client.

Devstack additions (never in OPA), under ``/_devstack`` (token required when
one is configured): the shared fault injector (``devstack/faults.py``),
``POST /_devstack/reset`` (lose every policy and document, like a restart)
and ``GET /_devstack/state`` (counts, and the counters of OPA's evaluator: engines built,
documents merged, engines dropped).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any, Awaitable, Callable
from urllib.parse import unquote

from aiohttp import web

from devstack.engine.state import EngineState, EvalError, PolicyError
from devstack.engine.store import MISSING, Path, StoreError, parse_url_path
from devstack.faults import ADMIN_PREFIX, FaultInjector
from fedplace.common.jsonsafe import dumps, loads

__all__ = ["STATE_KEY", "make_app"]

log = logging.getLogger("devstack.engine")

MAX_BODY = 512 * 1024 * 1024
IDLE_WARM_AFTER = 0.3  # seconds without requests before OPA's engine is built and its queries prepared
_FAULT_CODES = {400: "invalid_parameter", 401: "unauthorized", 404: "resource_not_found"}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATE_KEY = web.AppKey("state", EngineState)


def error(status: int, code: str, message: str, errors: list[dict[str, Any]] | None = None) -> web.Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if errors:
        body["errors"] = errors
    return web.json_response(body, status=status)


def fault_body(status: int, message: str) -> dict[str, Any]:
    """OPA's error shape for injected faults (``too_many_requests`` for 429)."""
    code = _FAULT_CODES.get(status) or ("too_many_requests" if status == 429 else "internal_error")
    return {"code": code, "message": message}


def _path_after(request: web.Request, prefix: str) -> Path:
    """Unescaped segments of the raw URL path after ``prefix`` (``%2F`` stays in its segment)."""
    raw = request.raw_path.split("?", 1)[0]
    rest = raw[len(prefix):]
    try:
        return parse_url_path(rest)
    except UnicodeDecodeError as exc:
        raise StoreError(400, "invalid_parameter", f"bad path: {rest}") from exc


def _policy_id(request: web.Request) -> str:
    raw = request.raw_path.split("?", 1)[0][len("/v1/policies/"):]
    return unquote(raw)


async def _json_body(request: web.Request) -> Any:
    """The request body as JSON; 400 like Go's decoder (``EOF`` when empty)."""
    try:
        text = (await request.read()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(400, "invalid_parameter", f"invalid character in body: {exc}") from exc
    if not text.strip():
        raise StoreError(400, "invalid_parameter", "EOF")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreError(400, "invalid_parameter", str(exc)) from exc


class Api:
    """Request handlers over one :class:`EngineState`."""

    def __init__(self, state: EngineState, faults: FaultInjector) -> None:
        self.state = state
        self.faults = faults
        self.last_request = time.monotonic()
        self._warm_handle: asyncio.TimerHandle | None = None

    # -- warm-up when idle ------------------------------------------------------------------------

    def _warm(self) -> None:
        self._warm_handle = None
        idle = time.monotonic() - self.last_request
        if idle < IDLE_WARM_AFTER:
            self._warm_handle = asyncio.get_running_loop().call_later(IDLE_WARM_AFTER - idle, self._warm)
            return
        if self.state.needs_warm:
            start = time.perf_counter()
            self.state.warm()
            log.debug("evaluator warmed while idle", extra={"ms": round((time.perf_counter() - start) * 1000, 1)})

    def _after_write(self) -> None:
        if self.state.needs_warm and self._warm_handle is None:
            self._warm_handle = asyncio.get_running_loop().call_later(IDLE_WARM_AFTER, self._warm)

    # -- health and admin -----------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({})

    async def reset(self, request: web.Request) -> web.Response:
        self.state.reset()
        self.faults.clear()
        log.info("state reset")
        return web.json_response({})

    async def admin_state(self, request: web.Request) -> web.Response:
        return web.json_response({
            "policies": len(self.state.modules),
            "top_level_keys": len(self.state.tree),
            "evaluator": self.state.evaluator.counters(),
        })

    # -- policies -------------------------------------------------------------------------------

    async def list_policies(self, request: web.Request) -> web.Response:
        return web.json_response({"result": self.state.list_policies()})

    async def get_policy(self, request: web.Request) -> web.Response:
        return web.json_response({"result": self.state.get_policy(_policy_id(request))})

    async def put_policy(self, request: web.Request) -> web.Response:
        mid = _policy_id(request)
        try:
            raw = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:
            return error(400, "invalid_parameter", "policy is not valid UTF-8")
        self.state.put_policy(mid, raw)
        log.info("policy loaded", extra={"policy_id": mid})
        self._after_write()
        return web.json_response({})

    async def delete_policy(self, request: web.Request) -> web.Response:
        mid = _policy_id(request)
        self.state.delete_policy(mid)
        log.info("policy deleted", extra={"policy_id": mid})
        self._after_write()
        return web.json_response({})

    # -- data -------------------------------------------------------------------------------------

    async def data_get(self, request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        input_doc: Any = MISSING
        if "input" in request.query:
            raw = request.query.getall("input")[-1]
            try:
                input_doc = json.loads(raw)
            except ValueError as exc:
                return error(400, "invalid_parameter", f"parameter contains malformed input document: {exc}")
        return self._answer(path, input_doc, warn=False)

    async def data_post(self, request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        text = (await request.read()).decode("utf-8", errors="replace")
        input_doc: Any = MISSING
        if text.strip():
            try:
                body = loads(text)
            except ValueError as exc:
                return error(400, "invalid_parameter", f"body contains malformed input document: {exc}")
            if body is not None and not isinstance(body, dict):
                return error(400, "invalid_parameter", "body contains malformed input document: json: cannot "
                             f"unmarshal {type(body).__name__} into Go value of type types.DataRequestV1")
            if isinstance(body, dict) and body.get("input") is not None:
                input_doc = body["input"]
        return self._answer(path, input_doc, warn=input_doc is MISSING)

    def _answer(self, path: Path, input_doc: Any, warn: bool) -> web.Response:
        if any('"' in seg for seg in path):
            return error(400, "invalid_parameter", f"invalid path: invalid ref term '{path}'")
        value = self.state.read(path, input_doc)
        body: dict[str, Any] = {} if value is MISSING else {"result": value}
        if warn:
            body["warning"] = {"code": "api_usage_warning", "message": "'input' key missing from the request"}
        return web.Response(body=dumps(body), content_type="application/json")

    async def data_put(self, request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        value = await _json_body(request)
        written = self.state.put_data(path, value, if_none_match=request.headers.get("If-None-Match") == "*")
        self._after_write()
        return web.Response(status=204 if written else 304)

    async def data_patch(self, request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        ops = await _json_body(request)
        self.state.patch_data(path, ops)
        self._after_write()
        return web.Response(status=204)

    async def data_delete(self, request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        self.state.delete_data(path)
        self._after_write()
        return web.Response(status=204)


def make_app(token: str | None = None, state: EngineState | None = None) -> web.Application:
    """The engine's aiohttp application; ``token`` enables bearer-token auth."""
    state = state or EngineState()
    faults = FaultInjector(fault_body)
    api = Api(state, faults)

    @web.middleware
    async def errors_and_log(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        if not request.path.startswith(ADMIN_PREFIX):
            api.last_request = time.monotonic()
        try:
            resp = await handler(request)
        except StoreError as exc:
            resp = error(exc.status, exc.code, exc.message)
        except PolicyError as exc:
            resp = web.json_response(exc.body(), status=exc.status)
        except EvalError as exc:
            resp = web.json_response(exc.body(), status=500)
        except web.HTTPException:
            raise
        except Exception as exc:  # noqa: BLE001 - never a traceback to a client
            log.exception("internal error", extra={"method": request.method, "path": request.path})
            resp = error(500, "internal_error", f"internal error: {exc.__class__.__name__}")
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request", extra={"method": request.method, "path": request.path, "status": resp.status,
                                        "ms": round((time.perf_counter() - start) * 1000, 2)})
        return resp

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token is not None:
            header = request.headers.get("Authorization", "")
            scheme, _, given = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                return error(401, "unauthorized", "request rejected by administrative policy")
        return await handler(request)

    app = web.Application(middlewares=[errors_and_log, auth, faults.middleware], client_max_size=MAX_BODY)
    app[STATE_KEY] = state
    faults.add_routes(app)
    r = app.router
    r.add_get("/health", api.health)
    r.add_post(f"{ADMIN_PREFIX}/reset", api.reset)
    r.add_get(f"{ADMIN_PREFIX}/state", api.admin_state)
    r.add_get("/v1/policies", api.list_policies)
    r.add_get("/v1/policies/{id:.+}", api.get_policy)
    r.add_put("/v1/policies/{id:.+}", api.put_policy)
    r.add_delete("/v1/policies/{id:.+}", api.delete_policy)
    for suffix in ("", "/", "/{path:.+}"):
        r.add_get("/v1/data" + suffix, api.data_get)
        r.add_post("/v1/data" + suffix, api.data_post)
        r.add_put("/v1/data" + suffix, api.data_put)
        r.add_patch("/v1/data" + suffix, api.data_patch)
        r.add_delete("/v1/data" + suffix, api.data_delete)
    return app
