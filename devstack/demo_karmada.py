"""The demo's Karmada steps: placement decided by OPA for Karmada workloads.

Karmada's API server is an API server of its own, and its Cluster objects share the plural
``clusters`` (so OPA's ``data.kubernetes.clusters``) with the Federation v1 Cluster CRD the rest of
the demo uses. So :func:`karmada_steps` starts a second, small control plane beside the first,
through the demo's ``started`` (stopped with the rest at the end): a devstack API server playing
karmada-apiserver, its own policy engine, opa-kube-sync (replicating Karmada Clusters,
Deployments — the resource templates — and ResourceBindings, remediating the bindings) and the
TLS webhook registered on it for Deployments, ResourceBindings and PropagationPolicies, with the
demo's CA and serving certificate. It installs the test CRDs shaped like Karmada's
(devstack/karmada/crds.yaml), creates four Karmada Clusters, loads the policy ConfigMaps deploy/
ships (``fedplace-lib``, ``fedplace-federation``, ``fedplace-karmada``, and the EU/PCI rule set
``fedplace-rules-eu-pci``) plus the settings ConfigMap
of deploy/components/karmada (``control_plane := "karmada"``), and runs the devstack stand-ins for Karmada's detector and
scheduler (devstack/karmada/standins.py) as background tasks of the demo process (the detector
passing when a template or a PropagationPolicy changed, as Karmada's reacts to their events;
the scheduler every 0.2 s). Then:

1. a Deployment with EU + PCI requirements and its PropagationPolicy: the detector's
   ResourceBinding is narrowed by the webhook (the forbidden clusters join the exclude list, the
   developer's exclusion kept) and the scheduler stand-in picks only allowed clusters;
2. a cluster's PCI level lowered: the remediator re-narrows the binding and the scheduler moves
   the replicas;
3. a template no cluster satisfies denied, and a PropagationPolicy naming only forbidden
   clusters denied, each with the policy's message;
4. the PropagationPolicy edited: the detector overwrites the binding's placement and the webhook
   narrows it again; then nothing writes the binding any more.

The demo passes in its helpers (``say``, ``step``, ``check``, ``eventually``) so that output and
failures look and count the same as its own steps.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import yaml
from kubernetes_asyncio import client, config

from devstack.demo_support import ADMISSION_PATIENCE, opa_get, policy_ok
from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES, RESOURCE_BINDINGS, install_crds
from devstack.karmada.standins import DEPLOYMENTS, Detector, Scheduler
from devstack.launch import ServerProcess
from devstack.scratch import create_namespace
from devstack.shipped import shipped_policy_configmaps
from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["karmada_steps"]

ROOT = Path(__file__).resolve().parents[1]
POLICY_NS = "kube-federation-scheduling-policy"
NS = "shop"
EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
EXCLUDED = "fedplace.io/excluded-clusters"
WHY = "fedplace.io/placement"
ADDED = "fedplace.io/exclusions-added"
SETTINGS_FILE = ROOT / "deploy" / "components" / "karmada" / "settings.yaml"
DEPLOYMENTS_PATH = f"/apis/apps/v1/namespaces/{NS}/deployments"
STANDIN_INTERVAL = 0.2  # seconds between the scheduler's passes, and the detector's looks for changes
STANDINS_LOG = logging.getLogger("devstack.karmada.standins")

# name, spec.region, pci-compliance-level label
KARMADA_CLUSTERS = [
    ("member-frankfurt", "eu-central-1", "3"),
    ("member-dublin", "eu-west-1", "2"),
    ("member-amsterdam", "europe-west4", "1"),
    ("member-virginia", "us-east-1", "3"),
]

# What karmada-apiserver sends to the webhook: the templates, the bindings, the policies.
WEBHOOK_RULES = [
    {"apiGroups": [group], "apiVersions": [version], "resources": [plural], "operations": ["CREATE", "UPDATE"],
     "scope": "Namespaced"}
    for group, version, plural in (("apps", "v1", "deployments"), ("work.karmada.io", "v1alpha2", "resourcebindings"),
                                   ("policy.karmada.io", "v1alpha1", "propagationpolicies"))
]


def policy_configmaps() -> dict[str, dict[str, str]]:
    """The packs deploy/base ships and the settings ConfigMap of deploy/components/karmada
    (``control_plane := "karmada"``)."""
    shipped = shipped_policy_configmaps()
    settings = yaml.safe_load(SETTINGS_FILE.read_text())
    return {"fedplace-lib": shipped["fedplace-lib"], "fedplace-federation": shipped["fedplace-federation"],
            "fedplace-karmada": shipped["fedplace-karmada"], "fedplace-rules-eu-pci": shipped["fedplace-rules-eu-pci"],
            settings["metadata"]["name"]: settings["data"]}


def karmada_cluster(name: str, region: str, pci: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": pci}},
            "spec": {"region": region, "provider": name.split("-")[0], "syncMode": "Push"}}


def deployment(name: str, annotations: dict[str, str], replicas: int = 4) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "annotations": annotations, "labels": {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def propagation_policy(name: str, template: str, affinity: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": template}],
                     "placement": {"clusterAffinity": affinity,
                                   "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                         "replicaDivisionPreference": "Weighted"}}}}


def exclude_of(binding: dict[str, Any]) -> list[str]:
    return list((((binding.get("spec") or {}).get("placement") or {}).get("clusterAffinity") or {}).get("exclude") or [])


def scheduled(binding: dict[str, Any]) -> str:
    """spec.clusters, as ``name (replicas), …``."""
    targets = (binding.get("spec") or {}).get("clusters")
    if targets is None:
        return "(not scheduled yet)"
    return ", ".join(f"{t['name']} ({t.get('replicas', 0)})" for t in targets) or "(no cluster)"


def show_binding(say: Callable[[str], None], binding: dict[str, Any]) -> None:
    meta = binding["metadata"]
    ann = meta.get("annotations") or {}
    say(f"   ResourceBinding {meta['namespace']}/{meta['name']}:")
    say(f"     spec.placement.clusterAffinity.exclude = {json.dumps(exclude_of(binding))}")
    say(f"     {EXCLUDED} = {ann.get(EXCLUDED)}")
    say(f"     {ADDED} = {ann.get(ADDED)}")
    say(f"     {WHY} = {ann.get(WHY)}")
    say(f"     spec.clusters = {scheduled(binding)}")


def _log_to(path: Path) -> logging.Handler:
    """The stand-ins' log lines (a refused write, a failed pass) into ``path``, not the demo's output."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    STANDINS_LOG.addHandler(handler)
    STANDINS_LOG.setLevel(logging.INFO)
    STANDINS_LOG.propagate = False
    return handler


