"""Benchmark the LimitRange pack's admission decision: a 5-container pod template against 3 LimitRanges.

Usage: .venv/bin/python bench/limitrange.py [--queries 500] [--opa-url URL [--opa-token-file PATH]]

The object is a Deployment whose template has five containers (two with
requests and limits, one with a limit only, two with nothing: they get
defaults); the namespace has three LimitRanges — Container defaults,
Container min / max / maxLimitRequestRatio, Pod max — so the decision parses
every quantity, defaults, totals the pod, checks every bound and writes the
patch. A second object breaks five bounds, for the cost of a denial. Measured,
sequentially, per evaluator:

* the devstack engine over HTTP (``POST /v1/data/io/k8s/federation/admission``),
  with only the pack and the lib loaded, then with the placement policy too;
* the same engine's evaluation in-process (``EngineState.read``, what its
  server runs for the request, without HTTP) — devstack only;
* regorus alone as the engine runs it (a template prepared once, a clone per
  decision), without HTTP and the engine's data mirror;
* OPA's own evaluator (OPA 1.20 in process, ``opa_bindings``), same modules;
* the floors: ``GET /health`` (HTTP alone), and a constant rule of the pack
  queried over HTTP and in process with the same input (what any query costs
  with these modules loaded: regorus' per-query set-up grows with the loaded
  Rego, whatever the query evaluates).

Target (issue 13): decision p50 <= 1 ms in the engine. Against an external
OPA (``--opa-url``) the HTTP rows measure it instead and the in-process
engine row is skipped.
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

from bench.common import Opa, add_server_flags, devstack_only, pct, servers  # noqa: E402

QUERY = "/v1/data/io/k8s/federation/admission"
CONSTANT = "/v1/data/io/k8s/federation/limitrange/quantity/max_units"  # a constant rule of the pack
PATH = ("io", "k8s", "federation", "admission")
# in an order OPA accepts one PUT at a time (quantity's functions before their callers)
PACK = ["lib/generated/replicated_root.rego", "lib/podspec.rego", "limitrange/quantity.rego",
        "limitrange/ranger.rego", "limitrange/admission.rego"]
PLACEMENT = ["federation/lib.rego", "federation/placement.rego"]
NS = "shop"


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


def summary(lat: list[float]) -> tuple[float, float]:
    return statistics.median(lat), pct(lat, 99)


def timed_calls(fn: Callable[[], Any], n: int) -> list[float]:
    fn()  # warm
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def http_queries(s: aiohttp.ClientSession, url: str, doc: dict[str, Any], n: int,
                       query: str = QUERY) -> list[float]:
    async def once() -> dict[str, Any]:
        async with s.post(url + query, json={"input": doc}) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    await once()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await once()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def interleaved(url_a: str, url_b: str, doc: dict[str, Any], n: int, rounds: int = 10
                      ) -> tuple[list[float], list[float]]:
    """The same decision asked of two engines in alternating blocks (both see the same load)."""
    a: list[float] = []
    b: list[float] = []
    async with aiohttp.ClientSession() as s:
        for _ in range(rounds):
            a += await http_queries(s, url_a, doc, max(1, n // rounds))
            b += await http_queries(s, url_b, doc, max(1, n // rounds))
    return a, b


async def load(s: aiohttp.ClientSession, url: str, mods: dict[str, str]) -> None:
    for mid, src in mods.items():
        async with s.put(f"{url}/v1/policies/bench-limitrange/{mid}", data=src) as r:
            assert r.status == 200, await r.text()
    async with s.put(f"{url}/v1/data/kubernetes", json={"limitranges": {NS: limitranges()}}) as r:
        assert r.status in (200, 204), await r.text()


def in_process_engine(mods: dict[str, str], doc: dict[str, Any], n: int) -> list[float]:
    from devstack.engine.state import EngineState

    state = EngineState()
    for mid, src in mods.items():
        state.put_policy(mid, src)
    state.put_data(("kubernetes",), {"limitranges": {NS: limitranges()}})
    return timed_calls(lambda: state.read(PATH, doc), n)


def regorus_prepared(mods: dict[str, str], doc: dict[str, Any], n: int,
                     query: str = "data.io.k8s.federation.admission") -> list[float]:
    """regorus alone, as the engine runs it (its template evaluated once, a clone per decision), without
    HTTP and the data mirror."""
    import json

    import regorus

    template = regorus.Engine()
    for mid, src in mods.items():
        template.add_policy(mid, src)
    template.add_data_json(json.dumps({"kubernetes": {"limitranges": {NS: limitranges()}}}))
    template.eval_query("x := 1")  # prepared once; clones keep it

    def once() -> None:
        engine = template.clone()
        engine.set_input_json(json.dumps(doc))
        engine.eval_query_as_json(query)

    return timed_calls(once, n)


def opa_evaluator(mods: dict[str, str], doc: dict[str, Any], n: int) -> tuple[list[float], Any]:
    from opa_bindings import OpaEngine

    engine = OpaEngine()
    for mid, src in mods.items():
        engine.add_policy(mid, src)
    engine.add_data({"kubernetes": {"limitranges": {NS: limitranges()}}})
    query = "x := data.io.k8s.federation.admission"
    return timed_calls(lambda: engine.eval_query(query, doc), n), engine.eval_query(query, doc)[0]["x"]


def check(decision: dict[str, Any], broken: bool) -> None:
    """The benchmark measures the right thing: defaults patched, or denied with both errors."""
    if broken:
        assert len(decision.get("errors") or []) == 5, decision
    else:
        assert not decision.get("errors") and len(decision["patches"]["limitrange"]) == 2, decision


async def run(args: argparse.Namespace) -> None:
    n = args.queries
    pack = modules(PACK)
    everything = {**modules(PLACEMENT), **pack}
    ok, broken = deployment("web"), deployment("big", broken=True)
    rows: list[tuple[str, str, list[float]]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        async with servers(args, Path(tmp)) as srv:
            assert srv.opa is not None
            engine = srv.opa
            engine.owns(documents=("kubernetes",), policies=("bench-limitrange/",))
            where = "external OPA" if engine.external else "devstack engine"
            async with engine.session() as s:
                await load(s, engine.url, pack)
                async with s.post(engine.url + QUERY, json={"input": ok}) as r:
                    check((await r.json())["result"], False)
                async with s.post(engine.url + QUERY, json={"input": broken}) as r:
                    check((await r.json())["result"], True)
                rows.append((f"{where}, HTTP", "pack only, defaults patched", await http_queries(s, engine.url, ok, n)))
                rows.append((f"{where}, HTTP", "pack only, denied (5 violations)",
                             await http_queries(s, engine.url, broken, n)))
                constant = await http_queries(s, engine.url, ok, n, CONSTANT)
                await load(s, engine.url, modules(PLACEMENT))
                rows.append((f"{where}, HTTP", "pack + placement policy", await http_queries(s, engine.url, ok, n)))
                if not engine.external:
                    # Baseline in the same run: an engine cloning regorus for every query with input
                    # (--per-query-clone, how the engine evaluated before), same modules and data.
                    base = Opa.start(Path(tmp), "baseline", "--per-query-clone")
                    try:
                        async with base.session() as b:
                            await load(b, base.url, everything)
                        reused, cloned = await interleaved(engine.url, base.url, ok, n)
                    finally:
                        await base.close()
                    rows.append((f"{where}, HTTP, one clone reused (default)", "pack + placement, alternated",
                                 reused))
                    rows.append((f"{where}, HTTP, baseline --per-query-clone", "pack + placement, alternated",
                                 cloned))
                health = []
                for _ in range(n):
                    t = time.perf_counter()
                    async with s.get(engine.url + "/health") as r:
                        await r.read()
                    health.append((time.perf_counter() - t) * 1000)
            described = srv.describe()
    engine_rows: list[tuple[str, str, list[float]]] = []
    if not args.opa_url:
        engine_rows.append(("devstack engine, in process (no HTTP)", "pack only, defaults patched",
                            in_process_engine(pack, ok, n)))
        engine_rows.append(("devstack engine, in process (no HTTP)", "pack + placement policy",
                            in_process_engine(everything, ok, n)))
        engine_rows.append(("regorus alone, template prepared once", "pack only, defaults patched",
                            regorus_prepared(pack, ok, n)))
        engine_rows.append(("regorus alone, template prepared once", "floor: a constant rule of the pack",
                            regorus_prepared(pack, ok, n, "data.io.k8s.federation.limitrange.quantity.max_units")))
    opa_ok, decision = opa_evaluator(pack, ok, n)
    check(decision, False)
    opa_rows = [("OPA 1.20 evaluator, in process", "pack only, defaults patched", opa_ok),
                ("OPA 1.20 evaluator, in process", "pack + placement policy", opa_evaluator(everything, ok, n)[0])]

    print(f"### LimitRange pack — 5-container Deployment template, 3 LimitRanges, {n} sequential decisions\n")
    print(f"{described}\n")
    print("| evaluator | case | p50 (ms) | p99 (ms) | min (ms) |")
    print("|---|---|---:|---:|---:|")
    floors = [(f"{where}, HTTP", "floor: a constant rule of the pack", constant), ("HTTP floor", "`GET /health`", health)]
    for who, case, lat in rows + engine_rows + opa_rows + floors:
        p50, p99 = summary(lat)
        print(f"| {who} | {case} | {p50:.2f} | {p99:.2f} | {min(lat):.2f} |")
    if args.opa_url:
        print(f"\n- in-process engine rows: {devstack_only('the engine in process')}")
    print(f"- bench wall time: {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    add_server_flags(parser, opa=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
