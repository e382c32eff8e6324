"""Same-run A/B of the placement decision between source trees, each on a real OPA server of its own.

A change to the placement rules or to the cluster index is judged against the
code before it in one run, on the same machine at the same moment: for every
source tree given (the first is the baseline; make the others with
``git worktree add /tmp/before <commit>``), an ``opa run --server`` of the
real binary is started holding that tree's policies (every non-test module
under ``policies/``) and ``data.kubernetes`` with N Federation v1 Clusters
beside the cluster index that tree's own ``common/cluster_index.py`` (before: ``sync/``) builds
(bench/karmada.py's ``federation_clusters``: half in EU regions, PCI level
*i* mod 4). Then the ReplicaSet and the Deployment of bench/scale.py (EU and
PCI ≥ 2: a quarter of the clusters eligible) are asked of each server in turn,
in blocks, over one keep-alive connection per server, and every answer is
checked to name the same clusters on every tree. A second server per tree holds
the same clusters as Karmada Clusters, 1,000 Deployment templates and the
settings module ``control_plane := "karmada"`` (bench/karmada.py's), and is
asked bench/karmada.py's ResourceBinding (its template asks for EU and PCI ≥ 2):
the clusters its patch excludes must be the same on every tree.

Prints per decision and tree: p50 / p99, sequential decisions/s, the ratio of
p50 to the baseline's, the answer's size, and each OPA's RSS at the end.

    .venv/bin/python bench/placement_ab.py --opa-bin "$REAL_OPA_BIN" /tmp/before .
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import pct, proc_mb  # noqa: E402
from bench.engine import DEPLOY_INPUT  # noqa: E402
from bench.karmada import RS_INPUT, SETTINGS, binding_input, federation_clusters, karmada_clusters, templates  # noqa: E402

QUERY = "/v1/data/io/k8s/federation/admission"
BODIES = {"ReplicaSet": json.dumps({"input": RS_INPUT}), "Deployment": json.dumps(DEPLOY_INPUT),
          "binding": json.dumps({"input": binding_input(0)})}
KARMADA = {"binding"}  # decisions asked of the tree's Karmada server
PREFS = "federation.kubernetes.io/replica-set-preferences"
SELECTOR = "federation.alpha.kubernetes.io/cluster-selector"


def cluster_index_of(tree: Path) -> Any:
    """The ``cluster_index`` function of ``tree``'s own common/cluster_index.py (sync/ in older trees)."""
    path = next((p for p in (tree / "common" / "cluster_index.py", tree / "sync" / "cluster_index.py") if p.is_file()),
                tree / "common" / "cluster_index.py")
    spec = importlib.util.spec_from_file_location(f"cluster_index_{abs(hash(tree))}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{tree}: no common/cluster_index.py (nor sync/cluster_index.py)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cluster_index


def stage(tree: Path, kube: dict[str, Any], into: Path, settings: str | None = None) -> None:
    """``into``/policies: the tree's non-test modules (and ``settings``); ``into``/data.json:
    ``kube`` as data.kubernetes and the index of its clusters."""
    (into / "policies").mkdir(parents=True)
    for path in sorted((tree / "policies").rglob("*.rego")):
        if not path.name.endswith("_test.rego"):
            shutil.copy(path, into / "policies" / path.relative_to(tree / "policies").as_posix().replace("/", "__"))
    if settings is not None:
        (into / "policies" / "zz-settings.rego").write_text(settings)
    data = {"kubernetes": kube, "kubernetes_index": {"clusters": cluster_index_of(tree)(kube["clusters"])}}
    (into / "data.json").write_text(json.dumps(data))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"OPA on port {port} exited ({proc.returncode})")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health?bundles")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"OPA on port {port} not healthy within 60 s")


