"""Benchmark fedplace-kube (the devstack Kubernetes API server) through kubernetes_asyncio.

Run: ``.venv/bin/python bench/kube.py [--objects 10000] [--updates 5000] [--kubeconfig PATH]``.
Starts the server as a subprocess (or uses the one of ``--kubeconfig``, see
bench/common.py), creates N ConfigMaps concurrently, times a
paged list (limit=500) against an unpaged list measured in the same run, and
the delivery rate of watch events during a burst of updates against the rate
the updates were acknowledged. Prints a markdown table and the server's RSS
(devstack only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402
from kubernetes_asyncio import client, watch  # noqa: E402

from bench.common import add_server_flags, pct, server_rss, servers  # noqa: E402


async def create_all(core: client.CoreV1Api, ns: str, n: int, concurrency: int = 64) -> tuple[float, list[float]]:
    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []

    async def one(i: int) -> None:
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i:05d}", labels={"bench": "1", "mod": str(i % 10)}),
                                  data={"payload": "x" * 200, "i": str(i)})
        async with sem:
            t = time.perf_counter()
            await core.create_namespaced_config_map(ns, body)
            lat.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - start, lat


async def raw_creates(api: client.ApiClient, ns: str, n: int, concurrency: int = 64) -> float:
    """Server capacity without kubernetes_asyncio: plain aiohttp POSTs with the ApiClient's
    auth headers, over its connector (the kubeconfig's TLS). Not over its session: that one
    has ``trust_env`` on, a proxy/netrc lookup per request that costs the client more than
    the server's work here."""
    sem = asyncio.Semaphore(concurrency)
    headers = {a["key"]: a["value"] for a in (await api.configuration.auth_settings()).values()}
    url = f"{api.configuration.host}/api/v1/namespaces/{ns}/configmaps"

    async def one(i: int) -> None:
        async with sem:
            async with s.post(url, json={"metadata": {"name": f"r-{i}"}, "data": {"payload": "x" * 200}},
                              headers=headers) as r:
                assert r.status == 201, await r.text()

    async with aiohttp.ClientSession(connector=api.rest_client.pool_manager.connector, connector_owner=False) as s:
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - start


async def paged_list(core: client.CoreV1Api, ns: str, page: int, typed: bool) -> tuple[float, list[float], int]:
    token = None
    lat: list[float] = []
    count = 0
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        if typed:
            resp = await core.list_namespaced_config_map(ns, limit=page, _continue=token)
            count += len(resp.items)
            token = resp.metadata._continue
        else:
            raw = await core.list_namespaced_config_map(ns, limit=page, _continue=token, _preload_content=False)
            doc = json.loads(await raw.read())
            count += len(doc["items"])
            token = doc["metadata"].get("continue")
        lat.append(time.perf_counter() - t)
        if not token:
            break
    return time.perf_counter() - start, lat, count


async def unpaged_list(core: client.CoreV1Api, ns: str, typed: bool) -> tuple[float, int]:
    start = time.perf_counter()
    if typed:
        resp = await core.list_namespaced_config_map(ns)
        n = len(resp.items)
    else:
        raw = await core.list_namespaced_config_map(ns, _preload_content=False)
        n = len(json.loads(await raw.read())["items"])
    return time.perf_counter() - start, n


async def watch_burst(core: client.CoreV1Api, ns: str, objects: int, updates: int,
                      concurrency: int = 64) -> dict[str, float]:
    rv = (await core.list_namespaced_config_map(ns, limit=1)).metadata.resource_version
    received = 0
    first_write = 0.0
    last_event = 0.0
    ready = asyncio.Event()
    done = asyncio.Event()
    w = watch.Watch()

    async def consume() -> None:
        nonlocal received, last_event
        stream = w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=120)
        ready.set()
        async for ev in stream:
            if ev["type"] == "MODIFIED":
                received += 1
                last_event = time.perf_counter()
                if received >= updates:
                    done.set()
                    break

    task = asyncio.create_task(consume())
    await ready.wait()
    await asyncio.sleep(0.3)
    sem = asyncio.Semaphore(concurrency)

    async def upd(i: int) -> None:
        async with sem:
            await core.patch_namespaced_config_map(f"cm-{i % objects:05d}", ns, {"data": {"u": str(i)}})

    first_write = time.perf_counter()
    await asyncio.gather(*(upd(i) for i in range(updates)))
    writes_done = time.perf_counter()
    await asyncio.wait_for(done.wait(), 120)
    await task
    await w.close()
    return {"write_s": writes_done - first_write, "deliver_s": last_event - first_write, "events": received,
            "lag_after_writes_s": max(0.0, last_event - writes_done)}


