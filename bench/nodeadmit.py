"""Benchmark node-level pod admission: the latency the plugin manager adds to each pod.

Usage: .venv/bin/python bench/nodeadmit.py [--pods 500] [--shell-pods 100] [--cli-runs 20]
       [--opa-url URL [--opa-token-file PATH]] [--kubeconfig PATH (ignored)]

1. Manager overhead: the manager (in process, as a kubelet would embed it)
   admits ``--pods`` pods, one after the other, through 3 plugins of one type
   that answer at once — 3 ``/bin/sh`` scripts, 3 socket servers, 3 gRPC
   servers (each a separate process) — and through all 9 together. The figure
   is the wall time of ``manager.admit(pod)``: what a pod waits for.
2. ``fedplace-node-admit`` with the shipped pack (policies/nodeadmission) on a
   devstack engine (or ``--opa-url``), one plugin of each type, alone and all
   three together; pods alternate between admitted and rejected (4 violations).
3. The console script ``fedplace-node-admit-manager`` per pod (a process start
   each) with the 3 socket plugins: what a caller pays without the library.

Trivial plugins are this file run with ``--serve-socket PATH`` / ``--serve-grpc PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import add_server_flags, pct, servers  # noqa: E402
from devstack.launch import free_port  # noqa: E402
from devstack.nodeadmit_demo import pack_modules, port_open  # noqa: E402
from fedplace.nodeadmit.config import ManagerConfig  # noqa: E402
from fedplace.nodeadmit.manager import AdmissionPluginManager  # noqa: E402
from fedplace.nodeadmit.result import AdmitResult  # noqa: E402
from fedplace.nodeadmit.serve import serve_grpc, serve_socket  # noqa: E402

SCRIPTS = Path(sys.executable).parent
POLICY_PREFIX = "bench-nodeadmission/"
SH_PLUGIN = "#!/bin/sh\ncat >/dev/null\necho '{\"admit\": true}'\n"
ENV = {**os.environ, "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1"}


def a_pod(i: int, bad: bool = False) -> dict[str, Any]:
    """A realistic pod (~2 KB of JSON); ``bad`` adds host networking, privilege, a hostPath and a sysctl."""
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{j}", "image": f"registry.example/team/app-{j}:1.{i}",
                        "ports": [{"containerPort": 8080 + j}],
                        "env": [{"name": f"VAR_{k}", "value": "x" * 20} for k in range(5)],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        "securityContext": {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}}
                       for j in range(3)],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    }
    if bad:
        spec["hostNetwork"] = True
        spec["containers"][0]["securityContext"] = {"privileged": True}
        spec["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
        spec["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}", "labels": {"app": "bench"}},
            "spec": spec}


class Node:
    """A node's directories under ``root`` and the plugin processes the benchmark started."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf, self.bin, self.sock = root / "conf", root / "bin", root / "sock"
        for d in (self.conf, self.bin, self.sock):
            d.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], ready: Callable[[], bool]) -> None:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                env=ENV)
        self.procs.append(proc)
        deadline = time.monotonic() + 30
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"plugin did not start: {argv}")
            time.sleep(0.02)

    def trivial(self, kind: str, name: str) -> dict[str, Any]:
        me = [sys.executable, str(Path(__file__).resolve())]
        if kind == "shell":
            path = self.bin / name
            path.write_text(SH_PLUGIN)
            path.chmod(0o755)
            return {"name": name, "type": "shell"}
        if kind == "socket":
            path = self.sock / f"{name}.sock"
            self.start(me + ["--serve-socket", str(path)], path.exists)
            return {"name": name, "type": "socket"}
        port = free_port()
        self.start(me + ["--serve-grpc", str(port)], lambda: port_open(port))
        return {"name": name, "type": "grpc", "port": port}

    def manager(self, plugins: list[dict[str, Any]]) -> AdmissionPluginManager:
        path = self.root / f"config-{len(list(self.root.glob('config-*')))}.json"
        path.write_text(json.dumps({"name": "bench", "version": "0.1", "timeoutSeconds": 10, "plugins": plugins}))
        return AdmissionPluginManager.load(ManagerConfig(conf_dir=self.conf, bin_dir=self.bin,
                                                         socket_dir=self.sock, enabled=True, config_file=path))

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(10)


async def measure(manager: AdmissionPluginManager, pods: int, alternate: bool, warmup: int = 20) -> list[float]:
    """Milliseconds per ``admit`` call; with ``alternate`` every other pod is a bad one. Checks each verdict."""
    for i in range(warmup):
        await manager.admit(a_pod(i))
    out = []
    for i in range(pods):
        bad = alternate and i % 2 == 1
        pod = a_pod(i, bad)
        started = time.perf_counter()
        result = await manager.admit(pod)
        out.append((time.perf_counter() - started) * 1000)
        if result.admit == bad:
            raise SystemExit(f"unexpected verdict for pod {i} (bad={bad}): {result}")
    return out


def row(label: str, ms: list[float]) -> str:
    return f"| {label} | {len(ms)} | {pct(ms, 50):.2f} | {pct(ms, 99):.2f} | {sum(ms) / len(ms):.2f} |"


HEADER = "| plugins | pods | p50 ms | p99 ms | mean ms |\n|---|---|---|---|---|"


