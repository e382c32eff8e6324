"""``fedplace-node-admit``: a node admission plugin that asks OPA, usable as all three plugin types.

For each pod it POSTs ``{"input": {"pod": <pod>, "node": <facts>}}`` to
``/v1/data/io/k8s/node/admission`` (configurable) of a node-local OPA,
retrying like the admission webhook (backoff with jitter, ``Retry-After``,
all inside one deadline: :mod:`fedplace.common.opa_query`), and maps the decision onto
an AdmitResult (:func:`result_from_outcome`).

Decision contract: the document is an object whose ``deny`` is a set (a JSON
array) of violations, each ``{"reason": "OneWord", "message": "…"}`` (a bare
string counts as a violation with reason :data:`REASON_DENIED`). No violation →
admit. Otherwise reject: violations sorted by (reason, message), the first one's
reason, every message joined with ``; ``. Other keys of the document are
ignored. No usable decision — OPA unreachable or failing after retries, the
document undefined (policy not loaded), a malformed document — rejects with
:data:`REASON_POLICY_ERROR` (fail closed).

Modes::

    fedplace-node-admit --config FILE                      # shell: pod on stdin, AdmitResult on stdout
    fedplace-node-admit --config FILE --socket PATH        # socket server
    fedplace-node-admit --config FILE --grpc-port 50051    # gRPC server (both flags: both servers)

The configuration file (YAML or JSON; default ``$FEDPLACE_NODE_ADMIT_CONFIG``,
else :data:`DEFAULT_CONFIG`)::

    opa:                        # as fedplace-admission's opa section (common.config)
      url: http://127.0.0.1:8181
      decision_path: /v1/data/io/k8s/node/admission
      token_file: /etc/fedplace/node-admit/opa-token
      timeout: 1                # seconds per attempt
    deadline: 2                 # seconds for the whole decision, retries included
    retry: {initial: 0.05, max: 0.5, jitter: 0.05}
    log_level: warning
    node:                       # the node's facts, passed to the policy as input.node
      name: node-a              # default: this host's name
      labels: {topology.kubernetes.io/zone: eu-west-1a}
      runtimeClasses: [runc, gvisor]
      allowedUnsafeSysctls: ["net.core.somaxconn"]
      allowedCapabilities: [NET_BIND_SERVICE]
      allowedHostPaths: []

Exit status: 0 (shell: an AdmitResult was written, whatever it says; server:
after SIGTERM/SIGINT), 2 invalid configuration, 1 a server could not start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from fedplace.common.config import ConfigError, OpaEndpoint, number, only, opa_section, read_config_file, retry_section
from fedplace.common.logs import configure_logging
from fedplace.common.opa_client import OpaClient
from fedplace.common.opa_query import OpaOutcome, query_within_deadline
from fedplace.common.retry import Backoff, Deadline
from fedplace.common.shutdown import stop_on_signals
from fedplace.nodeadmit.result import AdmitResult, InvalidResult, validate_result
from fedplace.nodeadmit.serve import run_shell, serve_grpc, serve_socket

__all__ = ["DEFAULT_CONFIG", "DEFAULT_DECISION_PATH", "NodeAdmitConfig", "NodeAdmitPlugin", "REASON_DENIED",
           "REASON_POLICY_ERROR", "config_from_mapping", "main", "result_from_outcome"]

log = logging.getLogger("fedplace.nodeadmit.opa")

COMPONENT = "fedplace-node-admit"
DEFAULT_CONFIG = "/etc/fedplace/node-admit.yaml"
CONFIG_ENV = "FEDPLACE_NODE_ADMIT_CONFIG"
DEFAULT_DECISION_PATH = "/v1/data/io/k8s/node/admission"
REASON_POLICY_ERROR = "NodeAdmissionPolicyError"
REASON_DENIED = "NodeAdmissionDenied"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
MAX_DEADLINE = 60.0

_TOP = ("opa", "deadline", "retry", "node", "log_level")
_LIST_FACTS = ("runtimeClasses", "allowedUnsafeSysctls", "allowedCapabilities", "allowedHostPaths")


@dataclass(frozen=True)
class NodeOpa(OpaEndpoint):
    """The ``opa`` section, for the node decision."""

    decision_path: str = DEFAULT_DECISION_PATH
    timeout: float = 1.0


@dataclass(frozen=True)
class NodeAdmitConfig:
    opa: NodeOpa = NodeOpa()
    deadline: float = 2.0
    retry: Backoff = Backoff(initial=0.05, maximum=0.5, jitter=0.05)
    node: dict[str, Any] = field(default_factory=dict)
    log_level: str = "warning"


def _facts(doc: Mapping[str, Any]) -> dict[str, Any]:
    node = doc.get("node")
    if node is None:
        node = {}
    if not isinstance(node, Mapping):
        raise ConfigError("node", "must be a mapping of facts about the node")
    facts = dict(node)
    name = facts.setdefault("name", socket.gethostname())
    if not isinstance(name, str) or not name:
        raise ConfigError("node.name", "must be a non-empty string")
    labels = facts.setdefault("labels", {})
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in labels.items()):
        raise ConfigError("node.labels", "must map strings to strings")
    for key in _LIST_FACTS:
        value = facts.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"node.{key}", "must be a list of strings")
    return facts


def config_from_mapping(doc: Mapping[str, Any]) -> NodeAdmitConfig:
    """Validate a configuration document; raises :class:`ConfigError` naming the field."""
    if not isinstance(doc, Mapping):
        raise ConfigError("config", "the configuration must be a mapping")
    only(doc, _TOP, "")
    opa = opa_section(doc, NodeOpa, default_decision_path=DEFAULT_DECISION_PATH, max_timeout=MAX_DEADLINE)
    retry = retry_section(doc) if doc.get("retry") is not None else NodeAdmitConfig.retry
    log_level = doc.get("log_level", NodeAdmitConfig.log_level)
    if not isinstance(log_level, str) or log_level.lower() not in LOG_LEVELS:
        raise ConfigError("log_level", f"{log_level!r}: expected one of {', '.join(LOG_LEVELS)}")
    return NodeAdmitConfig(opa=opa, deadline=number(doc, "deadline", "deadline", NodeAdmitConfig.deadline,
                                                    maximum=MAX_DEADLINE),
                           retry=retry, node=_facts(doc), log_level=log_level.lower())


def result_from_outcome(outcome: OpaOutcome) -> AdmitResult:
    """Map what OPA answered onto an AdmitResult (the module docstring's contract)."""
    where = f"data.{outcome.query_path.replace('/', '.')}"
    if outcome.error is not None:
        tries = f" after {outcome.attempts} attempts" if outcome.attempts > 1 else ""
        return AdmitResult.reject(REASON_POLICY_ERROR, "node admission policy could not be evaluated (failing "
                                                       f"closed): policy engine error{tries}: {outcome.error}")
    if not outcome.defined:
        return AdmitResult.reject(REASON_POLICY_ERROR, f"no node admission decision: {where} is undefined "
                                                       "(is the policy loaded?)")
    decision = outcome.result
    if not isinstance(decision, dict):
        return _malformed(f"{where} is a {type(decision).__name__}, not an object")
    deny = decision.get("deny", [])
    if not isinstance(deny, list):
        return _malformed(f"{where}.deny must be a set of violations")
    violations: list[tuple[str, str]] = []
    for item in deny:
        if isinstance(item, str):
            violations.append((REASON_DENIED, item))
        elif isinstance(item, dict) and isinstance(item.get("reason"), str) and isinstance(item.get("message"), str):
            violations.append((item["reason"], item["message"]))
        else:
            return _malformed(f"a violation in {where}.deny is not {{reason, message}} strings")
    if not violations:
        return AdmitResult(True)
    violations.sort()
    try:
        return validate_result({"admit": False, "reason": violations[0][0],
                                "message": "; ".join(m for _, m in violations)})
    except InvalidResult as exc:
        return _malformed(str(exc))


def _malformed(what: str) -> AdmitResult:
    return AdmitResult.reject(REASON_POLICY_ERROR, f"malformed node admission decision (failing closed): {what}")


class NodeAdmitPlugin:
    """The plugin's handler (``await plugin(pod)``); :meth:`close` releases the OPA client."""

    def __init__(self, config: NodeAdmitConfig, client: OpaClient | None = None) -> None:
        self.config = config
        self.client = client or OpaClient(config.opa.settings())

    async def __call__(self, pod: dict[str, Any]) -> AdmitResult:
        outcome = await query_within_deadline(
            self.client, self.config.opa.query_path, {"pod": pod, "node": self.config.node},
            deadline=Deadline(self.config.deadline), attempt_timeout=self.config.opa.timeout,
            backoff=self.config.retry)
        result = result_from_outcome(outcome)
        if not result.admit:
            meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
            log.info("pod rejected", extra={"pod": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
                                            "reason": result.reason, "opa_attempts": outcome.attempts})
        return result

    async def close(self) -> None:
        await self.client.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=COMPONENT, description=(
        "Node-level pod admission plugin deciding with OPA. Without --socket/--grpc-port: one pod on stdin, "
        "its AdmitResult on stdout (the shell plugin type)."))
    p.add_argument("--config", help=f"YAML/JSON configuration (default ${CONFIG_ENV}, else {DEFAULT_CONFIG})")
    p.add_argument("--socket", help="serve the socket plugin type on this Unix socket path")
    p.add_argument("--grpc-port", type=int, help="serve the grpc plugin type on this local port")
    p.add_argument("--grpc-host", default="127.0.0.1", help="address for --grpc-port (default 127.0.0.1)")
    p.add_argument("--log-level", choices=LOG_LEVELS, help="overrides log_level of the file")
    return p


