"""``fedplace-admission --workers N``: N processes serve one port (SO_REUSEPORT).

The real command as a subprocess against the devstack (or external) engine
and API server: both workers answer, ``/metrics`` sums them, SIGTERM stops
them gracefully (exit 0), a worker that dies takes the supervisor down
(exit 1). Behaviour only: no timing assertions.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Awaitable

import aiohttp
import pytest
from kubernetes_asyncio import client

from devstack.launch import ServerProcess
from fedplace.admission.config import ConfigError, load_config
from fedplace.common.kube_client import kube_json
from tests.admission.conftest import eventually, replicaset, review
from tests.fixtures.kube import ScratchNamespaces


def log_lines(proc: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.log_path.read_text().splitlines() if line.startswith("{")]


def worker_pids(proc: ServerProcess) -> list[int]:
    """The workers' pids, as the supervisor logs them; each is a live child of the supervisor."""
    assert proc.proc is not None
    pids = [line["pids"] for line in log_lines(proc) if line.get("msg") == "admission workers started"][0]
    for pid in pids:
        assert f"PPid:\t{proc.proc.pid}\n" in Path(f"/proc/{pid}/status").read_text()
    return list(pids)


def gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


@pytest.fixture
async def workers(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                  tmp_path: Path) -> Any:
    policy_ns = await kube_namespaces.create("fedplace-policy")
    await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {}})
    token_file = tmp_path / "opa.token"
    token_file.write_text((opa.token or f"unused-{uuid.uuid4().hex}") + "\n")
    proc = ServerProcess("admission-workers", [
        "-m", "fedplace.admission", "--workers", "2", "--listen", "127.0.0.1:{port}",
        "--kubeconfig", str(kube.kubeconfig), "--opa-url", opa.url, "--opa-token-file", str(token_file), "--policy-namespace", policy_ns,
        "--deadline", "1"], "/readyz", tmp_path)
    proc.start(timeout=60)

    async def both_listening() -> bool:  # /readyz answered by one; the kernel uses only workers that listen
        return {line.get("worker") for line in log_lines(proc)
                if line.get("msg") == "admission webhook listening"} == {0, 1}

    try:
        await eventually(both_listening, 30, "both workers listening")
        yield proc
    finally:
        proc.stop(30)


async def test_two_processes_serve_the_port_and_metrics_are_summed(workers: ServerProcess) -> None:
    assert len(worker_pids(workers)) == 2
    n = 40
    async with aiohttp.ClientSession() as session:
        for _ in range(n):  # a new connection each time: the kernel picks a worker per connection
            async with session.post(workers.url + "/mutate", json=review(replicaset()),
                                    headers={"Connection": "close"}) as resp:
                body = await resp.json()
            # A ConfigMap exists, no module defines the decision: fail closed, from either worker.
            assert resp.status == 200 and body["response"]["allowed"] is False

        async def both_logged() -> set[int]:
            seen = {line["worker"] for line in log_lines(workers) if line.get("msg") == "admission decision"}
            return seen if seen == {0, 1} else set()

        await eventually(both_logged, 10, "decisions logged by both workers")

        async def total() -> float:
            async with session.get(workers.url + "/metrics") as resp:
                text = await resp.text()
            pattern = r'^fedplace_admission_requests_total\{outcome="\w+"\} (\S+)$'
            return sum(float(v) for v in re.findall(pattern, text, re.M))

        # any worker's /metrics shows the sum over the workers (counted just after each answer)
        await eventually(lambda: _equal(total(), n), 10, f"/metrics to count {n} requests")


async def _equal(value: Awaitable[float], expected: float) -> bool:
    return await value == expected


async def test_sigterm_stops_every_worker_gracefully(workers: ServerProcess) -> None:
    assert workers.proc is not None
    pids = worker_pids(workers)
    workers.proc.send_signal(signal.SIGTERM)
    assert workers.proc.wait(30) == 0
    assert all(gone(pid) for pid in pids)
    lines = log_lines(workers)
    assert {line.get("worker") for line in lines if line.get("msg") == "admission webhook stopped"} == {0, 1}
    assert any(line.get("msg") == "admission workers stopped" for line in lines)


async def test_a_worker_that_dies_stops_the_supervisor_with_exit_1(workers: ServerProcess) -> None:
    assert workers.proc is not None
    victim, other = worker_pids(workers)
    os.kill(victim, signal.SIGKILL)
    assert workers.proc.wait(30) == 1
    assert gone(other)
    assert any(line.get("msg") == "an admission worker exited; stopping the others" for line in log_lines(workers))


def test_the_port_taken_is_exit_1_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "fedplace.admission", "--workers", "2",
                               "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(tmp_path / "none")], capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 1
    assert "cannot bind" in done.stderr


@pytest.mark.parametrize("value", ["0", "65", "-1"])
def test_workers_out_of_range_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="workers"):
        load_config(["--workers", value])


def test_workers_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "admission.yaml"
    path.write_text("workers: 4\n")
    assert load_config(["--config", str(path)]).workers == 4
    assert load_config([]).workers == 1
