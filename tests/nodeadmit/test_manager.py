"""The plugin manager over real processes, pipes, Unix sockets and gRPC ports.

Every plugin here is a real one: /bin/sh scripts for the shell type, separate
processes (tests/nodeadmit/fakeplugin.py) for the socket and grpc types. No
client of ours is mocked; failures are real crashes, hangs and bad bytes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from devstack.launch import free_port
from fedplace.nodeadmit.manager import ManagerResult
from fedplace.nodeadmit.result import (
    REASON_FAILED,
    REASON_INVALID_RESULT,
    REASON_MISSING,
    REASON_NOT_EXECUTABLE,
    REASON_TIMEOUT,
    REASON_UNREACHABLE,
)
from tests.nodeadmit.conftest import Node, pod

ADMIT = 'cat >/dev/null\necho \'{"admit": true}\''


def reject_script(reason: str, message: str) -> str:
    answer = json.dumps({"admit": False, "reason": reason, "message": message})
    return f"cat >/dev/null\necho '{answer}'"


async def admit(node: Node, the_pod: dict | None = None) -> ManagerResult:
    async with node.manager() as manager:
        return await manager.admit(the_pod or pod())


def alive(pid: int, grace: float = 2.0) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for a reaper does not), after a short grace."""
    deadline = time.monotonic() + grace
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state == "Z" or time.monotonic() > deadline:
            return state != "Z"
        time.sleep(0.05)


def outcome(result: ManagerResult, name: str):  # type: ignore[no-untyped-def]
    return next(p for p in result.plugins if p.name == name)


# -- the three types answer ------------------------------------------------------------


async def test_shell_plugins_admit_and_reject(node: Node) -> None:
    node.shell("ok", ADMIT)
    node.shell("sysctlcheck", reject_script("UnsafeSysctl", "kernel.msgmax is not allowed"))
    node.config([{"name": "ok", "type": "shell"}, {"name": "sysctlcheck", "type": "shell"}])
    result = await admit(node)
    assert not result.admit
    assert result.reason == "UnsafeSysctl"
    assert result.message == "sysctlcheck: kernel.msgmax is not allowed"
    assert outcome(result, "ok").result.admit and not outcome(result, "ok").failed
    assert not outcome(result, "sysctlcheck").failed

    node.config([{"name": "ok", "type": "shell"}])
    assert (await admit(node)).admit


async def test_shell_plugin_gets_the_pod_on_stdin_and_its_args(node: Node) -> None:
    seen = node.root / "seen.json"
    node.shell("recorder", f'printf "%s\\n" "$*" > {seen}.args\ncat > {seen}\necho \'{{"admit": true}}\'')
    node.config([{"name": "recorder", "type": "shell", "args": ["--node", "n1"]}])
    the_pod = pod("äpp", hostNetwork=True)
    assert (await admit(node, the_pod)).admit
    assert json.loads(seen.read_text()) == the_pod
    assert Path(f"{seen}.args").read_text().strip() == "--node n1"


@pytest.mark.parametrize("kind", ["socket", "grpc"])
async def test_server_plugins_admit_and_reject(node: Node, kind: str) -> None:
    good = node.fake(kind, "admit")
    bad = node.fake(kind, "reject")
    node.config([good, bad])
    result = await admit(node, pod("web"))
    assert not result.admit
    assert result.reason == "FakeRejected"
    assert result.message == f"{bad['name']}: pod web is not welcome"
    assert outcome(result, good["name"]).result.message == "pod web is fine"  # the pod arrived

    node.config([good])
    assert (await admit(node)).admit


async def test_the_first_rejection_in_config_order_names_the_reason(node: Node) -> None:
    """The slow plugin listed first gives the reason; every message is listed in config order."""
    node.shell("slow", f"sleep 0.5\n{reject_script('SlowNo', 'slow says no')}")
    node.shell("fast", reject_script("FastNo", "fast says no"))
    node.shell("ok", ADMIT)
    node.config([{"name": "slow", "type": "shell"}, {"name": "ok", "type": "shell"},
                 {"name": "fast", "type": "shell"}])
    result = await admit(node)
    assert (result.admit, result.reason) == (False, "SlowNo")
    assert result.message == "slow: slow says no; fast: fast says no"


# -- in parallel -----------------------------------------------------------------------


async def test_three_shell_plugins_sleeping_one_second_take_about_one_second(node: Node) -> None:
    for name in ("a", "b", "c"):
        node.shell(name, f"sleep 1\n{ADMIT}")
    node.config([{"name": n, "type": "shell"} for n in ("a", "b", "c")])
    started = time.monotonic()
    result = await admit(node)
    elapsed = time.monotonic() - started
    assert result.admit
    assert all(p.seconds >= 0.9 for p in result.plugins)
    assert elapsed < 2.5, f"plugins ran one after the other? {elapsed:.2f}s"


