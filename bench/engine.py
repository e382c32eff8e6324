"""Benchmark fedplace-engine over HTTP: query latency as data grows, writes, RSS.

Usage: .venv/bin/python bench/engine.py [--queries 500] [--writes 2000] [--evaluator regorus|opa]
       [--opa-url URL [--opa-token-file PATH]]

Starts the engine as a subprocess on a free port (or uses the OPA of
``--opa-url``, see bench/common.py), loads the federation
placement policy (policies/federation), and at 10, 1,000 and 10,000
replicated objects (a tenth of them Clusters, the rest ReplicaSets of a
realistic size, ~0.6 KB) measures sequential admission queries (p50/p99).

At 10,000 objects it then measures what a sync sidecar does — a single-object
PUT (an update of an existing ReplicaSet, or a new one) followed by a query —
and single-object PUT throughput. The baseline, measured in the same run, is a
second engine started with ``--data-sync reload``: identical except that any
write makes the next query reload all data into the interpreter (the naive
design). ``--evaluator opa`` runs both engines on OPA's own evaluator
(docs/devstack.md: its data is reloaded after every replacement anyway). Also printed: the GET /health round trip (the HTTP floor) and RSS.
Against an external OPA the baseline, the engine's data-mirror counters and
the RSS are devstack-only and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, devstack_only, pct, server_rss, servers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERY = "/v1/data/io/k8s/federation/admission"
RS_INPUT = {"input": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                      "metadata": {"name": "web", "namespace": "shop", "annotations": {
                          "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true",
                          "policy.federation.alpha.kubernetes.io/pci-compliance-level": "2"}}}}
# The same constraints on a Deployment: placed through the cluster selector (issue 18).
DEPLOY_INPUT = {"input": {**RS_INPUT["input"], "kind": "Deployment"}}


def replicaset(i: int, gen: int = 0) -> dict[str, Any]:
    ns = f"ns{i % 20}"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"rs{i}", "namespace": ns, "uid": f"0b7c6a4e-{i:08d}", "generation": gen + 1,
                         "resourceVersion": str(1000 + i + gen), "labels": {"app": f"app{i}", "tier": "web"},
                         "annotations": {"federation.kubernetes.io/replica-set-preferences":
                                         json.dumps({"clusters": {"c1": {"weight": 1}}})}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": f"app{i}"}},
                     "template": {"metadata": {"labels": {"app": f"app{i}"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                           "ports": [{"containerPort": 80}],
                                                           "resources": {"requests": {"cpu": "100m"}}}]}}},
            "status": {"replicas": 3, "readyReplicas": 3 - gen % 2, "observedGeneration": gen + 1}}


def objects(n: int) -> dict[str, Any]:
    """n objects: a tenth are Clusters, the rest ReplicaSets across 20 namespaces."""
    clusters = {f"c{i}": {"metadata": {"name": f"c{i}", "labels": {"pci-compliance-level": str(i % 4),
                                                                     "fedplace.io/cluster-name": f"c{i}"}},
                          "status": {"region": "europe-west1" if i % 2 else "us-east1"}}
                for i in range(max(1, n // 10))}
    rs: dict[str, Any] = {}
    for i in range(n - len(clusters)):
        rs.setdefault(f"ns{i % 20}", {})[f"rs{i}"] = replicaset(i)
    return {"clusters": clusters, "replicasets": rs}


async def timed(session: aiohttp.ClientSession, method: str, url: str, **kw: Any) -> float:
    t = time.perf_counter()
    async with session.request(method, url, **kw) as resp:
        await resp.read()
        assert resp.status in (200, 204), (resp.status, url)
    return (time.perf_counter() - t) * 1000


async def load(s: aiohttp.ClientSession, url: str, n: int) -> None:
    for name in ("lib.rego", "selector.rego", "placement.rego"):
        src = (ROOT / "policies/federation" / name).read_text()
        async with s.put(f"{url}/v1/policies/bench/{name}", data=src) as r:
            assert r.status == 200, await r.text()
    await timed(s, "PUT", f"{url}/v1/data/kubernetes", json=objects(n))
    await timed(s, "POST", url + QUERY, json=RS_INPUT)  # warm: the first query loads the data


async def interleaved(s: aiohttp.ClientSession, url: str, rounds: int, n: int,
                      kinds: tuple[str, ...] = ("update", "add")) -> dict[str, dict[str, list[float]]]:
    """What a sync sidecar does: single-object PUTs, each followed by a query.

    The kinds alternate round by round (update an existing ReplicaSet, add a new
    one) so machine noise hits both alike. Per kind: PUT latency, latency of the
    query right after it, and the query a second time (no write in between).
    """
    out = {k: {"put": [], "query_after": [], "query_again": []} for k in kinds}
    for r in range(rounds):
        for kind in kinds:
            i = r % (n - n // 10)
            name = f"rs{i}" if kind == "update" else f"new{r}"
            out[kind]["put"].append(await timed(s, "PUT", f"{url}/v1/data/kubernetes/replicasets/ns{i % 20}/{name}",
                                                json=replicaset(i, gen=r + 1)))
            out[kind]["query_after"].append(await timed(s, "POST", url + QUERY, json=RS_INPUT))
            out[kind]["query_again"].append(await timed(s, "POST", url + QUERY, json=RS_INPUT))
    return out


async def mirror_counters(s: aiohttp.ClientSession, opa: Opa) -> str:
    """The devstack engine's data-mirror counters over the run (GET /_devstack/state)."""
    if opa.external:
        return devstack_only("the data mirror counters (/_devstack/state)")
    async with s.get(opa.url + "/_devstack/state") as r:
        m = (await r.json())["mirror"]
    return (f"{m['rebuilds']} full reloads, {m['merges']} merged additions, {m['overlays']} overlay replacements, "
            f"{m['removals']} removals")