async def _detect_on_change(api: client.ApiClient, detector: Detector, interval: float) -> None:
    """The detector stand-in run as Karmada's detector is: a pass when a template or a policy
    changed (it reacts to their events), and again after a pass something refused (a 409).

    Not :meth:`Detector.run`, a pass every ``interval`` whatever changed: each of its passes finds
    the binding's placement (narrowed by the webhook) different from the policy's, PUTs the
    policy's back, and the webhook narrows it again — a write per pass, for ever.
    """
    seen: tuple[Any, ...] | None = None
    while True:
        try:
            listed = await asyncio.gather(*(kube_json(api, "GET", path) for path in (
                DEPLOYMENTS_PATH, PROPAGATION_POLICIES.collection_path(NS))))
            now = tuple(tuple(sorted((i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in doc["items"]))
                        for doc in listed)
            if now != seen:
                report = await detector.reconcile_once()
                seen = None if report.refused else now
        except Exception:  # noqa: BLE001 — a stand-in loop: log and go on
            STANDINS_LOG.exception("detector pass failed")
        await asyncio.sleep(interval)


async def _start_all(started: Callable[[ServerProcess], ServerProcess], *procs: ServerProcess) -> None:
    """Start ``procs`` side by side (each waits for its own readiness in a thread)."""
    results = await asyncio.gather(*(asyncio.to_thread(started, p) for p in procs), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r


async def karmada_steps(work: Path, logs: Path, started: Callable[[ServerProcess], ServerProcess], first: int, *,
                        say: Callable[[str], None], step: Callable[[int, str], None],
                        check: Callable[[bool, str], None], eventually: Callable[..., Awaitable[float]]) -> None:
    """Steps ``first`` … ``first + 4``. ``work`` holds the demo's CA and serving certificate
    (``ca.crt``, ``tls.crt``, ``tls.key``), reused by karmada-apiserver (TLS; its kubeconfig,
    ``work/karmada/kubeconfig``, carries the CA) and the second webhook; ``started`` starts a
    :class:`ServerProcess` and has the demo stop it at the end."""
    step(first, "Karmada: a second control plane (karmada-apiserver, its OPA, opa-kube-sync, webhook)")
    t_start = time.monotonic()
    kwork = work / "karmada"
    kwork.mkdir(parents=True, exist_ok=True)
    opa_token, kube_token = secrets.token_hex(16), secrets.token_hex(16)
    (kwork / "opa.token").write_text(opa_token)
    (kwork / "kube.token").write_text(kube_token)
    kubeconfig = kwork / "kubeconfig"
    engine = ServerProcess("karmada-engine", ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}",
                                              "--token-file", str(kwork / "opa.token")],
                           "/health", logs, token=opa_token)
    kube = ServerProcess("karmada-apiserver", ["-m", "devstack.kube", "--listen", "127.0.0.1:{port}",
                                               "--token-file", str(kwork / "kube.token"),
                                               "--tls-cert-file", str(work / "tls.crt"),
                                               "--tls-private-key-file", str(work / "tls.key"),
                                               "--tls-ca-file", str(work / "ca.crt"),
                                               "--write-kubeconfig", str(kubeconfig)],
                         "/version", logs, scheme="https", token=kube_token, cafile=str(work / "ca.crt"))
    await _start_all(started, engine, kube)
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    tasks: list[asyncio.Task[None]] = []
    log_handler: logging.Handler | None = None
    try:
        say(f"   karmada-apiserver {kube.url}   engine {engine.url}")
        for ns in ("opa", POLICY_NS, NS):
            await create_namespace(api, ns)
        admission = ServerProcess("karmada-admission", [
            "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}",
            "--tls-cert-file", str(work / "tls.crt"), "--tls-private-key-file", str(work / "tls.key"),
            "--kubeconfig", str(kubeconfig), "--opa-url", engine.url,
            "--opa-token-file", str(kwork / "opa.token"), "--policy-namespace", POLICY_NS,
            *ADMISSION_PATIENCE],
            "/readyz", logs, scheme="https", cafile=str(work / "ca.crt"))
        admission_up = asyncio.ensure_future(_start_all(started, admission))  # meanwhile: CRDs, Clusters, policies
        try:
            await install_crds(api)  # before the sync, which replicates Clusters and ResourceBindings
            for name, region, pci in KARMADA_CLUSTERS:
                await kube_json(api, "POST", CLUSTERS.collection_path(None), body=karmada_cluster(name, region, pci))
            say("   Karmada Clusters: " + ", ".join(f"{n} ({r}, PCI {p})" for n, r, p in KARMADA_CLUSTERS))
            configmaps = policy_configmaps()
            t0 = time.monotonic()
            for name, data in configmaps.items():  # a module calling one not loaded yet is retried by the sync
                await kube_json(api, "POST", f"/api/v1/namespaces/{POLICY_NS}/configmaps", body={
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
            sync = ServerProcess("karmada-opa-kube-sync", [
                "-m", "fedplace.sync", "--opa-url", engine.url + "/v1", "--opa-token-file", str(kwork / "opa.token"),
                "--kubeconfig", str(kubeconfig), "--listen", "127.0.0.1:{port}",
                "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters",
                "--replicate", "apps/v1/deployments", "--replicate", "work.karmada.io/v1alpha2/resourcebindings",
                "--remediate-resource", "work.karmada.io/v1alpha2/resourcebindings",
                "--replicate-ignore-namespaces", f"kube-system,opa,{POLICY_NS}",
                "--policy-namespace", POLICY_NS, "--opa-check-interval", "0.5",
                "--remediate", "enforce", "--remediate-debounce", "0.1", "--remediate-interval", "30",
                "--remediate-max-fraction", "1", "--leader-election-namespace", "opa"],
                "/readyz", logs)
            await _start_all(started, sync)
        finally:
            await admission_up
        await kube_json(api, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "fedplace"},
            "webhooks": [{
                "name": "placement.fedplace.io",
                "clientConfig": {"url": admission.url + "/mutate",
                                 "caBundle": base64.b64encode((work / "ca.crt").read_bytes()).decode()},
                "rules": WEBHOOK_RULES,
                "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1"],
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                            "values": ["kube-system", "opa", POLICY_NS]}]},
            }]})
        say(f"   opa-kube-sync {sync.url}   admission {admission.url} "
            "(registered for deployments, resourcebindings, propagationpolicies)")

        async def loaded() -> bool:
            return all([await policy_ok(api, POLICY_NS, name) for name in configmaps])

        await eventually(loaded, 60, "the policy ConfigMaps to load")
        say(f"   {', '.join(configmaps)} (control_plane := \"karmada\"): policy-status ok "
            f"{time.monotonic() - t0:.2f}s after they were created")
        log_handler = _log_to(logs / "karmada-standins.log")
        detector = Detector(api, [DEPLOYMENTS], namespaces=[NS])
        tasks.append(asyncio.create_task(_detect_on_change(api, detector, STANDIN_INTERVAL)))
        tasks.append(asyncio.create_task(Scheduler(api, namespaces=[NS], cluster_bindings=False).run(STANDIN_INTERVAL)))
        say("   detector and scheduler stand-ins running in this process (devstack only): the detector passes when "
            f"a template or a PropagationPolicy changed, the scheduler every {STANDIN_INTERVAL}s")
        say(f"   control plane up in {time.monotonic() - t_start:.2f}s")
        await _steps(api, engine, first, say=say, step=step, check=check, eventually=eventually)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if log_handler is not None:
            STANDINS_LOG.removeHandler(log_handler)
            log_handler.close()
        await api.close()


