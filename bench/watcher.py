"""A bare watcher of one collection, as its own process: when each change arrives.

Usage: python bench/watcher.py KUBECONFIG PATH RESOURCE_VERSION ANNOTATION OUT

Watches ``PATH`` (e.g. ``/apis/apps/v1/replicasets``) from ``RESOURCE_VERSION`` with the
services' client (:func:`fedplace.common.kube_client.new_api_client`: aiohttp, TLS,
uncompressed) and appends ``<name> <annotation value> <CLOCK_MONOTONIC seconds>`` to ``OUT``
for every event whose object carries ``ANNOTATION``, as each line of the stream is read, until
SIGTERM; its first line, ``watching``, says the watch is open. When the API server ends the
stream (it closes a watcher that does not keep up), it watches again from the last
resourceVersion it received, as an informer does, and writes ``rewatch <resourceVersion>``;
an ERROR event (that resourceVersion is gone) ends it. ``bench/sync.py`` compares these times
with its own updates' acknowledgements (the same clock): what any watcher on the machine, the
sync's included, receives, and when.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedplace.common.kube_client import kube_stream, new_api_client  # noqa: E402


async def watch(kubeconfig: str, path: str, resource_version: str, annotation: str, out: Path) -> None:
    api = await new_api_client(kubeconfig)
    try:
        with out.open("a", buffering=1) as sink:
            sink.write("watching\n")
            while True:
                resp = await kube_stream(api, "GET", path, query=[("watch", "true"),
                                                                  ("resourceVersion", resource_version)],
                                         timeout=aiohttp.ClientTimeout(total=None, sock_read=600))
                try:
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        if event.get("type") == "ERROR":
                            sink.write(f"error {json.dumps(event.get('object'), separators=(',', ':'))}\n")
                            return
                        meta = (event.get("object") or {}).get("metadata") or {}
                        value = (meta.get("annotations") or {}).get(annotation)
                        if value:
                            sink.write(f"{meta.get('name', '')} {value} {time.clock_gettime(time.CLOCK_MONOTONIC):.6f}\n")
                        resource_version = meta.get("resourceVersion") or resource_version
                finally:
                    resp.release()
                sink.write(f"rewatch {resource_version}\n")
    finally:
        await api.close()


def main() -> None:
    kubeconfig, path, resource_version, annotation, out = sys.argv[1:6]
    loop = asyncio.new_event_loop()
    task = loop.create_task(watch(kubeconfig, path, resource_version, annotation, Path(out)))
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass
    finally:
        loop.close()


if __name__ == "__main__":
    main()
