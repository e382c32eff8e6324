"""Benchmark remediation: one cluster label change that affects 1,000 of 5,000 ReplicaSets.

Usage: .venv/bin/python bench/remediation.py [--replicasets 5000] [--affected 1000]

Starts the devstack engine and API server and opa-kube-sync with remediation
enforced and the placement policy loaded from a ConfigMap. ``affected``
ReplicaSets require PCI ≥ 3, the rest PCI ≥ 1. Once the first pass has
annotated every ReplicaSet, cluster eu-a is downgraded from PCI 3 to 2: only
the PCI-3 ReplicaSets must change. Measures the time from the label change to
the last of them carrying its new preferences (seen on a watch), and the patches sent (from the
sync's metrics; must equal ``affected``). Baseline, same run: the first pass,
which patches every ReplicaSet. Finally one ReplicaSet's preferences are
overwritten by someone else: the time until a targeted pass (that object only)
puts them back, against the full pass above.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import post_all  # noqa: E402
from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH, cluster  # noqa: E402
from devstack.launch import ServerProcess, wait_http  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PREFS = "federation.kubernetes.io/replica-set-preferences"
POLICY_NS = "kube-federation-scheduling-policy"
NAMESPACES = 10
CLUSTERS = [("eu-a", "europe-west1", "3"), ("eu-c", "europe-west4", "3"), ("eu-b", "eu-west-1", "1"),
            ("us-d", "us-east1", "2")]


def rs(i: int, pci: str) -> dict:
    name = f"rs{i}"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": f"ns{i % NAMESPACES}",
                         "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": pci}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


async def patches_sent(s: aiohttp.ClientSession, sync_url: str) -> float:
    async with s.get(sync_url + "/metrics") as r:
        text = await r.text()
    m = re.search(r'^fedplace_remediation_patches_total\{mode="enforce"\} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


async def count_with(s: aiohttp.ClientSession, kube: str, predicate) -> int:  # type: ignore[no-untyped-def]
    async with s.get(kube + "/apis/apps/v1/replicasets") as r:
        doc = await r.json()
    return sum(1 for i in doc["items"] if predicate(i))


def clusters_of(item: dict) -> set[str]:
    raw = (item["metadata"].get("annotations") or {}).get(PREFS)
    return set(json.loads(raw)["clusters"]) if raw else set()


async def time_edit_reverted(s: aiohttp.ClientSession, kube: str, key: str) -> float:
    """Overwrite one ReplicaSet's preferences; seconds until they are back (seen on a watch)."""
    ns, name = key.split("/")
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets/{name}"
    async with s.get(kube + path) as r:
        obj = await r.json()
    want, rv = clusters_of(obj), obj["metadata"]["resourceVersion"]
    async with s.get(kube + f"/apis/apps/v1/namespaces/{ns}/replicasets",
                     params={"watch": "true", "resourceVersion": rv, "fieldSelector": f"metadata.name={name}"},
                     timeout=aiohttp.ClientTimeout(total=60)) as stream:
        t0 = time.perf_counter()
        async with s.patch(kube + path, json={"metadata": {"annotations": {PREFS: '{"clusters":{}}'}}},
                           headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200
        async for line in stream.content:
            if clusters_of(json.loads(line)["object"]) == want:
                return time.perf_counter() - t0
    raise AssertionError("the overwritten preferences were not put back")


async def run(total: int, affected: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-remediation-"))
    kubeconfig = tmp / "kubeconfig"
    engine = ServerProcess("engine", ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}", "--log-level", "warning"],
                           "/health", tmp).start()
    kube = ServerProcess("kube", ["-m", "devstack.kube", "--listen", "127.0.0.1:{port}", "--history", "100000",
                                  "--write-kubeconfig", str(kubeconfig), "--log-level", "warning"], "/version", tmp).start()
    sync: ServerProcess | None = None
    try:
        async with aiohttp.ClientSession() as s:
            await post_all(s, kube.url, [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                 "metadata": {"name": n}})
                                         for n in [f"ns{i}" for i in range(NAMESPACES)] + [POLICY_NS, "opa"]])
            async with s.post(kube.url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CLUSTER_CRD) as r:
                assert r.status == 201
            await post_all(s, kube.url, [(CLUSTERS_PATH, cluster(n, reg, p)) for n, reg, p in CLUSTERS])
            await post_all(s, kube.url, [(f"/apis/apps/v1/namespaces/ns{i % NAMESPACES}/replicasets",
                                          rs(i, "3" if i < affected else "1")) for i in range(total)])
            policy = {name: (ROOT / path).read_text() for name, path in (
                ("placement.rego", "policies/federation/placement.rego"),
                ("placement-lib.rego", "policies/federation/lib.rego"),
                ("remediation.rego", "policies/lib/remediation.rego"))}
            await post_all(s, kube.url, [(f"/api/v1/namespaces/{POLICY_NS}/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "placement", "namespace": POLICY_NS},
                "data": policy})])

            sync = ServerProcess("sync", [
                "-m", "sync", "--opa-url", engine.url + "/v1", "--kubeconfig", str(kubeconfig),
                "--listen", "127.0.0.1:{port}", "--replicate", "apps/v1/replicasets",
                "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters", "--policy-namespace", POLICY_NS,
                "--remediate", "enforce", "--remediate-max-fraction", "1", "--remediate-debounce", "0.2",
                "--remediate-rate", "1000", "--leader-election-namespace", "opa", "--log-level", "warning"],
                "/healthz", tmp).start()
            wait_http(sync.url + "/readyz", timeout=120, proc=sync.proc)
            t = time.perf_counter()
            while await count_with(s, kube.url, lambda i: bool(clusters_of(i))) < total:
                await asyncio.sleep(0.2)
                assert time.perf_counter() - t < 300, "first pass did not finish"
            t_first = time.perf_counter() - t
            await asyncio.sleep(1.0)  # let the events of the first pass settle
            before = await patches_sent(s, sync.url)

            # Watch (not poll: a full list every few ms would load the API server
            # under test) for the last affected ReplicaSet to be re-placed.
            async with s.get(kube.url + "/apis/apps/v1/replicasets", params={"limit": "1"}) as r:
                rv = (await r.json())["metadata"]["resourceVersion"]
            pending = {f"ns{i % NAMESPACES}/rs{i}" for i in range(affected)}
            async with s.get(kube.url + "/apis/apps/v1/replicasets",
                             params={"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "false"},
                             timeout=aiohttp.ClientTimeout(total=120)) as stream:
                t0 = time.perf_counter()
                async with s.patch(kube.url + "/apis/federation.fedplace.io/v1beta1/clusters/eu-a",
                                   json={"metadata": {"labels": {"pci-compliance-level": "2"}}},
                                   headers={"Content-Type": "application/merge-patch+json"}) as r:
                    assert r.status == 200
                async for line in stream.content:
                    obj = json.loads(line)["object"]
                    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                    if key in pending and clusters_of(obj) == {"eu-c"}:
                        pending.discard(key)
                        if not pending:
                            break
                t_remediate = time.perf_counter() - t0
            assert not pending, f"{len(pending)} affected ReplicaSets not re-placed"
            await asyncio.sleep(2.0)  # anything extra would show up now
            sent = await patches_sent(s, sync.url) - before
            untouched = await count_with(s, kube.url, lambda i: clusters_of(i) == {"eu-a", "eu-b", "eu-c", "us-d"})

            # Somebody overwrites one ReplicaSet's preferences: a targeted pass (that
            # object only) puts them back.
            t_edit = await time_edit_reverted(s, kube.url, f"ns{affected % NAMESPACES}/rs{affected}")
    finally:
        for p in (sync, kube, engine):
            if p is not None:
                p.stop()
    print("| measurement | value |")
    print("|---|---:|")
    print(f"| label change → last affected ReplicaSet re-placed ({affected:,} of {total:,}) | {t_remediate:.2f} s |")
    print(f"| patches sent for the change (must be {affected:,}) | {sent:,.0f} |")
    print(f"| unaffected ReplicaSets left as they were | {untouched:,} of {total - affected:,} |")
    print(f"| baseline: first pass annotating all {total:,} ReplicaSets | {t_first:.2f} s |")
    print(f"| throughput of the change pass | {affected / t_remediate:,.0f} patches/s |")
    print(f"| one ReplicaSet's preferences overwritten → put back (targeted pass) | {t_edit:.2f} s |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicasets", type=int, default=5000)
    p.add_argument("--affected", type=int, default=1000)
    a = p.parse_args()
    asyncio.run(run(a.replicasets, a.affected))


if __name__ == "__main__":
    main()
