"""The end-to-end demo: the whole system on the devstack, narrated.

``make demo`` runs this. It starts the policy engine and the API server (both
with bearer tokens; the API server over TLS), the admission webhook (TLS,
registered through the API server) and opa-kube-sync with remediation
enforced; loads the placement policy as the ConfigMaps deploy/ ships; creates
clusters and ReplicaSets through the API server; then shows

1. a ReplicaSet admitted with the policy's replica-set-preferences;
2. one denied with the policy's message;
3. a cluster's PCI level downgraded → the affected ReplicaSets remediated;
4. OPA restarted → its data and policies restored by the sync;
5. a Deployment and a Secret placed through the cluster selector
   (federation.alpha.kubernetes.io/cluster-selector naming the eligible
   clusters by their fedplace.io/cluster-name label), a contradicting
   developer selector denied, and the Deployment re-placed when a cluster's
   PCI level goes back up;
6. the LimitRange pack (devstack/demo_limitrange.py): switched on by its
   ConfigMap, a default injected, a violation explained, ``fedplace-limits``;
7. the SchedulingPolicy pack (devstack/demo_schedulingpolicy.py): switched on
   with its deploy component, a Deployment denied naming the component, the
   value and the policies considered, then a RoleBinding granting the team its
   policy and a pod template defaulted;
8. Karmada (devstack/demo_karmada.py), on a second control plane of its own
   (karmada-apiserver, its policy engine, opa-kube-sync and webhook) with the
   detector and scheduler stand-ins: a ResourceBinding narrowed and scheduled
   on the allowed clusters only, re-narrowed and moved when a cluster is
   downgraded, an unsatisfiable template and a PropagationPolicy naming only
   forbidden clusters denied, and the binding narrowed again after the
   detector rewrote it from an edited PropagationPolicy.

It prints a placement table before and after, and exits 0 only if every step
behaved as expected. Logs of every process are kept in ``.devstack/demo/``.

Both API servers serve TLS with a CA the demo makes in its folder, and the
kubeconfigs they write carry that CA and their bearer token, so kubectl works
with them. The policies are loaded under the ConfigMap names deploy/ ships
(``fedplace-lib``, ``fedplace-federation``, ...). ``--keep-running``
leaves every server running and prints their URLs, credentials and example
command lines (devstack/demo_explore.py). SIGTERM and SIGINT stop every server
the demo started, whenever they come; the exit status is then 128 + the signal.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import secrets
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

from kubernetes_asyncio import client, config

from devstack.demo_explore import control_plane, explore_lines
from devstack.demo_karmada import karmada_steps
from devstack.demo_limitrange import limitrange_steps
from devstack.demo_schedulingpolicy import CRDS as SCHEDULINGPOLICY_CRDS
from devstack.demo_schedulingpolicy import SYNC_FLAGS as SCHEDULINGPOLICY_SYNC_FLAGS
from devstack.demo_schedulingpolicy import schedulingpolicy_steps
from devstack.demo_support import ADMISSION_PATIENCE, opa_get, policy_ok
from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH, cluster
from devstack.launch import ServerProcess, stop_all
from devstack.scratch import create_namespace
from devstack.shipped import shipped_policy_configmaps
from devstack.tls import TlsFiles, write_ca_and_cert
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.common.opa_client import OpaError

ROOT = Path(__file__).resolve().parents[1]
POLICY_NS = "kube-federation-scheduling-policy"
PREFS = "federation.kubernetes.io/replica-set-preferences"
EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
RS_PATH = "/apis/apps/v1/namespaces/{ns}/replicasets"
DEPLOY_PATH = "/apis/apps/v1/namespaces/{ns}/deployments"
SECRET_PATH = "/api/v1/namespaces/{ns}/secrets"
SELECTOR = "federation.alpha.kubernetes.io/cluster-selector"
SELECTOR_SOURCE = "fedplace.io/cluster-selector-source"
NAME_LABEL = "fedplace.io/cluster-name"

# What the API server sends to the webhook (as deploy/ does): every pod-bearing
# kind, and the kinds placed through the cluster selector.
WEBHOOK_RULES = [
    {"apiGroups": group, "apiVersions": ["v1"], "resources": resources, "operations": ["CREATE", "UPDATE"],
     "scope": "Namespaced"}
    for group, resources in ((["apps"], ["replicasets", "deployments", "statefulsets", "daemonsets"]),
                             ([""], ["pods", "configmaps", "secrets", "services"]), (["batch"], ["jobs", "cronjobs"]),
                             (["networking.k8s.io"], ["ingresses"]))
]

# The kinds placed through the cluster selector that the devstack API server
# serves (it has no Ingresses): replicated and remediated like ReplicaSets.
SELECTOR_RESOURCES = ["apps/v1/deployments", "apps/v1/statefulsets", "apps/v1/daemonsets", "batch/v1/jobs",
                      "v1/configmaps", "v1/secrets", "v1/services"]

CLUSTERS = [
    ("gce-europe-west1", "europe-west1", "2"),
    ("aws-eu-central-1", "eu-central-1", "3"),
    ("azure-westeurope", "westeurope", "1"),
    ("gce-us-central1", "us-central1", "3"),
]


# The policy ConfigMaps of step 3, as deploy/ ships them; the packs' steps add theirs.
PLACEMENT_CONFIGMAPS = ("fedplace-lib", "fedplace-federation", "fedplace-rules-eu-pci")


class DemoFailed(Exception):
    pass


class Stopped(Exception):
    """The demo was stopped by ``signum`` (SIGTERM or SIGINT); every server has been stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def say(text: str) -> None:
    print(text, flush=True)


