"""The cost curve: decision p50 / p99 of each pack as its data grows, devstack engine and real OPA.

Usage: .venv/bin/python bench/scale.py [--queries 300] [--warmup 20] [--block 50] [--throughput 400]
       [--concurrency 16] [--plot PATH] [--json PATH] [--only PREFIX ...]
       [--opa-url URL [--opa-token-file PATH] [--real-only]]

One OPA holds the policy modules as deploy/ ships them (every ConfigMap of
devstack/shipped.py) and the replicated-root module opa-kube-sync generates
(fedplace.sync.replicated_root), as bench/karmada.py loads them; the admission
decision (``POST /v1/data/io/k8s/federation/admission``) is asked of all of
them, as the webhook asks it. Per decision kind and size, ``data.kubernetes``
holds that kind's data alone, and ``data.kubernetes_index`` the derived
documents opa-kube-sync writes beside it (fedplace.common.indexes: the cluster
index of the clusters, the subject index of the RBAC bindings), computed by the
sync's own functions:

* placement — 10, 100, 1,000, 5,000 Federation v1 Clusters (bench/karmada.py's
  ``federation_clusters``: half in the EU, PCI ``i % 4``); a ReplicaSet asking
  for EU and PCI ≥ 2 (replica-set-preferences) and the same constraints on a
  Deployment (the cluster selector, bench/engine.py's ``DEPLOY_INPUT``), in
  alternating blocks of ``--block``; the placement rules are the shipped rule
  set (rules-eu-pci) alone;
* placement, Karmada — the same clusters as Karmada Clusters, 1,000 Deployment
  templates and the settings module ``control_plane := "karmada"``
  (bench/karmada.py's): its ResourceBinding, whose template asks for EU and
  PCI ≥ 2 (the exclusions patched, the excluded clusters and the why annotated);
* placement with two more rule sets — all three again with the shipped
  tenancy and residency sets (policies/rules-tenancy, rules-residency: the
  namespace's label ``fedplace.io/tenant`` → the cluster label
  ``tenants.fedplace.io/<tenant>``; its annotation
  ``residency.fedplace.io/countries`` → the cluster label
  ``fedplace.io/country``) loaded beside rules-eu-pci; the namespaces
  replicated, every cluster labelled for the tenant and with its region's
  country, so the answer is the one above and the difference is what the two
  sets cost;
* SchedulingPolicy — bench/schedulingpolicy.py's world (200 policies, 300
  ClusterRoles) with 251, 1,000, 5,000, 10,000 bindings, all
  ClusterRoleBindings (251: its 250 team grants and ``sp:restricted`` are the
  fewest its world has when every binding is cluster-wide); its Deployment
  with all five components set, admitted. One more point, off the curve: its
  usual 250 / 4,750 ClusterRoleBinding / RoleBinding split;
* LimitRange — bench/limitrange.py's five-container Deployment against 1, 5,
  10, 20 LimitRanges in its namespace: its three (at 1, their items in one
  LimitRange, in the order that gives the same defaults), then loose Pod and
  Container bounds (``zz-…``, sorting after them) that change no answer.

``--warmup`` unmeasured decisions after each data change, then ``--queries``
sequential ones (then ``--throughput`` more with ``--concurrency`` in flight:
decisions/s), timed from the request to the last byte of the answer. Every
answer is checked (the clusters a placement allows, the SchedulingPolicy
verdict, the LimitRange patches — identical at every size): a wrong one stops
the benchmark. Growth per 10×: from one size to the next, (p50 ratio) ** (1 /
log10(size ratio)), i.e. 10 ** (the log-log slope), since the sizes are not
exact decades; and the same over the whole range.

The devstack engine, and with ``--opa-url`` (a scratch OPA: see
bench/common.py) that OPA too, one after the other (``--real-only``: that OPA
alone). ``--only PREFIX`` measures the series whose key starts with it
(``--only placement``: the six placement series). ``--plot PATH`` writes the
curve as a PNG (matplotlib: the ``bench`` extra), ``--json PATH`` every latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import limitrange, schedulingpolicy  # noqa: E402
from bench.common import Opa, add_server_flags, pct, proc_mb, servers  # noqa: E402
from bench.engine import DEPLOY_INPUT  # noqa: E402
from bench.karmada import (  # noqa: E402
    RS_INPUT,
    SETTINGS,
    binding_input,
    check_binding,
    check_rs,
    federation_clusters,
    karmada_clusters,
    opa_pid,
    policy_digest,
    put_json,
    templates,
)
from devstack.shipped import rule_set_configmap, shipped_policy_configmaps  # noqa: E402
from fedplace.common.indexes import index_of, index_path  # noqa: E402
from fedplace.common.kube_client import Resource  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402

QUERY = "/v1/data/io/k8s/federation/admission"
PREFIX = "bench-scale"  # policy ids: <PREFIX>/<configmap>/<key>
ROOT = replicated_root.DEFAULT_ROOT
CLUSTERS = Resource("federation.fedplace.io", "v1beta1", "clusters", False)
SELECTOR = "federation.alpha.kubernetes.io/cluster-selector"
SP_CASE = "all five set, admitted"


# -- the workloads: data.kubernetes per size (builders of the other benches) -------------------

def placement_data(n: int) -> dict[str, Any]:
    return {CLUSTERS.plural: federation_clusters(n)}


def karmada_data(n: int) -> dict[str, Any]:
    """Karmada Clusters and bench/karmada.py's 1,000 Deployment templates (their bindings' input)."""
    return {CLUSTERS.plural: karmada_clusters(n), "deployments": templates(1_000)}


TENANT = "acme"
COUNTRIES = "DE, FR, US"
EXTRA_SETS = ("tenancy", "residency")  # shipped, off by default (deploy/components/placement-rules-<set>)


def with_sets(kube: dict[str, Any]) -> dict[str, Any]:
    """``kube`` with the namespaces the shipped tenancy and residency sets read (each of tenant
    acme, allowing DE, FR and US) and every cluster labelled for them (acme's, in DE or the US), so
    the sets allow what the example set allows."""
    clusters = {}
    for name, c in kube[CLUSTERS.plural].items():
        region = c.get("status", {}).get("region") or c["spec"]["region"]
        labels = {**c["metadata"]["labels"], f"tenants.fedplace.io/{TENANT}": "true",
                  "fedplace.io/country": "DE" if region.startswith("europe-") else "US"}
        clusters[name] = {**c, "metadata": {**c["metadata"], "labels": labels}}
    names = ["shop", *(f"ns{i}" for i in range(20))]
    namespaces = {ns: {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": ns, "labels": {"fedplace.io/tenant": TENANT},
                                    "annotations": {"residency.fedplace.io/countries": COUNTRIES}}}
                  for ns in names}
    return {**kube, CLUSTERS.plural: clusters, "namespaces": namespaces}


def sp_data(cluster_bindings: int) -> dict[str, Any]:
    """bench/schedulingpolicy.py's world with ``cluster_bindings`` bindings, all cluster-wide
    (its ``BINDINGS`` is the total; the world reads it when called)."""
    saved = schedulingpolicy.BINDINGS
    schedulingpolicy.BINDINGS = cluster_bindings
    try:
        return schedulingpolicy.world(cluster_bindings)
    finally:
        schedulingpolicy.BINDINGS = saved


def sp_split_data(_: int) -> dict[str, Any]:
    """bench/schedulingpolicy.py's usual shape: 250 ClusterRoleBindings, 4,750 RoleBindings."""
    return schedulingpolicy.world(250)


def lr_data(n: int) -> dict[str, Any]:
    """bench/limitrange.py's three LimitRanges (at 1, their items in one), then loose bounds."""
    three = limitrange.limitranges()
    if n == 1:
        # Across LimitRanges the first by name that defaults a resource wins ("container-bounds": its
        # max), within one the last item (the API server's LimitRanger): "defaults" first, then the bounds.
        items = [item for name in ("defaults", "container-bounds", "pod-bounds")
                 for item in three[name]["spec"]["limits"]]
        one = {**three["defaults"], "metadata": {"name": "limits", "namespace": limitrange.NS},
               "spec": {"limits": items}}
        ranges = {"limits": one}
    else:
        assert n >= len(three), n
        ranges = dict(three)
        for i in range(n - len(three)):
            name = f"zz-{i:02d}"
            item = ({"type": "Pod", "max": {"cpu": str(64 + i), "memory": "256Gi"}} if i % 2 == 0 else
                    {"type": "Container", "maxLimitRequestRatio": {"memory": str(100 + i)}})
            ranges[name] = {"apiVersion": "v1", "kind": "LimitRange",
                            "metadata": {"name": name, "namespace": limitrange.NS}, "spec": {"limits": [item]}}
    return {"limitranges": {limitrange.NS: ranges}}


def indexes(kube: dict[str, Any]) -> dict[str, Any]:
    """``data.<root>_index`` as opa-kube-sync writes it for ``kube`` (fedplace.common.indexes)."""
    out: dict[str, Any] = {}
    for resource in (CLUSTERS, schedulingpolicy.CRB, schedulingpolicy.RB):
        index = index_of(resource)
        if index is not None and resource.plural in kube:
            top, plural = index_path(ROOT, resource)
            out.setdefault(top, {})[plural] = index(kube[resource.plural])
    return out


# -- the checks ---------------------------------------------------------------------------------

def eligible(n: int) -> list[str]:
    """What placement allows for EU and PCI ≥ 2 among federation_clusters(n): odd i (EU), i % 4 ≥ 2."""
    return sorted(f"c{i}" for i in range(n) if i % 4 == 3)


def check_deploy(answer: dict[str, Any], n: int) -> None:
    selector = answer["annotations"][SELECTOR]
    selector = json.loads(selector) if isinstance(selector, str) else selector
    values = [v for req in selector if req["key"] == "fedplace.io/cluster-name" for v in req["values"]]
    assert sorted(values) == eligible(n), (len(values), n)
    assert not answer.get("errors"), answer.get("errors")


def check_sp(answer: dict[str, Any], _: int) -> None:
    assert schedulingpolicy.CASES[SP_CASE][1](answer), answer


_LR_PATCHES: list[Any] = []  # the first answer's patches: every size, every server must give the same


def check_lr(answer: dict[str, Any], _: int) -> None:
    limitrange.check(answer, broken=False)
    if not _LR_PATCHES:
        _LR_PATCHES.append(answer["patches"])
    assert answer["patches"] == _LR_PATCHES[0], (answer["patches"], _LR_PATCHES[0])


# -- the series ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Series:
    key: str
    label: str
    unit: str  # what the size counts
    sizes: tuple[int, ...]
    data: Callable[[int], dict[str, Any]]
    body: dict[str, Any]
    check: Callable[[dict[str, Any], int], None]
    group: str  # series of a group share their data (and alternate in blocks)
    curve: bool = True  # drawn, and given a growth ratio
    policies: dict[str, str] = field(default_factory=dict)  # more modules while the group is measured


PLACEMENT_SIZES = (10, 100, 1_000, 5_000)
SETS = " + tenancy, residency"
SETTINGS_MODULE = {"fedplace-settings/settings.rego": SETTINGS}
SETS_MODULES = {f"{name}/{key}": src for name, data in map(rule_set_configmap, EXTRA_SETS) for key, src in data.items()}
SERIES = [
    Series("placement-rs", "placement, ReplicaSet (preferences)", "clusters", PLACEMENT_SIZES, placement_data,
           {"input": RS_INPUT}, check_rs, "placement"),
    Series("placement-deploy", "placement, Deployment (cluster selector)", "clusters", PLACEMENT_SIZES,
           placement_data, DEPLOY_INPUT, check_deploy, "placement"),
    Series("placement-binding", "placement, Karmada binding", "clusters", PLACEMENT_SIZES, karmada_data,
           {"input": binding_input(0)}, check_binding, "placement-karmada", policies=SETTINGS_MODULE),
    Series("placement-rs-sets", "placement, ReplicaSet" + SETS, "clusters", PLACEMENT_SIZES,
           lambda n: with_sets(placement_data(n)), {"input": RS_INPUT}, check_rs, "placement-sets",
           policies=SETS_MODULES),
    Series("placement-deploy-sets", "placement, Deployment" + SETS, "clusters", PLACEMENT_SIZES,
           lambda n: with_sets(placement_data(n)), DEPLOY_INPUT, check_deploy, "placement-sets",
           policies=SETS_MODULES),
    Series("placement-binding-sets", "placement, Karmada binding" + SETS, "clusters", PLACEMENT_SIZES,
           lambda n: with_sets(karmada_data(n)), {"input": binding_input(0)}, check_binding,
           "placement-karmada-sets", policies={**SETTINGS_MODULE, **SETS_MODULES}),
    Series("schedulingpolicy", f"SchedulingPolicy, {SP_CASE}", "ClusterRoleBindings", (251, 1_000, 5_000, 10_000),
           sp_data, {"input": schedulingpolicy.CASES[SP_CASE][0]}, check_sp, "schedulingpolicy"),
    Series("schedulingpolicy-split", f"SchedulingPolicy, {SP_CASE}, 250 CRB / 4,750 RB", "ClusterRoleBindings",
           (250,), sp_split_data, {"input": schedulingpolicy.CASES[SP_CASE][0]}, check_sp, "schedulingpolicy-split",
           curve=False),
    Series("limitrange", "LimitRange, 5 containers, defaults patched", "LimitRanges", (1, 5, 10, 20), lr_data,
           {"input": limitrange.deployment("web")}, check_lr, "limitrange"),
]
PANELS = [("placement", "clusters"), ("SchedulingPolicy", "ClusterRoleBindings"), ("LimitRange", "LimitRanges")]


@dataclass
class Figures:
    """What one server measured: {series key: {size: latencies (ms)}}, and the rest."""

    who: str
    what: str
    lat: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    answer_bytes: dict[str, dict[int, int]] = field(default_factory=dict)
    put_ms: dict[str, dict[int, float]] = field(default_factory=dict)
    health: list[float] = field(default_factory=list)
    tput: dict[str, dict[int, float]] = field(default_factory=dict)  # decisions/s, --concurrency in flight
    rss: float = float("nan")
    load: tuple[float, float] = (0.0, 0.0)
    policies: str = ""


def modules() -> dict[str, str]:
    """Policy id -> Rego: the generated replicated root, then every shipped module."""
    out = {replicated_root.POLICY_ID: replicated_root.render(ROOT)}
    for cm, data in shipped_policy_configmaps().items():
        out.update({f"{PREFIX}/{cm}/{key}": src for key, src in data.items()})
    return out


async def load_modules(s: aiohttp.ClientSession, url: str) -> str:
    """Every module, retried until OPA accepts them all (a module calling another's functions
    is refused until that one is there); returns bench/karmada.py's digest of them."""
    pending = modules()
    digest = policy_digest(pending)
    while pending:
        refused = {}
        for pid, src in pending.items():
            async with s.put(f"{url}/v1/policies/{pid}", data=src.encode()) as r:
                if r.status != 200:
                    refused[pid] = (src, await r.text())
        if len(refused) == len(pending):
            raise SystemExit(f"the OPA refused: {({k: v[1][:200] for k, v in refused.items()})}")
        pending = {pid: src for pid, (src, _) in refused.items()}
    return digest


async def put_data(s: aiohttp.ClientSession, url: str, kube: dict[str, Any]) -> float:
    """The mirror, then its indexes (as the sync: the index after the collection); ms."""
    t = time.perf_counter()
    await put_json(s, url, ROOT, kube)
    index = indexes(kube).get(f"{ROOT}_index")
    if index:
        await put_json(s, url, f"{ROOT}_index", index)
    else:
        async with s.delete(f"{url}/v1/data/{ROOT}_index") as r:
            assert r.status in (204, 404), r.status
    return (time.perf_counter() - t) * 1000


async def ask(s: aiohttp.ClientSession, url: str, series: Series, n: int) -> tuple[float, bytes]:
    t = time.perf_counter()
    async with s.post(url + QUERY, json=series.body) as r:
        raw = await r.read()
        ms = (time.perf_counter() - t) * 1000
        assert r.status == 200, (r.status, raw[:300])
    try:
        series.check(json.loads(raw)["result"], n)
    except (AssertionError, KeyError, TypeError) as exc:
        raise SystemExit(f"WRONG ANSWER: {series.label} at {sized(n, series.unit)}: {exc!r}\n{raw[:600]!r}") from exc
    return ms, raw


async def throughput(s: aiohttp.ClientSession, url: str, series: Series, n: int, total: int,
                     concurrency: int) -> float:
    """Decisions/s with ``concurrency`` in flight, ``total`` in all (answers checked)."""
    left = total

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await ask(s, url, series, n)

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - t)