async def overhead(node: Node, args: argparse.Namespace) -> None:
    entries = {kind: [node.trivial(kind, f"{kind}-{i}") for i in range(3)] for kind in ("shell", "socket", "grpc")}
    print("\n1. Manager overhead, plugins that answer at once (in-process manager)\n")
    print(HEADER)
    for label, plugins, pods in (("3 × shell (/bin/sh)", entries["shell"], args.shell_pods),
                                 ("3 × socket", entries["socket"], args.pods),
                                 ("3 × grpc", entries["grpc"], args.pods),
                                 ("9: 3 of each type", sum(entries.values(), []), args.shell_pods)):
        async with node.manager(plugins) as manager:
            print(row(label, await measure(manager, pods, alternate=False)), flush=True)


async def opa_plugin(node: Node, args: argparse.Namespace, opa_url: str, token_file: Path | None) -> None:
    config = node.root / "node-admit.json"
    opa: dict[str, Any] = {"url": opa_url}
    if token_file:
        opa["token_file"] = str(token_file)
    config.write_text(json.dumps({"opa": opa, "deadline": 2, "node": {"name": "bench-node"}}))
    link = node.bin / "fedplace-node-admit"
    if not link.exists():
        link.symlink_to(SCRIPTS / "fedplace-node-admit")
    path, port = node.sock / "node-admit.sock", free_port()
    node.start([str(SCRIPTS / "fedplace-node-admit"), "--config", str(config), "--socket", str(path),
                "--grpc-port", str(port)], lambda: path.exists() and port_open(port))
    shell = {"name": "fedplace-node-admit", "type": "shell", "args": ["--config", str(config)]}
    sock = {"name": "node-admit-socket", "type": "socket", "socket": str(path)}
    grpc = {"name": "node-admit-grpc", "type": "grpc", "port": port}
    print("\n2. fedplace-node-admit + policies/nodeadmission; every other pod rejected (4 violations)\n")
    print(HEADER)
    for label, plugins, pods in (("1 × socket", [sock], args.pods), ("1 × grpc", [grpc], args.pods),
                                 ("1 × shell (a Python start per pod)", [shell], args.shell_pods // 4),
                                 ("socket + grpc", [sock, grpc], args.pods),
                                 ("shell + socket + grpc", [shell, sock, grpc], args.shell_pods // 4)):
        async with node.manager(plugins) as manager:
            print(row(label, await measure(manager, pods, alternate=True, warmup=5)), flush=True)


def console_script(node: Node, runs: int) -> None:
    config = node.root / "cli.json"
    config.write_text(json.dumps({"plugins": [{"name": f"socket-{i}", "type": "socket"} for i in range(3)]}))
    argv = [str(SCRIPTS / "fedplace-node-admit-manager"), "--config", str(config), "--bin-dir", str(node.bin),
            "--socket-dir", str(node.sock), "--feature-gates", "PodAdmissionPlugin=true"]
    pod = json.dumps(a_pod(0))
    ms = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(argv, input=pod, capture_output=True, text=True, env=ENV)
        ms.append((time.perf_counter() - started) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"console script failed: {proc.stderr}")
    print("\n3. The console script per pod, 3 × socket (process start included)\n")
    print(HEADER)
    print(row("3 × socket via fedplace-node-admit-manager", ms))


async def main_async(args: argparse.Namespace) -> None:
    logging.getLogger("fedplace.nodeadmit").setLevel(logging.ERROR)  # a warning per rejected pod is not a figure
    with tempfile.TemporaryDirectory(prefix="bench-nodeadmit-") as tmp:
        node = Node(Path(tmp) / "node")
        try:
            async with servers(args, Path(tmp)) as found:
                assert found.opa is not None
                print(f"Node admission benchmark ({os.cpu_count()} cores). {found.describe()}")
                await overhead(node, args)
                found.opa.owns(policies=[POLICY_PREFIX])
                async with found.opa.session() as s:
                    for module_id, source in pack_modules().items():
                        async with s.put(f"{found.opa.url}/v1/policies/{POLICY_PREFIX}{module_id}", data=source) as r:
                            r.raise_for_status()
                await opa_plugin(node, args, found.opa.url, found.opa.token_file)
                console_script(node, args.cli_runs)
        finally:
            node.stop()


async def serve_trivial(socket_path: str | None, grpc_port: int | None) -> None:
    async def admit(pod: dict[str, Any]) -> AdmitResult:
        return AdmitResult(True)

    server = await (serve_socket(admit, socket_path) if socket_path else serve_grpc(admit, grpc_port or 0))
    await asyncio.Event().wait()
    del server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=500, help="pods per socket/grpc row (default 500)")
    parser.add_argument("--shell-pods", type=int, default=100, help="pods per row with shell plugins (default 100)")
    parser.add_argument("--cli-runs", type=int, default=20, help="console script runs (default 20)")
    parser.add_argument("--serve-socket", help=argparse.SUPPRESS)
    parser.add_argument("--serve-grpc", type=int, help=argparse.SUPPRESS)
    add_server_flags(parser, opa=True)
    args = parser.parse_args()
    if args.serve_socket or args.serve_grpc:
        try:
            asyncio.run(serve_trivial(args.serve_socket, args.serve_grpc))
        except KeyboardInterrupt:
            pass
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