def step(n: int, text: str) -> None:
    say(f"\n== {n}. {text}")


def check(ok: bool, what: str) -> None:
    say(f"   {'ok ' if ok else 'FAIL'} {what}")
    if not ok:
        raise DemoFailed(what)


async def eventually(fn: Callable[[], Awaitable[bool]], timeout: float, what: str) -> float:
    """Poll ``fn`` until true; returns the seconds it took. ``timeout`` bounds the wait on a
    busy machine (30 s, 60 s where policies compile); on a quiet one each wait is seconds."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if await fn():
                return time.monotonic() - start
        except KubeApiError:
            pass
        await asyncio.sleep(0.1)
    raise DemoFailed(f"timed out after {timeout:.0f}s waiting for: {what}")


def rs_body(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "annotations": annotations, "labels": {"app": name}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}},
    }


def placement(rs: dict[str, Any]) -> str:
    raw = ((rs.get("metadata") or {}).get("annotations") or {}).get(PREFS)
    if not raw:
        return "(any cluster)"
    return ", ".join(sorted(json.loads(raw).get("clusters", {})))


async def print_table(api: client.ApiClient, title: str) -> dict[str, str]:
    doc = await kube_json(api, "GET", RS_PATH.format(ns="shop"))
    rows = {i["metadata"]["name"]: placement(i) for i in doc["items"]}
    say(f"\n   {title}")
    say(f"   {'ReplicaSet':<18} clusters")
    for name, where in sorted(rows.items()):
        say(f"   {name:<18} {where}")
    return rows


def policy_configmaps() -> dict[str, dict[str, str]]:
    """Step 3's policy ConfigMaps ({name: data}) exactly as deploy/ ships them: the shared
    library (remediation, where packs find a pod spec), the federation placement policy and
    the rule set on by default (the EU/PCI example)."""
    shipped = shipped_policy_configmaps()
    return {name: shipped[name] for name in PLACEMENT_CONFIGMAPS}


async def run_demo(work: Path, keep_running: bool, procs: list[ServerProcess]) -> None:
    """The demo's steps; every process it starts is appended to ``procs`` (stopped here on the way
    out). SIGTERM or SIGINT cancels it: :class:`Stopped` is then raised once all are stopped."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    signals: list[int] = []

    def on_signal(signum: int) -> None:
        if not signals:  # the first one: a second must not interrupt the stopping
            say(f"\n{signal.Signals(signum).name}: stopping every server the demo started")
            task.cancel()
        signals.append(signum)

    # Left in place until the loop closes: a signal while it waits for a thread still starting
    # a server is then ignored, and main() stops that server too.
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await _run_demo(work, keep_running, procs)
    except asyncio.CancelledError:
        if not signals:
            raise
        raise Stopped(signals[0]) from None


