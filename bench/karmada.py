"""Benchmark the Karmada pack: a binding's placement decision, and remediation of bindings.

Usage: .venv/bin/python bench/karmada.py [--part both|decision|remediation] [--queries 300] [--block 50]
       [--templates 1000] [--bindings 5000] [--affected 1000] [--clusters 4] [--dump DIR] [--sync-arg ARG]
       [--opa-url URL [--opa-token-file PATH]] [--kubeconfig PATH]

Decision (``--part decision``). One OPA holds the policy modules as deploy/ ships
them (every ConfigMap deploy/scripts/sync-policy-configmap.py generates from
policies/) and the replicated-root module opa-kube-sync generates
(fedplace.sync.replicated_root), plus ``--templates`` Deployment templates in
``data.kubernetes.deployments``. At 100 and 1,000 clusters, ``--queries``
sequential decisions (``POST /v1/data/io/k8s/federation/admission``) of each case:

* ReplicaSet (the baseline): Federation v1 clusters (federation.fedplace.io,
  ``status.region``, the pci-compliance-level label, as bench/engine.py), no
  settings module (control plane federation-v1); a ReplicaSet asking for EU and PCI ≥ 2.
* binding: the same clusters as Karmada Clusters (``spec.region``), the settings
  module ``control_plane := "karmada"`` loaded (as a Karmada install has it); a
  ResourceBinding created by the detector, its placement a clusterAffinity with a
  user exclude list, its template (one of the replicated ones) asking for EU and PCI ≥ 2.
* binding, re-decided: the same binding once narrowed (its exclude list and the
  ``fedplace.io/exclusions-added`` record in place), what the webhook sees on the
  UPDATE that follows a remediation patch (informational).

The cases alternate in blocks of ``--block`` queries (each block after swapping
the clusters and the settings module and a few unmeasured queries), so machine
noise hits them alike. Every answer of a swap's warm-up is checked (a quarter of
the clusters eligible, three quarters excluded). Per case: p50 / p99, sequential
throughput, the response size; per size: the OPA's RSS, and the ratio binding /
ReplicaSet. Always the devstack engine; with ``--opa-url`` the external OPA too,
one after the other. ``--dump DIR`` writes the modules, data and inputs of the
largest size for ``opa eval --profile`` / ``opa bench``.

Remediation (``--part remediation``). The devstack engine and API server, or
external ones (``--opa-url`` and ``--kubeconfig``: scratch servers, see
bench/common.py); the test CRDs shaped like Karmada's (devstack/karmada);
``--clusters`` Karmada Clusters (eu-a PCI 3, eu-c PCI 3, eu-b PCI 1, us-d PCI 2,
then US clusters at PCI 1); ``--bindings`` Deployment templates and as many
ResourceBindings (placement: a clusterAffinity excluding ``zz-user``),
``--affected`` of whose templates require PCI ≥ 3, the rest PCI ≥ 1;
opa-kube-sync replicating the clusters, deployments and resourcebindings and
remediating the bindings (enforce, ``--remediate-debounce 0.2
--remediate-rate 1000``), with the shipped policy ConfigMaps and the settings
module; ``fedplace-admission`` (TLS) registered for resourcebindings CREATE and
UPDATE. A binding is placed once the webhook has applied its exclusions (the
remediator merge-patches the annotations; the API server calls the webhook on
that UPDATE). Baseline, same run: the first pass over every binding (from the
sync's readiness). Then cluster eu-a goes from PCI 3 to 2: the time until the
last affected binding excludes it (a watch), per-binding p50 / p99, the patches
sent (the sync's ``fedplace_remediation_patches_total{mode="enforce"}``; must
equal ``--affected``), the watch events per binding (exactly one per affected
binding, none on the others), and the sync's, webhook's and OPA's RSS. Where
the time went, from the services' logs (kept; the last line says where): the
webhook's decision times on bindings and its fail-closed decisions (OPA past
the webhook's deadline: the remediation patch is refused, and the binding waits
for the next full pass, ``--remediate-interval``, 300 s by default), the
remediator's passes (OPA queries and their seconds), and on the devstack the
engine's rebuilds. ``--sync-arg`` adds an opa-kube-sync argument (e.g.
``--sync-arg=--remediate-max-chunk=250``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Kube, Opa, add_server_flags, listener_pid, pct, post_all, proc_mb, servers  # noqa: E402
from devstack.karmada import CLUSTERS as KARMADA_CLUSTERS  # noqa: E402
from devstack.karmada import RESOURCE_BINDINGS, crds, install_crds
from devstack.launch import ServerProcess, wait_http  # noqa: E402
from devstack.scratch import CRDS_PATH  # noqa: E402
from devstack.shipped import shipped_policy_configmaps  # noqa: E402
from devstack.tls import make_ca_and_cert  # noqa: E402
from fedplace.common.kube_client import KubeApiError, kube_json, kube_stream  # noqa: E402
from fedplace.insight.view import excluded_of  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402
from fedplace.sync.sentinel import SENTINEL_PATH  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERY = "/v1/data/io/k8s/federation/admission"
EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
PREFS = "federation.kubernetes.io/replica-set-preferences"
EXCLUDED = "fedplace.io/excluded-clusters"
WHY = "fedplace.io/placement"
ADDED = "fedplace.io/exclusions-added"
SETTINGS = "package io.k8s.federation.placement.settings\n\ncontrol_plane := \"karmada\"\n"
PREFIX = "bench-karmada"  # policy ids of the decision part: <PREFIX>/<configmap>/<key>
SETTINGS_ID = f"{PREFIX}/fedplace-settings/settings.rego"
SIZES = (100, 1_000)
NAMESPACES = 20
USER_EXCLUDE = ["zz-user-a", "zz-user-b"]


def policy_digest(mods: dict[str, str]) -> str:
    """Which Rego was measured (policies/ may change between runs): the modules loaded, their
    ConfigMaps, and a digest of their text."""
    named = {"/".join(k.split("/")[-2:]): v for k, v in mods.items()}  # <configmap>/<key>: the id's prefix varies
    digest = hashlib.sha256("\0".join(f"{k}\0{v}" for k, v in sorted(named.items())).encode()).hexdigest()[:12]
    maps = sorted({k.split("/")[1] for k in mods if k.count("/") == 2})
    return f"{len(mods)} modules ({', '.join(maps)}; replicated root), sha256 {digest}"


def modules() -> dict[str, str]:
    """Policy id -> Rego: the generated replicated root, then every shipped module."""
    out = {replicated_root.POLICY_ID: replicated_root.render()}
    for cm, data in shipped_policy_configmaps().items():
        out.update({f"{PREFIX}/{cm}/{key}": src for key, src in data.items()})
    return out


# -- the decision ---------------------------------------------------------------------------


def region(i: int) -> str:
    return "europe-west1" if i % 2 else "us-east1"


def federation_clusters(n: int) -> dict[str, Any]:
    """n Federation v1 Clusters as bench/engine.py has them: half in the EU, PCI i % 4."""
    return {f"c{i}": {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
                      "metadata": {"name": f"c{i}", "labels": {"pci-compliance-level": str(i % 4),
                                                               "fedplace.io/cluster-name": f"c{i}"}},
                      "spec": {"serverAddress": f"https://c{i}.example.invalid"},
                      "status": {"region": region(i)}}
            for i in range(n)}


def karmada_clusters(n: int) -> dict[str, Any]:
    """The same n clusters as Karmada Clusters (cluster.karmada.io): region in spec."""
    return {f"c{i}": {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                      "metadata": {"name": f"c{i}", "labels": {"pci-compliance-level": str(i % 4)}},
                      "spec": {"region": region(i), "provider": "gcp" if i % 2 else "aws", "syncMode": "Push",
                               "apiEndpoint": f"https://c{i}.example.invalid"},
                      "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            for i in range(n)}


def template(i: int, annotations: dict[str, str]) -> dict[str, Any]:
    name, ns = f"app{i}", f"ns{i % NAMESPACES}"
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "uid": f"d-{i:08d}", "resourceVersion": str(1000 + i),
                         "labels": {"app": name}, "annotations": annotations},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                                           "resources": {"requests": {"cpu": "100m"}}}]}}}}


def templates(n: int) -> dict[str, Any]:
    """n Deployment templates over 20 namespaces; every fourth asks for EU and PCI ≥ 2, the
    others for PCI ≥ 1 / EU only / nothing."""
    shapes = [{EU: "true", PCI: "2"}, {PCI: "1"}, {EU: "true"}, {}]
    out: dict[str, Any] = {}
    for i in range(n):
        t = template(i, shapes[i % 4])
        out.setdefault(t["metadata"]["namespace"], {})[t["metadata"]["name"]] = t
    return out


RS_INPUT = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "shop", "annotations": {EU: "true", PCI: "2"}}}


def binding_input(i: int = 0) -> dict[str, Any]:
    """The detector's ResourceBinding of template app<i> (EU, PCI ≥ 2 when i % 4 == 0)."""
    name, ns = f"app{i}", f"ns{i % NAMESPACES}"
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"{name}-deployment", "namespace": ns, "uid": f"rb-{i:08d}",
                         "labels": {"propagationpolicy.karmada.io/name": "web"},
                         "annotations": {"policy.karmada.io/applied-placement": "{}"}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": name,
                                  "uid": f"d-{i:08d}", "resourceVersion": str(1000 + i)},
                     "replicas": 3,
                     "placement": {"clusterAffinity": {"exclude": list(USER_EXCLUDE)},
                                   "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                         "replicaDivisionPreference": "Weighted"}}}}


def narrowed_binding(answer: dict[str, Any], i: int = 0) -> dict[str, Any]:
    """The binding after the webhook applied ``answer`` (annotations and patches.karmada)."""
    b = binding_input(i)
    b["metadata"]["annotations"].update({k: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
                                         for k, v in answer["annotations"].items()})
    for op in answer["patches"]["karmada"]:
        if op["path"] == "/spec/placement/clusterAffinity/exclude":
            b["spec"]["placement"]["clusterAffinity"]["exclude"] = op["value"]
        elif op["path"] == "/metadata/annotations/fedplace.io~1exclusions-added":
            b["metadata"]["annotations"][ADDED] = op["value"]
        else:
            raise AssertionError(f"unexpected op {op}")
    return b


@dataclass
class Case:
    name: str
    label: str
    clusters: str  # "federation" or "karmada"
    settings: bool
    body: dict[str, Any]
    check: Any  # (answer, n) -> None
    series: dict[int, list[float]] = field(default_factory=dict)
    size: dict[int, int] = field(default_factory=dict)


def check_rs(answer: dict[str, Any], n: int) -> None:
    prefs = answer["annotations"][PREFS]
    prefs = json.loads(prefs) if isinstance(prefs, str) else prefs
    assert len(prefs["clusters"]) == n // 4, (len(prefs["clusters"]), n)
    assert not answer.get("errors"), answer.get("errors")


def excluded_count(answer: dict[str, Any], n: int) -> int:
    """How many of the n clusters a decision's fedplace.io/excluded-clusters names (either form)."""
    excluded = answer["annotations"][EXCLUDED]
    excluded = json.loads(excluded) if isinstance(excluded, str) else excluded
    return len(excluded) if isinstance(excluded, list) else n - len(excluded["allExcept"])


def check_binding(answer: dict[str, Any], n: int) -> None:
    assert excluded_count(answer, n) == n - n // 4, (excluded_count(answer, n), n)
    assert "clusters excluded by the placement policy" in answer["annotations"][WHY]
    ops = answer["patches"]["karmada"]
    exclude = next(op for op in ops if op["path"] == "/spec/placement/clusterAffinity/exclude")["value"]
    assert exclude[:2] == USER_EXCLUDE and len(exclude) == 2 + n - n // 4, (exclude[:3], len(exclude))


def check_redecided(answer: dict[str, Any], n: int) -> None:
    assert excluded_count(answer, n) == n - n // 4, (excluded_count(answer, n), n)
    assert not answer.get("patches"), "an already narrowed binding needs no patch"


async def post(s: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[float, bytes]:
    t = time.perf_counter()
    async with s.post(url + QUERY, json=body) as r:
        raw = await r.read()
        assert r.status == 200, (r.status, raw[:300])
    return (time.perf_counter() - t) * 1000, raw


async def put_policy(s: aiohttp.ClientSession, url: str, pid: str, src: str) -> int:
    async with s.put(f"{url}/v1/policies/{pid}", data=src.encode()) as r:
        await r.read()
        return r.status


async def load_modules(s: aiohttp.ClientSession, url: str) -> str:
    """Every module, retried until OPA accepts them all (a module calling another's
    functions is refused until that one is there); returns their :func:`policy_digest`."""
    pending = modules()
    digest = policy_digest(pending)
    while pending:
        refused = {pid: src for pid, src in pending.items() if await put_policy(s, url, pid, src) != 200}
        if len(refused) == len(pending):
            raise SystemExit(f"the OPA refused: {sorted(refused)}")
        pending = refused
    return digest


async def set_settings(s: aiohttp.ClientSession, url: str, karmada: bool) -> None:
    if karmada:
        assert await put_policy(s, url, SETTINGS_ID, SETTINGS) == 200
    else:
        async with s.delete(f"{url}/v1/policies/{SETTINGS_ID}") as r:
            assert r.status in (200, 404), r.status


async def put_json(s: aiohttp.ClientSession, url: str, path: str, doc: Any) -> None:
    async with s.put(f"{url}/v1/data/{path}", json=doc) as r:
        await r.read()
        assert r.status in (200, 204), r.status


def opa_pid(opa: Opa) -> int | None:
    if opa.process is not None and opa.process.proc is not None:
        return opa.process.proc.pid
    return listener_pid(opa.url)


@dataclass
class DecisionFigures:
    what: str
    cases: list[Case]
    rss: dict[int, float] = field(default_factory=dict)
    health: list[float] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)
    policies: str = ""


async def measure_decisions(opa: Opa, args: argparse.Namespace) -> DecisionFigures:
    cases = [Case("rs", "ReplicaSet (Federation v1 clusters)", "federation", False, RS_INPUT, check_rs),
             Case("binding", "binding (Karmada clusters)", "karmada", True, binding_input(0), check_binding),
             Case("redecided", "binding re-decided, already narrowed", "karmada", True, {}, check_redecided)]
    load0 = os.getloadavg()[0]
    rss: dict[int, float] = {}
    async with opa.session() as s:
        url = opa.url
        digest = await load_modules(s, url)
        await put_json(s, url, "kubernetes", {"deployments": templates(args.templates)})
        for n in SIZES:
            docs = {"federation": federation_clusters(n), "karmada": karmada_clusters(n)}
            # The narrowed binding is what the first binding decision of this size answers.
            await put_json(s, url, "kubernetes/clusters", docs["karmada"])
            await set_settings(s, url, True)
            current = ("karmada", True)
            _, raw = await post(s, url, {"input": binding_input(0)})
            cases[2].body = narrowed_binding(json.loads(raw)["result"])
            rounds = max(1, args.queries // args.block)
            for r in range(rounds):
                order = cases if r % 2 == 0 else list(reversed(cases))
                for case in order:
                    want = (case.clusters, case.settings)
                    if want != current:
                        await put_json(s, url, "kubernetes/clusters", docs[case.clusters])
                        await set_settings(s, url, case.settings)
                        current = want
                    for _ in range(args.warmup):
                        _, raw = await post(s, url, {"input": case.body})
                        case.check(json.loads(raw)["result"], n)
                    for _ in range(args.block):
                        ms, raw = await post(s, url, {"input": case.body})
                        case.series.setdefault(n, []).append(ms)
                    case.size[n] = len(raw)
            pid = opa_pid(opa)
            rss[n] = proc_mb(pid) if pid is not None else float("nan")
            print(f"  {opa.describe()}: {n:,} clusters done (RSS {rss[n]:.0f} MB)", file=sys.stderr)
            if n == SIZES[-1] and args.dump:
                dump(Path(args.dump), docs, args, cases)
        health = []
        for _ in range(200):
            t = time.perf_counter()
            async with s.get(url + "/health") as r:
                await r.read()
            health.append((time.perf_counter() - t) * 1000)
    return DecisionFigures(opa.describe(), cases, rss, health, (load0, os.getloadavg()[0]), digest)


def dump(out: Path, docs: dict[str, Any], args: argparse.Namespace, cases: list[Case]) -> None:
    """Modules, data and inputs of the largest size, for `opa eval --profile` / `opa bench`."""
    out.mkdir(parents=True, exist_ok=True)
    for pid, src in modules().items():
        path = out / "policies" / (pid.replace("/", "__"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src)
    (out / "settings.rego").write_text(SETTINGS)
    deployments = templates(args.templates)
    for kind in ("federation", "karmada"):
        (out / f"data-{kind}.json").write_text(json.dumps({"kubernetes": {"clusters": docs[kind],
                                                                           "deployments": deployments}}))
    for case in cases:
        (out / f"input-{case.name}.json").write_text(json.dumps(case.body))
    print(f"  wrote {out}: policies/, settings.rego, data-{{federation,karmada}}.json, input-*.json", file=sys.stderr)


def report_decisions(figs: list[DecisionFigures], args: argparse.Namespace) -> None:
    print("### Karmada pack — a binding's placement decision against a ReplicaSet's, same OPA, one run\n")
    for f in figs:
        print(f"- {f.what} (load average {f.load[0]:.1f} → {f.load[1]:.1f}; policies: {f.policies})")
    print(f"\n{args.queries} sequential decisions per case and size, in alternating blocks of {args.block} "
          f"({args.warmup} unmeasured after each swap); {args.templates:,} Deployment templates replicated.\n")
    head = " | ".join(f"{'external OPA' if 'external' in f.what else 'devstack engine'}: p50 / p99 (ms), queries/s, "
                      "answer" for f in figs)
    print(f"| clusters | case | {head} |")
    print("|---:|---|" + "---:|" * len(figs))
    for n in SIZES:
        for i, case in enumerate(figs[0].cases):
            cells = []
            for f in figs:
                c = f.cases[i]
                s = c.series[n]
                cells.append(f"{pct(s, 50):.2f} / {pct(s, 99):.2f}, {1000 * len(s) / sum(s):,.0f}/s, "
                             f"{c.size[n] / 1024:.1f} KB")
            print(f"| {n:,} | {case.label} | " + " | ".join(cells) + " |")
        ratio = []
        for f in figs:
            rs, b, rd = (pct(c.series[n], 50) for c in f.cases)
            ratio.append(f"**{b / rs:.2f}×** (re-decided {rd / rs:.2f}×)")
        print(f"| {n:,} | ratio binding / ReplicaSet, p50 | " + " | ".join(ratio) + " |")
        print(f"| {n:,} | OPA RSS after this size | " + " | ".join(f"{f.rss[n]:.0f} MB" for f in figs) + " |")
    print("| | `GET /health` p50 (the HTTP floor) | " + " | ".join(f"{pct(f.health, 50):.2f} ms" for f in figs) + " |")


async def run_decisions(args: argparse.Namespace, tmp: Path) -> list[DecisionFigures]:
    tmp.mkdir(parents=True, exist_ok=True)
    sub = argparse.Namespace(**{**vars(args), "uses_kube": False, "kubeconfig": None})
    figs = []
    async with servers(sub, tmp) as srv:
        assert srv.opa is not None
        external = srv.opa if srv.opa.external else None
        engine = srv.opa if external is None else Opa.start(tmp, "engine")
        try:
            figs.append(await measure_decisions(engine, args))
        finally:
            if external is not None:
                await engine.close()
        if external is not None:
            external.owns(documents=("kubernetes",), policies=(f"{PREFIX}/", replicated_root.POLICY_ID))
            figs.append(await measure_decisions(external, args))
    return figs



# -- remediation ----------------------------------------------------------------------------

RB_PATH = "/apis/work.karmada.io/v1alpha2/resourcebindings"
DEPLOY_PATH = "/apis/apps/v1/deployments"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
REM_NAMESPACES = 10
# (name, region, PCI) as bench/remediation.py; eu-a goes from 3 to 2.
REM_CLUSTERS = [("eu-a", "europe-west1", "3"), ("eu-c", "europe-west4", "3"), ("eu-b", "eu-west-1", "1"),
                ("us-d", "us-east1", "2")]
USER = "zz-user"


def rem_clusters(n: int) -> list[tuple[str, str, str]]:
    """The four of bench/remediation.py, then US clusters at PCI 1 (forbidden to PCI ≥ 3 only)."""
    return REM_CLUSTERS + [(f"us-f{i:04d}", "us-east1", "1") for i in range(max(0, n - len(REM_CLUSTERS)))]


def karmada_cluster(name: str, reg: str, pci: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci}},
            "spec": {"region": reg, "provider": "aws" if reg.startswith(("eu-", "us-")) else "gcp",
                     "syncMode": "Push", "apiEndpoint": f"https://{name}.example.invalid"}}


def rem_template(i: int, pci: str, namespaces: list[str]) -> dict[str, Any]:
    name = f"app{i}"
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespaces[i % REM_NAMESPACES], "annotations": {PCI: pci}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def rem_binding(i: int, namespaces: list[str]) -> dict[str, Any]:
    ns = namespaces[i % REM_NAMESPACES]
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"app{i}-deployment", "namespace": ns},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": f"app{i}"},
                     "replicas": 2, "placement": {"clusterAffinity": {"exclude": [USER]}}}}


