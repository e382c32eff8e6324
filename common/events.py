"""core/v1 Events, sent off the caller's path, aggregated and rate-limited.

:meth:`EventRecorder.record` never blocks and never raises: it queues the
event and returns. A background task (:meth:`EventRecorder.run`) sends them:

* the first occurrence of (object, type, reason, message) is POSTed as a new
  Event (``count: 1``);
* a repeat bumps ``count`` and ``lastTimestamp`` of that Event with a merge
  patch;
* each object gets a token bucket (``burst`` events, then one per
  ``refill_seconds``); occurrences over it are dropped;
* if the API refuses or is unreachable, the event is dropped (logged): Events
  are best effort and must never hold up the work that produced them.

Dropped events are counted in ``fedplace_events_dropped_total{reason}``
(:data:`DROPPED`): ``rate_limited`` (the object's bucket was empty),
``queue_full`` (``queue_size`` events waiting already), ``failed`` (the API
refused it or did not answer).

Events go to the involved object's namespace; a cluster-scoped object's to
``default`` (the API server refuses an Event whose namespace differs from
its involved object's).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from kubernetes_asyncio import client
from prometheus_client import Counter

from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["DROPPED", "EventRecorder", "InvolvedObject", "event_body", "involved_object"]

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024

DROPPED = Counter("fedplace_events_dropped_total", "Kubernetes Events not recorded, by reason: rate_limited (too "
                  "many about one object), queue_full (too many waiting), failed (the API refused or did not answer)",
                  ["reason"])
for _reason in ("rate_limited", "queue_full", "failed"):  # exported at 0 from the start
    DROPPED.labels(_reason)


@dataclass(frozen=True)
class InvolvedObject:
    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    def as_ref(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        return ref


def involved_object(obj: dict[str, Any], namespace: str | None = None) -> InvolvedObject:
    """Reference to a Kubernetes object dict (``namespace`` overrides the object's)."""
    meta = obj.get("metadata") or {}
    return InvolvedObject(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        namespace=str(namespace if namespace is not None else meta.get("namespace") or ""),
        uid=str(meta.get("uid") or ""),
    )


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(obj: InvolvedObject, event_type: str, reason: str, message: str, component: str, *,
               host: str | None = None, now: str | None = None) -> dict[str, Any]:
    """A new core/v1 Event (``count: 1``) about ``obj``, in its namespace (``default`` when
    cluster-scoped); ``host`` is ``source.host`` (the node, for a kubelet's Events)."""
    now = now or _now()
    # A generateName prefix ends in "-", which cannot end a DNS label: trim it (and cap the length).
    name = f"{obj.name[:200].rstrip('-.') or 'object'}.{uuid.uuid4().hex[:16]}"
    source = {"component": component, **({"host": host} if host else {})}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": obj.namespace or "default"},
        "involvedObject": obj.as_ref(),
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "type": event_type,
        "source": source,
        "reportingComponent": component,
        **({"reportingInstance": host} if host else {}),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


@dataclass
class _Bucket:
    tokens: float
    stamp: float


@dataclass
class _Aggregate:
    name: str
    namespace: str
    count: int


@dataclass
class EventRecorder:
    """Queue-backed Event writer. Start :meth:`run` as a task; stop by cancelling it."""

    api: client.ApiClient
    component: str
    burst: int = 10
    refill_seconds: float = 10.0
    queue_size: int = 1000
    _queue: asyncio.Queue[tuple[InvolvedObject, str, str, str]] = field(init=False)
    _buckets: dict[tuple[str, str, str], _Bucket] = field(default_factory=dict, init=False)
    _aggregates: dict[tuple[Any, ...], _Aggregate] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._queue = asyncio.Queue(self.queue_size)

    def record(self, obj: InvolvedObject, event_type: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj``; returns at once, never raises."""
        if not self._allow(obj):
            DROPPED.labels("rate_limited").inc()
            return
        try:
            self._queue.put_nowait((obj, event_type, reason, message[:MAX_MESSAGE]))
        except asyncio.QueueFull:
            DROPPED.labels("queue_full").inc()

    def _allow(self, obj: InvolvedObject) -> bool:
        key = (obj.kind, obj.namespace, obj.name)
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) / self.refill_seconds)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        if len(self._buckets) > 10_000:  # forget idle objects
            self._buckets = {k: b for k, b in self._buckets.items() if b.tokens < self.burst}
        return True

    async def run(self) -> None:
        """Send queued events until cancelled."""
        while True:
            item = await self._queue.get()
            try:
                await self._send(*item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - best effort
                DROPPED.labels("failed").inc()
                log.warning("event not recorded", extra={"reason": item[2], "error": str(exc)})
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until everything queued so far was sent or dropped."""
        await self._queue.join()

    async def _send(self, obj: InvolvedObject, event_type: str, reason: str, message: str) -> None:
        namespace = obj.namespace or "default"
        key = (obj.api_version, obj.kind, namespace, obj.name, obj.uid, event_type, reason, message)
        agg = self._aggregates.get(key)
        now = _now()
        if agg is not None:
            body = {"count": agg.count + 1, "lastTimestamp": now}
            try:
                await kube_json(self.api, "PATCH", f"/api/v1/namespaces/{namespace}/events/{agg.name}",
                                body=body, content_type="application/merge-patch+json")
                agg.count += 1
                return
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
                self._aggregates.pop(key, None)  # deleted or expired: start again
        event = event_body(obj, event_type, reason, message, self.component, now=now)
        name = event["metadata"]["name"]
        await kube_json(self.api, "POST", f"/api/v1/namespaces/{namespace}/events", body=event)
        if len(self._aggregates) > 10_000:
            self._aggregates.clear()
        self._aggregates[key] = _Aggregate(name=name, namespace=namespace, count=1)
