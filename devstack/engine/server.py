"""fedplace-engine's HTTP server: the subset of OPA's REST API (v1) fedplace uses.

Endpoints, status codes and bodies follow OPA 1.x (CONTRACTS.md, "OPA REST
API"); see docs/devstack.md for what is not implemented. All state is in
memory, as in OPA: a restart loses it.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any, Awaitable, Callable
from urllib.parse import unquote

from aiohttp import web

from devstack.engine.rego import CompileError, EvalError, RegoState
from devstack.engine.store import StoreError, delete_path, get_path, patch_path, put_path
from devstack.faults import ADMIN_PREFIX, FaultInjector

__all__ = ["Engine", "make_app"]

log = logging.getLogger("devstack.engine")

MAX_BODY = 256 * 1024 * 1024
COMPILE_MESSAGE = "error(s) occurred while compiling module(s)"
_FAULT_CODES = {400: "invalid_parameter", 401: "unauthorized", 404: "resource_not_found",
                429: "too_many_requests"}


def error(status: int, code: str, message: str, errors: list[dict[str, Any]] | None = None) -> web.Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if errors:
        body["errors"] = errors
    return web.json_response(body, status=status)


def _fault_body(status: int, message: str) -> dict[str, Any]:
    return {"code": _FAULT_CODES.get(status, "internal_error"), "message": message}


def _path_after(request: web.Request, prefix: str) -> list[str]:
    """URL-unescaped segments after ``prefix`` (``%2F`` stays inside its segment)."""
    raw = request.raw_path.split("?", 1)[0]
    rest = raw[len(prefix):] if raw.startswith(prefix) else ""
    return [unquote(s) for s in rest.split("/") if s != ""]


class Engine:
    """The engine's state: base documents, modules, and the Rego evaluator."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.rego = RegoState()

    def reset(self) -> None:
        self.data = {}
        self.rego.reset()

    def read(self, path: list[str], input_doc: Any = None, has_input: bool = False) -> tuple[bool, Any]:
        """(defined, value) of ``data.<path>``; pure data reads skip the evaluator."""
        if not self.rego.overlaps_policy(path):
            return get_path(self.data, path)
        return self.rego.evaluate(path, self.data, input_doc, has_input)

    def write(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.data = change(self.data)
        self.rego.data_changed()


def make_app(token: str | None = None) -> web.Application:
    engine = Engine()
    faults = FaultInjector(_fault_body)

    @web.middleware
    async def auth(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if token is not None:
            header = request.headers.get("Authorization", "")
            given = header[len("Bearer "):] if header.startswith("Bearer ") else ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                return error(401, "unauthorized", "request rejected by administrative policy")
        return await handler(request)

    @web.middleware
    async def no_tracebacks(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:  # noqa: BLE001 - never a traceback to a client
            log.exception("internal error", extra={"path": request.path})
            return error(500, "internal_error", f"internal error: {exc.__class__.__name__}")

    app = web.Application(middlewares=[no_tracebacks, auth, faults.middleware], client_max_size=MAX_BODY)
    app["engine"] = engine
    faults.add_routes(app)

    async def read_json(request: web.Request) -> tuple[bool, Any]:
        text = await request.text()
        if not text.strip():
            return False, None
        try:
            return True, json.loads(text)
        except ValueError as exc:
            raise StoreError(400, "invalid_parameter", f"body contains malformed JSON: {exc}") from exc

    # -- health and admin ------------------------------------------------------

    async def health(request: web.Request) -> web.Response:
        return web.json_response({})

    async def reset(request: web.Request) -> web.Response:
        engine.reset()
        faults.clear()
        log.info("state reset")
        return web.json_response({})

    # -- policies ----------------------------------------------------------------

    def policy_doc(mid: str) -> dict[str, Any]:
        pkg = engine.rego.packages.get(mid) or []
        return {"id": mid, "raw": engine.rego.modules[mid],
                "ast": {"package": {"path": [{"type": "var", "value": "data"}] +
                                    [{"type": "string", "value": p} for p in pkg]}}}

    async def list_policies(request: web.Request) -> web.Response:
        return web.json_response({"result": [policy_doc(m) for m in engine.rego.modules]})

    async def get_policy(request: web.Request) -> web.Response:
        mid = "/".join(_path_after(request, "/v1/policies"))
        if mid not in engine.rego.modules:
            return error(404, "resource_not_found", f"storage_not_found_error: policy id {mid!r}")
        return web.json_response({"result": policy_doc(mid)})

    async def put_policy(request: web.Request) -> web.Response:
        mid = "/".join(_path_after(request, "/v1/policies"))
        if not mid:
            return error(400, "invalid_parameter", "policy id is required")
        raw = await request.text()
        try:
            engine.rego.put_module(mid, raw)
        except CompileError as exc:
            return error(400, "invalid_parameter", COMPILE_MESSAGE, exc.errors)
        log.info("policy loaded", extra={"policy_id": mid})
        return web.json_response({})

    async def delete_policy(request: web.Request) -> web.Response:
        mid = "/".join(_path_after(request, "/v1/policies"))
        try:
            engine.rego.delete_module(mid)
        except KeyError:
            return error(404, "resource_not_found", f"storage_not_found_error: policy id {mid!r}")
        except CompileError as exc:
            return error(400, "invalid_parameter", COMPILE_MESSAGE, exc.errors)
        return web.json_response({})

    # -- data ----------------------------------------------------------------------

    async def data_read(request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        has_input, input_doc = False, None
        if request.method == "POST":
            try:
                present, body = await read_json(request)
            except StoreError as exc:
                return error(exc.status, exc.code, exc.message)
            if present:
                if not isinstance(body, dict):
                    return error(400, "invalid_parameter", "body must be an object with an optional input")
                if "input" in body:
                    has_input, input_doc = True, body["input"]
        try:
            defined, value = engine.read(path, input_doc, has_input)
        except EvalError as exc:
            return error(500, exc.code, exc.message)
        return web.json_response({"result": value} if defined else {})

    def conflicts_with_policy(path: list[str]) -> web.Response | None:
        if engine.rego.inside_policy(path):
            where = "/".join(path)
            return error(400, "invalid_parameter", f"conflicting rules for data path {where} found: "
                         "the document is defined by a policy",
                         [{"code": "rego_compile_error", "message": f"conflicting rule for data path {where}"}])
        return None

    async def data_put(request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        try:
            present, value = await read_json(request)
            if not present:
                raise StoreError(400, "invalid_parameter", "body is required")
            if (conflict := conflicts_with_policy(path)) is not None:
                return conflict
            if request.headers.get("If-None-Match") == "*" and get_path(engine.data, path)[0]:
                return web.Response(status=304)
            engine.write(lambda root: put_path(root, path, value))
        except StoreError as exc:
            return error(exc.status, exc.code, exc.message)
        return web.Response(status=204)

    async def data_patch(request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        try:
            present, ops = await read_json(request)
            if not present:
                raise StoreError(400, "invalid_parameter", "body is required")
            if (conflict := conflicts_with_policy(path)) is not None:
                return conflict
            # All or nothing: apply to a deep copy, then swap it in.
            candidate = json.loads(json.dumps(engine.data))
            new_root = patch_path(candidate, path, ops)
            engine.write(lambda _root: new_root)
        except StoreError as exc:
            return error(exc.status, exc.code, exc.message)
        return web.Response(status=204)

    async def data_delete(request: web.Request) -> web.Response:
        path = _path_after(request, "/v1/data")
        try:
            if (conflict := conflicts_with_policy(path)) is not None:
                return conflict
            engine.write(lambda root: delete_path(root, path))
        except StoreError as exc:
            return error(exc.status, exc.code, exc.message)
        return web.Response(status=204)

    r = app.router
    r.add_get("/health", health)
    r.add_post(f"{ADMIN_PREFIX}/reset", reset)
    r.add_get("/v1/policies", list_policies)
    r.add_get("/v1/policies/{id:.+}", get_policy)
    r.add_put("/v1/policies/{id:.+}", put_policy)
    r.add_delete("/v1/policies/{id:.+}", delete_policy)
    for suffix in ("", "/", "/{path:.+}"):
        r.add_get("/v1/data" + suffix, data_read)
        r.add_post("/v1/data" + suffix, data_read)
        r.add_put("/v1/data" + suffix, data_put)
        r.add_patch("/v1/data" + suffix, data_patch)
        r.add_delete("/v1/data" + suffix, data_delete)
    return app
