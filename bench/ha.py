"""Benchmark HA: the remediation leader SIGKILLed mid-remediation under a stream of admissions.

Usage: .venv/bin/python bench/ha.py [--objects 120] [--rate 10] [--kill-after 30] [--stream-rate 20]
       [--opa-bin PATH] [--kubeconfig PATH]

The scenario of tests/ha/test_ha.py, with its harness (tests/ha/harness.py), bigger
and measured: three opa-kube-sync + OPA pairs and three webhook processes against
one API server (the devstack's, or ``--kubeconfig``'s: a scratch server, since
the remediation would patch every ReplicaSet on it; the benchmark refuses one
that has any). The OPAs are real ``opa run --server`` with ``--opa-bin`` (default
``$REAL_OPA_BIN``), else devstack engines. A policy edit makes ``--objects``
ReplicaSets need a new annotation, remediated at ``--rate`` patches/s by the
leader; ReplicaSets are created through the webhook at ``--stream-rate``/s
meanwhile; once the leader has patched ``--kill-after``, its sync, its OPA and
one webhook are SIGKILLed. Prints the takeover time (kill → the new leader's
first Lease write and first patch), the remediation's completion, patches per
object (as the proxy in front of the API server counted them, and MODIFIED
events on a watch), and the admissions attempted, failed and their latency
before, during (kill → remediation complete) and after the kill.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, pct, servers  # noqa: E402
from devstack.launch import ServerProcess  # noqa: E402
from tests.ha.harness import HaStack, Outcome, kill_the_leader, seed  # noqa: E402

LEASE_SECONDS = 15.0  # the remediator's lease duration (remediator/config.py; no flag sets it)
_EXEC = "import os, sys; os.execv(sys.argv[1], sys.argv[1:])"  # python → OPA, same pid (SIGKILL reaches OPA)


def opa_starter(opa_bin: str | None):
    def start(log_dir: Path, name: str) -> ServerProcess:
        if opa_bin:
            return ServerProcess(name, ["-c", _EXEC, opa_bin, "run", "--server", "--addr", "127.0.0.1:{port}",
                                        "--disable-telemetry", "--log-level", "error"], "/health", log_dir).start()
        opa = Opa.start(log_dir, name)
        assert opa.process is not None
        return opa.process
    return start


def ms(values: list[float], p: float) -> str:
    return f"{pct(values, p) * 1000:.0f} ms" if values else "n/a"


def report(out: Outcome, args: argparse.Namespace) -> list[str]:
    rel = lambda t: f"{t - out.t_kill:.2f} s" if t is not None else "never"  # noqa: E731
    per_object = [len(ws) for ws in out.patches.values()]
    modified = [out.modified.get(n, 0) for n in out.objects]
    old = sum(1 for ws in out.patches.values() for w in ws if w.replica == out.leader)
    done = f"{out.t_done - out.t_edit:.2f} s (kill → done {out.t_done - out.t_kill:.2f} s)" if out.t_done else "never"
    rows = [
        ("leader killed (sync + OPA + one webhook, SIGKILL)", f"{out.leader}, after {old} patches"),
        (f"kill → new leader's first Lease write (lease {LEASE_SECONDS:.0f} s)", f"{rel(out.t_takeover)} ({out.new_leader})"),
        ("kill → new leader's first patch", rel(out.t_first_patch)),
        (f"policy edit → all {len(out.objects)} objects remediated", done),
        ("patches per object, proxy count (min / max)", f"{min(per_object)} / {max(per_object)}"),
        ("MODIFIED events per object, watch (min / max)", f"{min(modified)} / {max(modified)}"),
        ("patches of objects the edit did not affect", str(len(out.stray_patches))),
        ("admissions attempted / failed", f"{len(out.admissions)} / {sum(not a.ok for a in out.admissions)}"),
    ]
    for phase in ("before", "during", "after"):
        lat = [a.seconds for a in out.phase(phase)]
        rows.append((f"admission p50 / p99, {phase} the kill ({len(lat)} requests)",
                     f"{ms(lat, 50)} / {ms(lat, 99)}"))
    return ["| measurement | value |", "|---|---:|", *(f"| {k} | {v} |" for k, v in rows)]


async def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    async with servers(args, tmp) as srv:
        assert srv.kube is not None
        kube = srv.kube
        await kube.require_empty("/apis/apps/v1/replicasets", "remediation enforced would patch every ReplicaSet")
        policy_ns, changed_ns, stream_ns = [await kube.namespace(s) for s in ("policy", "changed", "stream")]
        stack = HaStack(kube.kubeconfig, kube.api, tmp, opa_starter(args.opa_bin), policy_ns, changed_ns, stream_ns,
                        rate=args.rate)
        await seed(kube.api, stack.changed_path, args.objects)
        await stack.put_policy("v1")
        try:
            await stack.start()
            out = await kill_the_leader(stack, objects=args.objects, kill_after=args.kill_after,
                                        stream_rate=args.stream_rate, before=3.0, after=3.0, complete_within=90)
        finally:
            await stack.stop()
        described = srv.describe()
    opas = f"real OPA ({args.opa_bin})" if args.opa_bin else "devstack engines"
    print(f"{described}; the three OPAs: {opas}\n")
    print(f"{args.objects} objects remediated at {args.rate:g} patches/s, admissions at {args.stream_rate:g}/s\n")
    print("\n".join(report(out, args)))
    failed = [a for a in out.admissions if not a.ok]
    if failed:
        print("\nfailed admissions (first 5):", *(f"  {a.error}" for a in failed[:5]), sep="\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=120)
    p.add_argument("--rate", type=float, default=10.0, help="remediation patches per second")
    p.add_argument("--kill-after", type=int, default=30, help="kill the leader after this many patches")
    p.add_argument("--stream-rate", type=float, default=20.0, help="admissions per second")
    p.add_argument("--opa-bin", default=os.environ.get("REAL_OPA_BIN") or None,
                   help="start real OPAs from this binary (default $REAL_OPA_BIN), else devstack engines")
    add_server_flags(p, kube=True)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
