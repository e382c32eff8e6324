"""Start devstack and fedplace processes as subprocesses and wait until they answer.

One launcher for the demo, the benchmarks and the test fixtures: a free
loopback port, a log file per process, readiness by polling an HTTP URL,
stop with SIGTERM then SIGKILL, and restart on the same port (how tests and
the demo simulate an OPA restart).
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ServerProcess", "free_port", "stop_all", "wait_http"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 15.0, token: str | None = None,
              ok: tuple[int, ...] = (200,), proc: subprocess.Popen | None = None,
              cafile: str | None = None) -> None:
    """Poll ``url`` until it answers a status in ``ok``; raise TimeoutError otherwise.

    Fails at once if ``proc`` exits meanwhile.
    """
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ctx = ssl.create_default_context(cafile=cafile) if cafile else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with opener.open(urllib.request.Request(url, headers=headers), timeout=2) as resp:
                if resp.status in ok:
                    return
                last = str(resp.status)
        except urllib.error.HTTPError as exc:
            if exc.code in ok:
                return
            last = str(exc.code)
        except (OSError, urllib.error.URLError) as exc:
            last = str(exc)
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s (last: {last})")


@dataclass
class ServerProcess:
    """A subprocess serving HTTP on ``port``; ``args`` may contain ``{port}``."""

    name: str
    args: list[str]
    ready_path: str
    log_dir: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    scheme: str = "http"
    token: str | None = None
    cafile: str | None = None
    ready_ok: tuple[int, ...] = (200,)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def start(self, timeout: float = 20.0) -> "ServerProcess":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1",
               "PYTHONUNBUFFERED": "1", **self.env}
        argv = [sys.executable, *[a.format(port=self.port) for a in self.args]]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        try:
            wait_http(self.url + self.ready_path, timeout=timeout, token=self.token, ok=self.ready_ok,
                      proc=self.proc, cafile=self.cafile)
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"{self.name} did not start: {exc}\n--- {self.log_path} ---\n{self.log_tail()}") from exc
        return self

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self, timeout: float = 20.0) -> "ServerProcess":
        """Stop and start again on the same port."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_all(procs: list[ServerProcess], timeout: float = 10.0) -> None:
    """Stop every process of ``procs`` at once: SIGTERM to all, then SIGKILL to those still
    running after ``timeout`` seconds; waits until each has exited."""
    running = [p.proc for p in procs if p.proc is not None and p.proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in running:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