async def test_one_plugin_of_each_type_sleeping_one_second_take_about_one_second(node: Node) -> None:
    node.shell("sleeper", f"sleep 1\n{ADMIT}")
    entries = [{"name": "sleeper", "type": "shell"}, node.fake("socket", "sleep:1"), node.fake("grpc", "sleep:1")]
    node.config(entries)
    started = time.monotonic()
    result = await admit(node)
    elapsed = time.monotonic() - started
    assert result.admit, result
    assert all(p.seconds >= 0.9 for p in result.plugins)
    assert elapsed < 2.5, f"plugins ran one after the other? {elapsed:.2f}s"


# -- fail closed: every way a plugin can fail rejects the pod ----------------------------


def assert_rejected_by(result: ManagerResult, name: str, reason: str, *fragments: str) -> None:
    assert not result.admit
    assert result.reason == reason, result
    part = outcome(result, name)
    assert part.failed and part.result.reason == reason
    assert result.message.startswith(f"{name}: ")
    for fragment in fragments:
        assert fragment in result.message, result.message


async def test_shell_crash_rejects_with_stderr(node: Node) -> None:
    node.shell("crasher", "cat >/dev/null\necho 'panic: nil map' >&2\necho '{\"admit\": true}'\nexit 3")
    node.config([{"name": "crasher", "type": "shell"}])
    assert_rejected_by(await admit(node), "crasher", REASON_FAILED, "exited with status 3", "stderr: panic: nil map")


async def test_shell_killed_by_a_signal_rejects(node: Node) -> None:
    node.shell("segv", "echo 'about to die' >&2\nkill -SEGV $$")
    node.config([{"name": "segv", "type": "shell"}])
    assert_rejected_by(await admit(node), "segv", REASON_FAILED, "killed by SIGSEGV", "about to die")


@pytest.mark.parametrize("kind", ["socket", "grpc"])
async def test_server_crash_mid_request_rejects(node: Node, kind: str) -> None:
    entry = node.fake(kind, "crash")
    node.config([entry])
    result = await admit(node)
    # A gRPC client sees the dropped connection as UNAVAILABLE.
    expected = {REASON_FAILED} if kind == "socket" else {REASON_FAILED, REASON_UNREACHABLE}
    assert not result.admit and result.reason in expected, result
    assert outcome(result, entry["name"]).failed


async def test_shell_timeout_kills_the_plugin_and_its_children(node: Node) -> None:
    pids = node.root / "pids"
    node.shell("stuck", f"sleep 30 &\necho $! > {pids}\necho $$ >> {pids}\nwait")
    node.config([{"name": "stuck", "type": "shell", "timeoutSeconds": 0.5}])
    started = time.monotonic()
    result = await admit(node)
    assert time.monotonic() - started < 3
    assert_rejected_by(result, "stuck", REASON_TIMEOUT, "no answer within 0.5s")
    for pid in map(int, pids.read_text().split()):
        assert not alive(pid), f"process {pid} of the timed-out plugin still runs"


@pytest.mark.parametrize("kind", ["socket", "grpc"])
async def test_server_timeout_rejects(node: Node, kind: str) -> None:
    entry = {**node.fake(kind, "hang"), "timeoutSeconds": 0.5}
    node.config([entry])
    started = time.monotonic()
    result = await admit(node)
    assert time.monotonic() - started < 3
    assert_rejected_by(result, entry["name"], REASON_TIMEOUT, "within 0.5s")


async def test_missing_plugins_reject(node: Node) -> None:
    port = free_port()  # nobody listens there
    node.config([{"name": "nobin", "type": "shell"}, {"name": "nosock", "type": "socket"},
                 {"name": "noport", "type": "grpc", "port": port}])
    result = await admit(node)
    assert (result.admit, result.reason) == (False, REASON_MISSING)
    assert outcome(result, "nobin").result.reason == REASON_MISSING
    assert outcome(result, "nosock").result.reason == REASON_MISSING
    assert outcome(result, "noport").result.reason == REASON_UNREACHABLE
    assert f"nobin: no executable at {node.bin / 'nobin'}" in result.message
    assert f"nosock: no socket at {node.sock / 'nosock.sock'}" in result.message
    assert f"noport: 127.0.0.1:{port}: UNAVAILABLE" in result.message