def exclude_of(obj: dict[str, Any]) -> list[str]:
    return ((((obj.get("spec") or {}).get("placement") or {}).get("clusterAffinity") or {}).get("exclude")) or []


def excluded_annotation(obj: dict[str, Any], clusters: list[str]) -> list[str] | None:
    """The clusters (of ``clusters``) a binding's fedplace.io/excluded-clusters names, in either form."""
    return excluded_of(((obj.get("metadata") or {}).get("annotations") or {}).get(EXCLUDED), clusters)


async def patches_sent(s: aiohttp.ClientSession, sync_url: str) -> float:
    async with s.get(sync_url + "/metrics") as r:
        text = await r.text()
    m = re.search(r'^fedplace_remediation_patches_total\{mode="enforce"\} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


class BindingWatch:
    """A watch of every ResourceBinding from a resourceVersion: each event's time and object,
    and a condition to wait for."""

    def __init__(self, api: client.ApiClient, rv: str, timeout: float) -> None:
        self.api, self.rv, self.timeout = api, rv, timeout
        self.events: list[tuple[float, str, str, dict[str, Any]]] = []  # (time, type, key, object)
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "BindingWatch":
        query = [("watch", "true"), ("resourceVersion", self.rv), ("allowWatchBookmarks", "false")]
        self.stream = await kube_stream(self.api, "GET", RB_PATH, query=query,
                                        timeout=aiohttp.ClientTimeout(total=self.timeout))
        self.task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        async for line in self.stream.content:
            event = json.loads(line)
            obj = event["object"]
            meta = obj.get("metadata") or {}
            self.events.append((time.perf_counter(), event["type"], f"{meta.get('namespace')}/{meta.get('name')}", obj))
            self.changed.set()

    async def until(self, done: Any, timeout: float, what: str) -> None:
        """Wait until ``done()`` holds (checked after each batch of events)."""
        deadline = time.perf_counter() + timeout
        while not done():
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0 or (self.task is not None and self.task.done()):
                raise AssertionError(f"timed out waiting for {what}")
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
            except asyncio.TimeoutError:
                pass

    async def __aexit__(self, *exc: Any) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.stream.release()


async def karmada_crds(kube: Kube) -> None:
    """The test CRDs (devstack/karmada/crds.yaml). Like Kube.install_crd: removed at the end when
    installed here, else (Cluster) their objects; a server holding any of them is refused."""
    api = kube.api
    present = set()
    for crd in crds():
        try:
            await kube_json(api, "GET", f"{CRDS_PATH}/{crd['metadata']['name']}")
            present.add(crd["metadata"]["name"])
        except KubeApiError as exc:
            if exc.status != 404:
                raise
    await install_crds(api)
    for crd in crds():
        name, spec = crd["metadata"]["name"], crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("storage"))
        collection = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"
        if name in present:
            await kube.require_empty(collection, "the figures assume only the benchmark's own objects")
            if spec["scope"] == "Cluster":
                kube.crds.append((name, collection, False))  # namespaced ones go with our namespaces
        else:
            kube.crds.append((name, collection, True))


