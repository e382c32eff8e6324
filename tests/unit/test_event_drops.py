"""common/events.py: Events it does not record are counted, by reason, in
fedplace_events_dropped_total."""

from __future__ import annotations

import asyncio
import socket

from kubernetes_asyncio import client

from fedplace.common.events import EventRecorder, InvolvedObject
from tests.metrics import metric

DROPPED = "fedplace_events_dropped_total"


def _object(name: str) -> InvolvedObject:
    return InvolvedObject("apps/v1", "ReplicaSet", name, "default", f"uid-{name}")


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(host: str) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = host
    return client.ApiClient(cfg)


async def test_events_over_an_objects_burst_are_counted_as_rate_limited() -> None:
    api = _api(f"http://127.0.0.1:{_closed_port()}")
    try:
        recorder = EventRecorder(api, "test", burst=2, refill_seconds=3600)
        before = metric(DROPPED, reason="rate_limited")
        for _ in range(5):
            recorder.record(_object("busy"), "Warning", "Test", "again")
        recorder.record(_object("quiet"), "Warning", "Test", "once")  # its own bucket
        assert metric(DROPPED, reason="rate_limited") - before == 3
    finally:
        await api.close()


async def test_events_beyond_the_queue_are_counted_as_queue_full() -> None:
    api = _api(f"http://127.0.0.1:{_closed_port()}")
    try:
        recorder = EventRecorder(api, "test", queue_size=2)
        before = metric(DROPPED, reason="queue_full")
        for i in range(5):  # nothing sends: run() is not started
            recorder.record(_object(f"o{i}"), "Normal", "Test", "queued")
        assert metric(DROPPED, reason="queue_full") - before == 3
    finally:
        await api.close()


async def test_events_the_api_does_not_take_are_counted_as_failed() -> None:
    api = _api(f"http://127.0.0.1:{_closed_port()}")  # connection refused
    recorder = EventRecorder(api, "test")
    task = asyncio.create_task(recorder.run())
    try:
        before = metric(DROPPED, reason="failed")
        recorder.record(_object("a"), "Warning", "Test", "unreachable")
        recorder.record(_object("b"), "Warning", "Test", "unreachable")
        await asyncio.wait_for(recorder.flush(), 60)
        assert metric(DROPPED, reason="failed") - before == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