def clusters_named(kind: str, answer: dict[str, Any]) -> list[str]:
    """The clusters a decision names (its preferences' keys, the selector's name requirement, or
    the binding's patched exclude list)."""
    if kind in KARMADA:
        return [x for op in answer["patches"]["karmada"] if op["path"].endswith("/exclude") for x in op["value"]]
    value = answer.get("annotations", {}).get(PREFS if kind == "ReplicaSet" else SELECTOR)
    value = json.loads(value) if isinstance(value, str) else value
    if kind == "ReplicaSet":
        return sorted(value["clusters"])
    return sorted(v for req in value if req["key"] == "fedplace.io/cluster-name" for v in req["values"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="source trees; the first is the baseline")
    parser.add_argument("--opa-bin", default=os.environ.get("REAL_OPA_BIN"), help="the real opa binary (REAL_OPA_BIN)")
    parser.add_argument("--clusters", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=6, help="blocks per decision and tree")
    parser.add_argument("--block", type=int, default=50, help="decisions per block")
    args = parser.parse_args()
    if not args.opa_bin:
        parser.error("--opa-bin (or REAL_OPA_BIN) is required: the A/B is on real OPA")
    for tree in args.trees:
        if not (tree / "policies").is_dir():
            parser.error(f"{tree} is not a source tree (no policies/)")
    worlds = {"federation": ({"clusters": federation_clusters(args.clusters)}, None),
              "karmada": ({"clusters": karmada_clusters(args.clusters), "deployments": templates(1_000)}, SETTINGS)}
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="bench-placement-ab-") as tmp:
        try:
            servers: list[dict[str, http.client.HTTPConnection]] = []
            for n, tree in enumerate(args.trees):
                servers.append({})
                for world, (kube, settings) in worlds.items():
                    staged = Path(tmp) / f"{n}-{world}"
                    stage(tree, kube, staged, settings)
                    port = free_port()
                    procs.append(subprocess.Popen(
                        [args.opa_bin, "run", "--server", "--addr", f"127.0.0.1:{port}",
                         str(staged / "policies"), str(staged / "data.json")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                    wait_healthy(port, procs[-1])
                    servers[n][world] = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conns = [{kind: s["karmada" if kind in KARMADA else "federation"] for kind in BODIES} for s in servers]
            lat: dict[tuple[int, str], list[float]] = {(n, k): [] for n in range(len(conns)) for k in BODIES}
            size: dict[tuple[int, str], int] = {}
            named: dict[str, list[str]] = {}

            def ask(n: int, kind: str) -> float:
                t = time.perf_counter()
                conns[n][kind].request("POST", QUERY, body=BODIES[kind], headers={"Content-Type": "application/json"})
                resp = conns[n][kind].getresponse()
                raw = resp.read()
                ms = (time.perf_counter() - t) * 1000
                if resp.status != 200:
                    raise SystemExit(f"{args.trees[n]}: {kind}: HTTP {resp.status}: {raw[:300]!r}")
                got = clusters_named(kind, json.loads(raw)["result"])
                if named.setdefault(kind, got) != got:
                    raise SystemExit(f"{args.trees[n]}: {kind}: names {len(got)} clusters, the baseline "
                                     f"{len(named[kind])}: not the same decision")
                size[(n, kind)] = len(raw)
                return ms

            load = os.getloadavg()[0]
            for n in range(len(conns)):  # warm-up, and the answers checked
                for kind in BODIES:
                    for _ in range(20):
                        ask(n, kind)
            for _ in range(args.rounds):
                for n in range(len(conns)):
                    for kind in BODIES:
                        lat[(n, kind)] += [ask(n, kind) for _ in range(args.block)]
            rss = [sum(proc_mb(p.pid) for p in procs[2 * n:2 * n + 2]) for n in range(len(args.trees))]
        finally:
            for p in procs:
                p.terminate()
                p.wait()
    print(f"placement at {args.clusters:,} clusters, real OPA ({args.opa_bin}), one server per tree; "
          f"{args.rounds} blocks of {args.block} per decision and tree, alternating; "
          f"load average {load:.1f} → {os.getloadavg()[0]:.1f}\n")
    print("| decision | tree | p50 / p99 (ms) | decisions/s | p50 ratio | answer | RSS, both OPAs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind in BODIES:
        base = statistics.median(lat[(0, kind)])
        for n, tree in enumerate(args.trees):
            xs = lat[(n, kind)]
            p50 = statistics.median(xs)
            print(f"| {kind} | {tree} | {p50:.2f} / {pct(xs, 99):.2f} | {1000 / statistics.mean(xs):,.0f} | "
                  f"{p50 / base:.2f}× | {size[(n, kind)] / 1024:.1f} KB | {rss[n]:.0f} MB |")


if __name__ == "__main__":
    main()
