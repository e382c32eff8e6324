"""The aiohttp application: routing, discovery, auth, error rendering, admin routes.

Admin API under ``/_devstack`` (besides devstack.faults' ``/_devstack/faults``):

``POST /_devstack/close-watches``  end every open watch stream now (cleanly).
``POST /_devstack/compact``        drop the retained history (``{"keep": N}`` keeps the last N events);
                                   a watch or continue token from an older RV then gets 410.
``POST /_devstack/reset``          back to the initial state: default namespaces only, CRDs and
                                   webhooks removed, faults cleared, watches closed; the RV keeps growing.
``GET  /_devstack/state``          counters (rv, compacted rv, objects, watchers).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from aiohttp import web

from devstack.faults import ADMIN_PREFIX, FaultInjector

from . import resources
from .handlers import Api, Target
from .status import NOT_FOUND_PATH, ApiError, PageNotFound, status_body
from .webhooks import WARNINGS, Dispatcher, ServiceResolver, warning_header

log = logging.getLogger("devstack.kube")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PUBLIC_PATHS = ("/version", "/version/", "/healthz", "/livez", "/readyz")
API_KEY: web.AppKey["Api"] = web.AppKey("api", Api)
MAX_REQUEST_BODY = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes
GZIP_THRESHOLD = 128 * 1024  # kube-apiserver gzips larger answers for a client accepting gzip


def _page_not_found() -> web.Response:
    """What Go's mux answers for a path no handler serves (an unknown API group, say)."""
    return web.Response(status=404, text=PageNotFound.TEXT, content_type="text/plain", charset="utf-8",
                        headers={"X-Content-Type-Options": "nosniff"})


@dataclass
class ServerConfig:
    token: str | None = None
    history: int = 10000
    bookmark_interval: float = 5.0
    service_resolver: ServiceResolver = field(default_factory=ServiceResolver)
    address: str = "127.0.0.1:8080"


def _method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")


