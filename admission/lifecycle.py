"""The webhook's lifecycle: start, serve, stop gracefully.

:class:`Webhook` owns the pieces: the OPA client, the Kubernetes API client,
the policy ConfigMap informer, the Event recorder, the TLS context (reloaded
when the files change) and the aiohttp runner. :meth:`Webhook.start` returns
once the server listens (readiness follows the informer); :meth:`Webhook.stop`
stops accepting connections, lets in-flight requests finish (up to
``shutdown_timeout``), then cancels the informer, the Event recorder and the
TLS watcher and closes the clients. Tests run it in-process on port 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client

from fedplace.admission.config import AdmissionConfig
from fedplace.admission.handler import build_app
from fedplace.admission.listener import listen
from fedplace.admission.presence import PolicyPresence
from fedplace.admission.tls import ReloadingTLS
from fedplace.common.eventloop import loop_name
from fedplace.common.events import EventRecorder
from fedplace.common.kube_client import new_api_client
from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.common.shutdown import stop_on_signals

__all__ = ["COMPONENT", "Webhook", "serve"]

log = logging.getLogger(__name__)

COMPONENT = "fedplace-admission"


class Webhook:
    """One running webhook. ``api`` may be given (tests); else built from the kubeconfig."""

    def __init__(self, config: AdmissionConfig, api: client.ApiClient | None = None) -> None:
        self.config = config
        self._api = api
        self._own_api = api is None
        self.opa: OpaClient | None = None
        self.policies: PolicyPresence | None = None
        self.recorder: EventRecorder | None = None
        self.tls: ReloadingTLS | None = None
        self.runner: web.AppRunner | None = None
        self.listener: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.port: int = config.listen_port

    @property
    def scheme(self) -> str:
        return "https" if self.config.tls.enabled else "http"

    @property
    def url(self) -> str:
        host = self.config.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def api(self) -> client.ApiClient:
        assert self._api is not None, "start() first"
        return self._api

    async def start(self) -> None:
        cfg = self.config
        if self._api is None:
            self._api = await new_api_client(cfg.kubeconfig)
        self.opa = OpaClient(OpaSettings(url=cfg.opa.url, token=cfg.opa.token, token_file=cfg.opa.token_file,
                                         ca_file=cfg.opa.ca_file, timeout=cfg.opa.timeout,
                                         lean_http="lean-http" in cfg.speedups))
        self.policies = PolicyPresence(self.api, cfg.policy_namespace)
        self.recorder = EventRecorder(self.api, COMPONENT, burst=cfg.events.burst,
                                      refill_seconds=cfg.events.refill_seconds)
        ssl_ctx: ssl.SSLContext | None = None
        if cfg.tls.enabled:
            assert cfg.tls.cert_file and cfg.tls.private_key_file
            self.tls = ReloadingTLS(cfg.tls.cert_file, cfg.tls.private_key_file, cfg.tls.client_ca_file,
                                    reload_interval=cfg.tls.reload_interval)
            ssl_ctx = self.tls.context
        else:
            log.warning("no --tls-cert-file: serving plain HTTP; the API server requires HTTPS, "
                        "so this is for local use only")

        self._tasks.append(asyncio.create_task(self.policies.run(), name="policy-informer"))
        self._tasks.append(asyncio.create_task(self.recorder.run(), name="event-recorder"))
        if self.tls is not None:
            self._tasks.append(asyncio.create_task(self.tls.run(), name="tls-reload"))

        app = build_app(cfg, self.opa, self.policies, self.recorder)
        self.runner = web.AppRunner(app, shutdown_timeout=cfg.shutdown_timeout, access_log=None)
        await self.runner.setup()
        try:
            # Reading each request is bounded in time (admission/listener.py).
            self.listener = await listen(self.runner, cfg.listen_host, cfg.listen_port, ssl_context=ssl_ctx,
                                         read_timeout=cfg.read_timeout, idle_timeout=cfg.idle_timeout,
                                         reuse_port=cfg.reuse_port)
        except OSError:
            await self.stop()
            raise
        sockets = self.listener.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("admission webhook listening",
                 extra={"url": self.url, "tls": cfg.tls.enabled, "client_auth": bool(cfg.tls.client_ca_file),
                        "opa": cfg.opa.decision_url, "policy_namespace": cfg.policy_namespace,
                        "deadline_s": cfg.deadline, "event_loop": loop_name(asyncio.get_running_loop())})

    async def wait_synced(self, timeout: float = 10.0) -> None:
        """Wait for the policy informer's first list (tests, startup logs)."""
        assert self.policies is not None
        await asyncio.wait_for(self.policies.informer.synced.wait(), timeout)

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, then stop the background tasks."""
        if self.listener is not None:
            self.listener.close()  # stop accepting
            self.listener = None
        if self.runner is not None:
            await self.runner.cleanup()  # closes idle connections, waits for in-flight handlers
            self.runner = None
        if self.recorder is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.recorder.flush(), 2.0)  # best effort: send queued Events
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.opa is not None:
            await self.opa.close()
            self.opa = None
        if self._own_api and self._api is not None:
            await self._api.close()
            self._api = None
        log.info("admission webhook stopped")

    async def __aenter__(self) -> "Webhook":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve(config: AdmissionConfig) -> None:
    """Start the webhook, wait for a termination signal, stop gracefully."""
    stop = stop_on_signals()
    webhook = Webhook(config)
    await webhook.start()
    try:
        await stop.wait()
        log.info("termination signal received; shutting down gracefully")
    finally:
        await webhook.stop()