async def measure(opa: Opa, who: str, args: argparse.Namespace) -> Figures:
    fig = Figures(who, opa.describe())
    load0 = os.getloadavg()[0]
    groups: dict[str, list[Series]] = {}
    for series in SERIES:
        groups.setdefault(series.group, []).append(series)
    async with opa.session() as s:
        url = opa.url
        fig.policies = await load_modules(s, url)
        for group in groups.values():
            if args.only and not any(x.key.startswith(tuple(args.only)) for x in group):
                continue
            for pid, src in group[0].policies.items():
                async with s.put(f"{url}/v1/policies/{PREFIX}/{pid}", data=src.encode()) as r:
                    assert r.status == 200, (pid, r.status, await r.text())
            for n in group[0].sizes:
                fig.put_ms.setdefault(group[0].group, {})[n] = await put_data(s, url, group[0].data(n))
                rounds = max(1, math.ceil(args.queries / args.block))
                for r in range(rounds):
                    block = min(args.block, args.queries - r * args.block)
                    for series in group if r % 2 == 0 else list(reversed(group)):
                        for _ in range(args.warmup if r == 0 else 0):
                            await ask(s, url, series, n)
                        for _ in range(block):
                            ms, raw = await ask(s, url, series, n)
                            fig.lat.setdefault(series.key, {}).setdefault(n, []).append(ms)
                        fig.answer_bytes.setdefault(series.key, {})[n] = len(raw)
                if args.throughput:
                    for series in group:
                        fig.tput.setdefault(series.key, {})[n] = await throughput(
                            s, url, series, n, args.throughput, args.concurrency)
                line = ", ".join(f"{x.key} p50 {statistics.median(fig.lat[x.key][n]):.2f} ms" for x in group)
                print(f"  {who}: {sized(n, group[0].unit)}: {line}", file=sys.stderr)
            for pid in group[0].policies:
                async with s.delete(f"{url}/v1/policies/{PREFIX}/{pid}") as r:
                    assert r.status == 200, (pid, r.status)
        for _ in range(200):
            t = time.perf_counter()
            async with s.get(url + "/health") as r:
                await r.read()
            fig.health.append((time.perf_counter() - t) * 1000)
    pid = opa_pid(opa)
    fig.rss = proc_mb(pid) if pid is not None else float("nan")
    fig.load = (load0, os.getloadavg()[0])
    return fig