async def serve(plugin: NodeAdmitPlugin, socket_path: str | None, grpc_port: int | None, grpc_host: str) -> None:
    stop = stop_on_signals()
    servers: list[Any] = []
    grpc_server = None
    try:
        if socket_path:
            servers.append(await serve_socket(plugin, socket_path))
        if grpc_port is not None:
            grpc_server = await serve_grpc(plugin, grpc_port, grpc_host)
        log.info("serving", extra={"socket": socket_path, "grpc": grpc_port and f"{grpc_host}:{grpc_port}"})
        await stop.wait()
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()
        if socket_path and os.path.exists(socket_path):
            os.unlink(socket_path)
        if grpc_server is not None:
            await grpc_server.stop(1.0)
        await plugin.close()


async def _shell(plugin: NodeAdmitPlugin) -> int:
    try:
        return await run_shell(plugin)
    finally:
        await plugin.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    path = args.config or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG
    try:
        config = config_from_mapping(read_config_file(path))
    except ConfigError as exc:
        print(f"{COMPONENT}: invalid configuration {path}: {exc}", file=sys.stderr)
        return 2
    configure_logging(COMPONENT, args.log_level or config.log_level)
    plugin = NodeAdmitPlugin(config)
    if not args.socket and args.grpc_port is None:
        return asyncio.run(_shell(plugin))
    try:
        asyncio.run(serve(plugin, args.socket, args.grpc_port, args.grpc_host))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # noqa: BLE001 - report start-up failures in one line
        log.error("plugin server failed", extra={"error": f"{exc.__class__.__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
