"""Benchmark remediation: one cluster label change that affects 1,000 of 5,000 ReplicaSets.

Usage: .venv/bin/python bench/remediation.py [--replicasets 5000] [--affected 1000]
       [--opa-url URL [--opa-token-file PATH]] [--kubeconfig PATH]

Starts the devstack engine and API server (or uses external ones, see
bench/common.py: scratch servers; remediation patches every ReplicaSet it
sees, so it refuses a server that already has any) and opa-kube-sync with
remediation enforced and the placement policy loaded from a ConfigMap. ``affected``
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
from typing import Any, Callable

import aiohttp
from kubernetes_asyncio import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import add_server_flags, post_all, servers  # noqa: E402
from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH, cluster  # noqa: E402
from devstack.launch import ServerProcess, wait_http  # noqa: E402
from fedplace.common.kube_client import kube_json, kube_stream  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402
from fedplace.sync.sentinel import SENTINEL_PATH  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PREFS = "federation.kubernetes.io/replica-set-preferences"
RS_PATH = "/apis/apps/v1/replicasets"
NAMESPACES = 10
CLUSTERS = [("eu-a", "europe-west1", "3"), ("eu-c", "europe-west4", "3"), ("eu-b", "eu-west-1", "1"),
            ("us-d", "us-east1", "2")]


def rs(i: int, pci: str, namespaces: list[str]) -> dict:
    name = f"rs{i}"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespaces[i % NAMESPACES],
                         "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": pci}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


async def patches_sent(s: aiohttp.ClientSession, sync_url: str) -> float:
    async with s.get(sync_url + "/metrics") as r:
        text = await r.text()
    m = re.search(r'^fedplace_remediation_patches_total\{mode="enforce"\} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


async def count_with(api: client.ApiClient, predicate: Callable[[dict[str, Any]], bool]) -> int:
    doc = await kube_json(api, "GET", RS_PATH)
    return sum(1 for i in doc["items"] if predicate(i))


def clusters_of(item: dict) -> set[str]:
    raw = (item["metadata"].get("annotations") or {}).get(PREFS)
    return set(json.loads(raw)["clusters"]) if raw else set()


async def watch(api: client.ApiClient, path: str, rv: str, timeout: float, **params: str) -> aiohttp.ClientResponse:
    """An open watch on ``path`` from ``rv`` (release the response when done)."""
    query = [("watch", "true"), ("resourceVersion", rv), *params.items()]
    return await kube_stream(api, "GET", path, query=query, timeout=aiohttp.ClientTimeout(total=timeout))


async def time_edit_reverted(api: client.ApiClient, key: str) -> float:
    """Overwrite one ReplicaSet's preferences; seconds until they are back (seen on a watch)."""
    ns, name = key.split("/")
    path = f"/apis/apps/v1/namespaces/{ns}/replicasets/{name}"
    obj = await kube_json(api, "GET", path)
    want, rv = clusters_of(obj), obj["metadata"]["resourceVersion"]
    stream = await watch(api, f"/apis/apps/v1/namespaces/{ns}/replicasets", rv, 60,
                         fieldSelector=f"metadata.name={name}")
    try:
        t0 = time.perf_counter()
        await kube_json(api, "PATCH", path, body={"metadata": {"annotations": {PREFS: '{"clusters":{}}'}}},
                        content_type="application/merge-patch+json")
        async for line in stream.content:
            if clusters_of(json.loads(line)["object"]) == want:
                return time.perf_counter() - t0
    finally:
        stream.release()
    raise AssertionError("the overwritten preferences were not put back")