# -- the report ---------------------------------------------------------------------------------

def sized(n: int, unit: str) -> str:
    return f"{n:,} {unit.removesuffix('s') if n == 1 else unit}"


def per_10x(p_small: float, p_big: float, small: int, big: int) -> float:
    """The p50 ratio per 10× of size: 10 ** (log-log slope between the two sizes)."""
    return (p_big / p_small) ** (1 / math.log10(big / small))


def p50(lat: list[float]) -> float:
    return statistics.median(lat)


def measured(figs: list[Figures]) -> list[Series]:
    """The series every server measured (``--only`` may leave some out)."""
    return [s for s in SERIES if all(s.key in f.lat for f in figs)]


def report(figs: list[Figures], args: argparse.Namespace, why_not: str) -> None:
    print("### Cost curve — decision p50 / p99 as the data grows, devstack engine and real OPA\n")
    for f in figs:
        print(f"- {f.who}: {f.what} (load average {f.load[0]:.1f} → {f.load[1]:.1f}; policies: {f.policies})")
    if all(f.who != "real OPA" for f in figs):
        print(f"- real OPA: {why_not}")
    print(f"\n{args.queries} sequential decisions per row and server ({args.warmup} unmeasured first; placement's "
          f"two inputs alternate in blocks of {args.block}), every answer checked. Growth per 10×: "
          "(p50 / p50 of the size above) ** (1 / log10(size ratio)), i.e. 10 ** log-log slope.\n")
    head = " | ".join(f"{f.who}: p50 / p99 (ms) | growth per 10×" for f in figs)
    print(f"| decision | size | {head} |")
    print("|---|---:|" + "---:|---:|" * len(figs))
    for series in measured(figs):
        prev: int | None = None
        for n in series.sizes:
            cells = []
            for f in figs:
                lat = f.lat[series.key][n]
                growth = (f"×{per_10x(p50(f.lat[series.key][prev]), p50(lat), prev, n):.2f}"
                          if prev is not None and series.curve else "—")
                cells.append(f"{p50(lat):.2f} / {pct(lat, 99):.2f} | {growth}")
            print(f"| {series.label} | {sized(n, series.unit)} | " + " | ".join(cells) + " |")
            prev = n
        if series.curve:
            lo, hi = series.sizes[0], series.sizes[-1]
            cells = [f"{p50(f.lat[series.key][hi]) / p50(f.lat[series.key][lo]):.2f}× overall | "
                     f"**×{per_10x(p50(f.lat[series.key][lo]), p50(f.lat[series.key][hi]), lo, hi):.2f}**"
                     for f in figs]
            print(f"| {series.label} | {lo:,} → {hi:,} | " + " | ".join(cells) + " |")
    print("| `GET /health` (the HTTP floor) | | " + " | ".join(f"{p50(f.health):.2f} / {pct(f.health, 99):.2f} | "
                                                             for f in figs) + " |")
    print("| RSS at the end | | " + " | ".join(f"{f.rss:.0f} MB | " for f in figs) + " |")
    if args.throughput:
        print(f"\nThroughput: {args.throughput} decisions with {args.concurrency} in flight, per row and server.\n")
        print("| decision | size | " + " | ".join(f"{f.who}: decisions/s" for f in figs) + " |")
        print("|---|---:|" + "---:|" * len(figs))
        for series in measured(figs):
            for n in series.sizes:
                print(f"| {series.label} | {sized(n, series.unit)} | "
                      + " | ".join(f"{f.tput[series.key][n]:,.0f}" for f in figs) + " |")
    sets = [(x, y) for x in measured(figs) for y in measured(figs) if y.key == x.key + "-sets"]
    if sets:
        print("\nTwo more rule sets against the example set alone, p50 ratio (target ≤ 1.5×):\n")
        print("| decision | size | " + " | ".join(f"{f.who}" for f in figs) + " |")
        print("|---|---:|" + "---:|" * len(figs))
        for alone, more in sets:
            for n in alone.sizes:
                print(f"| {more.label} | {sized(n, alone.unit)} | " + " | ".join(
                    f"{p50(f.lat[more.key][n]) / p50(f.lat[alone.key][n]):.2f}×" for f in figs) + " |")
    largest = [(s, s.sizes[-1]) for s in measured(figs) if s.curve]
    print("\n- answer size at the largest size: " + "; ".join(
        f"{s.key} {figs[0].answer_bytes[s.key][n] / 1024:.1f} KB" for s, n in largest))
    for f in figs:
        puts = "; ".join(f"{g} " + ", ".join(f"{ms:,.0f}" for ms in by.values()) for g, by in f.put_ms.items())
        print(f"- {f.who}, data + index PUT per size (ms): {puts}")


