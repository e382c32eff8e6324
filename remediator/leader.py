"""Leader election over a coordination.k8s.io/v1 Lease.

Only the holder of the Lease remediates, so several replicas never patch the
same object twice. The holder renews every ``lease_duration / 3``; another
replica takes over once ``renewTime + leaseDurationSeconds`` has passed: a
follower retries every ``lease_duration / 3``, and sooner when the holder's
Lease expires before that, so a dead holder is replaced within the lease's
duration of its last renewal.
Takeover and renewal are updates guarded by ``resourceVersion``: a 409 means
another replica won, and this one stays (or becomes) a follower. The gauge
``fedplace_remediation_leader{lease="<namespace>/<name>"}`` is 1 while this
replica holds the Lease.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from datetime import datetime, timedelta, timezone
from typing import Any

from kubernetes_asyncio import client
from prometheus_client import Gauge

from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["LEADER", "LeaderElector", "default_identity"]

log = logging.getLogger(__name__)

LEADER = Gauge("fedplace_remediation_leader",
               "1 while this replica leads (holds the remediator's Lease, namespace/name; lease is empty without "
               "leader election, and the replica then always leads), else 0", ["lease"])


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _fmt(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


class LeaderElector:
    """Acquire and renew a Lease; ``is_leader`` tells whether this replica holds it."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str,
                 lease_duration: float = 15.0) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.is_leader = False
        self.changed = asyncio.Event()
        # Seconds until another holder's Lease, as last read, expires (None: not held by another).
        self.held_for: float | None = None
        self.gauge = LEADER.labels(f"{namespace}/{name}")
        self.gauge.set(0)

    @property
    def _path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    async def try_acquire(self) -> bool:
        """One attempt to acquire or renew; returns whether this replica leads."""
        now = _now()
        self.held_for = None
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "renewTime": _fmt(now),
        }
        try:
            lease: dict[str, Any] = await kube_json(self.api, "GET", f"{self._path}/{self.name}")
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**spec, "acquireTime": _fmt(now), "leaseTransitions": 0}}
            try:
                await kube_json(self.api, "POST", self._path, body=body)
            except KubeApiError as exc2:
                if exc2.status == 409:
                    return self._set(False)
                raise
            return self._set(True)
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        renewed = _parse(current.get("renewTime")) or _parse(current.get("acquireTime"))
        duration = float(current.get("leaseDurationSeconds") or self.lease_duration)
        expired = renewed is None or renewed + timedelta(seconds=duration) < now
        if holder and holder != self.identity and not expired:
            if renewed is not None:
                self.held_for = (renewed + timedelta(seconds=duration) - now).total_seconds()
            return self._set(False)
        new_spec = dict(current)
        new_spec.update(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _fmt(now)
            new_spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:
            await kube_json(self.api, "PUT", f"{self._path}/{self.name}", body=lease)
        except KubeApiError as exc:
            if exc.status == 409:
                return self._set(False)
            raise
        return self._set(True)

    def _set(self, leader: bool) -> bool:
        if leader != self.is_leader:
            log.info("leadership changed", extra={"leader": leader, "lease": f"{self.namespace}/{self.name}",
                                                   "identity": self.identity})
            self.is_leader = leader
            self.gauge.set(1 if leader else 0)
            self.changed.set()
        return leader

    async def run(self) -> None:
        """Keep trying to acquire/renew until cancelled; on errors, stop leading."""
        while True:
            try:
                await self.try_acquire()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - unknown state: not the leader
                log.warning("lease renewal failed", extra={"error": str(exc)})
                self._set(False)
            await asyncio.sleep(self.next_attempt_in())

    def next_attempt_in(self) -> float:
        """Seconds until the next attempt: a renewal or retry every third of the lease
        duration, or just after another holder's Lease expires if that comes first (a
        holder that died is then replaced on time, not up to a retry period late)."""
        period = self.lease_duration / 3
        if self.held_for is None:
            return period
        return min(period, max(0.0, self.held_for) + 0.05)

    async def release(self) -> None:
        """Give the Lease up on shutdown so another replica takes over at once."""
        if not self.is_leader:
            return
        try:
            lease = await kube_json(self.api, "GET", f"{self._path}/{self.name}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["renewTime"] = None
                await kube_json(self.api, "PUT", f"{self._path}/{self.name}", body=lease)
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            log.warning("lease release failed", extra={"error": str(exc)})
        self._set(False)