async def run(args: argparse.Namespace) -> None:
    total, affected = args.replicasets, args.affected
    tmp = Path(tempfile.mkdtemp(prefix="bench-remediation-"))
    async with servers(args, tmp, kube_args=["--history", "100000"]) as srv:
        assert srv.opa is not None and srv.kube is not None
        opa, kube = srv.opa, srv.kube
        api = kube.api
        await kube.require_empty(RS_PATH, "remediation enforced would patch every ReplicaSet on the server")
        namespaces = [await kube.namespace(f"ns{i}") for i in range(NAMESPACES)]
        policy_ns, lease_ns = await kube.namespace("policy"), await kube.namespace("opa")
        opa.owns(documents=("kubernetes", SENTINEL_PATH[0]), policies=(f"{policy_ns}/", replicated_root.POLICY_ID))
        await kube.install_crd(CLUSTER_CRD, CLUSTERS_PATH)
        await post_all(api, [(CLUSTERS_PATH, cluster(n, reg, p)) for n, reg, p in CLUSTERS])
        await post_all(api, [(f"/apis/apps/v1/namespaces/{namespaces[i % NAMESPACES]}/replicasets",
                              rs(i, "3" if i < affected else "1", namespaces)) for i in range(total)])
        policy = {name: (ROOT / path).read_text() for name, path in (
            ("placement.rego", "policies/federation/placement.rego"),
            ("placement-lib.rego", "policies/federation/lib.rego"),
            ("remediation.rego", "policies/lib/remediation.rego"))}
        await post_all(api, [(f"/api/v1/namespaces/{policy_ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "placement", "namespace": policy_ns},
            "data": policy})])

        sync = ServerProcess("sync", [
            "-m", "fedplace.sync", *opa.sync_flags(), "--kubeconfig", str(kube.kubeconfig),
            "--listen", "127.0.0.1:{port}", "--replicate", "apps/v1/replicasets",
            "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters", "--policy-namespace", policy_ns,
            "--remediate", "enforce", "--remediate-max-fraction", "1", "--remediate-debounce", "0.2",
            "--remediate-rate", "1000", "--leader-election-namespace", lease_ns, "--log-level", "warning"],
            "/healthz", tmp)
        try:
            async with aiohttp.ClientSession() as s:  # the sync's /metrics
                sync.start()
                wait_http(sync.url + "/readyz", timeout=120, proc=sync.proc)
                t = time.perf_counter()
                while await count_with(api, lambda i: bool(clusters_of(i))) < total:
                    await asyncio.sleep(0.2)
                    assert time.perf_counter() - t < 300, "first pass did not finish"
                t_first = time.perf_counter() - t
                await asyncio.sleep(1.0)  # let the events of the first pass settle
                before = await patches_sent(s, sync.url)

                # Watch (not poll: a full list every few ms would load the API server
                # under test) for the last affected ReplicaSet to be re-placed.
                rv = (await kube_json(api, "GET", RS_PATH, query=[("limit", "1")]))["metadata"]["resourceVersion"]
                pending = {f"{namespaces[i % NAMESPACES]}/rs{i}" for i in range(affected)}
                stream = await watch(api, RS_PATH, rv, 120, allowWatchBookmarks="false")
                try:
                    t0 = time.perf_counter()
                    await kube_json(api, "PATCH", f"{CLUSTERS_PATH}/eu-a",
                                    body={"metadata": {"labels": {"pci-compliance-level": "2"}}},
                                    content_type="application/merge-patch+json")
                    async for line in stream.content:
                        obj = json.loads(line)["object"]
                        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                        if key in pending and clusters_of(obj) == {"eu-c"}:
                            pending.discard(key)
                            if not pending:
                                break
                    t_remediate = time.perf_counter() - t0
                finally:
                    stream.release()
                assert not pending, f"{len(pending)} affected ReplicaSets not re-placed"
                await asyncio.sleep(2.0)  # anything extra would show up now
                sent = await patches_sent(s, sync.url) - before
                untouched = await count_with(api, lambda i: clusters_of(i) == {"eu-a", "eu-b", "eu-c", "us-d"})

                # Somebody overwrites one ReplicaSet's preferences: a targeted pass (that
                # object only) puts them back.
                t_edit = await time_edit_reverted(api, f"{namespaces[affected % NAMESPACES]}/rs{affected}")
        finally:
            sync.stop()
        described = srv.describe()
    print(f"{described}\n")
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
    add_server_flags(p, opa=True, kube=True)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
