"""The plugin manager: the pod admission shim a kubelet would run (KEP-2823).

:meth:`AdmissionPluginManager.load` reads the configuration (only when the
``PodAdmissionPlugin`` gate is on) and raises
:class:`~fedplace.common.config.ConfigError` for any fault in it — the caller must not
start then. :meth:`AdmissionPluginManager.admit` asks every configured plugin
about one pod, all of them at once, each bounded by its own timeout, and
combines their answers:

* gate off → admitted, no plugin called;
* every plugin admits → admitted;
* otherwise rejected: the ``reason`` is that of the first rejecting plugin in
  configuration order, the ``message`` lists every rejecting plugin's message
  in configuration order (``name: message; name: message``).

A plugin that gives no valid answer rejects the pod (fail closed) with one of
the manager's own reasons (:mod:`fedplace.nodeadmit.result`), its message naming the
plugin and saying what happened. The same path serves static pods (read from
a manifest file) and pods from the API server: :meth:`admit` takes the pod
object, whatever its source. Plugins never change the pod.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from fedplace.common.config import ConfigError
from fedplace.nodeadmit.config import FEATURE_GATE, ManagerConfig, PluginConfig, find_config_file, load_plugin_config
from fedplace.nodeadmit.plugins import Plugin, PluginFailure, make_plugin
from fedplace.nodeadmit.result import REASON_FAILED, REASON_TIMEOUT, AdmitResult

__all__ = ["AdmissionPluginManager", "ManagerResult", "PluginOutcome", "encode_pod"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PluginOutcome:
    """What one plugin said (or what the manager decided for it)."""

    name: str
    type: str
    result: AdmitResult
    seconds: float
    failed: bool = False  # True when the manager decided: the plugin gave no valid answer

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, **self.result.to_json(), "failed": self.failed,
                "seconds": round(self.seconds, 6)}


@dataclass(frozen=True)
class ManagerResult:
    """The manager's verdict on one pod, with each plugin's part."""

    admit: bool
    reason: str = ""
    message: str = ""
    plugins: tuple[PluginOutcome, ...] = field(default_factory=tuple)
    gate: bool = True

    @property
    def result(self) -> AdmitResult:
        return AdmitResult(self.admit, self.reason, self.message)

    def to_json(self) -> dict[str, Any]:
        return {**self.result.to_json(), "featureGate": self.gate, "plugins": [p.to_json() for p in self.plugins]}


def encode_pod(pod: dict[str, Any]) -> bytes:
    """The request every plugin type receives: the pod as compact UTF-8 JSON."""
    return json.dumps(pod, separators=(",", ":"), ensure_ascii=False).encode()


class AdmissionPluginManager:
    """Use :meth:`load`; then :meth:`admit` per pod; :meth:`close` at the end (or ``async with``)."""

    def __init__(self, config: ManagerConfig, plugin_config: PluginConfig | None) -> None:
        self.config = config
        self.plugin_config = plugin_config
        self.plugins: list[Plugin] = ([make_plugin(s, config.bin_dir) for s in plugin_config.plugins]
                                      if plugin_config is not None else [])

    @classmethod
    def load(cls, config: ManagerConfig) -> "AdmissionPluginManager":
        """Validate everything the manager needs before it admits a single pod.

        Gate off: nothing is read. Gate on: the configuration file must exist and
        be valid, and a grpc plugin needs grpcio — else :class:`ConfigError`.
        """
        if not config.enabled:
            return cls(config, None)
        path = config.config_file or find_config_file(config.conf_dir)
        plugin_config = load_plugin_config(path, config.socket_dir)
        if any(p.type == "grpc" for p in plugin_config.plugins):
            try:
                import grpc  # noqa: F401

                from fedplace.nodeadmit.api import podadmission_pb2  # noqa: F401
            except (ImportError, RuntimeError) as exc:  # RuntimeError: stubs newer than grpcio
                raise ConfigError("plugins", f"a grpc plugin is configured but gRPC is unusable ({exc}); "
                                             "install fedplace[nodeadmit]") from exc
        manager = cls(config, plugin_config)
        log.info("pod admission plugins loaded", extra={
            "config": str(path), "plugins": [p.describe() for p in plugin_config.plugins]})
        return manager

    async def __aenter__(self) -> "AdmissionPluginManager":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for plugin in self.plugins:
            await plugin.close()

    async def admit(self, pod: dict[str, Any]) -> ManagerResult:
        """Ask every plugin about ``pod`` in parallel; see the module docstring."""
        if not self.config.enabled:
            return ManagerResult(True, message=f"feature gate {FEATURE_GATE} is off: no plugin called", gate=False)
        request = encode_pod(pod)
        outcomes = await asyncio.gather(*(self._ask(p, request) for p in self.plugins))
        return self._combine(pod, outcomes)

    async def _ask(self, plugin: Plugin, request: bytes) -> PluginOutcome:
        spec = plugin.spec
        started = time.monotonic()
        failed = True
        try:
            async with asyncio.timeout(spec.timeout) as scope:
                result = await plugin.call(request)
            failed = False
        except PluginFailure as exc:
            result = AdmitResult.reject(exc.reason, exc.detail)
        except TimeoutError:
            if scope.expired():
                result = AdmitResult.reject(REASON_TIMEOUT, f"no answer within {spec.timeout:g}s")
            else:
                result = AdmitResult.reject(REASON_FAILED, "timed out on its own")
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, the pod is not admitted
            log.exception("pod admission plugin call failed", extra={"plugin": spec.name})
            result = AdmitResult.reject(REASON_FAILED, f"unexpected error: {exc.__class__.__name__}: {exc}")
        return PluginOutcome(spec.name, spec.type, result, time.monotonic() - started, failed)

    def _combine(self, pod: dict[str, Any], outcomes: list[PluginOutcome]) -> ManagerResult:
        rejected = [o for o in outcomes if not o.result.admit]
        if not rejected:
            return ManagerResult(True, plugins=tuple(outcomes))
        message = "; ".join(f"{o.name}: {o.result.message or o.result.reason}" for o in rejected)
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
        log.warning("pod rejected by admission plugins", extra={
            "pod": f"{meta.get('namespace', '')}/{meta.get('name', '')}", "reason": rejected[0].result.reason,
            "rejected_by": [o.name for o in rejected], "failed": [o.name for o in rejected if o.failed]})
        return ManagerResult(False, rejected[0].result.reason, message, tuple(outcomes))