def rss_of(proc: ServerProcess | None, url: str | None = None) -> str:
    pid = proc.proc.pid if proc is not None and proc.proc is not None else (listener_pid(url) if url else None)
    if pid is None:
        return "n/a"
    return f"{proc_mb(pid):.0f} MB (peak {proc_mb(pid, 'VmHWM'):.0f} MB)"


async def engine_builds(s: aiohttp.ClientSession, opa: Opa) -> int | None:
    """The devstack engine's count of evaluator builds (all modules compiled, all data loaded:
    what a replaced document costs its next query); None on an external OPA."""
    if opa.external:
        return None
    async with s.get(opa.url + "/_devstack/state", headers=opa.headers()) as r:
        return int((await r.json())["evaluator"]["builds"])


@dataclass
class RemediationFigures:
    described: str = ""
    first: float = 0.0
    first_from_start: float = 0.0
    first_times: list[float] = field(default_factory=list)
    change: float = 0.0
    change_times: list[float] = field(default_factory=list)
    sent: float = 0.0
    first_sent: float = 0.0
    events_affected: dict[int, int] = field(default_factory=dict)  # events per affected binding -> how many
    events_others: int = 0
    untouched: int = 0
    rss: dict[str, str] = field(default_factory=dict)
    load: tuple[float, float] = (0.0, 0.0)
    policies: str = ""
    builds_first: int | None = None
    builds_change: int | None = None
    phases: dict[str, Phase] = field(default_factory=dict)  # "first", "change"
    # The remediation query over every binding, shared decisions (the library's decision_key)
    # against every binding decided alone, alternated: seconds per query, and the keys' count.
    ab: dict[str, list[float]] = field(default_factory=dict)
    ab_notifications: int = 0
    ab_shared: int = 0