async def _run_demo(work: Path, keep_running: bool, procs: list[ServerProcess]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    opa_token, kube_token, notify_token = (secrets.token_hex(16) for _ in range(3))
    (work / "opa.token").write_text(opa_token)
    (work / "kube.token").write_text(kube_token)
    (work / "notify.token").write_text(notify_token)
    kubeconfig = work / "kubeconfig"
    # One CA and serving certificate (never committed: .devstack/ is ignored) for the API
    # servers and the webhooks; the kubeconfigs carry the CA.
    tls = write_ca_and_cert(work, ["127.0.0.1", "localhost"])

    def started(p: ServerProcess) -> ServerProcess:
        procs.append(p)
        return p.start()

    try:
        step(1, "Start the devstack: policy engine and Kubernetes API server (TLS)")
        engine = started(ServerProcess("engine", ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}",
                                                  "--token-file", str(work / "opa.token")],
                                       "/health", logs, token=opa_token))
        kube = started(ServerProcess("kube", ["-m", "devstack.kube", "--listen", "127.0.0.1:{port}",
                                              "--token-file", str(work / "kube.token"),
                                              "--tls-cert-file", str(tls.cert), "--tls-private-key-file", str(tls.key),
                                              "--tls-ca-file", str(tls.ca), "--write-kubeconfig", str(kubeconfig)],
                                     "/version", logs, scheme="https", token=kube_token, cafile=str(tls.ca)))
        say(f"   engine {engine.url}   API server {kube.url}")
        api = await config.new_client_from_config(config_file=str(kubeconfig))
        try:
            await demo_steps(api, work, logs, engine, kube, kubeconfig, tls, started, notify_token)
        finally:
            await api.close()
        if keep_running:
            planes = [control_plane("The federation control plane (steps 1-14)", procs, work, tls.ca,
                                    ("replicaset/payments", "shop")),
                      control_plane("The Karmada control plane (steps 15-19)", procs, work / "karmada", tls.ca,
                                    ("resourcebinding/payments-deployment", "shop"), prefix="karmada-")]
            for line in explore_lines([p for p in planes if p is not None], Path.cwd()):
                say(line)
            while True:
                await asyncio.sleep(3600)
    finally:
        stop_all(procs)


