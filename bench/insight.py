"""Benchmark ``fedplace what-if`` and the placement page: 5,000 workloads over 1,000 clusters.

Usage: .venv/bin/python bench/insight.py [--replicasets 5000] [--clusters 1000] [--worst-case]
       [--policies all|placement] [--opa-url URL [--opa-token-file PATH]]

The live OPA (a devstack engine, or an external scratch one) holds every
shipped policy ConfigMap of deploy/base (placement, lib, LimitRange,
SchedulingPolicy) under the sync's ids, and ``data.kubernetes``: 1,000 Cluster
objects (a fifth of them in EU regions, PCI levels 0–4) and 5,000 ReplicaSets
in 20 namespaces, each unique (name, uid, labels, selector, timestamps), with
one of six constraint shapes (none, EU, EU + PCI 2, PCI 1, PCI 3, PCI 4), one
of 10 team annotations, one of 3 images, and the replica-set-preferences
admission gave it (about 290 clusters on average: 57 MB of JSON in all).

Timed, each as the ``fedplace what-if`` command runs it (read the live OPA,
load the evaluator, decide before, apply, decide after, compare), with the
evaluator named:

1. a cluster label change (the PCI level of 100 clusters lowered);
2. a policy change (the federation ConfigMap with a stricter EU rule);
3. both at once;
4. with ``--worst-case``: every workload made distinct to the policies (its
   own replica-set-preferences, which the policy reads), so no evaluation is
   shared;
5. the same as 1 with a scratch OPA (a second devstack engine; skipped against
   an external OPA).

Then the placement page for the same 5,000 × 1,000: the view built from the
data (what the sync serves from its caches) and rendered to HTML, and loaded
in headless Chromium from a file: ``data-rendered-ms`` (navigation start →
load event with layout forced), and the browser process's wall time against
a blank page's. Targets: what-if ≤ 5 s; the page renders ≤ 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from bench.common import Opa, add_server_flags, devstack_only, servers  # noqa: E402
from fedplace.common.annotations import canonical_value  # noqa: E402
from fedplace.insight import page, whatif  # noqa: E402
from fedplace.insight.evaluate import BindingsEvaluator  # noqa: E402
from fedplace.insight.view import build_view  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402

MANIFEST = ROOT / "deploy/base/policies/policies.yaml"
EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
DECISION = ("io", "k8s", "federation", "admission")
SHAPES = [{}, {EU: "true"}, {EU: "true", PCI: "2"}, {PCI: "1"}, {PCI: "3"}, {PCI: "4"}]
EU_REGIONS = ["europe-west1", "europe-west4", "eu-central-1", "eu-west-1", "westeurope", "northeurope"]
OTHER_REGIONS = ["us-east1", "us-central1", "us-west-2", "asia-east1", "ap-south-1", "southamerica-east1"]


CONFIGMAPS: set[str] | None = None  # --policies placement: only these ConfigMaps


def shipped_modules() -> dict[str, str]:
    out = {replicated_root.POLICY_ID: replicated_root.render()}
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and (
                CONFIGMAPS is None or doc["metadata"]["name"] in CONFIGMAPS):
            meta = doc["metadata"]
            out.update({f"{meta['namespace']}/{meta['name']}/{k}": v for k, v in doc["data"].items()})
    return out


def clusters(n: int, rng: random.Random) -> dict[str, Any]:
    out = {}
    for i in range(n):
        eu = rng.random() < 0.2
        region = rng.choice(EU_REGIONS if eu else OTHER_REGIONS)
        name = f"{'eu' if eu else 'xx'}-{region}-{i:04d}"
        out[name] = {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
                     "metadata": {"name": name, "uid": f"c-{i}", "labels": {"pci-compliance-level": str(rng.randint(0, 4)),
                                                                            "provider": region.split("-")[0]}},
                     "spec": {"serverAddress": f"https://{name}.example"}, "status": {"region": region}}
    return out


def replicaset(i: int, rng: random.Random, distinct: list[str] | None = None) -> dict[str, Any]:
    """A ReplicaSet; with ``distinct`` (cluster names), its own replica-set-preferences naming two
    of them, which the policy reads: no two workloads look alike to it."""
    ns, name = f"team-{i % 20:02d}", f"app-{i:05d}"
    ann = {**rng.choice(SHAPES), "example.com/team": f"team-{rng.randint(0, 9)}"}
    if distinct:
        chosen = {distinct[i % len(distinct)]: {"weight": 1}, distinct[(i * 7 + 3) % len(distinct)]: {"weight": 2}}
        ann["federation.kubernetes.io/replica-set-preferences"] = json.dumps({"clusters": chosen, "tag": i})
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": ns, "uid": f"rs-{i}", "resourceVersion": str(1000 + i),
                         "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": name},
                         "annotations": ann},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app",
                                                           "image": f"registry.example/app:{rng.randint(1, 3)}"}]}}}}


async def admitted(objects: list[dict[str, Any]], data: dict[str, Any]) -> None:
    """Merge the decision's annotations into every object (as admission did), evaluated in process."""
    ev = BindingsEvaluator()
    try:
        await ev.load(shipped_modules(), "kubernetes", data)
        decisions, _ = await whatif.decide_workloads(ev, DECISION, objects, await ev.parse())
    finally:
        await ev.close()
    for obj, d in zip(objects, decisions, strict=True):
        for k, v in d.annotations.items():
            obj["metadata"]["annotations"][k] = canonical_value(v)