def log_records(log: Path, start: int) -> tuple[list[dict[str, Any]], int]:
    """The JSON records of a service's log from line ``start``; and the next line."""
    lines = log.read_text(errors="replace").splitlines()
    out = []
    for line in lines[start:]:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out, len(lines)


@dataclass
class Phase:
    """What the services logged during one pass."""

    hook_ms: list[float] = field(default_factory=list)  # the webhook's elapsed_ms per binding decision
    fail_closed: int = 0  # webhook decisions that failed closed (OPA too slow or failing)
    passes: list[dict[str, Any]] = field(default_factory=list)  # the remediator's pass records
    failed: int = 0  # remediation patches that failed (not retried before the next full pass)

    def add(self, hook: list[dict[str, Any]], sync: list[dict[str, Any]]) -> None:
        for r in hook:
            if "ResourceBinding" in str(r.get("object")) and "elapsed_ms" in r:
                self.hook_ms.append(float(r["elapsed_ms"]))
                self.fail_closed += r.get("outcome") == "fail_closed"
        for r in sync:
            if r.get("msg") == "remediation pass":
                self.passes.append(r)
            self.failed += r.get("msg") == "remediation patch failed"


AB_PACKAGE = "bench_karmada_ab"
# Every binding decided alone: the library's notifications with no object keyed.
AB_MODULE = f"""package {AB_PACKAGE}

alone := x if {{
	x := data.io.k8s.federation.remediation.notifications with data.io.k8s.federation.remediation.decision_key as null
}}
"""
AB_QUERIES = {"shared": "io/k8s/federation/remediation/notifications", "alone": f"{AB_PACKAGE}/alone",
              "keys": "io/k8s/federation/remediation/shared"}


