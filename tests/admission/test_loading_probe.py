"""No admission decision from a partly loaded policy set, probed across OPA restarts.

A probe sends the webhook the admission request of one write every 0.1 s — as the
API server does for each write — while OPA loses its state:

* **OPA restarts alone** (an OPA container restart): the OPA process is killed
  and started again on its port while opa-kube-sync and the webhook keep
  running; opa-kube-sync notices and loads every policy ConfigMap again, one
  module at a time;
* **everything starts**: OPA, opa-kube-sync and the webhook are stopped and
  started together.

Writes probed: a ReplicaSet asking for EU jurisdiction and PCI level 2 (the
federation placement pack: the decision names the one eligible cluster in
``replica-set-preferences``), and a Karmada ResourceBinding of a template asking
the same, as Karmada's detector re-PUTs it (the Karmada pack: the decision
excludes the two forbidden clusters; the test CRDs of devstack/karmada).

Every answer must be a denial (failing closed, e.g. ``policies are loading``) or
exactly the decision the webhook gave with everything loaded: never an answer
computed from part of the policy set or part of the replicated data. OPA is a
dedicated process (``opa_process``: a real OPA with ``REAL_OPA_BIN``, else the
devstack engine); the webhook and the sync run in this process and reach OPA and
the API server over HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import aiohttp
import jsonpatch
import pytest
from kubernetes_asyncio import client

from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH
from devstack.federation import cluster as federation_cluster
from devstack.karmada import CLUSTERS as KARMADA_CLUSTERS
from devstack.karmada import install_crds
from devstack.karmada.standins import desired_binding
from devstack.scratch import install_crd
from devstack.shipped import shipped_policy_configmaps
from fedplace.admission.lifecycle import Webhook
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.sync.app import SyncApp
from fedplace.sync.config import parse_args
from tests.admission.conftest import make_config
from tests.fixtures.kube import ScratchNamespaces

EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
PREFERENCES = "federation.kubernetes.io/replica-set-preferences"
KARMADA_SETTINGS = "package io.k8s.federation.placement.settings\n\ncontrol_plane := \"karmada\"\n"
PERIOD = 0.1  # seconds between two probes
OPA_RESTARTS = 3
RECOVERY_SECONDS = 30.0


@dataclass
class Answer:
    """One probe: when, in which phase, and what the webhook said (``allowed`` None: no answer)."""

    t: float
    phase: str
    allowed: bool | None
    patch: list[dict[str, Any]] | None = None
    message: str = ""


@dataclass
class Case:
    """What one scenario needs: sync flags, policy ConfigMaps, the probed request, and a check of
    the full decision (on the object the full patch produces)."""

    sync_flags: list[str]
    configmaps: dict[str, dict[str, str]]
    request: dict[str, Any]
    check_full: Callable[[dict[str, Any]], None]
    cleanup: list[str] = field(default_factory=list)  # cluster-scoped paths to delete


def admission_review(obj: dict[str, Any], operation: str, group: str, version: str, kind: str,
                     resource: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "", "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": meta["name"], "namespace": meta.get("namespace", ""), "operation": operation,
        "userInfo": {"username": "probe"}, "object": obj,
        "oldObject": obj if operation == "UPDATE" else None, "dryRun": True}}


def patched(obj: dict[str, Any], patch: list[dict[str, Any]] | None) -> dict[str, Any]:
    return jsonpatch.apply_patch(obj, patch or [])


class Probe:
    """Sends ``request`` to the webhook at ``url()`` every :data:`PERIOD` s, recording each answer."""

    def __init__(self, session: aiohttp.ClientSession, request: dict[str, Any], url: Callable[[], str]) -> None:
        self.session = session
        self.request = request
        self.url = url
        self.phase = "steady"
        self.answers: list[Answer] = []

    async def once(self) -> Answer:
        doc = json.loads(json.dumps(self.request))
        doc["request"]["uid"] = str(uuid.uuid4())
        t = time.monotonic()
        try:
            async with self.session.post(self.url() + "/mutate", json=doc,
                                         timeout=aiohttp.ClientTimeout(total=5)) as resp:
                body = await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return Answer(t, self.phase, None, message=f"no answer: {type(exc).__name__}")
        answer = body["response"]
        patch = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else None
        return Answer(t, self.phase, answer["allowed"], patch, (answer.get("status") or {}).get("message", ""))

    async def run(self) -> None:
        next_at = time.monotonic()
        while True:
            self.answers.append(await self.once())
            next_at += PERIOD
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def full_decision_since(self, since: float, full: Answer, what: str) -> None:
        deadline = time.monotonic() + RECOVERY_SECONDS
        while not any(a.t >= since and a.allowed and a.patch == full.patch for a in self.answers):
            if time.monotonic() > deadline:
                tail = [(round(a.t - since, 2), a.allowed, a.message[:120]) for a in self.answers[-5:]]
                raise AssertionError(f"no full decision within {RECOVERY_SECONDS} s of {what}; last answers: {tail}")
            await asyncio.sleep(PERIOD)


async def replicaset_case(api: client.ApiClient, suffix: str, app_ns: str) -> Case:
    """Federation placement: three federation Clusters, one EU with PCI 3."""
    await install_crd(api, CLUSTER_CRD)
    names = {"eu1": f"probe-eu1-{suffix}", "eu2": f"probe-eu2-{suffix}", "us1": f"probe-us1-{suffix}"}
    cleanup = []
    for key, region, pci in (("eu1", "eu-west-1", "3"), ("eu2", "europe-west4", "1"), ("us1", "us-east-1", "3")):
        await kube_json(api, "POST", CLUSTERS_PATH, body=federation_cluster(names[key], region, pci))
        cleanup.append(f"{CLUSTERS_PATH}/{names[key]}")
    shipped = shipped_policy_configmaps()
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "probe", "namespace": app_ns, "annotations": {EU: "true", PCI: "2"}},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "probe"}},
                   "template": {"metadata": {"labels": {"app": "probe"}},
                                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}

    def check_full(obj: dict[str, Any]) -> None:
        clusters = json.loads(obj["metadata"]["annotations"][PREFERENCES])["clusters"]
        assert names["eu1"] in clusters and names["eu2"] not in clusters and names["us1"] not in clusters, clusters

    return Case(["--replicate-cluster", "federation.fedplace.io/v1beta1/clusters"],
                {"fedplace-lib": shipped["fedplace-lib"], "fedplace-federation": shipped["fedplace-federation"],
                 "fedplace-rules-eu-pci": shipped["fedplace-rules-eu-pci"]},
                admission_review(rs, "CREATE", "apps", "v1", "ReplicaSet", "replicasets"), check_full, cleanup)


async def binding_case(api: client.ApiClient, suffix: str, app_ns: str) -> Case:
    """Karmada placement: three Karmada Clusters, a template asking EU + PCI 2 (replicated),
    and its binding as the detector writes it."""
    await install_crds(api)
    names = {"eu1": f"probe-eu1-{suffix}", "eu2": f"probe-eu2-{suffix}", "us1": f"probe-us1-{suffix}"}
    cleanup = []
    for key, region, pci in (("eu1", "eu-west-1", "3"), ("eu2", "europe-west4", "1"), ("us1", "us-east-1", "3")):
        await kube_json(api, "POST", KARMADA_CLUSTERS.collection_path(None), body={
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": names[key], "labels": {"pci-compliance-level": pci}},
            "spec": {"region": region, "provider": "aws", "syncMode": "Push"}})
        cleanup.append(KARMADA_CLUSTERS.object_path(names[key], None))
    template = await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{app_ns}/deployments", body={
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "probe", "annotations": {EU: "true", PCI: "2"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "probe"}},
                 "template": {"metadata": {"labels": {"app": "probe"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    template.setdefault("apiVersion", "apps/v1")
    template.setdefault("kind", "Deployment")
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
              "metadata": {"name": "probe", "namespace": app_ns},
              "spec": {"placement": {"clusterAffinity": {"clusterNames": sorted(names.values())}}}}
    binding = desired_binding(template, policy)
    shipped = shipped_policy_configmaps()

    def check_full(obj: dict[str, Any]) -> None:
        exclude = obj["spec"]["placement"]["clusterAffinity"].get("exclude") or []
        assert names["eu2"] in exclude and names["us1"] in exclude and names["eu1"] not in exclude, exclude

    return Case(["--replicate", "apps/v1/deployments", "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters"],
                {"fedplace-lib": shipped["fedplace-lib"], "fedplace-federation": shipped["fedplace-federation"],
                 "fedplace-rules-eu-pci": shipped["fedplace-rules-eu-pci"], "fedplace-karmada": shipped["fedplace-karmada"],
                 "fedplace-settings": {"settings.rego": KARMADA_SETTINGS}},
                admission_review(binding, "UPDATE", "work.karmada.io", "v1alpha2", "ResourceBinding",
                                 "resourcebindings"), check_full, cleanup)


CASES: dict[str, Callable[[client.ApiClient, str, str], Awaitable[Case]]] = {
    "replicaset": replicaset_case, "resourcebinding": binding_case}


class Stack:
    """opa-kube-sync and the webhook (plain HTTP), in process, both asking ``opa_url``."""

    def __init__(self, opa_url: str, kubeconfig: str, api: client.ApiClient, policy_ns: str, app_ns: str,
                 flags: list[str]) -> None:
        self.args = ["--opa-url", opa_url + "/v1", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0",
                     "--opa-check-interval", "0.2", "--policy-namespace", policy_ns,
                     "--replicate-ignore-namespaces", policy_ns, *flags]
        self.config = make_config(opa_url, None, policy_ns, deadline=1.0, opa={"timeout": 0.5})
        self.api = api
        self.sync: SyncApp | None = None
        self.hook: Webhook | None = None
        self.url = ""

    async def start(self) -> None:
        self.sync = SyncApp(parse_args(self.args))
        self.hook = Webhook(self.config, api=self.api)
        await self.sync.start()
        await self.hook.start()
        self.url = self.hook.url

    async def stop(self) -> None:
        if self.hook is not None:
            await self.hook.stop()
        if self.sync is not None:
            await self.sync.stop()
        self.hook = self.sync = None


@pytest.fixture
async def apps_namespaces(kube_namespaces: ScratchNamespaces) -> AsyncIterator[tuple[str, str]]:
    yield await kube_namespaces.create("probe-policy"), await kube_namespaces.create("probe-apps")


@pytest.mark.parametrize("kind", sorted(CASES))
async def test_no_write_is_admitted_from_a_partial_policy_set_across_opa_restarts(
        kind: str, opa_process: Any, kube: Any, kube_api: client.ApiClient,
        apps_namespaces: tuple[str, str], tmp_path: Path) -> None:
    policy_ns, app_ns = apps_namespaces
    suffix = uuid.uuid4().hex[:6]
    case = await CASES[kind](kube_api, suffix, app_ns)
    stack = Stack(opa_process.url, str(kube.kubeconfig), kube_api, policy_ns, app_ns, case.sync_flags)
    async with AsyncExitStack() as cleanup:
        for path in case.cleanup:
            cleanup.push_async_callback(_delete, kube_api, path)
        session = await cleanup.enter_async_context(aiohttp.ClientSession())
        for name, data in case.configmaps.items():
            await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps",
                            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
        await stack.start()
        cleanup.push_async_callback(stack.stop)
        probe = Probe(session, case.request, lambda: stack.url)

        # The full decision, once everything is loaded.
        deadline = time.monotonic() + RECOVERY_SECONDS
        while not (stack.sync is not None and stack.sync.is_ready()):
            assert time.monotonic() < deadline, "the sync never became ready"
            await asyncio.sleep(0.05)
        full = await probe.once()
        assert full.allowed and full.patch, full
        case.check_full(patched(case.request["request"]["object"], full.patch))

        task = asyncio.create_task(probe.run())
        cleanup.callback(task.cancel)
        await asyncio.sleep(1.0)
        for i in range(1, OPA_RESTARTS + 1):  # OPA alone: the sync and the webhook keep running
            probe.phase = f"opa-restart-{i}"
            since = time.monotonic()
            opa_process.process.kill()
            await asyncio.sleep(0.3)
            await asyncio.to_thread(opa_process.process.start)
            await probe.full_decision_since(since, full, f"OPA restart {i}")
            await asyncio.sleep(1.0)

        probe.phase = "start-all"  # everything at once
        since = time.monotonic()
        await stack.stop()
        opa_process.process.kill()
        await asyncio.to_thread(opa_process.process.start)
        await stack.start()
        await probe.full_decision_since(since, full, "the start of everything")
        await asyncio.sleep(1.0)
        task.cancel()

    answers = probe.answers
    partial = [a for a in answers if a.allowed and a.patch != full.patch]
    loading = [a for a in answers if a.allowed is False and "policies are loading" in a.message]
    by_phase = {p: sum(1 for a in answers if a.phase == p) for p in dict.fromkeys(a.phase for a in answers)}
    print(f"{kind}: {len(answers)} probes {by_phase}; full {sum(1 for a in answers if a.allowed)}, "
          f"loading {len(loading)}, other denials "
          f"{sum(1 for a in answers if a.allowed is False) - len(loading)}, no answer "
          f"{sum(1 for a in answers if a.allowed is None)}")
    assert not partial, ("admitted with a decision from a partial state: "
                         + "; ".join(f"{a.phase} +{a.t - answers[0].t:.2f}s patch={a.patch}" for a in partial[:5]))
    assert loading, "no probe met the loading window: the test did not exercise what it is for"


async def _delete(api: client.ApiClient, path: str) -> None:
    try:
        await kube_json(api, "DELETE", path)
    except KubeApiError:
        pass