async def load_live(opa: Opa, data: dict[str, Any]) -> None:
    async with opa.session() as s:
        pending = shipped_modules()
        while pending:
            refused = {}
            for mid, src in pending.items():
                async with s.put(f"{opa.url}/v1/policies/{mid}", data=src) as r:
                    if r.status != 200:
                        refused[mid] = src
            if len(refused) == len(pending):
                raise SystemExit(f"the OPA refused: {sorted(refused)}")
            pending = refused
        async with s.put(f"{opa.url}/v1/data/kubernetes", json=data, timeout=None) as r:
            r.raise_for_status()


async def what_if(opa: Opa, *argv: str) -> tuple[float, dict[str, Any]]:
    parser = argparse.ArgumentParser()
    whatif.add_arguments(parser)
    token = ["--opa-token-file", str(opa.token_file)] if opa.token_file else []
    args = parser.parse_args([*argv, "--max-moves", "100%", "--max-denials", "100%", "--opa-url", opa.url,
                              "--opa-timeout", "120", *token])
    t, cpu = time.perf_counter(), time.process_time()
    doc = await whatif.evaluate(args, io.StringIO())
    doc["summary"]["cpu"] = time.process_time() - cpu
    return time.perf_counter() - t, doc


async def chromium_ms(binary: str, tmp: Path, html: Path) -> tuple[int, float]:
    """(``data-rendered-ms`` of the page, the browser's wall time in s)."""
    t = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp / ('profile-' + html.stem)}", "--window-size=1400,900", "--dump-dom", html.as_uri(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await proc.communicate()
    wall = time.perf_counter() - t
    found = re.search(rb'data-rendered-ms="(\d+)"', out)
    return (int(found.group(1)) if found else -1), wall


PHASES = ("read", "load", "before", "change", "after", "close", "compare")


def row(label: str, seconds: float, doc: dict[str, Any]) -> str:
    s = doc["summary"]
    ev = s["evaluations"]
    phases = " / ".join(f"{s['seconds'].get(p, 0):.2f}" for p in PHASES)
    return (f"| {label} | {s['evaluator']} | {ev['before']} + {ev['after']} | {len(doc['moves'])} | "
            f"{len(doc['denied'])} | {phases} | {s['cpu']:.2f} | **{seconds:.2f}** |")