async def remediation_ab(opa: Opa, rounds: int) -> tuple[dict[str, list[float]], int, int]:
    """The remediation query over every replicated binding, both ways, ``rounds`` times alternated
    (what a full pass asks, in one query): seconds per query by way, the notifications (the same
    both ways, checked) and the distinct decisions shared."""
    query_input = {"input": {"resources": [{"plural": "resourcebindings", "namespaced": True}]}}
    times: dict[str, list[float]] = {"shared": [], "alone": []}
    answers: dict[str, list[str]] = {}
    async with opa.session() as s:
        async with s.put(f"{opa.url}/v1/policies/{AB_PACKAGE}/ab.rego", data=AB_MODULE.encode()) as r:
            assert r.status == 200, (r.status, await r.text())
        for i in range(rounds):
            for way in (("shared", "alone") if i % 2 == 0 else ("alone", "shared")):
                t = time.perf_counter()
                async with s.post(f"{opa.url}/v1/data/{AB_QUERIES[way]}", json=query_input) as r:
                    doc = await r.json()
                    assert r.status == 200, (r.status, doc)
                times[way].append(time.perf_counter() - t)
                answers[way] = sorted(json.dumps(n, sort_keys=True) for n in doc.get("result") or [])
        async with s.post(f"{opa.url}/v1/data/{AB_QUERIES['keys']}", json=query_input) as r:
            shared = len((await r.json()).get("result") or {})
    assert answers["shared"] == answers["alone"], "shared decisions differ from separate ones"
    return times, len(answers["shared"]), shared