async def demo_steps(api: client.ApiClient, work: Path, logs: Path, engine: ServerProcess,
                     kube: ServerProcess, kubeconfig: Path, tls: TlsFiles,
                     started: Callable[[ServerProcess], ServerProcess], notify_token: str) -> None:
    for ns in ("opa", POLICY_NS, "shop"):
        await create_namespace(api, ns)  # and its default ServiceAccount, as the controller would
    await kube_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CLUSTER_CRD)
    for crd in SCHEDULINGPOLICY_CRDS:  # before the sync, which replicates SchedulingPolicies
        await kube_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    await eventually(lambda: _served(api), 30, "the Cluster CRD to be served")
    for name, region, pci in CLUSTERS:
        body = cluster(name, region, pci)
        body["metadata"]["labels"][NAME_LABEL] = name  # how the cluster selector names a cluster
        await kube_json(api, "POST", CLUSTERS_PATH, body=body)
    say("   clusters: " + ", ".join(f"{n} ({r}, PCI {p})" for n, r, p in CLUSTERS)
        + f"; each labelled {NAME_LABEL}=<its name>")

    step(2, "Start opa-kube-sync (remediation enforced) and the admission webhook (TLS)")
    sync = started(ServerProcess("opa-kube-sync", [
        "-m", "fedplace.sync", "--opa-url", engine.url + "/v1", "--opa-token-file", str(work / "opa.token"),
        "--kubeconfig", str(kubeconfig), "--listen", "127.0.0.1:{port}",
        "--replicate", "apps/v1/replicasets", "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters",
        *[a for r in SELECTOR_RESOURCES for a in ("--replicate", r, "--remediate-resource", r)],
        "--remediate-resource", "apps/v1/replicasets",
        "--replicate-ignore-namespaces", f"kube-system,opa,{POLICY_NS}",
        "--replicate", "v1/limitranges",  # the LimitRange pack (devstack/demo_limitrange.py)
        *SCHEDULINGPOLICY_SYNC_FLAGS,  # the SchedulingPolicy pack (devstack/demo_schedulingpolicy.py)
        "--policy-namespace", POLICY_NS, "--opa-check-interval", "0.5",
        "--remediate", "enforce", "--remediate-debounce", "0.2", "--remediate-interval", "30",
        # A handful of objects: one label change moves more than half of them (step 8),
        # which the default guard (0.5) would refuse.
        "--remediate-max-fraction", "1",
        "--leader-election-namespace", "opa", "--notifications-token-file", str(work / "notify.token"),
        "--placement-page"],
        "/readyz", logs))
    admission = started(ServerProcess("admission", [
        "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}",
        "--tls-cert-file", str(tls.cert), "--tls-private-key-file", str(tls.key),
        "--kubeconfig", str(kubeconfig), "--opa-url", engine.url,
        "--opa-token-file", str(work / "opa.token"), "--policy-namespace", POLICY_NS,
        *ADMISSION_PATIENCE],
        "/readyz", logs, scheme="https", cafile=str(tls.ca)))
    say(f"   opa-kube-sync {sync.url}   admission {admission.url}")
    await kube_json(api, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", body={
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "fedplace"},
        "webhooks": [{
            "name": "placement.fedplace.io",
            "clientConfig": {"url": admission.url + "/mutate", "caBundle": base64.b64encode(tls.ca.read_bytes()).decode()},
            "rules": WEBHOOK_RULES,
            "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                        "values": ["kube-system", "opa", POLICY_NS]}]},
        }]})
    say("   webhook registered: placement.fedplace.io → " + admission.url + "/mutate")

    step(3, "Load the placement policy: the ConfigMaps " + ", ".join(PLACEMENT_CONFIGMAPS) + ", as deploy/ ships them")
    t0 = time.monotonic()
    for name, data in policy_configmaps().items():  # a module calling one not loaded yet is retried by the sync
        await kube_json(api, "POST", f"/api/v1/namespaces/{POLICY_NS}/configmaps", body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": POLICY_NS},
            "data": data})

    async def loaded() -> bool:
        return all([await policy_ok(api, POLICY_NS, name) for name in PLACEMENT_CONFIGMAPS])

    await eventually(loaded, 60, "the policy status annotations to say ok")
    say(f"   fedplace.io/policy-status = ok on both after {time.monotonic() - t0:.2f}s")

    step(4, "Create ReplicaSets: each is admitted with the policy's preferences")
    wanted = {
        "web-eu": {EU: "true"},
        "payments": {EU: "true", PCI: "2"},
        "ledger": {PCI: "3"},
        "blog": {},
    }
    for name, ann in wanted.items():
        await kube_json(api, "POST", RS_PATH.format(ns="shop"), body=rs_body(name, ann))
    before = await print_table(api, "placement after admission:")
    check(before["payments"] == "aws-eu-central-1, gce-europe-west1", "payments (EU, PCI>=2) on the two EU clusters with PCI>=2")
    check(before["web-eu"] == "aws-eu-central-1, azure-westeurope, gce-europe-west1", "web-eu on every EU cluster")
    check(before["ledger"] == "aws-eu-central-1, gce-us-central1", "ledger (PCI>=3) on the PCI 3 clusters")
    check(before["blog"] == "(any cluster)", "blog, unconstrained, left alone")

    step(5, "A ReplicaSet the policy forbids is denied with the policy's message")
    try:
        await kube_json(api, "POST", RS_PATH.format(ns="shop"), body=rs_body("vault", {EU: "true", PCI: "5"}))
        check(False, "vault (EU, PCI>=5) should have been denied")
    except KubeApiError as exc:
        say(f"   {exc.status}: {exc.message}")
        check(exc.status == 403 and "no cluster satisfies the placement policy" in exc.message,
              "denied (403) with the policy's message")
    try:
        prefs = json.dumps({"clusters": {"gce-us-central1": {"weight": 1}}})
        await kube_json(api, "POST", RS_PATH.format(ns="shop"), body=rs_body("gdpr", {EU: "true", PREFS: prefs}))
        check(False, "gdpr asking for a US cluster should have been denied")
    except KubeApiError as exc:
        say(f"   {exc.status}: {exc.message}")
        check(exc.status == 403 and "forbids: gce-us-central1" in exc.message,
              "developer preferences outside the policy denied")

    step(6, "Downgrade aws-eu-central-1 from PCI 3 to PCI 1: the remediator re-places what it affects")
    t0 = time.monotonic()
    await kube_json(api, "PATCH", CLUSTERS_PATH + "/aws-eu-central-1",
                    body={"metadata": {"labels": {"pci-compliance-level": "1"}}},
                    content_type="application/merge-patch+json")

    async def remediated() -> bool:
        doc = await kube_json(api, "GET", RS_PATH.format(ns="shop"))
        rows = {i["metadata"]["name"]: placement(i) for i in doc["items"]}
        return rows["payments"] == "gce-europe-west1" and rows["ledger"] == "gce-us-central1"

    await eventually(remediated, 30, "payments and ledger to be re-placed")
    say(f"   remediated {time.monotonic() - t0:.2f}s after the label change")
    after = await print_table(api, "placement after remediation:")
    check(after["payments"] == "gce-europe-west1", "payments now only on gce-europe-west1")
    check(after["ledger"] == "gce-us-central1", "ledger now only on gce-us-central1")
    check(after["web-eu"] == before["web-eu"] and after["blog"] == before["blog"], "the others untouched")

    step(7, "Restart OPA (all its in-memory state is lost): the sync restores it")
    modules = len((await opa_get(engine, "/v1/policies")).get("result") or [])
    engine.kill()
    engine.start()
    t0 = time.monotonic()

    async def restored() -> bool:
        """Every module back (the sync loads them one by one), the data, and the sync's record of a
        complete load (until it is written the webhook fails closed: docs/admission.md)."""
        opa = await opa_get(engine, "/v1/data/kubernetes/clusters")
        pol = await opa_get(engine, "/v1/policies")
        record = await opa_get(engine, "/v1/data/fedplace_sync/loaded")
        return isinstance(opa.get("result"), dict) and len(opa["result"]) == len(CLUSTERS) \
            and len(pol.get("result") or []) >= modules and bool(record.get("result"))

    await eventually(restored, 60, "OPA's data and policies to be restored")
    say(f"   data and policies restored {time.monotonic() - t0:.2f}s after OPA came back")
    await kube_json(api, "POST", RS_PATH.format(ns="shop"), body=rs_body("checkout", {EU: "true", PCI: "2"}))
    final = await print_table(api, "placement after the restart:")
    check(final["checkout"] == "gce-europe-west1", "a new ReplicaSet is decided on the restored state")
    await selector_steps(api, engine, 8)
    await limitrange_steps(api, engine, 9, say=say, step=step, check=check, eventually=eventually)
    await schedulingpolicy_steps(api, 12, say=say, step=step, check=check, eventually=eventually)
    await karmada_steps(work, logs, started, 15, say=say, step=step, check=check, eventually=eventually)
    say("\nAll steps behaved as expected.")


