"""Fixtures of the monitoring tests: Debian's ``prometheus`` package (``prometheus``
and ``promtool``, 2.42), and a real Prometheus server run by a test.

Where the binaries are absent the tests that need them are skipped with one line
saying so (``apt-get install prometheus``; .ci/run installs it).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import aiohttp
import pytest
import yaml

from devstack.launch import free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "deploy" / "components" / "monitoring"
RULES = COMPONENT / "fedplace.rules.yml"
RULE_TESTS = Path(__file__).resolve().parent / "fedplace.rules.test.yml"
DASHBOARD = COMPONENT / "dashboard.json"
PODMONITORS = COMPONENT / "podmonitors.yaml"

SKIP = "(Debian: apt-get install prometheus; .ci/run installs it): the checks with the real Prometheus are skipped"


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"no {name} installed {SKIP}")
    return found


@pytest.fixture(scope="session")
def promtool() -> str:
    return _binary("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return _binary("prometheus")


@dataclass
class Prometheus:
    """One ``prometheus`` server process with its own config, data directory and port."""

    binary: str
    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def start(self, config: dict[str, Any], timeout: float = 20.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(config, sort_keys=False))
        log = open(self.log_path, "ab")
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1"}
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={cfg}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info",
             # the console assets Debian ships under /etc/prometheus are not needed
             f"--web.console.templates={self.workdir}", f"--web.console.libraries={self.workdir}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        log.close()
        try:
            wait_http(self.url + "/-/ready", timeout=timeout, proc=self.proc)
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"prometheus did not start: {exc}\n--- {self.log_path} ---\n{self.log_tail()}") from exc

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    async def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the ``data`` of a successful answer."""
        async with aiohttp.ClientSession(trust_env=False) as session:
            async with session.get(f"{self.url}/api/v1/{path}", params=params) as resp:
                body = json.loads(await resp.text())
        assert body.get("status") == "success", (path, params, body)
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector (or a scalar as one sample)."""
        data = await self.api("query", query=expr, time=f"{time.time():.3f}")
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    async def alerts(self, state: str | None = None) -> list[dict[str, Any]]:
        """Alerts pending or firing now (``state``: only those)."""
        found = (await self.api("alerts"))["alerts"]
        return [a for a in found if state is None or a["state"] == state]

    async def wait_for(self, check: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = await check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n--- prometheus log ---\n"
                                     f"{self.log_tail()}")
            await asyncio.sleep(0.25)


@pytest.fixture
def prometheus(prometheus_bin: str, tmp_path: Path) -> Iterator[Prometheus]:
    """A Prometheus for the test (not started: ``start(config)``); stopped after it."""
    server = Prometheus(prometheus_bin, tmp_path / "prometheus")
    try:
        yield server
    finally:
        server.stop()
