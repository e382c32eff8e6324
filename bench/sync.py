"""Benchmark opa-kube-sync: initial replication, peak RSS, and event-to-OPA lag.

Usage: .venv/bin/python bench/sync.py [--replicasets 10000] [--clusters 1000] [--rate 200] [--seconds 10]
       [--opa-url URL [--opa-token-file PATH]] [--kubeconfig PATH]

Starts the devstack engine and API server (or uses external ones, see
bench/common.py), creates the objects, then starts opa-kube-sync as a
subprocess and measures:

* initial replication: process start → /readyz (every type listed and pushed,
  sentinel written), and the same minus the process's own start-up (→ /healthz);
* peak RSS of the sync (VmHWM);
* lag under a steady stream of updates: from the API server acknowledging a
  PATCH to OPA serving the new value (polled), p50/p99;
* baseline, same run: loading the same objects into a fresh engine with one PUT
  per object — kube-mgmt's per-event path. Against an external OPA there is no
  fresh engine to start: the objects go into the same OPA under
  ``data.bench_baseline`` (the output says so).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from kubernetes_asyncio import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, pct, post_all, proc_mb, servers  # noqa: E402
from fedplace.common.kube_client import kube_json  # noqa: E402
from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH  # noqa: E402
from devstack.launch import ServerProcess, wait_http  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402
from fedplace.sync.sentinel import SENTINEL_PATH  # noqa: E402

NAMESPACES = 20
RS_PATH = "/apis/apps/v1/replicasets"
BASELINE_ROOT = "bench_baseline"  # the baseline's document on an external OPA


def rs(i: int, namespaces: list[str]) -> dict:
    name = f"rs{i}"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespaces[i % NAMESPACES], "labels": {"app": name, "gen": "0"},
                         "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": str(i % 3)}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def cluster(i: int) -> dict:
    return {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": f"c{i}", "labels": {"pci-compliance-level": str(i % 4)}},
            "status": {"region": "europe-west1" if i % 2 else "us-east1"}}


async def baseline(s: aiohttp.ClientSession, opa: Opa, tmp: Path, objs: list[tuple[str, dict]]) -> tuple[float, str]:
    """Seconds to PUT ``objs`` (paths under the replicated root) one by one into a fresh
    devstack engine, or into ``data.bench_baseline`` of the external OPA; and which it was."""
    if opa.external:
        opa.owns(documents=(BASELINE_ROOT,))
        target, root, where = opa, BASELINE_ROOT, f"the same external OPA, under data.{BASELINE_ROOT}"
    else:
        target, root, where = Opa.start(tmp, "engine-baseline"), "kubernetes", "a fresh devstack engine"
    try:
        t = time.perf_counter()
        for path, body in objs:
            async with s.put(f"{target.url}/v1/data/{root}/{path}", json=body) as r:
                assert r.status == 204, await r.text()
        return time.perf_counter() - t, where
    finally:
        if target is not opa:
            await target.close()


async def run(args: argparse.Namespace) -> None:
    n_rs, n_clusters, rate, seconds = args.replicasets, args.clusters, args.rate, args.seconds
    tmp = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    async with servers(args, tmp, kube_args=["--history", "100000"]) as srv:
        assert srv.opa is not None and srv.kube is not None
        opa, kube = srv.opa, srv.kube
        await kube.require_empty(RS_PATH, "the sync replicates every ReplicaSet and the figures count only ours")
        opa.owns(documents=("kubernetes", SENTINEL_PATH[0]), policies=(replicated_root.POLICY_ID,))
        namespaces = [await kube.namespace(f"ns{i}") for i in range(NAMESPACES)]
        await kube.install_crd(CLUSTER_CRD, CLUSTERS_PATH)
        t = time.perf_counter()
        await post_all(kube.api, [(f"/apis/apps/v1/namespaces/{namespaces[i % NAMESPACES]}/replicasets",
                                   rs(i, namespaces)) for i in range(n_rs)])
        await post_all(kube.api, [(CLUSTERS_PATH, cluster(i)) for i in range(n_clusters)])
        print(f"created {n_rs:,} ReplicaSets + {n_clusters:,} clusters in {time.perf_counter() - t:.1f}s",
              file=sys.stderr)

        sync = ServerProcess("sync", [
            "-m", "fedplace.sync", *opa.sync_flags(), "--kubeconfig", str(kube.kubeconfig),
            "--listen", "127.0.0.1:{port}", "--replicate", "apps/v1/replicasets",
            "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters", "--enable-policies=false",
            "--log-level", "warning"], "/healthz", tmp)
        try:
            async with opa.session() as s:
                t0 = time.perf_counter()
                sync.start()
                t_alive = time.perf_counter() - t0
                wait_http(sync.url + "/readyz", timeout=120, proc=sync.proc)
                t_ready = time.perf_counter() - t0
                async with s.get(opa.url + "/v1/data/kubernetes/replicasets") as r:
                    doc = await r.json()
                replicated = sum(len(v) for v in doc["result"].values())
                assert replicated == n_rs, replicated

                hist_before = await lag_histogram(s, sync.url)
                lags = await measure_lag(s, kube.api, opa.url, namespaces, n_rs, rate, seconds)
                hist = diff_histogram(await lag_histogram(s, sync.url), hist_before)
                assert sync.proc is not None
                rss_peak = proc_mb(sync.proc.pid, "VmHWM")

                # Baseline: the same objects, one PUT per object (kube-mgmt's per-event path).
                objs = [(f"replicasets/{namespaces[i % NAMESPACES]}/rs{i}", rs(i, namespaces)) for i in range(n_rs)]
                objs += [(f"clusters/c{i}", cluster(i)) for i in range(n_clusters)]
                t_baseline, baseline_where = await baseline(s, opa, tmp, objs)
        finally:
            sync.stop()
        described = srv.describe()
    print(f"{described}\n")
    n = n_rs + n_clusters
    print(f"| measurement | value |")
    print(f"|---|---:|")
    print(f"| initial replication of {n:,} objects, process start → ready | {t_ready:.2f} s |")
    print(f"| of which process start-up (→ /healthz) | {t_alive:.2f} s |")
    print(f"| initial replication after start-up | {t_ready - t_alive:.2f} s |")
    print(f"| baseline: one PUT per object, same objects, into {baseline_where} | {t_baseline:.2f} s |")
    print(f"| ratio baseline / sync (after start-up) | {t_baseline / max(t_ready - t_alive, 1e-9):.1f}x |")
    print(f"| sync peak RSS (VmHWM) | {rss_peak:.0f} MB |")
    total = int(rate * seconds)
    print(f"| update → visible in OPA (polled), p50 ({len(lags)}/{total} seen within 10 s, at {rate:.0f}/s) "
          f"| {statistics.median(lags):.1f} ms |")
    print(f"| update → visible in OPA (polled), p99 | {pct(lags, 99):.1f} ms |")
    print(f"| replication lag histogram (event received → OPA write done), p50 | ≤ {hist_quantile(hist, 0.5) * 1000:g} ms |")
    print(f"| replication lag histogram, p99 ({int(hist.get(float('inf'), 0))} events) | ≤ {hist_quantile(hist, 0.99) * 1000:g} ms |")


async def lag_histogram(s: aiohttp.ClientSession, sync_url: str) -> dict[float, float]:
    """Cumulative bucket counts of fedplace_sync_replication_lag_seconds (replicasets) from /metrics."""
    async with s.get(sync_url + "/metrics") as r:
        text = await r.text()
    out: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("fedplace_sync_replication_lag_seconds_bucket") and "replicasets" in line:
            le = line.split('le="')[1].split('"')[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def diff_histogram(after: dict[float, float], before: dict[float, float]) -> dict[float, float]:
    return {le: n - before.get(le, 0.0) for le, n in after.items()}


def hist_quantile(hist: dict[float, float], q: float) -> float:
    """The smallest bucket bound holding the q-quantile (an upper bound of it)."""
    total = hist.get(float("inf"), 0.0)
    for le in sorted(hist):
        if total and hist[le] >= q * total:
            return le
    return float("nan")


async def measure_lag(s: aiohttp.ClientSession, api: client.ApiClient, opa: str, namespaces: list[str], n_rs: int,
                      rate: float, seconds: float) -> list[float]:
    """PATCH a label at ``rate``/s; for each, time until OPA serves the new value."""
    lags: list[float] = []
    tasks: list[asyncio.Task[None]] = []

    async def watch_for(i: int, gen: str, acked: float) -> None:
        url = f"{opa}/v1/data/kubernetes/replicasets/{namespaces[i % NAMESPACES]}/rs{i}/metadata/labels/gen"
        deadline = acked + 10
        while time.perf_counter() < deadline:
            async with s.get(url) as r:
                if (await r.json()).get("result") == gen:
                    lags.append((time.perf_counter() - acked) * 1000)
                    return
            await asyncio.sleep(0.002)

    total = int(rate * seconds)
    start = time.perf_counter()
    for k in range(total):
        await asyncio.sleep(max(0.0, start + k / rate - time.perf_counter()))
        i = (k * 7919) % n_rs
        gen = str(k + 1)
        await kube_json(api, "PATCH", f"/apis/apps/v1/namespaces/{namespaces[i % NAMESPACES]}/replicasets/rs{i}",
                        body={"metadata": {"labels": {"gen": gen}}}, content_type="application/merge-patch+json")
        tasks.append(asyncio.create_task(watch_for(i, gen, time.perf_counter())))
    await asyncio.gather(*tasks)
    return lags


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicasets", type=int, default=10_000)
    p.add_argument("--clusters", type=int, default=1_000)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=10.0)
    add_server_flags(p, opa=True, kube=True)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
