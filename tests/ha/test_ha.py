"""HA proven: the remediation leader dies mid-remediation under a stream of admissions.

Against one API server (the devstack's or ``FEDPLACE_TEST_KUBECONFIG``'s): three
opa-kube-sync + OPA pairs (OPAs real with ``REAL_OPA_BIN``, else devstack
engines) and three webhook processes, every one a real OS process
(tests/ha/harness.py). The webhooks reach the OPAs through a round-robin front
(the OPA Service); the API server reaches the webhooks through one registered
URL, a TLS-terminating front that sends an AdmissionReview a webhook could not
answer to the next one (harness.py says why: one registration names one URL,
and kube-apiserver never re-sends a webhook call). The syncs reach the API
server through a proxy that records each write and which replica sent it
(tests/ha/harness.py ``AuditProxy``): that is how patches are counted, beside a
watch counting each object's MODIFIED events (the API server's own view).

A policy edit makes 60 ReplicaSets (the webhook does not intercept their
namespace) need a new annotation, remediated at 10 patches/s; meanwhile
ReplicaSets are created at 10/s through the webhook in another namespace. Once
the leader has patched 15, its sync and its OPA and one webhook are SIGKILLed.
Then:

* a new leader takes over — its first write of the Lease — within the lease
  duration (5 s here, ``--leader-election-lease-duration``; 15 s by default) of
  the kill, plus 1 s for a loaded machine; the Lease names it;
* the remediation completes: every affected object carries the new annotation;
* every affected object was patched exactly once, counted by the proxy (requests
  answered 2xx) and by the watch (MODIFIED events); the old leader patched only
  before the kill, the new one only after it, nobody patched anything else;
* no admission failed (each answered 201 and carried the webhook's annotation)
  before, during or after — two webhooks and two OPAs stayed up.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.fixtures.kube import ScratchNamespaces
from tests.ha.harness import HaStack, kill_the_leader, seed, start_opa_process

pytestmark = pytest.mark.timeout(180)

# Each sync's --leader-election-lease-duration: renewals every 1.7 s, leadership kept 3.3 s after the
# last one (remediator/leader.py); shorter than the 15 s default, so the test takes ~15 s, not ~30 s.
LEASE_SECONDS = 5.0
OBJECTS, KILL_AFTER, RATE, STREAM_RATE = 60, 15, 10.0, 10.0


async def test_leader_killed_mid_remediation(kube, kube_api, kube_namespaces: ScratchNamespaces, tmp_path: Path):
    policy_ns = await kube_namespaces.create("ha-policy")
    changed_ns = await kube_namespaces.create("ha-changed")
    stream_ns = await kube_namespaces.create("ha-stream")
    stack = HaStack(kube.kubeconfig, kube_api, tmp_path, start_opa_process, policy_ns, changed_ns, stream_ns,
                    rate=RATE, lease_duration=LEASE_SECONDS)
    await seed(kube_api, stack.changed_path, OBJECTS)
    await stack.put_policy("v1")
    try:
        await stack.start()
        out = await kill_the_leader(stack, objects=OBJECTS, kill_after=KILL_AFTER, stream_rate=STREAM_RATE)
    except BaseException:
        print(stack.logs())
        raise
    finally:
        await stack.stop()

    # A new leader, within the lease duration of the kill, and the Lease says so.
    assert out.new_leader is not None and out.new_leader != out.leader, (out.leader, out.new_leader)
    assert out.t_takeover is not None
    takeover = out.t_takeover - out.t_kill
    assert takeover <= LEASE_SECONDS + 1.0, f"new leader after {takeover:.2f} s"
    assert out.lease["spec"]["holderIdentity"] == out.new_leader
    assert out.lease["spec"]["leaseTransitions"] >= 1

    # The remediation completed.
    assert out.t_done is not None, "not every affected object was remediated"

    # Each affected object patched exactly once: PATCHes answered 2xx, and MODIFIED events.
    counts = {name: len(ws) for name, ws in out.patches.items()}
    assert {n: c for n, c in counts.items() if c != 1} == {}, "patched other than once (PATCHes)"
    assert {n: out.modified.get(n, 0) for n in out.objects if out.modified.get(n, 0) != 1} == {}, \
        "changed other than once (watch)"
    by_whom = collections.Counter((w.replica, w.t > out.t_kill) for ws in out.patches.values() for w in ws)
    assert set(by_whom) == {(out.leader, False), (out.new_leader, True)}, by_whom
    assert by_whom[(out.leader, False)] >= KILL_AFTER and by_whom[(out.new_leader, True)] >= 1, by_whom
    assert out.stray_patches == []

    # No admission failed, before, during or after the kill.
    failed = [a for a in out.admissions if not a.ok]
    assert failed == [], failed[:5]
    assert all(len(out.phase(p)) >= 5 for p in ("before", "during", "after")), \
        {p: len(out.phase(p)) for p in ("before", "during", "after")}
