"""A node for the node admission tests: configuration, bin and socket directories, plugin processes.

``node`` gives each test a fresh directory tree and starts real plugins: shell
scripts in the bin directory, and socket / gRPC servers as separate processes
(tests/nodeadmit/fakeplugin.py, or ``fedplace-node-admit`` itself). Every
process a test started is stopped after it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from devstack.launch import free_port
from devstack.nodeadmit_demo import port_open
from fedplace.nodeadmit.config import ManagerConfig
from fedplace.nodeadmit.manager import AdmissionPluginManager

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(sys.executable).parent
NODE_ADMIT = SCRIPTS / "fedplace-node-admit"
MANAGER = SCRIPTS / "fedplace-node-admit-manager"
ENV = {**os.environ, "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1",
       "PYTHONPATH": str(ROOT)}


def pod(name: str = "web", namespace: str = "shop", **spec: Any) -> dict[str, Any]:
    """A v1 Pod with one container, ``spec`` merged in."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}], **spec}}


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen | None, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        if ready():
            return
        time.sleep(0.02)
    raise TimeoutError(f"{what} not ready within {timeout}s")


@dataclass
class Node:
    """The directories of one node, and the plugin processes started on it."""

    root: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def sock(self) -> Path:
        return self.root / "sock"

    def shell(self, name: str, body: str, mode: int = 0o755) -> Path:
        """A /bin/sh plugin ``<bin>/<name>`` running ``body``."""
        path = self.bin / name
        path.write_text("#!/bin/sh\n" + body.strip() + "\n")
        path.chmod(mode)
        return path

    def config(self, plugins: list[dict[str, Any]], **top: Any) -> Path:
        """Write the one configuration file (replacing any other)."""
        for old in self.conf.iterdir():
            old.unlink()
        path = self.conf / "plugins.json"
        path.write_text(json.dumps({"name": "test", "version": "0.1", **top, "plugins": plugins}))
        return path

    def manager_config(self, enabled: bool = True) -> ManagerConfig:
        return ManagerConfig(conf_dir=self.conf, bin_dir=self.bin, socket_dir=self.sock, enabled=enabled)

    def manager(self, enabled: bool = True) -> AdmissionPluginManager:
        return AdmissionPluginManager.load(self.manager_config(enabled))

    def spawn(self, argv: list[str], ready: Callable[[], bool], what: str) -> subprocess.Popen:
        log = open(self.root / f"{what.replace('/', '_')}.log", "ab")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=ENV,
                                start_new_session=True)
        log.close()
        self.procs.append(proc)
        wait_until(ready, proc, what)
        return proc

    def fake(self, kind: str, behaviour: str, name: str | None = None, port: int | None = None) -> dict[str, Any]:
        """Start a fake socket or grpc plugin process (on ``port``, default a free one);
        returns its configuration entry."""
        name = name or f"{kind}-{behaviour.replace(':', '-')}"
        argv = [sys.executable, "-m", "tests.nodeadmit.fakeplugin", "--behaviour", behaviour]
        if kind == "socket":
            self._spawn_ready_line(argv + ["--socket", str(self.sock / f"{name}.sock")], name)
            return {"name": name, "type": "socket"}
        port = port or free_port()
        self._spawn_ready_line(argv + ["--grpc-port", str(port)], name)
        return {"name": name, "type": "grpc", "port": port}

    def _spawn_ready_line(self, argv: list[str], what: str) -> subprocess.Popen:
        def said_ready() -> bool:
            assert proc.stdout is not None
            readable, _, _ = select.select([proc.stdout], [], [], 0.05)
            return bool(readable) and proc.stdout.readline().strip() == b"ready"

        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                env=ENV, cwd=ROOT, start_new_session=True)
        self.procs.append(proc)
        wait_until(said_ready, proc, what)
        return proc

    def node_admit_server(self, config: Path, name: str = "fedplace-node-admit") -> dict[str, Any]:
        """``fedplace-node-admit`` serving both the socket and the grpc type; returns the ports/paths."""
        path, port = self.sock / f"{name}.sock", free_port()
        self.spawn([str(NODE_ADMIT), "--config", str(config), "--socket", str(path), "--grpc-port", str(port)],
                   lambda: path.exists() and port_open(port), name)
        return {"socket": path, "port": port}

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path)
    for d in (n.conf, n.bin, n.sock):
        d.mkdir()
    try:
        yield n
    finally:
        n.stop_all()


def run_manager(node: Node, *args: str, stdin: str | None = None, gates: str = "PodAdmissionPlugin=true",
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The console script, as a kubelet-side caller would run it."""
    argv = [str(MANAGER), "--conf-dir", str(node.conf), "--bin-dir", str(node.bin), "--socket-dir", str(node.sock),
            "--feature-gates", gates, *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=ENV)