def deployment_body(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations, "labels": {"app": name}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}},
    }


def selected(obj: dict[str, Any]) -> str:
    """The clusters a cluster selector names through the name label."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(SELECTOR)
    if not raw:
        return "(any cluster)"
    return ", ".join(v for r in json.loads(raw) if r.get("key") == NAME_LABEL for v in r.get("values") or [])


async def selector_steps(api: client.ApiClient, engine: ServerProcess, n: int) -> None:
    """Step ``n``: other kinds placed through the cluster selector, and re-placed."""
    step(n, "A Deployment and a Secret placed through the cluster selector (every kind but ReplicaSets)")
    await kube_json(api, "POST", DEPLOY_PATH.format(ns="shop"), body=deployment_body("storefront", {EU: "true", PCI: "2"}))
    await kube_json(api, "POST", SECRET_PATH.format(ns="shop"), body={
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "card-keys", "annotations": {EU: "true", PCI: "2"}},
        "stringData": {"key": "s3cr3t"}})
    storefront = await kube_json(api, "GET", DEPLOY_PATH.format(ns="shop") + "/storefront")
    keys = await kube_json(api, "GET", SECRET_PATH.format(ns="shop") + "/card-keys")
    for obj in (storefront, keys):
        ann = obj["metadata"]["annotations"]
        say(f"   {obj['kind']} {obj['metadata']['name']}: {SELECTOR} = {ann.get(SELECTOR)}"
            f" ({SELECTOR_SOURCE}: {ann.get(SELECTOR_SOURCE)})")
    check(selected(storefront) == "gce-europe-west1", "storefront (EU, PCI>=2) selects gce-europe-west1 by its name label")
    check(selected(keys) == "gce-europe-west1", "the Secret card-keys likewise")

    async def replicated_without_data() -> bool:
        doc = await opa_get(engine, "/v1/data/kubernetes/secrets/shop/card-keys")
        return isinstance(doc.get("result"), dict)

    await eventually(replicated_without_data, 30, "the Secret to be replicated")
    doc = (await opa_get(engine, "/v1/data/kubernetes/secrets/shop/card-keys"))["result"]
    check("data" not in doc and "stringData" not in doc, "OPA holds the Secret's metadata only, never its data")
    mine = json.dumps([{"key": NAME_LABEL, "operator": "In", "values": ["gce-us-central1"]}])
    try:
        await kube_json(api, "POST", DEPLOY_PATH.format(ns="shop"),
                        body=deployment_body("gdpr-api", {EU: "true", SELECTOR: mine}))
        check(False, "gdpr-api selecting a US cluster should have been denied")
    except KubeApiError as exc:
        say(f"   {exc.status}: {exc.message}")
        check(exc.status == 403 and "admits none of the clusters the placement policy allows" in exc.message,
              "a developer selector contradicting the policy denied")
    t0 = time.monotonic()
    await kube_json(api, "PATCH", CLUSTERS_PATH + "/aws-eu-central-1",
                    body={"metadata": {"labels": {"pci-compliance-level": "3"}}},
                    content_type="application/merge-patch+json")

    async def replaced() -> bool:
        obj = await kube_json(api, "GET", DEPLOY_PATH.format(ns="shop") + "/storefront")
        return selected(obj) == "aws-eu-central-1, gce-europe-west1"

    await eventually(replaced, 30, "storefront to be re-placed")
    say(f"   aws-eu-central-1 back to PCI 3: storefront re-placed {time.monotonic() - t0:.2f}s later")
    storefront = await kube_json(api, "GET", DEPLOY_PATH.format(ns="shop") + "/storefront")
    check(selected(storefront) == "aws-eu-central-1, gce-europe-west1", "storefront now selects both clusters")


async def _served(api: client.ApiClient) -> bool:
    await kube_json(api, "GET", CLUSTERS_PATH)
    return True


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """SIGTERM and SIGINT ignored meanwhile (the last servers being stopped)."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run fedplace end to end on the devstack.")
    parser.add_argument("--workdir", default=str(ROOT / ".devstack" / "demo"),
                        help="where logs, certificates, tokens and the kubeconfig go")
    parser.add_argument("--keep-running", action="store_true", help="leave everything running after the demo")
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    start = time.monotonic()
    procs: list[ServerProcess] = []
    try:
        asyncio.run(run_demo(work, args.keep_running, procs))
    except (DemoFailed, KubeApiError, OpaError) as exc:  # a step's check, or an answer no step expected
        print(f"\nDEMO FAILED: {exc}\nlogs: {work / 'logs'}", file=sys.stderr)
        return 1
    except Stopped as exc:
        print(f"stopped by {exc}; every server the demo started is stopped", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:  # before the demo's own handlers were in place, or after
        return 128 + signal.SIGINT
    finally:
        # A server a thread was starting when the demo stopped is started by now (the event
        # loop waited for its threads): stop it too.
        with _signals_ignored():
            stop_all(procs)
    print(f"(took {time.monotonic() - start:.1f}s; logs in {work / 'logs'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
