"""Benchmark the LimitRange pack's admission decision: a 5-container pod template against 3 LimitRanges.

Usage: .venv/bin/python bench/limitrange.py [--queries 500] [--rounds 10] [--opa-url URL [--opa-token-file PATH]]

The object is a Deployment whose template has five containers (two with
requests and limits, one with a limit only, two with nothing: they get
defaults); the namespace has three LimitRanges — Container defaults,
Container min / max / maxLimitRequestRatio, Pod max — so the decision reads
every quantity, defaults, totals the pod, checks every bound and writes the
patch. A second object breaks five bounds, for the cost of a denial.

Always starts a devstack engine; with ``--opa-url`` (a scratch OPA, see
bench/common.py) measures that OPA too, in the same run, one server after the
other. Per server, ``--queries`` sequential decisions over HTTP
(``POST /v1/data/io/k8s/federation/admission``):

* the pack alone (and the lib it needs): defaults patched; denied;
* the pack's common case against its rules alone, in alternating blocks
  (``--rounds``): the same decision asked through a bench module, as is and
  with ``common_case`` set to false — what the common case saves;
* the pack beside the placement policy;
* the floors: a constant rule of the pack with the same input (what any
  query costs), ``GET /health`` (HTTP alone).

Then OPA 1.20's own evaluator in process (``opa_bindings``), the same modules,
without HTTP. Target: decision p50 <= 2 ms on a real OPA.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import Opa, add_server_flags, pct, servers  # noqa: E402

QUERY = "/v1/data/io/k8s/federation/admission"
CONSTANT = "/v1/data/io/k8s/federation/limitrange/quantity/max_units"  # a constant rule of the pack
# in an order OPA accepts one PUT at a time (quantity's functions before their callers)
PACK = ["lib/generated/replicated_root.rego", "lib/podspec.rego", "limitrange/quantity.rego",
        "limitrange/ranger.rego", "limitrange/admission.rego"]
PLACEMENT = ["federation/lib.rego", "federation/placement.rego", "federation/admission.rego"]
PREFIX = "bench-limitrange/"
NS = "shop"

# The decision as is, and with the common case off (the rules alone decide): same wrapping for both.
AB_MODULE = """package bench.limitrange

decision := d if {
	d := data.io.k8s.federation.admission
}

