"""The node pack decides the same under the devstack engine and under OPA's own evaluator, and never raises.

Seeded random pods and node facts — well-formed ones and ones with wrongly
typed fields (what a static pod manifest on a node could hold) — are evaluated
at ``data.io.k8s.node.admission`` by the engine behind the ``opa`` fixture and
by OPA in process (tests/policies/differential.py compares); OPA's evaluator
runs with strict builtin errors, so a case that would make production OPA
silently drop a rule fails here. ``FEDPLACE_DIFF_SEED`` replaces the seed.
"""

from __future__ import annotations

import os
import random
from typing import Any

import aiohttp

from devstack.nodeadmit_demo import pack_modules
from tests.fixtures.opa import OpaServer
from tests.policies.differential import EngineSide, OpaSide

PATH = ("io", "k8s", "node", "admission")
SEED = int(os.environ.get("FEDPLACE_DIFF_SEED", "2823"))
CASES = 300

ODD = [None, 3, 2.5, True, "x", [], {}, [1, "a"], {"k": "v"}]
CAPS = ["NET_ADMIN", "cap_sys_admin", "CHOWN", "net_bind_service", "ALL", "SYS_TIME", "BPF", ""]
SYSCTLS = ["kernel.shm_rmid_forced", "net.core.somaxconn", "kernel/msgmax", "net/ipv4/tcp_syncookies",
           "net.ipv4.conf.eth0/100.rp_filter", "kernel.sem", "net.ipv4.tcp_rmem", ""]
PATHS = ["/", "/var/log", "/var/log/app", "/var/logs", "/etc", "/run/containerd/containerd.sock", ""]


def maybe(rng: random.Random, value: Any, odd: float = 0.1) -> Any:
    return rng.choice(ODD) if rng.random() < odd else value


def container(rng: random.Random, i: int) -> Any:
    sc: dict[str, Any] = {}
    if rng.random() < 0.3:
        sc["privileged"] = maybe(rng, rng.random() < 0.5)
    if rng.random() < 0.4:
        sc["capabilities"] = maybe(rng, {"add": maybe(rng, rng.sample(CAPS, rng.randint(0, 3))), "drop": ["ALL"]})
    c: dict[str, Any] = {"name": maybe(rng, f"c{i}", 0.05), "image": "img"}
    if sc or rng.random() < 0.1:
        c["securityContext"] = maybe(rng, sc, 0.05)
    return maybe(rng, c, 0.03)


def pod(rng: random.Random) -> Any:
    spec: dict[str, Any] = {}
    for field in ("initContainers", "containers", "ephemeralContainers"):
        if field == "containers" or rng.random() < 0.3:
            spec[field] = maybe(rng, [container(rng, i) for i in range(rng.randint(0, 3))], 0.05)
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if rng.random() < 0.2:
            spec[flag] = maybe(rng, rng.random() < 0.7)
    if rng.random() < 0.3:
        spec["volumes"] = maybe(rng, [maybe(rng, {"name": f"v{i}", "hostPath": maybe(rng, {"path": maybe(
            rng, rng.choice(PATHS))})} if rng.random() < 0.6 else {"name": f"v{i}", "emptyDir": {}}, 0.05)
            for i in range(rng.randint(0, 3))], 0.05)
    if rng.random() < 0.3:
        spec["securityContext"] = maybe(rng, {"sysctls": maybe(rng, [maybe(rng, {"name": maybe(rng, rng.choice(
            SYSCTLS)), "value": "1"}, 0.05) for _ in range(rng.randint(0, 3))], 0.05)}, 0.05)
    if rng.random() < 0.2:
        spec["runtimeClassName"] = maybe(rng, rng.choice(["runc", "gvisor", "kata"]))
    the_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    return maybe(rng, the_pod, 0.03)


def node(rng: random.Random) -> Any:
    facts: dict[str, Any] = {"name": "node-1", "labels": {}}
    if rng.random() < 0.4:
        facts["allowedCapabilities"] = maybe(rng, rng.sample(CAPS, rng.randint(0, 3)))
    if rng.random() < 0.4:
        facts["allowedUnsafeSysctls"] = maybe(rng, rng.sample(["net.core.*", "kernel.msg*", "kernel.sem", "*"], 2))
    if rng.random() < 0.4:
        facts["allowedHostPaths"] = maybe(rng, rng.sample(["/var/log/", "/var/log", "/", "/etc", 3], 2))
    if rng.random() < 0.4:
        facts["runtimeClasses"] = maybe(rng, rng.sample(["runc", "gvisor", "kata"], rng.randint(0, 2)))
    return maybe(rng, facts, 0.03)


def cases() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    return [{"pod": pod(rng), "node": node(rng)} for _ in range(CASES)]


async def test_engine_and_opa_decide_alike_and_opa_never_raises(opa: OpaServer) -> None:
    inputs = cases()
    async with aiohttp.ClientSession() as session:
        engine = EngineSide(opa, session)
        await engine.load_modules(pack_modules())
        theirs = await engine.evaluate_all(PATH, inputs)
    with OpaSide(pack_modules(), None) as reference:
        ours = reference.evaluate_all(PATH, inputs)
    raised = [(i, str(o)) for i, o in enumerate(ours) if o.error is not None]
    assert not raised, f"seed {SEED}: OPA raised on {raised[:3]}"
    differ = [(inputs[i], str(a), str(b)) for i, (a, b) in enumerate(zip(theirs, ours, strict=True)) if not a.agrees(b)]
    assert not differ, f"seed {SEED}: {len(differ)} cases differ, e.g. input {differ[0][0]}: " \
                       f"engine {differ[0][1]} vs OPA {differ[0][2]}"
    decided = {tuple(sorted(v["reason"] for v in o.value["deny"])) for o in ours}
    assert len(decided) > 10, "the generated cases hardly exercise the pack"