class Server:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.dispatcher = Dispatcher(config.service_resolver)
        self.api = Api(config.history, self.dispatcher, config.bookmark_interval)
        self.faults = FaultInjector(lambda code, msg: status_body(code, msg))

    # ---- middlewares ---------------------------------------------------------
    @web.middleware
    async def errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.monotonic()
        status = 500
        try:
            resp = await handler(request)
            status = resp.status
            return resp
        except ApiError as exc:
            status = exc.code
            return web.json_response(exc.body, status=exc.code, headers=exc.headers)
        except PageNotFound:
            status = 404
            return _page_not_found()
        except web.HTTPException as exc:
            status = exc.status
            if exc.status == 404:
                return _page_not_found()
            if exc.status == 405:
                return web.json_response(_method_not_allowed().body, status=405)
            if exc.status == 413:
                return web.json_response(status_body(413, f"Request entity too large: limit is {MAX_REQUEST_BODY}"),
                                         status=413)
            return web.json_response(status_body(exc.status, exc.reason), status=exc.status)
        except ConnectionResetError:
            status = 499
            raise
        except Exception as exc:  # a bug: still answer a Status, never a traceback
            log.exception("unhandled error", extra={"method": request.method, "path": request.path})
            return web.json_response(status_body(500, f"Internal error occurred: {type(exc).__name__}: {exc}"),
                                     status=500)
        finally:
            level = logging.WARNING if status >= 500 else logging.DEBUG
            if log.isEnabledFor(level):
                log.log(level, "request", extra={"method": request.method, "path": request.path,
                                                 "status": status, "ms": round((time.monotonic() - start) * 1000, 2)})

    @staticmethod
    @web.middleware
    async def warnings(request: web.Request, handler: Handler) -> web.StreamResponse:
        """The admission webhooks' warnings as ``Warning`` headers of the answer (webhooks.WARNINGS)."""
        collected: list[str] = []
        token = WARNINGS.set(collected)
        try:
            resp = await handler(request)
        finally:
            WARNINGS.reset(token)
        if collected and not resp.prepared:
            for text in collected:
                resp.headers.add("Warning", warning_header(text))
        return resp

    @web.middleware
    async def auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        token = self.config.token
        if token and request.path not in PUBLIC_PATHS:
            header = request.headers.get("Authorization", "")
            scheme, _, given = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                raise ApiError(401, "Unauthorized", "Unauthorized")
        return await handler(request)

    @staticmethod
    @web.middleware
    async def compression(request: web.Request, handler: Handler) -> web.StreamResponse:
        """As kube-apiserver (APIResponseCompression, on by default): an answer of more than
        128 KiB goes gzip-compressed to a client that accepts gzip; watch streams never do."""
        resp = await handler(request)
        accepted = {part.split(";")[0].strip().lower() for part in request.headers.get("Accept-Encoding", "").split(",")}
        if (isinstance(resp, web.Response) and "gzip" in accepted and isinstance(resp.body, bytes)
                and len(resp.body) > GZIP_THRESHOLD):
            resp.enable_compression(web.ContentCoding.gzip)
            resp.headers["Vary"] = "Accept-Encoding"
        return resp

    # ---- app -------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.warnings, self.errors, self.auth, self.faults.middleware, self.compression],
                              client_max_size=MAX_REQUEST_BODY)
        app[API_KEY] = self.api
        self.faults.add_routes(app)
        app.router.add_post(f"{ADMIN_PREFIX}/close-watches", self.admin_close_watches)
        app.router.add_post(f"{ADMIN_PREFIX}/compact", self.admin_compact)
        app.router.add_post(f"{ADMIN_PREFIX}/reset", self.admin_reset)
        app.router.add_get(f"{ADMIN_PREFIX}/state", self.admin_state)
        app.router.add_get("/version", self.version)
        app.router.add_get("/version/", self.version)
        for path in ("/healthz", "/livez", "/readyz"):
            app.router.add_get(path, self.health)
        app.router.add_route("*", "/api", self.dispatch)
        app.router.add_route("*", "/api/{tail:.*}", self.dispatch)
        app.router.add_route("*", "/apis", self.dispatch)
        app.router.add_route("*", "/apis/{tail:.*}", self.dispatch)
        app.on_shutdown.append(self._on_shutdown)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_shutdown(self, app: web.Application) -> None:
        self.api.store.close_watches()

    async def _on_cleanup(self, app: web.Application) -> None:
        await self.dispatcher.close()

    # ---- simple endpoints ------------------------------------------------------
    async def version(self, request: web.Request) -> web.Response:
        return web.json_response(resources.VERSION_INFO)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # ---- admin -----------------------------------------------------------------
    async def admin_close_watches(self, request: web.Request) -> web.Response:
        return web.json_response({"closed": self.api.store.close_watches()})

    async def admin_compact(self, request: web.Request) -> web.Response:
        try:
            raw = await request.text()
            spec = json.loads(raw) if raw.strip() else {}
            keep = int(spec.get("keep", 0)) if isinstance(spec, dict) else 0
        except (ValueError, TypeError) as exc:
            raise ApiError(400, f"bad compact request: {exc}", "BadRequest") from None
        compacted = self.api.store.compact(keep)
        return web.json_response({"compactedResourceVersion": str(compacted), "resourceVersion": str(self.api.store.rv)})

    async def admin_reset(self, request: web.Request) -> web.Response:
        self.faults.clear()
        self.api.reset()
        return web.json_response({"resourceVersion": str(self.api.store.rv)})

    async def admin_state(self, request: web.Request) -> web.Response:
        store = self.api.store
        return web.json_response({
            "resourceVersion": str(store.rv), "compactedResourceVersion": str(store.compacted_rv),
            "history": len(store.history),
            "objects": {f"{g}/{p}" if g else p: len(c.items) for (g, p), c in store.collections.items()},
            "watchers": sum(len(ws) for ws in store.watchers.values()),
        })

    # ---- resources ---------------------------------------------------------------
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        api = self.api
        if parts[0] == "api":
            if len(parts) == 1:
                return self._get_only(request, resources.api_versions(request.host or self.config.address))
            if parts[1] != "v1":
                raise NOT_FOUND_PATH
            group, version, rest = "", "v1", parts[2:]
        else:
            if len(parts) == 1:
                return self._get_only(request, resources.api_group_list(api.registry))
            group = parts[1]
            if not api.registry.group_versions(group):
                raise PageNotFound()
            if len(parts) == 2:
                return self._get_only(request, resources.api_group(api.registry, group))
            version, rest = parts[2], parts[3:]
        if not rest:
            doc = resources.api_resource_list(api.registry, group, version)
            if doc is None:
                raise NOT_FOUND_PATH
            return self._get_only(request, doc)
        t = self._target(group, version, rest)
        return await self._route(request, t)

    @staticmethod
    def _get_only(request: web.Request, doc: dict) -> web.Response:
        if request.method != "GET":
            raise _method_not_allowed()
        return web.json_response(doc)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise NOT_FOUND_PATH
        rt = self.api.rt(group, version, rest[0])
        if rt is None:
            raise NOT_FOUND_PATH
        if namespace is not None and not rt.namespaced:
            raise NOT_FOUND_PATH
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if name is not None and rt.namespaced and namespace is None:
            raise NOT_FOUND_PATH
        if sub and not (sub == "status" and rt.status_subresource):
            raise NOT_FOUND_PATH
        return Target(rt, namespace, name, sub)

    async def _route(self, request: web.Request, t: Target) -> web.StreamResponse:
        m = request.method
        api = self.api
        if t.name is None:
            if m == "GET":
                return await api.list(request, t)
            if m == "POST":
                return await api.create(request, t)
            if m == "DELETE":
                return await api.delete_collection(request, t)
            raise _method_not_allowed()
        if m == "GET":
            return await api.get(request, t)
        if m == "PUT":
            return await api.update(request, t)
        if m == "PATCH":
            return await api.patch(request, t)
        if m == "DELETE" and not t.sub:
            return await api.delete(request, t)
        raise _method_not_allowed()