async def run(args: argparse.Namespace) -> None:
    queries, writes = args.queries, args.writes
    t0 = time.perf_counter()
    base: dict[str, dict[str, list[float]]] | None = None
    rss_naive = ""
    with tempfile.TemporaryDirectory() as tmp:
        async with servers(args, Path(tmp)) as srv:
            assert srv.opa is not None
            engine = srv.opa
            engine.owns(documents=("kubernetes",), policies=("bench/",))
            # the baseline is the devstack engine in another mode: none against an external OPA
            naive = None if engine.external else Opa.start(Path(tmp), "engine-naive", "--data-sync", "reload",
                                                           evaluator=engine.evaluator)
            try:
                async with engine.session() as s:
                    rows = []
                    for n in (10, 1_000, 10_000):
                        await load(s, engine.url, n)
                        lat = [await timed(s, "POST", engine.url + QUERY, json=RS_INPUT) for _ in range(queries)]
                        dep = [await timed(s, "POST", engine.url + QUERY, json=DEPLOY_INPUT) for _ in range(queries)]
                        rows.append((n, lat, dep))
                    n = 10_000
                    inc = await interleaved(s, engine.url, 300, n)
                    t = time.perf_counter()
                    for i in range(writes):
                        await timed(s, "PUT", f"{engine.url}/v1/data/kubernetes/replicasets/ns{i % 20}/rs{i}",
                                    json=replicaset(i, gen=i + 7))
                    wps = writes / (time.perf_counter() - t)
                    after_burst = await timed(s, "POST", engine.url + QUERY, json=RS_INPUT)
                    health = [await timed(s, "GET", engine.url + "/health") for _ in range(300)]
                    mirror = await mirror_counters(s, engine)
                    rss = server_rss(engine.process)
                    if naive is not None:  # baseline: the naive engine, same data, same interleaving
                        await load(s, naive.url, n)
                        base = await interleaved(s, naive.url, 25, n, kinds=("update",))
                        rss_naive = f" (baseline engine: {server_rss(naive.process)})"
            finally:
                if naive is not None:
                    await naive.close()
            described = srv.describe()
            external = engine.external

    what = "external OPA" if external else f"fedplace-engine, {args.evaluator} evaluator"
    print(f"### {what} — placement policy, {queries} sequential queries per size, over HTTP\n")
    print(f"{described}\n")
    print("| objects (clusters) | ReplicaSet query p50 (ms) | p99 (ms) | Deployment (cluster selector) p50 (ms) | p99 (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for n, lat, dep in rows:
        print(f"| {n:,} ({max(1, n // 10):,}) | {statistics.median(lat):.2f} | {pct(lat, 99):.2f} "
              f"| {statistics.median(dep):.2f} | {pct(dep, 99):.2f} |")
    print("\n### Single-object writes interleaved with queries at 10,000 objects\n")
    print("Each round: one PUT, the query right after it, the same query again (no write in between).\n")
    print("| engine | write | PUT p50 / p99 (ms) | query after the write p50 / p99 (ms) "
          "| query again p50 (ms) | round (PUT + query) p50 (ms) |")
    print("|---|---|---:|---:|---:|---:|")
    med = statistics.median

    def row(engine_name: str, kind: str, m: dict[str, list[float]]) -> float:
        rounds = [a + b for a, b in zip(m["put"], m["query_after"])]
        print(f"| {engine_name} | {kind} | {med(m['put']):.2f} / {pct(m['put'], 99):.2f} "
              f"| {med(m['query_after']):.2f} / {pct(m['query_after'], 99):.2f} | {med(m['query_again']):.2f} "
              f"| {med(rounds):.2f} |")
        return med(rounds)

    measured = "external OPA" if external else "incremental (default)"
    upd = row(measured, "update existing object", inc["update"])
    row(measured, "add new object", inc["add"])
    if base is not None:
        naive_upd = row("baseline: `--data-sync reload`", "update existing object", base["update"])
        print(f"\n- ratio baseline / incremental, update + query round p50: {naive_upd / upd:.1f}x")
    else:
        print(f"\n- baseline `--data-sync reload`: {devstack_only('a second devstack engine in that mode')}")
    print(f"- single-object PUT throughput at 10,000 objects: {wps:,.0f} writes/s (sequential, one client); "
          f"first query after {writes:,} writes: {after_burst:.1f} ms")
    print(f"- GET /health round trip p50: {med(health):.2f} ms (HTTP floor)")
    print(f"- data mirror over the run: {mirror}")
    print(f"- engine RSS after the run: {rss}{rss_naive}")
    print(f"- bench wall time: {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--writes", type=int, default=2000)
    add_server_flags(parser, opa=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
