"""Benchmark fedplace-engine against a real OPA server, same workload, in one run.

Usage: .venv/bin/python bench/engine.py [--queries 500] [--rounds 30] [--writes 2000] [--concurrency 16]
       [--opa-url URL [--opa-token-file PATH]]

Always starts a devstack engine; with ``--opa-url`` (a scratch OPA, see
bench/common.py) measures that OPA too, one server after the other, and prints
each figure for both with the ratio engine / OPA. Without it, the OPA column
says why it is empty.

Workload, per server: the federation placement policy (policies/federation),
at 10, 1,000 and 10,000 replicated objects (a tenth of them Clusters, the rest
ReplicaSets of a realistic size, ~0.6 KB), ``--queries`` sequential admission
queries for a ReplicaSet and for a Deployment (the cluster selector): p50 and
p99. At 10,000 objects: query throughput with ``--concurrency`` requests in
flight; what a sync sidecar does, ``--rounds`` times per kind — a single-object
PUT (an update of an existing ReplicaSet, or a new one), the query right after
it, the same query again; ``--writes`` sequential single-object PUTs (their
throughput) and the first query after them; the GET /health round trip (the
HTTP floor); the server's RSS at the end (a local server's, found by its
listening port when it is external).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, listener_pid, pct, proc_mb, servers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERY = "/v1/data/io/k8s/federation/admission"
RS_INPUT = {"input": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                      "metadata": {"name": "web", "namespace": "shop", "annotations": {
                          "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true",
                          "policy.federation.alpha.kubernetes.io/pci-compliance-level": "2"}}}}
# The same constraints on a Deployment: placed through the cluster selector.
DEPLOY_INPUT = {"input": {**RS_INPUT["input"], "kind": "Deployment"}}
SIZES = (10, 1_000, 10_000)
LARGE = SIZES[-1]


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


async def load(s: aiohttp.ClientSession, url: str, n: int) -> float:
    """The policy and ``n`` objects; returns the ms until the first query after them answered."""
    for name in ("lib.rego", "selector.rego", "placement.rego", "admission.rego"):
        src = (ROOT / "policies/federation" / name).read_text()
        async with s.put(f"{url}/v1/policies/bench/{name}", data=src) as r:
            assert r.status == 200, await r.text()
    t = time.perf_counter()
    await timed(s, "PUT", f"{url}/v1/data/kubernetes", json=objects(n))
    await timed(s, "POST", url + QUERY, json=RS_INPUT)
    return (time.perf_counter() - t) * 1000


@dataclass
class Figures:
    """What one server measured: latencies (ms) by name, single figures by name."""

    what: str
    series: dict[str, list[float]] = field(default_factory=dict)
    single: dict[str, float] = field(default_factory=dict)


async def throughput(s: aiohttp.ClientSession, url: str, total: int, concurrency: int) -> float:
    todo = iter(range(total))

    async def worker() -> None:
        for _ in todo:
            async with s.post(url + QUERY, json=RS_INPUT) as resp:
                await resp.read()
                assert resp.status == 200

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - t)


async def measure(opa: Opa, args: argparse.Namespace) -> Figures:
    fig = Figures(opa.describe())
    async with opa.session() as s:
        url = opa.url
        for n in SIZES:
            fig.single[f"load {n}"] = await load(s, url, n)
            fig.series[f"rs {n}"] = [await timed(s, "POST", url + QUERY, json=RS_INPUT) for _ in range(args.queries)]
            fig.series[f"deploy {n}"] = [await timed(s, "POST", url + QUERY, json=DEPLOY_INPUT)
                                         for _ in range(args.queries)]
        fig.single["throughput"] = await throughput(s, url, args.queries * 4, args.concurrency)
        for r in range(args.rounds):  # the kinds alternate round by round: machine noise hits both alike
            for kind in ("update", "add"):
                i = r % (LARGE - LARGE // 10)
                name = f"rs{i}" if kind == "update" else f"new{r}"
                put = await timed(s, "PUT", f"{url}/v1/data/kubernetes/replicasets/ns{i % 20}/{name}",
                                  json=replicaset(i, gen=r + 1))
                after = await timed(s, "POST", url + QUERY, json=RS_INPUT)
                again = await timed(s, "POST", url + QUERY, json=RS_INPUT)
                for key, value in (("put", put), ("after", after), ("again", again), ("round", put + after)):
                    fig.series.setdefault(f"{kind} {key}", []).append(value)
        t = time.perf_counter()
        for i in range(args.writes):
            await timed(s, "PUT", f"{url}/v1/data/kubernetes/replicasets/ns{i % 20}/rs{i}", json=replicaset(i, gen=i + 7))
        fig.single["writes/s"] = args.writes / (time.perf_counter() - t)
        fig.single["after burst"] = await timed(s, "POST", url + QUERY, json=RS_INPUT)
        fig.series["health"] = [await timed(s, "GET", url + "/health") for _ in range(300)]
    pid = opa.process.proc.pid if opa.process is not None and opa.process.proc is not None else listener_pid(opa.url)
    fig.single["rss"] = proc_mb(pid) if pid is not None else float("nan")
    return fig


def report(engine: Figures, opa: Figures | None, why_not: str, args: argparse.Namespace) -> None:
    med = statistics.median

    def cells(value: Any, fmt: str) -> str:
        get = (lambda f: value(f)) if callable(value) else (lambda f: f.single[value])
        mine = get(engine)
        if opa is None:
            return f"| {mine:{fmt}} | — | — |"
        theirs = get(opa)
        return f"| {mine:{fmt}} | {theirs:{fmt}} | {mine / theirs:.2f} |"

    def p(name: str, q: float) -> Any:
        return lambda f: med(f.series[name]) if q == 50 else pct(f.series[name], q)

    print("### fedplace-engine vs OPA — placement policy, same workload, one run\n")
    print(f"- engine: {engine.what}")
    print(f"- OPA: {opa.what if opa is not None else why_not}\n")
    print(f"Sequential queries: {args.queries} per size; throughput: {args.queries * 4} queries, "
          f"{args.concurrency} in flight; {args.rounds} rounds per write kind; {args.writes} writes.\n")
    print("| measurement | engine | OPA | engine / OPA |")
    print("|---|---:|---:|---:|")
    for n in SIZES:
        for kind, label in (("rs", "ReplicaSet"), ("deploy", "Deployment (cluster selector)")):
            for q in (50, 99):
                print(f"| {label} query p{q} at {n:,} objects (ms) " + cells(p(f"{kind} {n}", q), ".2f"))
        print(f"| data PUT + first query at {n:,} objects (ms) " + cells(f"load {n}", ".0f"))
    print(f"| query throughput at {LARGE:,} objects (queries/s) " + cells("throughput", ",.0f"))
    for kind, label in (("update", "update an existing object"), ("add", "add a new object")):
        print(f"| {label}: PUT p50 (ms) " + cells(p(f"{kind} put", 50), ".2f"))
        for q in (50, 99):
            print(f"| {label}: query right after p{q} (ms) " + cells(p(f"{kind} after", q), ".2f"))
        print(f"| {label}: query again p50 (ms) " + cells(p(f"{kind} again", 50), ".2f"))
        print(f"| {label}: PUT + query round p50 (ms) " + cells(p(f"{kind} round", 50), ".2f"))
    print(f"| single-object PUT throughput at {LARGE:,} objects (writes/s) " + cells("writes/s", ",.0f"))
    print(f"| first query after {args.writes:,} PUTs (ms) " + cells("after burst", ".1f"))
    print("| GET /health p50 (ms, the HTTP floor) " + cells(p("health", 50), ".2f"))
    print("| RSS after the run (MB) " + cells("rss", ".0f"))


async def run(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        async with servers(args, Path(tmp)) as srv:
            assert srv.opa is not None
            external = srv.opa if srv.opa.external else None
            engine = srv.opa if external is None else Opa.start(Path(tmp), "engine")
            try:
                engine_figures = await measure(engine, args)
            finally:
                if external is not None:
                    await engine.close()
            opa_figures = None
            if external is not None:
                external.owns(documents=("kubernetes",), policies=("bench/",))
                opa_figures = await measure(external, args)
    report(engine_figures, opa_figures, "skipped (no --opa-url given)", args)
    print(f"\n- bench wall time: {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    add_server_flags(parser, opa=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