async def run_remediation(args: argparse.Namespace, tmp: Path) -> RemediationFigures:
    total, affected = args.bindings, args.affected
    tmp.mkdir(parents=True, exist_ok=True)
    fig = RemediationFigures(load=(os.getloadavg()[0], 0.0))
    clusters = rem_clusters(args.clusters)
    forbidden_before = sorted(n for n, _, p in clusters if int(p) < 3)  # to PCI ≥ 3 templates
    names = [n for n, _, _ in clusters]
    async with servers(args, tmp, kube_args=["--history", "200000"]) as srv:
        assert srv.opa is not None and srv.kube is not None
        opa, kube = srv.opa, srv.kube
        api = kube.api
        await karmada_crds(kube)
        await kube.require_empty(DEPLOY_PATH, "the sync replicates every Deployment as a template")
        namespaces = [await kube.namespace(f"ns{i}") for i in range(REM_NAMESPACES)]
        policy_ns, lease_ns = await kube.namespace("policy"), await kube.namespace("opa")
        opa.owns(documents=("kubernetes", SENTINEL_PATH[0]),
                 policies=(f"{policy_ns}/", replicated_root.POLICY_ID, f"{AB_PACKAGE}/"))
        await post_all(api, [(KARMADA_CLUSTERS.collection_path(None), karmada_cluster(*c)) for c in clusters])
        await post_all(api, [(f"/apis/apps/v1/namespaces/{namespaces[i % REM_NAMESPACES]}/deployments",
                              rem_template(i, "3" if i < affected else "1", namespaces)) for i in range(total)])
        await post_all(api, [(RESOURCE_BINDINGS.collection_path(namespaces[i % REM_NAMESPACES]),
                              rem_binding(i, namespaces)) for i in range(total)])
        configmaps = {**shipped_policy_configmaps(), "fedplace-settings": {"settings.rego": SETTINGS}}
        fig.policies = policy_digest({replicated_root.POLICY_ID: replicated_root.render(),
                                      **{f"{policy_ns}/{cm}/{k}": v for cm, data in configmaps.items()
                                         for k, v in data.items()}})
        for name, data in configmaps.items():
            await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": policy_ns},
                "data": data})
        print(f"  {len(clusters)} Karmada Clusters, {total:,} templates and bindings created", file=sys.stderr)

        # The webhook (TLS), registered for bindings in the benchmark's namespaces.
        ca_pem, cert_pem, key_pem = make_ca_and_cert(["127.0.0.1", "localhost"])
        for fname, pem in (("ca.crt", ca_pem), ("tls.crt", cert_pem), ("tls.key", key_pem)):
            (tmp / fname).write_bytes(pem)
        token = ["--opa-token-file", str(opa.token_file)] if opa.token_file else []
        hook = ServerProcess("admission", [
            "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}", "--tls-cert-file", str(tmp / "tls.crt"),
            "--tls-private-key-file", str(tmp / "tls.key"), "--kubeconfig", str(kube.kubeconfig),
            "--opa-url", opa.url, *token, "--policy-namespace", policy_ns],
            "/readyz", tmp, scheme="https", cafile=str(tmp / "ca.crt"))
        sync = ServerProcess("sync", [
            "-m", "fedplace.sync", *opa.sync_flags(), "--kubeconfig", str(kube.kubeconfig),
            "--listen", "127.0.0.1:{port}",
            "--replicate", "apps/v1/deployments", "--replicate", "work.karmada.io/v1alpha2/resourcebindings",
            "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters",
            "--replicate-ignore-namespaces", f"{policy_ns},{lease_ns}", "--policy-namespace", policy_ns,
            "--remediate", "enforce", "--remediate-resource", "work.karmada.io/v1alpha2/resourcebindings",
            "--remediate-max-fraction", "1", "--remediate-debounce", "0.2", "--remediate-rate", "1000",
            "--leader-election-namespace", lease_ns, "--log-level", "info",  # one line per pass
            *args.sync_arg],
            "/healthz", tmp)
        mwc = f"{kube.run}-karmada"
        registered = False
        try:
            hook.start(timeout=60)
            await kube_json(api, "POST", MWC_PATH, body={
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": mwc},
                "webhooks": [{
                    "name": "placement.fedplace.io",
                    "clientConfig": {"url": hook.url + "/mutate", "caBundle": base64.b64encode(ca_pem).decode()},
                    "rules": [{"apiGroups": ["work.karmada.io"], "apiVersions": ["v1alpha2"],
                               "resources": ["resourcebindings"], "operations": ["CREATE", "UPDATE"],
                               "scope": "Namespaced"}],
                    "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                    "admissionReviewVersions": ["v1"],
                    "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                "operator": "In", "values": namespaces}]},
                }]})
            registered = True
            await asyncio.sleep(1.0)  # a real API server picks the configuration up asynchronously

            def placed(obj: dict[str, Any], pci3: bool) -> bool:
                want = forbidden_before if pci3 else []
                return excluded_annotation(obj, names) == want and exclude_of(obj) == [USER, *want]

            rv = (await kube_json(api, "GET", RB_PATH, query=[("limit", "1")]))["metadata"]["resourceVersion"]
            async with aiohttp.ClientSession() as s, BindingWatch(api, rv, 7200) as watch:
                pending = {f"{namespaces[i % REM_NAMESPACES]}/app{i}-deployment": i < affected for i in range(total)}
                settled: dict[str, float] = {}
                seen = 0

                def first_pass_done() -> bool:
                    nonlocal seen
                    for t, _, key, obj in watch.events[seen:]:
                        if key in pending and placed(obj, pending[key]):
                            settled.setdefault(key, t)
                    seen = len(watch.events)
                    return len(settled) == total

                builds0 = await engine_builds(s, opa)
                hook_line = log_records(hook.log_path, 0)[1]
                sync_line = 0

                def phase() -> Phase:
                    nonlocal hook_line, sync_line
                    hook_recs, hook_line = log_records(hook.log_path, hook_line)
                    sync_recs, sync_line = log_records(sync.log_path, sync_line)
                    p = Phase()
                    p.add(hook_recs, sync_recs)
                    return p

                t_start = time.perf_counter()
                sync.start(timeout=60)
                wait_http(sync.url + "/readyz", timeout=300, proc=sync.proc)
                t_ready = time.perf_counter()
                await watch.until(first_pass_done, 1800, "the first pass")
                last = max(settled.values())
                fig.first, fig.first_from_start = last - t_ready, last - t_start
                fig.first_times = [t - t_ready for t in settled.values()]
                await asyncio.sleep(2.0)  # let the events of the first pass settle
                builds1 = await engine_builds(s, opa)
                fig.phases["first"] = phase()
                before = fig.first_sent = await patches_sent(s, sync.url)
                listed = await kube_json(api, "GET", RB_PATH)
                rvs = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                       for o in listed["items"]}
                mark = len(watch.events)

                # eu-a: PCI 3 -> 2. The last affected binding excluding it ends the change.
                affected_keys = {k for k, pci3 in pending.items() if pci3}
                changed: dict[str, float] = {}
                seen = mark

                def change_done() -> bool:
                    nonlocal seen
                    for t, _, key, obj in watch.events[seen:]:
                        if key in affected_keys and "eu-a" in exclude_of(obj):
                            changed.setdefault(key, t)
                    seen = len(watch.events)
                    return len(changed) == affected

                t0 = time.perf_counter()
                await kube_json(api, "PATCH", f"{KARMADA_CLUSTERS.collection_path(None)}/eu-a",
                                body={"metadata": {"labels": {"pci-compliance-level": "2"}}},
                                content_type="application/merge-patch+json")
                await watch.until(change_done, 1800, "the change pass")
                fig.change = max(changed.values()) - t0
                fig.change_times = [t - t0 for t in changed.values()]
                await asyncio.sleep(3.0)  # anything extra would show up now
                fig.sent = await patches_sent(s, sync.url) - before
                builds2 = await engine_builds(s, opa)
                fig.phases["change"] = phase()
                if builds0 is not None and builds1 is not None and builds2 is not None:
                    fig.builds_first, fig.builds_change = builds1 - builds0, builds2 - builds1
                per_key: dict[str, int] = {}
                for _, _etype, key, _ in watch.events[mark:]:
                    per_key[key] = per_key.get(key, 0) + 1
                counts: dict[int, int] = {}
                for key in affected_keys:
                    counts[per_key.get(key, 0)] = counts.get(per_key.get(key, 0), 0) + 1
                fig.events_affected = counts
                fig.events_others = sum(v for k, v in per_key.items() if k not in affected_keys)
                listed = await kube_json(api, "GET", RB_PATH)
                want_after = sorted({*forbidden_before, "eu-a"})
                fig.untouched = sum(1 for o in listed["items"]
                                    if (k := f"{o['metadata']['namespace']}/{o['metadata']['name']}") not in affected_keys
                                    and o["metadata"]["resourceVersion"] == rvs.get(k) and placed(o, False))
                wrong = [k for o in listed["items"]
                         if (k := f"{o['metadata']['namespace']}/{o['metadata']['name']}") in affected_keys
                         and not (excluded_annotation(o, names) == want_after
                                  and exclude_of(o) == [USER, *want_after])]
                assert not wrong, f"{len(wrong)} affected bindings not as expected, e.g. {wrong[:3]}"
                if args.ab_rounds > 0:  # the sync is idle now: the data is what the pass evaluated
                    fig.ab, fig.ab_notifications, fig.ab_shared = await remediation_ab(opa, args.ab_rounds)
            fig.rss = {"opa-kube-sync": rss_of(sync), "fedplace-admission": rss_of(hook),
                       "OPA": rss_of(opa.process, opa.url)}
        finally:
            sync.stop()
            hook.stop()
            if registered:
                try:
                    await kube_json(api, "DELETE", f"{MWC_PATH}/{mwc}")
                except KubeApiError:
                    pass
        fig.described = srv.describe()
    fig.load = (fig.load[0], os.getloadavg()[0])
    return fig


