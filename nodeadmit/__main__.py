"""``fedplace-node-admit-manager``: run the pod admission plugins for one pod, as a kubelet would.

The pod comes from a file (``--pod``: a static pod manifest, YAML or JSON) or
from stdin (a pod as the API server serves it): both take the same path. The
verdict is printed on stdout as JSON::

    {"admit": false, "reason": "HostNetworkForbidden", "message": "node-admit: …",
     "featureGate": true, "plugins": [{"name", "type", "admit", "reason", "message", "failed", "seconds"}, …],
     "podStatus": {"phase": "Failed", "reason": "HostNetworkForbidden", "message": "Pod was rejected: …"}}

``podStatus`` (only on rejection) is what the kubelet writes; ``--report``
writes it to the API server with a Warning Event (:mod:`fedplace.nodeadmit.rejection`).

Exit status: 0 admitted, 1 rejected, 2 the manager cannot start (invalid or
missing configuration, unknown feature gate) or the pod cannot be read.
``--check-config`` only validates the configuration (0 or 2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from fedplace.common.config import ConfigError
from fedplace.common.logs import configure_logging
from fedplace.nodeadmit.config import (
    DEFAULT_BIN_DIR,
    DEFAULT_CONF_DIR,
    DEFAULT_SOCKET_DIR,
    FEATURE_GATE,
    ManagerConfig,
    parse_feature_gates,
)
from fedplace.nodeadmit.manager import AdmissionPluginManager, ManagerResult
from fedplace.nodeadmit.rejection import rejected_pod_status, report_rejection

__all__ = ["PodInputError", "build_parser", "main", "manager_config", "read_pod"]

COMPONENT = "fedplace-node-admit-manager"
log = logging.getLogger("fedplace.nodeadmit")


class PodInputError(ValueError):
    """The pod to admit could not be read."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=COMPONENT, description=(
        "Node-level pod admission (KEP-2823): run every configured plugin on one pod, in parallel, fail closed."))
    p.add_argument("--conf-dir", default=DEFAULT_CONF_DIR,
                   help=f"holds the one configuration file (default {DEFAULT_CONF_DIR})")
    p.add_argument("--config", help="the configuration file itself (instead of searching --conf-dir)")
    p.add_argument("--bin-dir", default=DEFAULT_BIN_DIR, help=f"shell plugins' executables (default {DEFAULT_BIN_DIR})")
    p.add_argument("--socket-dir", default=DEFAULT_SOCKET_DIR,
                   help=f"socket plugins' sockets, <name>.sock (default {DEFAULT_SOCKET_DIR})")
    p.add_argument("--feature-gates", default="", help=f"e.g. {FEATURE_GATE}=true (off by default: admit everything)")
    p.add_argument("--pod", help="the pod: a manifest file (YAML or JSON); '-' or absent: stdin")
    p.add_argument("--check-config", action="store_true", help="validate the configuration and exit")
    p.add_argument("--report", action="store_true",
                   help="on rejection, write the pod's Failed status and a Warning Event to the API server")
    p.add_argument("--kubeconfig", help="for --report (default $KUBECONFIG, else in-cluster)")
    p.add_argument("--node-name", default=socket.gethostname(), help="for --report: the Event's source host")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def manager_config(args: argparse.Namespace) -> ManagerConfig:
    gates = parse_feature_gates(args.feature_gates)
    return ManagerConfig(conf_dir=Path(args.conf_dir), bin_dir=Path(args.bin_dir), socket_dir=Path(args.socket_dir),
                         enabled=gates[FEATURE_GATE], config_file=Path(args.config) if args.config else None)


def read_pod(path: str | None) -> dict[str, Any]:
    """A pod from a manifest file or stdin (YAML or JSON, one object)."""
    try:
        text = sys.stdin.read() if path in (None, "-") else Path(path).read_text(encoding="utf-8")  # type: ignore[arg-type]
    except (OSError, UnicodeDecodeError) as exc:
        raise PodInputError(f"cannot read the pod from {path}: {exc}") from exc
    try:
        pod = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PodInputError(f"the pod is not YAML or JSON: {exc}") from exc
    if not isinstance(pod, dict):
        raise PodInputError("the pod must be an object")
    if pod.get("kind", "Pod") != "Pod" or pod.get("apiVersion", "v1") != "v1":
        raise PodInputError(f"expected a v1 Pod, got {pod.get('apiVersion')}/{pod.get('kind')}")
    if not isinstance(pod.get("metadata", {}), dict) or not isinstance(pod.get("spec", {}), dict):
        raise PodInputError("metadata and spec must be objects")
    return pod


def output(result: ManagerResult) -> dict[str, Any]:
    doc = result.to_json()
    if not result.admit:
        doc["podStatus"] = rejected_pod_status(result.result)
    return doc


async def run(config: ManagerConfig, pod: dict[str, Any], args: argparse.Namespace) -> int:
    async with AdmissionPluginManager.load(config) as manager:
        result = await manager.admit(pod)
    print(json.dumps(output(result), ensure_ascii=False))
    if not result.admit and args.report:
        await report(pod, result, args)
    return 0 if result.admit else 1


async def report(pod: dict[str, Any], result: ManagerResult, args: argparse.Namespace) -> None:
    from fedplace.common.kube_client import KubeApiError, new_api_client  # only here: see nodeadmit.rejection

    if not (pod.get("metadata") or {}).get("name"):
        log.error("cannot report the rejection: the pod has no name")
        return
    api = await new_api_client(args.kubeconfig)
    try:
        await report_rejection(api, pod, result.result, args.node_name)
    except KubeApiError as exc:
        log.error("cannot report the rejection", extra={"error": str(exc)})
    finally:
        await api.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(COMPONENT, args.log_level)
    try:
        config = manager_config(args)
        if args.check_config:
            manager = AdmissionPluginManager.load(config)
            described = [p.describe() for p in manager.plugin_config.plugins] if manager.plugin_config else []
            print(json.dumps({"featureGate": config.enabled, "plugins": described}))
            return 0
        pod = read_pod(args.pod)
        return asyncio.run(run(config, pod, args))
    except ConfigError as exc:
        print(f"{COMPONENT}: invalid configuration, not starting: {exc}", file=sys.stderr)
        return 2
    except PodInputError as exc:
        print(f"{COMPONENT}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
