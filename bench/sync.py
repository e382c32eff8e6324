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

``--target`` (real servers): 100,000 ReplicaSets of ~0.6 KB in
100 namespaces + 5,000 Cluster objects, created once (64 concurrent POSTs,
timed). First 10 % of them are created and measured as the baseline of the
same run, then the rest is created and the full size measured (``--runs``
start-ups). Each start-up gets a fresh ``opa run --server`` (``--opa-bin``,
default ``$REAL_OPA_BIN``) so that OPA's memory is that of the sync's data:
process start → /readyz, a count of what OPA holds, the sync's VmHWM and OPA's
RSS (sampled every 50 ms), then 500 annotation PATCHes/s for 60 s (concurrent,
distinct objects: long enough to hold the Go servers' periodic garbage
collection), one in ``--sample`` timed from the API server's answer to
OPA serving the value (OPA asked every 2 ms, one query for every update not
seen yet) and to its arrival at a bare watcher
process (``bench/watcher.py``: what any watcher on the machine gets, the
floor under the sync's figure), with what to read the tail by: the cores each
process used, when OPA completed a garbage-collection cycle, the API server's
cycles and the watchers it closed as too slow, and the seconds in which the
late updates fell. At full size, before the start-ups, the sync's informer
(its own settings: compact cache, noise stripped) lists the ReplicaSets each
way of ``LIST_WAYS`` in turn, ``--runs`` + 1 times each: its first list from
the watch cache in one answer (gzip-compressed, as aiohttp asks), the paged
list from etcd (the library's way, and every relist's), and the watch cache's
answer uncompressed. Each full-size start-up comes with one start-up per
setting in which the sync departs from a library's default (``LIBRARY_WAYS``:
Python's garbage-collection threshold), with that default given back by a
flag, each taking its turn first, after one warm-up start-up that is left out
(the first after the lists is slower whatever it runs): a same-run A/B of
each:

    .venv/bin/python bench/sync.py --target --opa-url "$FEDPLACE_TEST_OPA_URL" \
        --kubeconfig "$FEDPLACE_TEST_KUBECONFIG" --opa-bin "$REAL_OPA_BIN"
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, cpu_seconds, listener_pid, pct, post_all, proc_mb, servers  # noqa: E402
from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH  # noqa: E402
from devstack.launch import ServerProcess, free_port, wait_http  # noqa: E402
from fedplace.common.informer import Informer  # noqa: E402
from fedplace.common.kube_client import KubeApiError, Resource, kube_json, kube_stream, new_api_client  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402
from fedplace.sync.replicate import informer_settings  # noqa: E402
from fedplace.sync.sentinel import SENTINEL_PATH  # noqa: E402

NAMESPACES = 20
RS_PATH = "/apis/apps/v1/replicasets"
RS = Resource("apps", "v1", "replicasets", True)
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
    print("| measurement | value |")
    print("|---|---:|")
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


# -- 100,000 ReplicaSets + 5,000 clusters on the real servers (--target) ----------

GEN = "fedplace-bench-gen"  # the annotation the updates set (no "/": it is read as an OPA path segment)
TARGET_READY_S, TARGET_RSS_MB, TARGET_P99_MS = 10.0, 600.0, 50.0


def realistic_rs(i: int, namespace: str) -> dict:
    """A ReplicaSet of about 0.6 KB of JSON (as created, before the API server adds its metadata)."""
    name = f"rs{i}"
    labels = {"app": name, "tier": ("web", "api", "worker")[i % 3], "team": f"team{i % 40}"}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": str(i % 3),
                                         GEN: "0"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{
                                      "name": "app", "image": f"registry.example.com/team{i % 40}/app:1.27.{i % 10}",
                                      "ports": [{"name": "http", "containerPort": 8080}],
                                      "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                    "limits": {"cpu": "500m", "memory": "256Mi"}}}]}}}}


class RssSampler:
    """Samples the VmRSS of some processes every ``interval`` s in a thread (the event loop may be busy)."""

    def __init__(self, pids: dict[str, int | None], interval: float = 0.05) -> None:
        self.pids = {k: v for k, v in pids.items() if v}
        self.peak: dict[str, float] = {k: 0.0 for k in self.pids}
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, pid in self.pids.items():
                try:
                    self.peak[name] = max(self.peak[name], proc_mb(pid))
                except OSError:
                    pass
            self._stop.wait(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def start_opa(binary: str, tmp: Path, name: str) -> tuple[str, subprocess.Popen]:
    """A fresh ``opa run --server`` on a free loopback port: (url, process)."""
    port = free_port()
    log = open(tmp / f"{name}.log", "ab")
    proc = subprocess.Popen([binary, "run", "--server", "--addr", f"127.0.0.1:{port}", "--log-level", "error"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health", timeout=30, proc=proc)
    return url, proc


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def opa_counts(s: aiohttp.ClientSession, url: str) -> dict[str, int]:
    """How many ReplicaSets, clusters and indexed cluster names OPA holds (one ad-hoc query)."""
    query = ("rs := count([1 | data.kubernetes.replicasets[_][_]]); cl := count(data.kubernetes.clusters); "
             "ix := count(data.kubernetes_index.clusters.names)")
    async with s.post(url + "/v1/query", json={"query": query}) as r:
        doc = await r.json()
    result = (doc.get("result") or [{}])[0]
    return {k: int(result.get(k, -1)) for k in ("rs", "cl", "ix")}


async def create_range(kube_api: client.ApiClient, namespaces: list[str], lo: int, hi: int, c_lo: int,
                       c_hi: int) -> float:
    """Create ReplicaSets ``lo..hi-1`` and clusters ``c_lo..c_hi-1`` (64 concurrent POSTs): seconds taken."""
    t = time.perf_counter()
    n = len(namespaces)
    await post_all(kube_api, [(f"/apis/apps/v1/namespaces/{namespaces[i % n]}/replicasets",
                               realistic_rs(i, namespaces[i % n])) for i in range(lo, hi)])
    await post_all(kube_api, [(CLUSTERS_PATH, cluster(i)) for i in range(c_lo, c_hi)])
    return time.perf_counter() - t


def read_arrivals(path: Path) -> dict[tuple[str, str], float]:
    """What bench/watcher.py wrote so far: (name, annotation value) → CLOCK_MONOTONIC seconds."""
    arrivals: dict[tuple[str, str], float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                arrivals.setdefault((parts[0], parts[1]), float(parts[2]))
    return arrivals


GO_GC_CYCLES = "go_gc_duration_seconds_count"  # a Go server's completed garbage-collection cycles

# The probe of the updates' arrival in OPA, loaded for the update phase: one query (a path OPA keeps
# prepared) answers for every pending update, where a GET per update and poll costs OPA a query
# compiled for its path, and twice the allocation.
PROBE_POLICY_ID, PROBE_PACKAGE = "fedplace_bench_probe", "fedplace_bench_probe"
PROBE_POLICY = f"""package {PROBE_PACKAGE}

# input.pending[k] = [namespace, name, annotation]: what OPA holds there, per k.
values[k] := v if {{
	some k
	p := input.pending[k]
	v := data.kubernetes.replicasets[p[0]][p[1]].metadata.annotations[p[2]]
}}
"""


def metric_total(text: str, name: str) -> float:
    """The sum of sample ``name``'s values (every label set) in a Prometheus exposition ``text``."""
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name)


async def api_server_metrics(api: client.ApiClient) -> str:
    """The API server's /metrics ("" when it has none to give)."""
    try:
        resp = await kube_stream(api, "GET", "/metrics")
    except KubeApiError:
        return ""
    try:
        return (await resp.read()).decode()
    finally:
        resp.release()


def machine_cpu_seconds() -> float:
    """CPU time every core of the machine has spent busy so far (/proc/stat: all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def cpu_shares(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Cores used per process over ``seconds`` (``machine``: all of them; ``others``: the rest)."""
    shares = {name: (after[name] - before[name]) / seconds for name in before}
    shares["others"] = shares["machine"] - sum(v for k, v in shares.items() if k != "machine")
    return shares


def second_ranges(seconds: list[float]) -> str:
    """Whole seconds, as ranges: [0.2, 1.5, 5.1, 6.9, 7.0] → "0–1, 5–7"."""
    out: list[str] = []
    for k in sorted({int(x) for x in seconds}):
        if out and int(out[-1].split("–")[-1]) == k - 1:
            out[-1] = f"{out[-1].split('–')[0]}–{k}"
        else:
            out.append(str(k))
    return ", ".join(out) or "none"


async def drive_updates(s: aiohttp.ClientSession, api: client.ApiClient, kubeconfig: Path, tmp: Path, opa_url: str,
                        namespaces: list[str], n_rs: int, rate: float, seconds: float, sample: int,
                        pids: dict[str, int | None]) -> dict:
    """PATCH the ``GEN`` annotation of distinct ReplicaSets at ``rate``/s (concurrently, at most 128 in
    flight); for one update in ``sample``, time from the API server's answer until OPA serves the value
    (every 2 ms one query, ``PROBE_POLICY``, asks OPA for every such update not seen yet), and until a
    bare watcher, a process of its own (bench/watcher.py), received it: the floor any watcher on the
    machine, the sync too, is subject to (``watch_lags``; ``watch_unseen``: not received within 10 s of
    the last update).

    What the machine and the Go servers did meanwhile, to read the tail by: when OPA completed a
    garbage-collection cycle (``opa_gc_at``, seconds since the first update, its /metrics polled every
    0.5 s), how many the API server completed (``api_gc_cycles``) and how many watchers it closed as too
    slow (``watchers_closed``); and in which seconds the updates over ``TARGET_P99_MS`` were
    acknowledged (``late_at``: to OPA, ``watch_late_at``: to the bare watcher). ``cpu``: the cores each
    process of ``pids`` used while the updates were sent, beside this benchmark's own (the sender and
    the poller), the bare watcher's, the machine's and the rest's (etcd, for one)."""
    total = int(rate * seconds)
    n_ns = len(namespaces)
    inflight = asyncio.Semaphore(128)
    lags: list[float] = []
    out: dict = {"acked": 0, "errors": 0, "unseen": 0, "behind": 0.0, "late_at": [], "opa_gc_at": []}
    run = os.urandom(3).hex()
    sampled: list[tuple[str, str, float]] = []  # (name, gen, acked): CLOCK_MONOTONIC seconds
    pending: dict[str, tuple[str, str, str, float]] = {}  # timed, not yet seen in OPA: (namespace, name, gen, acked)
    async with s.put(f"{opa_url}/v1/policies/{PROBE_POLICY_ID}", data=PROBE_POLICY) as r:
        assert r.status == 200, await r.text()
    head = await kube_json(api, "GET", RS_PATH, query=[("limit", 1)])
    arrivals_file = tmp / f"arrivals-{time.monotonic_ns()}"
    watcher = subprocess.Popen([sys.executable, str(Path(__file__).with_name("watcher.py")), str(kubeconfig), RS_PATH,
                                head["metadata"]["resourceVersion"], GEN, str(arrivals_file)])
    deadline = time.perf_counter() + 30
    while not (arrivals_file.exists() and arrivals_file.read_text().startswith("watching")):
        assert watcher.poll() is None and time.perf_counter() < deadline, "bench/watcher.py did not start watching"
        await asyncio.sleep(0.05)
    api_before = await api_server_metrics(api)

    async def one(k: int) -> None:
        i = (k * 7919) % n_rs
        gen = f"{run}.{k + 1}"  # never a value the object already holds: a no-op PATCH would not be watched
        ns = namespaces[i % n_ns]
        async with inflight:
            try:
                await kube_json(api, "PATCH", f"/apis/apps/v1/namespaces/{ns}/replicasets/rs{i}",
                                body={"metadata": {"annotations": {GEN: gen}}},
                                content_type="application/merge-patch+json")
            except Exception:  # noqa: BLE001 - counted
                out["errors"] += 1
                return
        acked = time.perf_counter()
        out["acked"] += 1
        out["last_ack"] = acked
        if k % sample:
            return
        sampled.append((f"rs{i}", gen, time.clock_gettime(time.CLOCK_MONOTONIC) - (time.perf_counter() - acked)))
        pending[str(k)] = (ns, f"rs{i}", gen, acked)

    async def poll_opa() -> None:
        """Every 2 ms, one query for every pending update: what OPA holds of each."""
        while True:
            if pending:
                batch = dict(pending)
                query = {"input": {"pending": {k: [ns, name, GEN] for k, (ns, name, _, _) in batch.items()}}}
                async with s.post(f"{opa_url}/v1/data/{PROBE_PACKAGE}/values", json=query) as r:
                    values = (await r.json()).get("result") or {}
                now = time.perf_counter()
                for k, (_, _, gen, acked) in batch.items():
                    if values.get(k) == gen:
                        lags.append((now - acked) * 1000)
                        if lags[-1] > TARGET_P99_MS:
                            out["late_at"].append(acked - start)
                        del pending[k]
                    elif now > acked + 10:
                        out["unseen"] += 1
                        del pending[k]
            await asyncio.sleep(0.002)

    async def opa_gc_cycles() -> None:
        seen = None
        while True:
            async with s.get(f"{opa_url}/metrics") as r:
                cycles = metric_total(await r.text(), GO_GC_CYCLES) if r.status == 200 else None
            if seen is not None and cycles is not None and cycles > seen:
                out["opa_gc_at"].append(time.perf_counter() - start)
            seen = cycles
            await asyncio.sleep(0.5)

    counted = {**{name: pid for name, pid in pids.items() if pid}, "benchmark": os.getpid(),
               "bare watcher": watcher.pid}
    tasks = []
    cpu_before = {"machine": machine_cpu_seconds(), **{name: cpu_seconds(pid) for name, pid in counted.items()}}
    start = time.perf_counter()
    start_mono = time.clock_gettime(time.CLOCK_MONOTONIC)
    gc_task = asyncio.create_task(opa_gc_cycles())
    poll_task = asyncio.create_task(poll_opa())
    for k in range(total):
        behind = time.perf_counter() - (start + k / rate)
        if behind < 0:
            await asyncio.sleep(-behind)
        out["behind"] = max(out["behind"], behind)
        tasks.append(asyncio.create_task(one(k)))
    await asyncio.gather(*tasks)
    cpu_after = {"machine": machine_cpu_seconds(), **{name: cpu_seconds(pid) for name, pid in counted.items()}}
    out["cpu"] = cpu_shares(cpu_before, cpu_after, time.perf_counter() - start)
    while pending:  # each leaves when seen or 10 s after its acknowledgement
        await asyncio.sleep(0.05)
    for task in (gc_task, poll_task):
        task.cancel()
    await asyncio.gather(gc_task, poll_task, return_exceptions=True)
    async with s.delete(f"{opa_url}/v1/policies/{PROBE_POLICY_ID}") as r:
        assert r.status == 200, await r.text()
    api_after = await api_server_metrics(api)
    deadline = time.perf_counter() + 10
    while True:
        arrivals = read_arrivals(arrivals_file)
        if all((name, gen) in arrivals for name, gen, _ in sampled) or time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.1)
    stop_process(watcher)
    out["lags"] = lags
    received = [(acked, (arrivals[(name, gen)] - acked) * 1000) for name, gen, acked in sampled
                if (name, gen) in arrivals]
    out["watch_lags"] = [lag for _, lag in received]
    out["watch_late_at"] = [acked - start_mono for acked, lag in received if lag > TARGET_P99_MS]
    out["watch_unseen"] = len(sampled) - len(out["watch_lags"])
    out["rewatches"] = arrivals_file.read_text().count("\nrewatch ")
    out["throughput"] = out["acked"] / max(out.get("last_ack", start) - start, 1e-9)
    out["total"] = total
    for key, metric in (("api_gc_cycles", GO_GC_CYCLES), ("watchers_closed", "apiserver_terminated_watchers_total")):
        out[key] = metric_total(api_after, metric) - metric_total(api_before, metric) if api_after else float("nan")
    return out


def update_timeline(u: dict) -> str:
    """What happened during an update phase, for reading its tail: cores used, garbage collection,
    watchers closed, and the seconds in which the late updates were acknowledged."""
    cores = ", ".join(f"{name} {used:.2f}" for name, used in u["cpu"].items())
    opa_gcs = ", ".join(f"{t:.1f}" for t in u["opa_gc_at"]) or "no time"
    return (f"cores used: {cores} (of {os.cpu_count()}); OPA completed garbage-collection cycles at {opa_gcs} s; "
            f"the API server completed {u['api_gc_cycles']:.0f} and closed {u['watchers_closed']:.0f} watchers as "
            f"unresponsive (the bare watcher watched again {u['rewatches']} times); updates over "
            f"{TARGET_P99_MS:g} ms were acknowledged in seconds {second_ranges(u['late_at'])} (to OPA), "
            f"{second_ranges(u['watch_late_at'])} (to the bare watcher)")


async def target_startup(args: argparse.Namespace, kube_api: client.ApiClient, kubeconfig: Path, ext_opa: Opa,
                         tmp: Path, n_rs: int, n_cl: int, namespaces: list[str], label: str,
                         updates: bool, flags: tuple[str, ...] = ()) -> dict:
    """Start OPA (fresh, or clear the external one) and the sync (with ``flags`` added); measure
    start-up, memory and, with ``updates``, update → visible latency."""
    opa_proc = None
    if args.opa_bin:
        opa_url, opa_proc = start_opa(args.opa_bin, tmp, f"opa-{label}")
        opa_pid: int | None = opa_proc.pid
        token: list[str] = []
        headers: dict[str, str] = {}
    else:
        opa_url, opa_pid = ext_opa.url, listener_pid(ext_opa.url)
        token = ["--opa-token-file", str(ext_opa.token_file)] if ext_opa.token_file else []
        headers = ext_opa.headers()
    res: dict = {"label": label, "n_rs": n_rs, "n_cl": n_cl}
    sync = ServerProcess(f"sync-{label}", [
        "-m", "fedplace.sync", "--opa-url", opa_url + "/v1", *token, "--kubeconfig", str(kubeconfig),
        "--listen", "127.0.0.1:{port}", "--replicate", "apps/v1/replicasets",
        "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters", "--enable-policies=false",
        "--log-level", "warning", *flags], "/healthz", tmp)
    try:
        async with aiohttp.ClientSession(headers=headers) as s:
            if not args.opa_bin:  # the external OPA: what an earlier start-up left goes first
                for doc in ("kubernetes", "kubernetes_index", SENTINEL_PATH[0]):
                    async with s.delete(f"{opa_url}/v1/data/{doc}") as r:
                        assert r.status in (204, 404), r.status
            res["opa_rss_empty"] = proc_mb(opa_pid) if opa_pid else float("nan")
            t0 = time.perf_counter()
            sync.start(timeout=60)
            res["alive"] = time.perf_counter() - t0
            assert sync.proc is not None
            with RssSampler({"sync": sync.proc.pid, "opa": opa_pid}) as rss:
                wait_http(sync.url + "/readyz", timeout=600, proc=sync.proc, ok=(200,))
                res["ready"] = time.perf_counter() - t0
                res["counts"] = await opa_counts(s, opa_url)
                res["counted_at"] = time.perf_counter() - t0
                assert res["counts"] == {"rs": n_rs, "cl": n_cl, "ix": n_cl}, res["counts"]
                res["sync_rss_ready"] = proc_mb(sync.proc.pid)
                res["opa_rss_ready"] = proc_mb(opa_pid) if opa_pid else float("nan")
                if updates:
                    hist_before = await lag_histogram(s, sync.url)
                    res["updates"] = await drive_updates(
                        s, kube_api, kubeconfig, tmp, opa_url, namespaces, n_rs, args.rate, args.seconds, args.sample,
                        {"sync": sync.proc.pid, "OPA": opa_pid, "API server": listener_pid(kube_api.configuration.host)})
                    res["hist"] = diff_histogram(await lag_histogram(s, sync.url), hist_before)
                    res["sync_rss_after"] = proc_mb(sync.proc.pid)
                res["sync_hwm"] = proc_mb(sync.proc.pid, "VmHWM")
                res["opa_hwm"] = proc_mb(opa_pid, "VmHWM") if opa_pid else float("nan")
            res["opa_rss_peak_sampled"] = rss.peak.get("opa", float("nan"))
    finally:
        sync.stop()
        if opa_proc is not None:
            stop_process(opa_proc)
    print(f"  {label}: ready {res['ready']:.2f} s, sync VmHWM {res['sync_hwm']:.0f} MB, "
          f"OPA VmRSS {res['opa_rss_ready']:.0f} MB" + (
              f", p99 {pct(res['updates']['lags'], 99):.1f} ms" if updates else ""), file=sys.stderr, flush=True)
    return res


# How the sync's informer lists at start-up, and the libraries' ways, measured against each other
# in the same --target run: name → (first list from the watch cache, gzip-compressed answers).
LIST_WAYS: dict[str, tuple[bool, bool]] = {
    "as shipped: one answer from the watch cache, gzip-compressed (aiohttp asks for it)": (True, True),
    "paged from etcd, the library's way (and every relist's)": (False, True),
    "one answer from the watch cache, uncompressed (Accept-Encoding: identity)": (True, False),
}


async def informer_list_seconds(kubeconfig: Path, from_cache: bool, compression: bool) -> float:
    """Seconds the sync's ReplicaSet informer takes to its first sync (the list alone: no handler),
    its first list from the watch cache or paged, with answers uncompressed or gzip-compressed."""
    settings = dataclasses.replace(informer_settings(RS), first_list_from_cache=from_cache)
    kube_api = await new_api_client(str(kubeconfig))
    if not compression:
        kube_api.set_default_header("Accept-Encoding", "identity")
    informer = Informer(kube_api, RS, None, settings=settings)
    t = time.perf_counter()
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 600)
        seconds = time.perf_counter() - t
        assert informer.stats.errors == 0, informer.stats.last_error
        return seconds
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube_api.close()


async def run_target(args: argparse.Namespace) -> None:
    n_rs, n_cl = args.replicasets, args.clusters
    b_rs, b_cl = max(1, int(n_rs * args.baseline_fraction)), max(1, int(n_cl * args.baseline_fraction))
    tmp = Path(tempfile.mkdtemp(prefix="bench-sync-target-"))
    async with servers(args, tmp) as srv:
        assert srv.opa is not None and srv.kube is not None
        opa, kube = srv.opa, srv.kube
        await kube.require_empty(RS_PATH, "the sync replicates every ReplicaSet and the figures count only ours")
        opa.owns(documents=("kubernetes", "kubernetes_index", SENTINEL_PATH[0]),
                 policies=(replicated_root.POLICY_ID, PROBE_POLICY_ID))
        namespaces = [await kube.namespace(f"ns{i}") for i in range(args.namespaces)]
        await kube.install_crd(CLUSTER_CRD, CLUSTERS_PATH)
        sample_size = len(json.dumps(realistic_rs(n_rs - 1, namespaces[-1]), separators=(",", ":")))
        results = []
        t_create = await create_range(kube.api, namespaces, 0, b_rs, 0, b_cl)
        print(f"created {b_rs:,} ReplicaSets ({sample_size} B of JSON each) + {b_cl:,} clusters in "
              f"{t_create:.1f} s ({(b_rs + b_cl) / t_create:.0f}/s)", file=sys.stderr, flush=True)
        results.append(await target_startup(args, kube.api, kube.kubeconfig, opa, tmp, b_rs, b_cl, namespaces,
                                            "baseline", True))
        t_create2 = await create_range(kube.api, namespaces, b_rs, n_rs, b_cl, n_cl)
        print(f"created {n_rs - b_rs:,} more ReplicaSets + {n_cl - b_cl:,} clusters in {t_create2:.1f} s "
              f"({(n_rs - b_rs + n_cl - b_cl) / t_create2:.0f}/s)", file=sys.stderr, flush=True)
        lists: dict[str, list[float]] = {name: [] for name in LIST_WAYS}
        for _ in range(args.runs + 1):
            for name, (from_cache, compression) in LIST_WAYS.items():
                lists[name].append(await informer_list_seconds(kube.kubeconfig, from_cache, compression))
        print(f"  informer's first list: {lists}", file=sys.stderr, flush=True)
        # The first start-up after the lists is slower whatever it runs (the API server is still
        # collecting the garbage of 200 MB answers): one is run first and left out.
        warm_up = await target_startup(args, kube.api, kube.kubeconfig, opa, tmp, n_rs, n_cl, namespaces, "warm-up",
                                       False)
        arms: dict[str, list[float]] = {name: [] for name in LIBRARY_WAYS}
        order: list[str | None] = [None, *LIBRARY_WAYS]  # None: as shipped
        for run_no in range(args.runs):
            turn = run_no % len(order)  # each takes its turn first: no way always follows the same one
            for name in order[turn:] + order[:turn]:
                if name is None:
                    results.append(await target_startup(args, kube.api, kube.kubeconfig, opa, tmp, n_rs, n_cl,
                                                        namespaces, f"target{run_no + 1}", run_no == args.runs - 1))
                else:
                    arm = await target_startup(args, kube.api, kube.kubeconfig, opa, tmp, n_rs, n_cl, namespaces,
                                               f"{name} {run_no + 1}", False, LIBRARY_WAYS[name])
                    arms[name].append(arm["ready"])
        # Reported before the clean-up, which deletes 100,000 objects one by one on a real API server.
        target_report(args, srv.describe(), results, sample_size, t_create, t_create2, lists, arms, warm_up["ready"])
        print("cleaning up (deleting the objects)…", file=sys.stderr, flush=True)


# The sync's start-up settings that differ from the libraries' defaults, each measured against
# the default in the same --target run: name → the flags giving the library's way back.
LIBRARY_WAYS: dict[str, tuple[str, ...]] = {
    "Python's garbage-collection threshold": ("--gc-threshold", "700"),
}


def target_report(args: argparse.Namespace, described: str, results: list[dict], sample_size: int, t_create: float,
                  t_create2: float, lists: dict[str, list[float]], arms: dict[str, list[float]],
                  warm_up: float) -> None:
    n_rs, n_cl = args.replicasets, args.clusters
    base, full = results[0], results[-1]
    b_rs, b_cl = base["n_rs"], base["n_cl"]
    print(f"{described}; OPA for the sync: "
          + (f"a fresh `{Path(args.opa_bin).name} run --server` per start-up ({args.opa_bin})" if args.opa_bin
             else "the external one"))
    print(f"ReplicaSets: {sample_size} B of JSON each as created, in {args.namespaces} namespaces; creation "
          f"{b_rs + b_cl:,} objects in {t_create:.1f} s, then {n_rs - b_rs + n_cl - b_cl:,} in {t_create2:.1f} s "
          f"({(n_rs + n_cl) / (t_create + t_create2):.0f}/s, 64 concurrent POSTs)\n")
    print(f"| measurement | baseline: {b_rs:,} RS + {b_cl:,} clusters | {n_rs:,} RS + {n_cl:,} clusters | "
          f"ratio | target |", flush=True)
    print("|---|---:|---:|---:|---|")

    def row(name: str, b: float, f: float, unit: str, fmt: str = ".2f", target: str = "") -> None:
        print(f"| {name} | {b:{fmt}} {unit} | {f:{fmt}} {unit} | {f / b if b else float('nan'):.1f}x | {target} |")

    for r in results[1:-1]:
        print(f"| (earlier start-up {r['label']}) process start → ready | | {r['ready']:.2f} s | | |")
    row("process start → /readyz", base["ready"], full["ready"], "s",
        target=f"≤ {TARGET_READY_S:g} s: {'met' if full['ready'] <= TARGET_READY_S else 'MISSED'}")
    row("of which process start-up (→ /healthz)", base["alive"], full["alive"], "s")
    row("OPA holds every object (counted by one query, after ready)", base["counted_at"], full["counted_at"], "s")
    row("sync peak RSS (VmHWM)", base["sync_hwm"], full["sync_hwm"], "MB", ".0f",
        target=f"≤ {TARGET_RSS_MB:g} MB: {'met' if full['sync_hwm'] <= TARGET_RSS_MB else 'MISSED'}")
    row("sync RSS once ready", base["sync_rss_ready"], full["sync_rss_ready"], "MB", ".0f")
    row("sync RSS after the updates", base["sync_rss_after"], full["sync_rss_after"], "MB", ".0f")
    row("OPA RSS empty (before the sync)", base["opa_rss_empty"], full["opa_rss_empty"], "MB", ".0f")
    row("OPA RSS once ready", base["opa_rss_ready"], full["opa_rss_ready"], "MB", ".0f")
    row("OPA peak RSS (VmHWM)", base["opa_hwm"], full["opa_hwm"], "MB", ".0f")
    bu, fu = base["updates"], full["updates"]
    row(f"updates sent (at {args.rate:g}/s for {args.seconds:g} s), acknowledged", bu["acked"], fu["acked"], "", ".0f")
    row("update throughput acknowledged by the API server", bu["throughput"], fu["throughput"], "/s", ".0f",
        target=f"{args.rate:g}/s: {'met' if fu['throughput'] >= 0.95 * args.rate else 'MISSED'}")
    row("sender behind schedule at most", bu["behind"] * 1000, fu["behind"] * 1000, "ms", ".0f")
    row(f"update → visible in OPA, p50 (1 in {args.sample} timed: {len(bu['lags'])} / {len(fu['lags'])})",
        statistics.median(bu["lags"]), statistics.median(fu["lags"]), "ms", ".1f")
    p99 = pct(fu["lags"], 99)
    row("update → visible in OPA, p99", pct(bu["lags"], 99), p99, "ms", ".1f",
        target=f"≤ {TARGET_P99_MS:g} ms: {'met' if p99 <= TARGET_P99_MS else 'MISSED'}")
    row("update → visible in OPA, max", max(bu["lags"]), max(fu["lags"]), "ms", ".1f")
    bw, fw = bu["watch_lags"], fu["watch_lags"]
    print(f"| the same updates → received by a bare watcher process (bench/watcher.py: the floor), p50 / p99 "
          f"| {statistics.median(bw):.1f} / {pct(bw, 99):.1f} ms | {statistics.median(fw):.1f} / {pct(fw, 99):.1f} ms "
          f"| | |")
    print(f"| of those, not received by the watcher within 10 s | {bu['watch_unseen']} | {fu['watch_unseen']} | | |")
    print(f"| timed updates not visible within 10 s / PATCH errors | {bu['unseen']} / {bu['errors']} | "
          f"{fu['unseen']} / {fu['errors']} | | |")
    print(f"| what the machine and the Go servers did meanwhile | {update_timeline(bu)} | {update_timeline(fu)} | | |")
    for q in (0.5, 0.99):
        print(f"| sync's lag histogram (event received → OPA write done), p{q * 100:g} | "
              f"≤ {hist_quantile(base['hist'], q) * 1000:g} ms | ≤ {hist_quantile(full['hist'], q) * 1000:g} ms | | |")
    ways = list(lists.items())
    shipped_list = statistics.median(ways[0][1])
    print(f"\nThe sync's informer listing the {n_rs:,} ReplicaSets (to its first sync, no handler), each way in turn, "
          f"median of {len(ways[0][1])}:")
    for name, seconds in ways:
        print(f"- {name}: {statistics.median(seconds):.2f} s ({', '.join(f'{x:.2f}' for x in seconds)})"
              + ("" if seconds is ways[0][1] else f"; as shipped / this: {shipped_list / statistics.median(seconds):.2f}x"))
    shipped = [r["ready"] for r in results[1:]]
    print(f"\nStart-up (process start → /readyz) as shipped against each library default, in turns, median of "
          f"{len(shipped)}, after a warm-up start-up left out ({warm_up:.2f} s): as shipped "
          f"{statistics.median(shipped):.2f} s ({', '.join(f'{x:.2f}' for x in shipped)})")
    for name, flags in LIBRARY_WAYS.items():
        arm = arms[name]
        print(f"- {name} (`{' '.join(flags)}`): {statistics.median(arm):.2f} s "
              f"({', '.join(f'{x:.2f}' for x in arm)}); as shipped / this: "
              f"{statistics.median(shipped) / statistics.median(arm):.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicasets", type=int, default=None, help="default 10,000 (100,000 with --target)")
    p.add_argument("--clusters", type=int, default=None, help="default 1,000 (5,000 with --target)")
    p.add_argument("--rate", type=float, default=None, help="updates/s (default 200; 500 with --target)")
    p.add_argument("--seconds", type=float, default=None, help="seconds of updates (default 10; 60 with --target)")
    p.add_argument("--target", action="store_true",
                   help="the target scenario: 100,000 ReplicaSets + 5,000 clusters, 500 annotation updates/s for "
                        "60 s, each figure beside a baseline of the same run at --baseline-fraction of the objects "
                        "(created first, then topped up: every object is created once per invocation)")
    p.add_argument("--baseline-fraction", type=float, default=0.1, help="with --target: the baseline's share")
    p.add_argument("--runs", type=int, default=1, help="with --target: sync start-ups measured at full size")
    p.add_argument("--sample", type=int, default=10, help="with --target: time one update in N (polling OPA)")
    p.add_argument("--namespaces", type=int, default=100, help="with --target: namespaces the ReplicaSets spread over")
    p.add_argument("--opa-bin", metavar="PATH", default=os.environ.get("REAL_OPA_BIN"),
                   help="with --target: start a fresh `opa run --server` from this binary for every sync start-up "
                        "(default $REAL_OPA_BIN), so that its memory is that of the sync's data only; without it "
                        "the external --opa-url is used (cleared between start-ups)")
    add_server_flags(p, opa=True, kube=True)
    args = p.parse_args()
    defaults = (100_000, 5_000, 500.0, 60.0) if args.target else (10_000, 1_000, 200.0, 10.0)
    for name, default in zip(("replicasets", "clusters", "rate", "seconds"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    asyncio.run(run_target(args) if args.target else run(args))


if __name__ == "__main__":
    main()