@pytest.mark.parametrize("setup, fragment", [
    (lambda n: n.shell("plugin", ADMIT, mode=0o644), "is not an executable file"),
    (lambda n: (n.bin / "plugin").mkdir(), "is not an executable file"),
    (lambda n: n.shell("plugin", ADMIT).write_text("#!/nonexistent/interpreter\n"), "cannot be executed"),
    (lambda n: (n.shell("plugin", ADMIT).write_bytes(b"\x7fELF\x00garbage")), "cannot be executed"),
], ids=["mode-644", "a-directory", "missing-interpreter", "not-a-program"])
async def test_not_executable_rejects(node: Node, setup, fragment: str) -> None:  # type: ignore[no-untyped-def]
    setup(node)
    node.config([{"name": "plugin", "type": "shell"}])
    assert_rejected_by(await admit(node), "plugin", REASON_NOT_EXECUTABLE, fragment)


async def test_socket_that_nobody_serves_rejects(node: Node) -> None:
    stale = node.sock / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()  # the file stays, nobody listens: a plugin that died
    (node.sock / "file.sock").write_text("not a socket")
    node.config([{"name": "stale", "type": "socket"}, {"name": "file", "type": "socket"}])
    result = await admit(node)
    assert (result.admit, result.reason) == (False, REASON_UNREACHABLE)
    assert outcome(result, "file").result.reason == REASON_UNREACHABLE
    assert "cannot connect to" in result.message


@pytest.mark.parametrize("stdout, fragment", [
    ("hello, kubelet", "not JSON: 'hello, kubelet'"),
    ("", "no answer"),
    ("[true]", "not an object"),
    ('{"reason": "NoVerdict"}', 'no "admit"'),
    ('{"admit": "yes"}', '"admit" must be true or false'),
    ('{"admit": false, "message": "why not"}', 'a rejection without a "reason"'),
    ('{"admit": false, "reason": "two words"}', '"reason" must be one word'),
    ('{"admit": true, "message": 5}', '"message" must be a string'),
], ids=["text", "empty", "array", "no-admit", "admit-not-bool", "no-reason", "bad-reason", "bad-message"])
async def test_shell_garbage_or_incomplete_result_rejects(node: Node, stdout: str, fragment: str) -> None:
    node.shell("liar", f"cat >/dev/null\nprintf '%s' '{stdout}'\necho 'some detail' >&2")
    node.config([{"name": "liar", "type": "shell"}])
    assert_rejected_by(await admit(node), "liar", REASON_INVALID_RESULT, fragment, "stderr: some detail")


async def test_shell_oversized_output_rejects(node: Node) -> None:
    node.shell("flood", "cat >/dev/null\nwhile :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done")
    node.config([{"name": "flood", "type": "shell", "timeoutSeconds": 10}])
    started = time.monotonic()
    assert_rejected_by(await admit(node), "flood", REASON_INVALID_RESULT, "more than 1048576 bytes")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("kind", ["socket", "grpc"])
@pytest.mark.parametrize("behaviour, reason", [
    ("garbage", REASON_INVALID_RESULT), ("incomplete", REASON_INVALID_RESULT), ("error", REASON_FAILED)])
async def test_server_garbage_incomplete_or_error_rejects(node: Node, kind: str, behaviour: str, reason: str) -> None:
    entry = node.fake(kind, behaviour)
    node.config([entry])
    assert_rejected_by(await admit(node), entry["name"], reason)


async def test_a_plugin_that_ignores_a_large_pod_on_stdin_still_answers(node: Node) -> None:
    node.shell("deaf", "echo '{\"admit\": true}'")  # never reads stdin
    node.config([{"name": "deaf", "type": "shell"}])
    big = pod(annotations_padding="x" * 1_000_000)
    assert (await admit(node, big)).admit


async def test_grpc_plugin_restart_is_picked_up_within_seconds(node: Node) -> None:
    """The manager's channel reconnects quickly (gRPC's default backoff grows to 2 minutes)."""
    entry = node.fake("grpc", "admit", name="restarting")
    node.config([entry])
    async with node.manager() as manager:
        assert (await manager.admit(pod())).admit
        proc = node.procs[-1]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        down = await manager.admit(pod())
        assert (down.admit, down.reason) == (False, REASON_UNREACHABLE)
        await asyncio.sleep(1.5)  # the channel backs off meanwhile
        node.fake("grpc", "admit", name="restarting", port=entry["port"])
        started = time.monotonic()
        while not (await manager.admit(pod())).admit:
            assert time.monotonic() - started < 5, "still rejecting 5 s after the plugin came back"
            await asyncio.sleep(0.1)