rules_only := d if {
	d := data.io.k8s.federation.admission with data.io.k8s.federation.limitrange.common_case as false
}
"""
AB = {"with the common case": "/v1/data/bench/limitrange/decision",
      "rules alone (common case off)": "/v1/data/bench/limitrange/rules_only"}

Rows = list[tuple[str, str, list[float]]]


def limitranges() -> dict[str, Any]:
    def lr(name: str, *items: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": NS},
                "spec": {"limits": list(items)}}

    return {
        "defaults": lr("defaults", {"type": "Container", "default": {"cpu": "500m", "memory": "512Mi"},
                                    "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}),
        "container-bounds": lr("container-bounds", {"type": "Container", "min": {"cpu": "10m", "memory": "16Mi"},
                                                    "max": {"cpu": "2", "memory": "2Gi"},
                                                    "maxLimitRequestRatio": {"cpu": "10"}}),
        "pod-bounds": lr("pod-bounds", {"type": "Pod", "max": {"cpu": "8", "memory": "8Gi"}}),
    }


def deployment(name: str, broken: bool = False) -> dict[str, Any]:
    resources: list[dict[str, Any]] = [
        {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        {"requests": {"cpu": "0.5", "memory": "300M"}, "limits": {"cpu": "1500m", "memory": "1.5Gi"}},
        {"limits": {"cpu": "200m", "memory": "256Mi"}},
        {},
        {},
    ]
    if broken:
        resources[1] = {"requests": {"cpu": "100m"}, "limits": {"cpu": "3", "memory": "3Gi"}}
    containers = [{"name": f"c{i}", "image": "nginx:1.27", **({"resources": r} if r else {})}
                  for i, r in enumerate(resources)]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}}}}


def modules(names: list[str]) -> dict[str, str]:
    return {n: (ROOT / "policies" / n).read_text() for n in names}


def timed_calls(fn: Callable[[], Any], n: int) -> list[float]:
    fn()  # warm
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def http_queries(s: aiohttp.ClientSession, url: str, doc: dict[str, Any] | None, n: int,
                       query: str = QUERY) -> list[float]:
    """``n`` sequential POSTs of ``query`` (GET when ``doc`` is None), after one to warm; latencies in ms."""
    async def once() -> None:
        request = s.get(url + query) if doc is None else s.post(url + query, json={"input": doc})
        async with request as r:
            assert r.status == 200, await r.text()
            await r.read()

    await once()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await once()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def alternated(s: aiohttp.ClientSession, url: str, doc: dict[str, Any], queries: dict[str, str], n: int,
                     rounds: int) -> dict[str, list[float]]:
    """The same decision through each of ``queries`` in alternating blocks (both see the same load)."""
    out: dict[str, list[float]] = {name: [] for name in queries}
    for _ in range(rounds):
        for name, query in queries.items():
            out[name] += await http_queries(s, url, doc, max(1, n // rounds), query)
    return out


async def load(s: aiohttp.ClientSession, url: str, mods: dict[str, str]) -> None:
    for mid, src in mods.items():
        async with s.put(f"{url}/v1/policies/{PREFIX}{mid}", data=src.encode()) as r:
            assert r.status == 200, await r.text()


async def decide(s: aiohttp.ClientSession, url: str, doc: dict[str, Any], query: str = QUERY) -> dict[str, Any]:
    async with s.post(url + query, json={"input": doc}) as r:
        assert r.status == 200, await r.text()
        return (await r.json())["result"]  # type: ignore[no-any-return]


def check(decision: dict[str, Any], broken: bool) -> None:
    """The benchmark measures the right thing: defaults patched, or denied with every violation."""
    if broken:
        assert len(decision.get("errors") or []) == 5, decision
    else:
        assert not decision.get("errors") and len(decision["patches"]["limitrange"]) == 2, decision


async def measure(server: Opa, args: argparse.Namespace) -> Rows:
    """Every HTTP row of one server (see the module docstring)."""
    n, who = args.queries, "real OPA" if server.external else "devstack engine"
    ok, broken = deployment("web"), deployment("big", broken=True)
    rows: Rows = []
    server.owns(documents=("kubernetes",), policies=(PREFIX,))
    async with server.session() as s:
        async with s.put(f"{server.url}/v1/data/kubernetes", json={"limitranges": {NS: limitranges()}}) as r:
            assert r.status in (200, 204), await r.text()
        await load(s, server.url, {**modules(PACK), "bench/limitrange.rego": AB_MODULE})
        check(await decide(s, server.url, ok), False)
        check(await decide(s, server.url, broken), True)
        for query in AB.values():
            check(await decide(s, server.url, ok, query), False)
        rows.append((who, "pack alone, defaults patched", await http_queries(s, server.url, ok, n)))
        rows.append((who, "pack alone, denied (5 violations)", await http_queries(s, server.url, broken, n)))
        ab = await alternated(s, server.url, ok, AB, n, args.rounds)
        rows += [(who, f"defaults patched, {name}, alternated", lat) for name, lat in ab.items()]
        rows.append((who, "floor: a constant rule of the pack", await http_queries(s, server.url, ok, n, CONSTANT)))
        rows.append((who, "floor: `GET /health`", await http_queries(s, server.url, None, n, "/health")))
        await load(s, server.url, modules(PLACEMENT))
        rows.append((who, "pack + placement policy, defaults patched", await http_queries(s, server.url, ok, n)))
    return rows


def in_process(mods: dict[str, str], doc: dict[str, Any], n: int) -> list[float]:
    """OPA 1.20's own evaluator, in process, holding ``mods`` and the LimitRanges."""
    from opa_bindings import OpaEngine

    engine = OpaEngine()
    for mid, src in mods.items():
        engine.add_policy(mid, src)
    engine.add_data({"kubernetes": {"limitranges": {NS: limitranges()}}})
    query = "x := data.io.k8s.federation.admission"
    check(engine.eval_query(query, doc)[0]["x"], False)
    return timed_calls(lambda: engine.eval_query(query, doc), n)


async def run(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    rows: Rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with servers(args, Path(tmp)) as srv:
            assert srv.opa is not None
            external = srv.opa if srv.opa.external else None
            engine = srv.opa if external is None else Opa.start(Path(tmp), "engine")
            try:
                rows += await measure(engine, args)
            finally:
                if external is not None:
                    await engine.close()
            if external is not None:
                rows += await measure(external, args)
            described = srv.describe() + ("" if external is None else f"; {engine.describe()}")
    ok = deployment("web")
    rows.append(("OPA 1.20 in process", "pack alone, defaults patched", in_process(modules(PACK), ok, args.queries)))
    rows.append(("OPA 1.20 in process", "pack + placement policy, defaults patched",
                 in_process(modules(PLACEMENT + PACK), ok, args.queries)))

    print(f"### LimitRange pack — 5-container Deployment template, 3 LimitRanges, {args.queries} sequential "
          "decisions\n")
    print(f"{described}\n")
    print("| evaluator | case | p50 (ms) | p99 (ms) | min (ms) |")
    print("|---|---|---:|---:|---:|")
    for who, case, lat in rows:
        print(f"| {who} | {case} | {statistics.median(lat):.2f} | {pct(lat, 99):.2f} | {min(lat):.2f} |")
    if external is None:
        print("\n- real OPA rows: skipped (no --opa-url given)")
    print(f"- bench wall time: {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10, help="blocks of the alternated rows")
    add_server_flags(parser, opa=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
