"""A remediation PATCH undone by the admission webhook is retried, not forgotten.

Two OPA replicas out of step, as during a policy roll-out: the remediating
opa-kube-sync (a real process, its own OPA, ``--remediate-interval`` far beyond
the test, so its periodic pass cannot help) already has policy v2; the
fedplace-admission webhook registered for UPDATEs of the ReplicaSet asks a
second OPA (its own sync, webhook and OPA: tests/fixtures/stack.py) that still
has v1, and merges v1's annotation back into the PATCH — a no-op. Once the
second OPA has v2, the object must reach v2 within seconds (the remediator
re-targets a reverted object after a backoff), and the revert must show in
``fedplace_remediation_skipped_total{reason="reverted"}``. HTTP only.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp

from devstack.launch import ServerProcess
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually, policy_loaded, rules, webhook_stack
from tests.ha.harness import OWNER, policy_configmap, replicaset

REVERTED = 'fedplace_remediation_skipped_total{reason="reverted"}'
FULL_PASSES = 'fedplace_remediation_passes_total{outcome="ok",scope="full"}'


async def put_policy(api: Any, namespace: str, version: str, changed_ns: str) -> None:
    """The ConfigMap ``placement`` in ``namespace`` holding the owner policy ``version``."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "placement"},
            "data": policy_configmap(version, changed_ns)}
    try:
        current = await kube_json(api, "GET", f"{path}/placement")
    except KubeApiError as exc:
        if exc.status != 404:
            raise
        await kube_json(api, "POST", path, body=body)
        return
    current["data"] = body["data"]
    await kube_json(api, "PUT", f"{path}/placement", body=current)


async def sample(sync: ServerProcess, series: str) -> float:
    """The value of ``series`` (name and labels, as exposed) on the sync's /metrics; 0 if absent."""
    async with aiohttp.ClientSession(trust_env=False) as s, s.get(sync.url + "/metrics") as r:
        match = re.search("^" + re.escape(series) + r" (\S+)$", await r.text(), re.M)
    return float(match.group(1)) if match else 0.0


async def owner(api: Any, ns: str) -> str | None:
    obj = await kube_json(api, "GET", f"/apis/apps/v1/namespaces/{ns}/replicasets/rs-0")
    return (obj["metadata"].get("annotations") or {}).get(OWNER)


async def test_patch_reverted_by_a_stale_webhook_is_retried(opa: Any, opa_process: Any, kube: Any, kube_api: Any,
                                                            kube_namespaces: ScratchNamespaces, tmp_path: Path):
    api = kube_api
    ns = await kube_namespaces.create("revert-apps")
    policy_a = await kube_namespaces.create("revert-pol-a")  # the remediating sync's (OPA A)
    policy_b = await kube_namespaces.create("revert-pol-b")  # the webhook's (OPA B)
    body = replicaset("rs-0", {OWNER: "team-v1"})
    body["metadata"]["namespace"] = ns
    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets", body=body)

    await put_policy(api, policy_b, "v1", ns)
    (tmp_path / "b").mkdir()
    async with webhook_stack(opa_process, kube, api, tmp_path / "b", name=f"fedplace-revert-{ns}", policy_ns=policy_b,
                             sync_flags=[], webhook_rules=rules(("apps", ["replicasets"])), namespaces=[ns]):
        await eventually(lambda: policy_loaded(api, policy_b, "placement"), 20, "v1 in the webhook's OPA")
        await put_policy(api, policy_a, "v2", ns)
        token_args: list[str] = []
        if opa.token:
            (tmp_path / "opa-a.token").write_text(opa.token)
            token_args = ["--opa-token-file", str(tmp_path / "opa-a.token")]
        sync = ServerProcess("sync-a", [
            "-m", "fedplace.sync", "--opa-url", opa.url + "/v1", *token_args, "--kubeconfig", str(kube.kubeconfig),
            "--listen", "127.0.0.1:{port}", "--opa-check-interval", "0.2", "--policy-namespace", policy_a,
            "--replicate", "apps/v1/replicasets", "--remediate", "enforce",
            "--remediate-resource", "apps/v1/replicasets", "--remediate-max-fraction", "1",
            "--remediate-debounce", "0.1", "--remediate-interval", "3600", "--leader-election", "false",
            "--log-level", "info"], ready_path="/readyz", log_dir=tmp_path)
        await asyncio.to_thread(sync.start, 60)
        try:
            # The remediator patches rs-0 to v2; the webhook (v1) puts v1 back.
            await eventually(lambda: sample(sync, FULL_PASSES), 20, "the first full pass")
            assert await owner(api, ns) == "team-v1"
            await put_policy(api, policy_b, "v2", ns)
            # The retry comes after a backoff of seconds, not the hour of --remediate-interval.
            await eventually(lambda: _is(owner(api, ns), "team-v2"), 15,
                             "rs-0 remediated once the webhook's OPA has v2")
            assert await sample(sync, REVERTED) >= 1
        finally:
            await asyncio.to_thread(sync.stop)


async def _is(value: Any, want: Any) -> bool:
    return await value == want