def report_remediation(f: RemediationFigures, args: argparse.Namespace) -> None:
    total, affected = args.bindings, args.affected
    print("\n### Karmada pack — remediation of bindings after a cluster change\n")
    extra = f"; opa-kube-sync also given {' '.join(args.sync_arg)}" if args.sync_arg else ""
    print(f"{f.described} (load average {f.load[0]:.1f} → {f.load[1]:.1f}); {args.clusters} Karmada Clusters{extra}; "
          f"policies: {f.policies}.\n")
    print("| measurement | value |")
    print("|---|---:|")
    print(f"| label change → last affected binding excludes eu-a ({affected:,} of {total:,}) | **{f.change:.2f} s** |")
    print(f"| per binding, change → re-narrowed: p50 / p99 | {pct(f.change_times, 50):.2f} / "
          f"{pct(f.change_times, 99):.2f} s |")
    print(f"| patches sent for the change (must be {affected:,}) | {f.sent:,.0f} |")
    events = ", ".join(f"{n} event{'s' if n != 1 else ''}: {c:,}" for n, c in sorted(f.events_affected.items()))
    print(f"| watch events per affected binding | {events} |")
    print(f"| watch events on the {total - affected:,} others / left as they were | {f.events_others:,} / "
          f"{f.untouched:,} of {total - affected:,} |")
    print(f"| throughput of the change pass | {affected / f.change:,.0f} bindings/s |")
    print(f"| baseline: all {total:,} placed the first time (from the sync's readiness; from its start) | "
          f"{f.first:.2f} s; {f.first_from_start:.2f} s |")
    print(f"| first placement, per binding: p50 / p99 | {pct(f.first_times, 50):.2f} / "
          f"{pct(f.first_times, 99):.2f} s |")
    print(f"| first placement: patches sent / throughput | {f.first_sent:,.0f} / {total / f.first:,.0f} bindings/s |")
    print(f"| ratio change / first placement (time; per binding) | {f.change / f.first:.2f}; "
          f"{(f.change / affected) / (f.first / total):.2f} |")
    for name, label in (("change", "change"), ("first", "first placement")):
        ph = f.phases.get(name)
        if ph is None:
            continue
        ms = ph.hook_ms
        print(f"| {label}: webhook decisions on bindings, count, p50 / p99 / max (its elapsed_ms) | {len(ms):,}, "
              f"{pct(ms, 50):.1f} / {pct(ms, 99):.1f} / {max(ms, default=float('nan')):.1f} ms |")
        print(f"| {label}: webhook decisions failed closed (OPA past the deadline) / remediation patches failed | "
              f"{ph.fail_closed:,} / {ph.failed:,} |")
        runs = "; ".join(f"{r.get('scope')}: {r.get('evaluated')} evaluated, {r.get('queries')} queries "
                         f"{r.get('query_seconds')} s, {r.get('patched')} patched, {r.get('failed')} failed, "
                         f"{r.get('seconds')} s" for r in ph.passes)
        print(f"| {label}: remediation passes (the sync's log) | {runs or 'none logged'} |")
    if f.ab:
        sh, al = pct(f.ab["shared"], 50), pct(f.ab["alone"], 50)
        print(f"| the remediation query over all {total:,} bindings, {len(f.ab['shared'])} × each way alternated: "
              f"shared decisions ({f.ab_shared} evaluated) / every binding alone, p50 (min–max) | "
              f"**{sh:.2f}** ({min(f.ab['shared']):.2f}–{max(f.ab['shared']):.2f}) / "
              f"{al:.2f} ({min(f.ab['alone']):.2f}–{max(f.ab['alone']):.2f}) s: **{al / sh:.1f}×**; "
              f"{f.ab_notifications:,} notifications, the same both ways |")
    if f.builds_change is not None:
        print(f"| devstack engine rebuilds (every module compiled, all data loaded), change / first placement | "
              f"{f.builds_change:,} / {f.builds_first:,} |")
    for name, value in f.rss.items():
        print(f"| {name} RSS at the end | {value} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("both", "decision", "remediation"), default="both")
    p.add_argument("--queries", type=int, default=300, help="decisions per case and size")
    p.add_argument("--block", type=int, default=50, help="decisions per block (the cases alternate)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured decisions after each swap")
    p.add_argument("--templates", type=int, default=1000, help="Deployment templates of the decision part")
    p.add_argument("--dump", metavar="DIR", help="write the largest size's modules, data and inputs here")
    p.add_argument("--bindings", type=int, default=5000)
    p.add_argument("--affected", type=int, default=1000)
    p.add_argument("--clusters", type=int, default=4, help="Karmada Clusters of the remediation part (≥ 4)")
    p.add_argument("--sync-arg", action="append", default=[], metavar="ARG",
                   help="one more opa-kube-sync argument (repeatable), e.g. --sync-arg=--remediate-max-chunk=250")
    p.add_argument("--ab-rounds", type=int, default=3, metavar="N",
                   help="remediation part: after the change, the remediation query over every binding N times each "
                        "way (shared decisions / every binding alone), alternated; 0: not measured")
    add_server_flags(p, opa=True, kube=True)
    args = p.parse_args()
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench-karmada-"))  # kept: the servers' logs
    if args.part in ("both", "decision"):
        report_decisions(asyncio.run(run_decisions(args, tmp / "decision")), args)
    if args.part in ("both", "remediation"):
        report_remediation(asyncio.run(run_remediation(args, tmp / "remediation")), args)
    print(f"- logs: {tmp}")
    print(f"\n- bench wall time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