async def run(args: argparse.Namespace) -> None:
    history = ["--history", str(args.updates * 2 + args.objects + 100)]
    async with servers(args, Path(tempfile.mkdtemp(prefix="fedplace-bench-kube-")), kube_args=history) as srv:
        assert srv.kube is not None
        api = srv.kube.api
        core = client.CoreV1Api(api)
        ns, raw_ns = await srv.kube.namespace("cm"), await srv.kube.namespace("raw")
        create_s, create_lat = await create_all(core, ns, args.objects)
        raw_create_s = await raw_creates(api, raw_ns, args.objects // 2)
        rss_after_create = server_rss(srv.kube.process)

        paged_typed, page_lat_typed, n1 = [], [], 0
        paged_raw, page_lat_raw = [], []
        unpaged_typed, unpaged_raw = [], []
        for _ in range(args.rounds):
            s, lat, n1 = await paged_list(core, ns, 500, typed=True)
            paged_typed.append(s)
            page_lat_typed += lat
            s, lat, _ = await paged_list(core, ns, 500, typed=False)
            paged_raw.append(s)
            page_lat_raw += lat
            s, n2 = await unpaged_list(core, ns, typed=True)
            unpaged_typed.append(s)
            s, _ = await unpaged_list(core, ns, typed=False)
            unpaged_raw.append(s)
        assert n1 == args.objects == n2, (n1, n2)
        burst = await watch_burst(core, ns, args.objects, args.updates)
        rss_end = server_rss(srv.kube.process)
        described, external = srv.describe(), srv.kube.external

    med = statistics.median
    print(f"\n## fedplace-kube benchmark ({args.objects} ConfigMaps, {args.updates} updates, {args.rounds} list rounds)\n")
    print(f"{described}\n")
    print("| measurement | value | p50 | p99 | baseline | ratio |")
    print("|---|---|---|---|---|---|")
    print(f"| create {args.objects} (64 concurrent) | {create_s:.2f} s ({args.objects / create_s:,.0f}/s) | "
          f"{pct(create_lat, 50) * 1000:.1f} ms | {pct(create_lat, 99) * 1000:.1f} ms | "
          f"plain aiohttp POSTs {args.objects // 2 / raw_create_s:,.0f}/s | "
          f"{(args.objects / create_s) / (args.objects // 2 / raw_create_s):.2f}x |")
    print(f"| paged list, limit=500, typed models | {med(paged_typed):.3f} s | {pct(page_lat_typed, 50) * 1000:.1f} ms/page | "
          f"{pct(page_lat_typed, 99) * 1000:.1f} ms/page | unpaged typed {med(unpaged_typed):.3f} s | "
          f"{med(paged_typed) / med(unpaged_typed):.2f}x |")
    print(f"| paged list, limit=500, raw JSON | {med(paged_raw):.3f} s | {pct(page_lat_raw, 50) * 1000:.1f} ms/page | "
          f"{pct(page_lat_raw, 99) * 1000:.1f} ms/page | unpaged raw {med(unpaged_raw):.3f} s | "
          f"{med(paged_raw) / med(unpaged_raw):.2f}x |")
    write_rate = args.updates / burst["write_s"]
    deliver_rate = burst["events"] / burst["deliver_s"]
    print(f"| watch delivery during update burst | {deliver_rate:,.0f} events/s ({burst['events']:.0f} events) | | | "
          f"updates acknowledged {write_rate:,.0f}/s | {deliver_rate / write_rate:.2f}x |")
    print(f"| watch lag after last write acknowledged | {burst['lag_after_writes_s'] * 1000:.0f} ms | | | | |")
    created = args.objects + args.objects // 2
    rss = rss_end if external else f"{rss_after_create} after {created} objects, {rss_end} at end"
    print(f"| server RSS | {rss} | | | | |")
    print()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=10000)
    p.add_argument("--updates", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    add_server_flags(p, kube=True)
    args = p.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
