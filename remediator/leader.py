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

Leadership also expires locally, whatever the API server answers or fails to
answer: ``is_leader`` is true only until ``renew_deadline`` — two thirds of the
lease duration, client-go's default ratio (its renewDeadline 10 s of a 15 s
lease) — after the start of the last successful acquisition or renewal (the
moment its ``renewTime`` was taken, so never later than the renewal the other
replicas see). A renewal that fails gives leadership up at once; one that
hangs gives it up at that deadline even though it has not returned, and is
abandoned then (each attempt is bounded by ``renew_deadline``: a success any
later would leave no time to lead). The other replicas cannot take over
before ``renewTime + leaseDurationSeconds``, so between the moment this
replica stops leading and the earliest takeover lies a third of the lease
duration: the margin for clock skew between the replicas' nodes and for a
PATCH checked just before the deadline still being in flight. The remediator
checks ``is_leader`` immediately before every PATCH, so a pass running when
leadership is lost sends nothing more (remediator/remediator.py).

``leaseDurationSeconds`` is a whole number of seconds on the wire (at least 1;
kube-apiserver rejects 0): a fractional lease duration is rounded up there,
which only makes the other replicas wait a little longer.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from kubernetes_asyncio import client
from prometheus_client import Gauge

from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["LEADER", "LeaderElector", "MIN_LEASE_DURATION", "RENEW_DEADLINE_FRACTION", "default_identity"]

log = logging.getLogger(__name__)

LEADER = Gauge("fedplace_remediation_leader",
               "1 while this replica leads (holds the remediator's Lease, namespace/name; lease is empty without "
               "leader election, and the replica then always leads), else 0", ["lease"])


# Leadership lasts this share of the lease duration after the last successful renewal (see the
# module docstring); the rest is the margin before another replica may take over.
RENEW_DEADLINE_FRACTION = 2 / 3
# leaseDurationSeconds is an integer >= 1 on the wire.
MIN_LEASE_DURATION = 1.0


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
    """Acquire and renew a Lease; ``is_leader`` tells whether this replica holds it (and
    its leadership has not expired locally: see the module docstring)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str,
                 lease_duration: float = 15.0) -> None:
        if not lease_duration >= MIN_LEASE_DURATION:
            raise ValueError(f"lease duration must be at least {MIN_LEASE_DURATION:g} s, not {lease_duration}")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = lease_duration * RENEW_DEADLINE_FRACTION
        self._leading = False  # as last decided (gauge, log, ``changed``); is_leader also checks the deadline
        self._valid_until = 0.0  # time.monotonic() at which leadership expires locally
        self._expiry: asyncio.TimerHandle | None = None
        self.changed = asyncio.Event()
        # Seconds until another holder's Lease, as last read, expires (None: not held by another).
        self.held_for: float | None = None
        self.gauge = LEADER.labels(f"{namespace}/{name}")
        self.gauge.set(0)

    @property
    def is_leader(self) -> bool:
        """Whether this replica leads now: it acquired or renewed the Lease, and less than
        ``renew_deadline`` has passed since that attempt started — also while a renewal
        is still waiting for its answer."""
        return self._leading and time.monotonic() < self._valid_until

    @property
    def lease_seconds(self) -> int:
        """``leaseDurationSeconds`` as written: whole seconds, rounded up, at least 1."""
        return max(1, math.ceil(self.lease_duration))

    @property
    def _path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    async def try_acquire(self) -> bool:
        """One attempt to acquire or renew; returns whether this replica leads."""
        started = time.monotonic()  # no later than renewTime as the other replicas read it
        now = _now()
        self.held_for = None
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
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
            return self._renewed(started)
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
        return self._renewed(started)

    def _renewed(self, started: float) -> bool:
        """The Lease was written by an attempt that started at ``started`` (monotonic):
        lead until ``renew_deadline`` after that, unless a later renewal extends it."""
        self._valid_until = started + self.renew_deadline
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        delay = self._valid_until - time.monotonic()
        if delay <= 0:
            log.warning("lease renewed too late to lead", extra={"lease": f"{self.namespace}/{self.name}",
                                                                  "identity": self.identity})
            return self._set(False)
        self._expiry = asyncio.get_running_loop().call_later(delay, self._expire)
        return self._set(True)

    def _expire(self) -> None:
        """The deadline timer: give leadership up unless a renewal moved the deadline."""
        self._expiry = None
        remaining = self._valid_until - time.monotonic()
        if remaining > 0:  # the timer fired early (clock granularity)
            self._expiry = asyncio.get_running_loop().call_later(remaining, self._expire)
            return
        if self._leading:
            log.warning("leadership expired: no renewal within the renew deadline",
                        extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity,
                               "renew_deadline": round(self.renew_deadline, 3)})
            self._set(False)

    def _set(self, leader: bool) -> bool:
        if not leader:
            self._valid_until = 0.0
            if self._expiry is not None:
                self._expiry.cancel()
                self._expiry = None
        if leader != self._leading:
            log.info("leadership changed", extra={"leader": leader, "lease": f"{self.namespace}/{self.name}",
                                                   "identity": self.identity})
            self._leading = leader
            self.gauge.set(1 if leader else 0)
            self.changed.set()
        return leader

    async def run(self) -> None:
        """Keep trying to acquire/renew until cancelled; on errors, stop leading. An attempt
        gets ``renew_deadline`` to finish (a later success would leave no time to lead)."""
        while True:
            try:
                await asyncio.wait_for(self.try_acquire(), timeout=self.renew_deadline)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - unknown state: not the leader
                error = (f"no answer within {self.renew_deadline:.3g} s" if isinstance(exc, TimeoutError)
                         else str(exc) or type(exc).__name__)
                log.warning("lease renewal failed", extra={"error": error})
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
