"""Benchmark fedplace-kube (the devstack Kubernetes API server) through kubernetes_asyncio.

Run: ``.venv/bin/python bench/kube.py [--objects 10000] [--updates 5000]``.
Starts the server as a subprocess, creates N ConfigMaps concurrently, times a
paged list (limit=500) against an unpaged list measured in the same run, and
the delivery rate of watch events during a burst of updates against the rate
the updates were acknowledged. Prints a markdown table and the server's RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes_asyncio import client, watch  # noqa: E402

from devstack.launch import ServerProcess  # noqa: E402

NS = "bench"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def create_all(core: client.CoreV1Api, n: int, concurrency: int = 64) -> tuple[float, list[float]]:
    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []

    async def one(i: int) -> None:
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i:05d}", labels={"bench": "1", "mod": str(i % 10)}),
                                  data={"payload": "x" * 200, "i": str(i)})
        async with sem:
            t = time.perf_counter()
            await core.create_namespaced_config_map(NS, body)
            lat.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - start, lat


async def raw_creates(url: str, n: int, concurrency: int = 64) -> float:
    """Server capacity without kubernetes_asyncio's (de)serialization: plain aiohttp POSTs."""
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), trust_env=False) as s:
        async with s.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": "bench-raw"}}) as r:
            assert r.status == 201
        async def one(i: int) -> None:
            async with sem:
                async with s.post(f"{url}/api/v1/namespaces/bench-raw/configmaps",
                                  json={"metadata": {"name": f"r-{i}"}, "data": {"payload": "x" * 200}}) as r:
                    assert r.status == 201, await r.text()
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - start


async def paged_list(core: client.CoreV1Api, page: int, typed: bool) -> tuple[float, list[float], int]:
    token = None
    lat: list[float] = []
    count = 0
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        if typed:
            resp = await core.list_namespaced_config_map(NS, limit=page, _continue=token)
            count += len(resp.items)
            token = resp.metadata._continue
        else:
            raw = await core.list_namespaced_config_map(NS, limit=page, _continue=token, _preload_content=False)
            import json
            doc = json.loads(await raw.read())
            count += len(doc["items"])
            token = doc["metadata"].get("continue")
        lat.append(time.perf_counter() - t)
        if not token:
            break
    return time.perf_counter() - start, lat, count


async def unpaged_list(core: client.CoreV1Api, typed: bool) -> tuple[float, int]:
    start = time.perf_counter()
    if typed:
        resp = await core.list_namespaced_config_map(NS)
        n = len(resp.items)
    else:
        import json
        raw = await core.list_namespaced_config_map(NS, _preload_content=False)
        n = len(json.loads(await raw.read())["items"])
    return time.perf_counter() - start, n


async def watch_burst(core: client.CoreV1Api, updates: int, concurrency: int = 64) -> dict[str, float]:
    rv = (await core.list_namespaced_config_map(NS, limit=1)).metadata.resource_version
    received = 0
    first_write = 0.0
    last_event = 0.0
    ready = asyncio.Event()
    done = asyncio.Event()
    w = watch.Watch()

    async def consume() -> None:
        nonlocal received, last_event
        stream = w.stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=120)
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
            await core.patch_namespaced_config_map(f"cm-{i % 10000:05d}", NS, {"data": {"u": str(i)}})

    first_write = time.perf_counter()
    await asyncio.gather(*(upd(i) for i in range(updates)))
    writes_done = time.perf_counter()
    await asyncio.wait_for(done.wait(), 120)
    await task
    await w.close()
    return {"write_s": writes_done - first_write, "deliver_s": last_event - first_write, "events": received,
            "lag_after_writes_s": max(0.0, last_event - writes_done)}


async def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="fedplace-bench-kube-"))
    proc = ServerProcess(name="fedplace-kube", args=["-m", "devstack.kube", "--listen", "127.0.0.1:{port}",
                                                     "--history", str(args.updates * 2 + args.objects + 100),
                                                     "--log-level", "warning"],
                         ready_path="/version", log_dir=tmp)
    proc.start()
    try:
        cfg = client.Configuration(host=proc.url)
        async with client.ApiClient(cfg) as api:
            api.rest_client.pool_manager.connector._limit = 128  # noqa: SLF001 - more parallel connections
            core = client.CoreV1Api(api)
            await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
            create_s, create_lat = await create_all(core, args.objects)
            raw_create_s = await raw_creates(proc.url, args.objects // 2)
            rss_after_create = rss_mb(proc.proc.pid)

            paged_typed, page_lat_typed, n1 = [], [], 0
            paged_raw, page_lat_raw = [], []
            unpaged_typed, unpaged_raw = [], []
            for _ in range(args.rounds):
                s, lat, n1 = await paged_list(core, 500, typed=True)
                paged_typed.append(s)
                page_lat_typed += lat
                s, lat, _ = await paged_list(core, 500, typed=False)
                paged_raw.append(s)
                page_lat_raw += lat
                s, n2 = await unpaged_list(core, typed=True)
                unpaged_typed.append(s)
                s, _ = await unpaged_list(core, typed=False)
                unpaged_raw.append(s)
            assert n1 == args.objects == n2, (n1, n2)
            burst = await watch_burst(core, args.updates)
            rss_end = rss_mb(proc.proc.pid)
    finally:
        proc.stop()

    med = statistics.median
    print(f"\n## fedplace-kube benchmark ({args.objects} ConfigMaps, {args.updates} updates, {args.rounds} list rounds)\n")
    print("| measurement | value | p50 | p99 | baseline | ratio |")
    print("|---|---|---|---|---|---|")
    print(f"| create {args.objects} (64 concurrent) | {create_s:.2f} s ({args.objects / create_s:,.0f}/s) | "
          f"{pct(create_lat, 50) * 1000:.1f} ms | {pct(create_lat, 99) * 1000:.1f} ms | "
          f"raw aiohttp POSTs {args.objects // 2 / raw_create_s:,.0f}/s | "
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
    print(f"| server RSS | {rss_after_create:.0f} MB after {args.objects + args.objects // 2} objects, {rss_end:.0f} MB at end | | | | |")
    print()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=10000)
    p.add_argument("--updates", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