async def run(args: argparse.Namespace) -> None:
    global CONFIGMAPS
    load = os.getloadavg()
    if args.policies == "placement":
        CONFIGMAPS = {"fedplace-federation", "fedplace-lib"}
    rng = random.Random(16)
    t0 = time.perf_counter()
    cl = clusters(args.clusters, rng)
    objects = [replicaset(i, rng) for i in range(args.replicasets)]
    data: dict[str, Any] = {"clusters": cl}
    await admitted(objects, data)
    data["replicasets"] = {}
    for obj in objects:
        data["replicasets"].setdefault(obj["metadata"]["namespace"], {})[obj["metadata"]["name"]] = obj
    size = len(json.dumps(data))
    lowered = [n for n in cl if n.startswith("eu-")][:50] + [n for n in cl if n.startswith("xx-")][:50]
    labels = [a for n in lowered for a in ("--cluster-label", f"{n}:pci-compliance-level=0")]
    cm = next(d for d in yaml.safe_load_all(MANIFEST.read_text()) if d["metadata"]["name"] == "fedplace-federation")
    cm["data"]["lib.rego"] = cm["data"]["lib.rego"].replace("eu_region_pattern := `^(europe-|eu-)|europe$`",
                                                            "eu_region_pattern := `^europe-`")
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        proposal = Path(tmp) / "federation.yaml"
        proposal.write_text(yaml.safe_dump(cm))
        async with servers(args, Path(tmp)) as srv:
            assert srv.opa is not None
            opa = srv.opa
            opa.owns(documents=("kubernetes",), policies=("kube-federation-scheduling-policy/", "opa-kube-sync/"))
            await load_live(opa, data)
            for label, argv in (("100 cluster labels", labels), ("policy ConfigMap", ["--policy", str(proposal)]),
                                ("both", [*labels, "--policy", str(proposal)])):
                seconds, doc = await what_if(opa, *argv)
                rows.append(row(label, seconds, doc))
            if args.worst_case:
                distinct = [replicaset(i, random.Random(i), list(cl)) for i in range(args.replicasets)]
                await admitted(distinct, {"clusters": cl})
                worst = {"clusters": cl, "replicasets": {}}
                for obj in distinct:
                    worst["replicasets"].setdefault(obj["metadata"]["namespace"], {})[obj["metadata"]["name"]] = obj
                await load_live(opa, worst)
                seconds, doc = await what_if(opa, *labels)
                rows.append(row("100 cluster labels, every workload distinct", seconds, doc))
                await load_live(opa, data)
            scratch_note = ""
            if opa.external:
                scratch_note = devstack_only("a second engine as the scratch OPA")
            else:
                scratch = Opa.start(Path(tmp), "scratch")
                try:
                    seconds, doc = await what_if(opa, *labels, "--scratch-opa-url", scratch.url)
                    rows.append(row("100 cluster labels", seconds, doc))
                finally:
                    await scratch.close()
            described = srv.describe()

        # the page, as the sync builds it from its caches
        t = time.perf_counter()
        view = build_view(cl, [("replicasets", o) for o in objects], source="bench")
        built = time.perf_counter() - t
        t = time.perf_counter()
        html = page.render(view, refresh=10)
        rendered = time.perf_counter() - t
        page_file = Path(tmp) / "placement.html"
        page_file.write_text(html)
        blank = Path(tmp) / "blank.html"
        blank.write_text("<!DOCTYPE html><title>x</title>")
        groups = len({(tuple(w["placement"] or ()), w["requires"]) for w in view["workloads"]})
        binary = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                      None)
        browser = None
        if binary:
            await chromium_ms(binary, Path(tmp), blank)  # warm the browser's files
            _, blank_wall = await chromium_ms(binary, Path(tmp), blank)
            layout_ms, wall = await chromium_ms(binary, Path(tmp), page_file)
            browser = (layout_ms, wall, blank_wall)

    print(f"### fedplace what-if and the placement page — {args.replicasets} ReplicaSets × {args.clusters} clusters\n")
    print(f"{described}")
    print(f"Replicated data: {size / 1e6:.1f} MB of JSON; "
          f"{'every shipped policy ConfigMap' if CONFIGMAPS is None else 'the placement ConfigMaps'} loaded. "
          f"Load average at the start and the end: {load[0]:.1f}, {os.getloadavg()[0]:.1f} (2 cores).\n")
    print("| what-if | evaluator | inputs evaluated (before + after) | moves | new denials | "
          "read / load / before / change / after / close / compare (s) | CPU of the command (s) | total (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(r)
    if scratch_note:
        print(f"\n- scratch OPA row: {scratch_note}")
    print(f"\nPlacement page: {len(view['workloads'])} workloads in {groups} matrix rows × {len(view['clusters'])} "
          f"clusters, {len(html) / 1e6:.2f} MB of HTML")
    print(f"- view built in {built * 1000:.0f} ms, HTML rendered in {rendered * 1000:.0f} ms (Python)")
    if browser:
        layout_ms, wall, blank_wall = browser
        print(f"- headless Chromium: loaded and laid out in {layout_ms} ms (data-rendered-ms); "
              f"process wall {wall:.2f} s vs {blank_wall:.2f} s for a blank page")
    else:
        print("- headless Chromium: not installed (apt-get install chromium), no browser figure")
    print(f"- bench wall time: {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicasets", type=int, default=5000)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--worst-case", action="store_true",
                        help="also time a what-if where no two workloads look alike to the policies")
    parser.add_argument("--policies", choices=["all", "placement"], default="all",
                        help="every shipped ConfigMap (default), or only the placement policy's (federation, lib)")
    add_server_flags(parser, opa=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
