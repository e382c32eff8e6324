"""Benchmark fedplace-engine over HTTP: query latency as data grows, write throughput, RSS.

Usage: .venv/bin/python bench/engine.py [--queries 300]

Starts the engine as a subprocess, loads the placement policy, and at 10,
1,000 and 10,000 replicated objects measures sequential admission queries
(p50/p99) on unchanged data. The baseline, measured in the same run, is a
query issued right after a data write — the engine then has to push the whole
data set into the interpreter again, which is what every query would cost
without the lazy, change-tracking data push. Then single-object PUT
throughput at 10,000 objects and the engine's RSS.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devstack.launch import ServerProcess  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERY = "/v1/data/io/k8s/federation/admission"
RS_INPUT = {"input": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                      "metadata": {"name": "web", "namespace": "shop", "annotations": {
                          "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true",
                          "policy.federation.alpha.kubernetes.io/pci-compliance-level": "2"}}}}


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def objects(n: int) -> dict:
    """n objects: a tenth are clusters, the rest ReplicaSets across 20 namespaces."""
    clusters = {f"c{i}": {"metadata": {"name": f"c{i}", "labels": {"pci-compliance-level": str(i % 4)}},
                          "status": {"region": "europe-west1" if i % 2 else "us-east1"}}
                for i in range(max(1, n // 10))}
    rs: dict = {}
    for i in range(n - len(clusters)):
        rs.setdefault(f"ns{i % 20}", {})[f"rs{i}"] = {"kind": "ReplicaSet", "metadata": {"name": f"rs{i}"},
                                                     "spec": {"replicas": 3}}
    return {"clusters": clusters, "replicasets": rs}


async def timed(session: aiohttp.ClientSession, method: str, url: str, **kw) -> float:
    t = time.perf_counter()
    async with session.request(method, url, **kw) as resp:
        await resp.read()
        assert resp.status in (200, 204), resp.status
    return (time.perf_counter() - t) * 1000


async def run(queries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = ServerProcess("engine", ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}",
                                          "--log-level", "warning"], "/health", Path(tmp)).start()
        try:
            async with aiohttp.ClientSession() as s:
                for name in ("placement.rego", "lib.rego"):
                    src = (ROOT / "policies/federation" / name).read_text()
                    async with s.put(f"{engine.url}/v1/policies/bench/{name}", data=src) as r:
                        assert r.status == 200, await r.text()
                rows = []
                for n in (10, 1_000, 10_000):
                    await timed(s, "PUT", f"{engine.url}/v1/data/kubernetes", json=objects(n))
                    await timed(s, "POST", engine.url + QUERY, json=RS_INPUT)  # warm
                    lat = [await timed(s, "POST", engine.url + QUERY, json=RS_INPUT) for _ in range(queries)]
                    cold = []
                    for i in range(max(20, queries // 10)):
                        await timed(s, "PUT", f"{engine.url}/v1/data/kubernetes/replicasets/ns0/rs0",
                                    json={"kind": "ReplicaSet", "metadata": {"name": "rs0"}, "i": i})
                        cold.append(await timed(s, "POST", engine.url + QUERY, json=RS_INPUT))
                    rows.append((n, lat, cold))
                writes = 2_000
                t = time.perf_counter()
                for i in range(writes):
                    await timed(s, "PUT", f"{engine.url}/v1/data/kubernetes/replicasets/ns{i % 20}/w{i}",
                                json={"kind": "ReplicaSet", "metadata": {"name": f"w{i}"}})
                wps = writes / (time.perf_counter() - t)
                health = [await timed(s, "GET", engine.url + "/health") for _ in range(200)]
            rss = rss_mb(engine.proc.pid)
        finally:
            engine.stop()
    print("| objects | query p50 (ms) | query p99 (ms) | after-a-write p50 (ms) | after-a-write p99 (ms) | ratio p50 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, lat, cold in rows:
        print(f"| {n:,} | {statistics.median(lat):.2f} | {pct(lat, 99):.2f} | {statistics.median(cold):.2f} "
              f"| {pct(cold, 99):.2f} | {statistics.median(cold) / statistics.median(lat):.1f}x |")
    print()
    print(f"- single-object PUT throughput at 10,000 objects: {wps:,.0f} writes/s (sequential, one client)")
    print(f"- GET /health round trip p50: {statistics.median(health):.2f} ms (HTTP floor)")
    print(f"- engine RSS after the run: {rss:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(run(args.queries))


if __name__ == "__main__":
    main()