def plot(figs: list[Figures], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"placement-rs": "tab:blue", "placement-deploy": "tab:orange", "schedulingpolicy": "tab:green",
               "limitrange": "tab:red"}
    styles = {"devstack engine": dict(linestyle="--", marker="o", mfc="white"),
              "real OPA": dict(linestyle="-", marker="o")}
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.8), sharey=True)
    for ax, (title, unit) in zip(axes, PANELS, strict=True):
        drawn = [s for s in measured(figs) if s.curve and s.unit == unit]
        for series in drawn:
            for f in figs:
                xs = list(series.sizes)
                ys = [p50(f.lat[series.key][n]) for n in xs]
                label = series.label.split(", ", 1)[1] if len(drawn) > 1 else "p50"
                ax.plot(xs, ys, color=colours.get(series.key), label=f"{label} — {f.who}", **styles.get(f.who, {}))
        # a line of slope 1 (cost proportional to size) through the first series' first point, for the eye
        first = drawn[0]
        x0, x1 = first.sizes[0], first.sizes[-1]
        y0 = p50(figs[-1].lat[first.key][x0])
        ax.plot([x0, x1], [y0, y0 * x1 / x0], color="grey", linestyle=":", linewidth=1,
                label="∝ size (for reference)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("decision p50 over HTTP (ms)")
    fig.suptitle("fedplace admission decision: cost against data size (bench/scale.py)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"- plot: {path}")


def write_json(figs: list[Figures], args: argparse.Namespace, path: Path) -> None:
    doc = {"queries": args.queries, "warmup": args.warmup, "block": args.block, "servers": {
        f.who: {"what": f.what, "policies": f.policies, "load": f.load, "rss_mb": f.rss, "throughput": f.tput,
                "health_ms": f.health, "put_ms": f.put_ms,
                "series": {s.key: {"label": s.label, "unit": s.unit, "sizes": {
                    str(n): {"p50": p50(f.lat[s.key][n]), "p99": pct(f.lat[s.key][n], 99), "min": min(f.lat[s.key][n]),
                             "answer_bytes": f.answer_bytes[s.key][n], "latencies_ms": f.lat[s.key][n]}
                    for n in s.sizes}} for s in measured(figs)}}
        for f in figs}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    print(f"- raw figures: {path}")


async def run(args: argparse.Namespace, tmp: Path) -> list[Figures]:
    figs = []
    async with servers(args, tmp) as srv:
        assert srv.opa is not None
        external = srv.opa if srv.opa.external else None
        if external is None or not args.real_only:
            engine = srv.opa if external is None else Opa.start(tmp, "engine")
            try:
                figs.append(await measure(engine, "devstack engine", args))
            finally:
                if external is not None:
                    await engine.close()
        if external is not None:
            external.owns(documents=(ROOT, f"{ROOT}_index"), policies=(f"{PREFIX}/", replicated_root.POLICY_ID))
            figs.append(await measure(external, "real OPA", args))
    return figs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300, help="timed decisions per decision kind and size")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured decisions after each data change")
    parser.add_argument("--block", type=int, default=50, help="placement's two inputs alternate in blocks of this")
    parser.add_argument("--throughput", type=int, default=400, metavar="N",
                        help="then N decisions with --concurrency in flight, per row (0: skip)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--plot", metavar="PATH", type=Path, help="write the curve as a PNG (needs matplotlib)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write every figure and latency as JSON")
    parser.add_argument("--only", action="append", metavar="PREFIX",
                        help="measure only the series whose key starts with PREFIX (repeatable; e.g. placement)")
    parser.add_argument("--real-only", action="store_true", help="with --opa-url: skip the devstack engine")
    add_server_flags(parser, opa=True)
    args = parser.parse_args()
    if args.queries < 1 or args.block < 1 or args.warmup < 0:
        parser.error("--queries and --block must be ≥ 1, --warmup ≥ 0")
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SystemExit("--plot needs matplotlib, which is not installed: .venv/bin/pip install -e '.[bench]' "
                             "(or 'matplotlib>=3.8')") from None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        figs = asyncio.run(run(args, Path(tmp)))
    report(figs, args, "skipped (no --opa-url given)")
    if args.plot is not None:
        plot(figs, args.plot)
    if args.json is not None:
        write_json(figs, args, args.json)
    print(f"\n- bench wall time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