async def _steps(api: client.ApiClient, engine: ServerProcess, first: int, *, say: Callable[[str], None],
                 step: Callable[[int, str], None], check: Callable[[bool, str], None],
                 eventually: Callable[..., Awaitable[float]]) -> None:
    binding_path = RESOURCE_BINDINGS.object_path("payments-deployment", NS)
    policy_path = PROPAGATION_POLICIES.object_path("payments", NS)

    async def binding() -> dict[str, Any]:
        return await kube_json(api, "GET", binding_path)

    async def replicated(path: str) -> bool:
        return isinstance((await opa_get(engine, f"/v1/data/kubernetes/{path}")).get("result"), dict)

    step(first + 1, "Karmada: a workload placed — the binding narrowed, the scheduler picks allowed clusters")
    await kube_json(api, "POST", DEPLOYMENTS_PATH, body=deployment("payments", {EU: "true", PCI: "2"}))
    say("   Deployment shop/payments (EU jurisdiction, PCI >= 2, 4 replicas) admitted")
    await eventually(lambda: replicated(f"deployments/{NS}/payments"), 30, "the template to be replicated")
    t0 = time.monotonic()
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(NS), body=propagation_policy(
        "payments", "payments", {"exclude": ["member-virginia"]}))
    say('   PropagationPolicy shop/payments: clusterAffinity.exclude ["member-virginia"] (the developer\'s), '
        "replicas Divided")

    async def placed() -> bool:
        return scheduled(await binding()) != "(not scheduled yet)"

    await eventually(placed, 30, "the detector's binding to be scheduled")
    took = time.monotonic() - t0
    b = await binding()
    show_binding(say, b)
    say(f"   bound and scheduled {took:.2f}s after the PropagationPolicy")
    check(exclude_of(b) == ["member-virginia", "member-amsterdam"],
          "exclude: the developer's member-virginia kept (first), the policy added member-amsterdam (PCI 1)")
    check(json.loads(b["metadata"]["annotations"][EXCLUDED]) == ["member-amsterdam", "member-virginia"],
          f"{EXCLUDED} names both clusters the policy forbids")
    check(scheduled(b) == "member-dublin (2), member-frankfurt (2)",
          "the scheduler stand-in divides the replicas over the allowed clusters only")

    step(first + 2, "Karmada: member-dublin downgraded to PCI 1 — the binding re-narrowed, the workload moved")
    before = scheduled(b)
    t0 = time.monotonic()
    await kube_json(api, "PATCH", CLUSTERS.object_path("member-dublin", None),
                    body={"metadata": {"labels": {"pci-compliance-level": "1"}}},
                    content_type="application/merge-patch+json")

    async def renarrowed() -> bool:
        return "member-dublin" in exclude_of(await binding())

    narrowed_after = await eventually(renarrowed, 30, "the remediator to re-narrow the binding")

    async def moved() -> bool:
        return scheduled(await binding()) == "member-frankfurt (4)"

    await eventually(moved, 30, "the scheduler to move the replicas")
    moved_after = time.monotonic() - t0
    b = await binding()
    show_binding(say, b)
    say(f"   spec.clusters before: {before}")
    say(f"   spec.clusters after:  {scheduled(b)}")
    say(f"   binding re-narrowed {narrowed_after:.2f}s after the label change, workload moved after {moved_after:.2f}s")
    check(exclude_of(b) == ["member-virginia", "member-amsterdam", "member-dublin"],
          "member-dublin excluded too, the developer's exclusion still first")
    check(scheduled(b) == "member-frankfurt (4)", "all 4 replicas now on member-frankfurt")

    step(first + 3, "Karmada: an unsatisfiable template and a PropagationPolicy naming only forbidden clusters denied")
    try:
        await kube_json(api, "POST", DEPLOYMENTS_PATH, body=deployment("vault", {EU: "true", PCI: "4"}))
        check(False, "vault (EU, PCI>=4) should have been denied")
    except KubeApiError as exc:
        say(f"   {exc.status}: {exc.message}")
        check(exc.status == 403 and "no cluster satisfies the placement policy "
              "(EU jurisdiction required, PCI compliance level >= 4)" in exc.message,
              "the template denied (403) with the policy's message")
    try:
        await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(NS), body=propagation_policy(
            "payments-us", "payments", {"clusterNames": ["member-virginia", "member-amsterdam"]}))
        check(False, "payments-us should have been denied")
    except KubeApiError as exc:
        say(f"   {exc.status}: {exc.message}")
        check(exc.status == 403 and "only on clusters the placement policy forbids" in exc.message,
              "the PropagationPolicy denied (403) with the policy's message")

    step(first + 4, "Karmada: the PropagationPolicy edited — the detector rewrites the placement, the webhook "
                    "narrows it again")
    t0 = time.monotonic()
    await kube_json(api, "PATCH", policy_path, content_type="application/merge-patch+json",
                    body={"spec": {"placement": {"clusterAffinity": {"exclude": ["member-staging"]}}}})
    say('   PropagationPolicy shop/payments: exclude now ["member-staging"] (member-virginia no longer excluded '
        "by the developer)")

    async def rewritten() -> bool:
        return exclude_of(await binding())[:1] == ["member-staging"]

    await eventually(rewritten, 30, "the detector to rewrite the binding's placement")
    took = time.monotonic() - t0
    b = await binding()
    show_binding(say, b)
    say(f"   rewritten and narrowed {took:.2f}s after the edit")
    check(exclude_of(b) == ["member-staging", "member-amsterdam", "member-dublin", "member-virginia"],
          "the developer's new exclusion first, then every cluster the policy forbids (member-virginia now by "
          "the policy)")
    check(json.loads(b["metadata"]["annotations"][ADDED])["clusterAffinity"]["user"] == 1,
          f"{ADDED} records that the list fedplace wrote begins with the developer's one entry")
    check(scheduled(b) == "member-frankfurt (4)", "the workload stays on member-frankfurt")

    async def observed() -> bool:  # the scheduler's own record of the rewrite (annotation, status) written
        obj = await binding()
        return (obj.get("status") or {}).get("schedulerObservedGeneration") == obj["metadata"]["generation"]

    await eventually(observed, 10, "the scheduler to observe the rewritten binding")
    settled = (await binding())["metadata"]["resourceVersion"]
    await asyncio.sleep(4 * STANDIN_INTERVAL)
    check((await binding())["metadata"]["resourceVersion"] == settled,
          f"settled: nothing wrote the binding again in the next {4 * STANDIN_INTERVAL:.1f}s (no detector/webhook fight)")
