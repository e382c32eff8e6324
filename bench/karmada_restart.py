"""Benchmark a Karmada controller-manager restart with fedplace in place: every binding re-PUT at once.

Usage: .venv/bin/python bench/karmada_restart.py --opa-url URL --kubeconfig PATH [--karmada-state DIR]
       [--bindings 5000] [--affected 1000] [--quiet 5] [--sync-arg ARG]

Needs real Karmada beside the API server of ``--kubeconfig`` (Karmada's CRDs, karmada-webhook and
karmada-controller-manager with its resource detector and binding controller, karmada-scheduler),
started by a script that leaves the controller-manager's pid in ``<state>/controller-manager.pid``
and its health port in ``<state>/controller-manager.healthz-port`` (``--karmada-state``, default
``$KARMADA_REAL_STATE``). The benchmark restarts that controller-manager twice with its own command
line (read from ``/proc``), logging to ``<state>/logs/controller-manager.log`` (the old log kept
beside it) and writing the new pid back.

Setup: 4 Karmada Clusters of the benchmark (eu-a PCI 3, eu-c PCI 3, eu-b PCI 1, us-d PCI 2; Ready,
Deployments enabled, a resource summary; their execution namespaces); ``--bindings`` Deployment
templates in 10 namespaces, ``--affected`` of them requiring PCI ≥ 3 and the rest PCI ≥ 2 (so
fedplace narrows every binding: eu-b, and us-d too for the first); one
PropagationPolicy per namespace placing its Deployments on the 4 clusters (Duplicated). Karmada's
detector writes a ResourceBinding per template and the scheduler schedules it.

1. Baseline, same run: the controller-manager restarted without fedplace.
2. fedplace as deploy/ runs it for Karmada: opa-kube-sync replicating the clusters, deployments and
   resourcebindings and remediating the bindings (enforce), with the shipped policy ConfigMaps and
   the settings module; ``fedplace-admission`` (TLS) registered for resourcebindings CREATE and
   UPDATE in the benchmark's namespaces (failurePolicy Fail). Every binding narrowed (its first
   placement: the remediator's patches through the webhook, timed).
3. The controller-manager restarted: the detector re-applies every policy, and every binding whose
   placement fedplace narrowed differs from its policy's, so it is PUT again, through the webhook.

Figures: time from the restart until quiet (no binding write at the API server and no webhook
decision for ``--quiet`` seconds), against the baseline's; the webhook's decisions on bindings
during the burst (count, p50 / p99 / max of its ``elapsed_ms``, fail-closed decisions, throughput);
the API server's binding writes by code (every re-PUT answered: no 5xx, no webhook denial);
bindings whose ``spec.clusters`` changed (none should: a restart moves no workload); errors in the
controller-manager's log; RSS of each process.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import add_server_flags, pct, post_all, proc_mb, servers  # noqa: E402
from bench.karmada import EXCLUDED, MWC_PATH, REM_NAMESPACES, SETTINGS, log_records, policy_digest, rem_template, rss_of  # noqa: E402
from devstack.karmada import CLUSTERS as KARMADA_CLUSTERS  # noqa: E402
from devstack.karmada import PROPAGATION_POLICIES
from devstack.launch import ServerProcess, wait_http  # noqa: E402
from devstack.shipped import shipped_policy_configmaps  # noqa: E402
from devstack.tls import make_ca_and_cert  # noqa: E402
from fedplace.common.kube_client import KubeApiError, kube_json, kube_stream  # noqa: E402
from fedplace.sync import replicated_root  # noqa: E402
from fedplace.sync.sentinel import SENTINEL_PATH  # noqa: E402

RB_PATH = "/apis/work.karmada.io/v1alpha2/resourcebindings"
CLUSTER_SPECS = [("eu-a", "europe-west1", "3"), ("eu-c", "europe-west4", "3"), ("eu-b", "eu-west-1", "1"),
                 ("us-d", "us-east1", "2")]
API_ENABLEMENTS = [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
                   {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"}]}]


@dataclass
class Burst:
    """One controller-manager restart."""

    quiet_after: float = 0.0  # restart -> the last binding write / webhook decision
    healthy_after: float = 0.0  # restart -> the new controller-manager's /healthz answers
    first_after: float | None = None  # restart -> the first binding write / webhook decision (None: none)
    writes: dict[str, float] = field(default_factory=dict)  # "<verb> <code>" -> binding requests at the API server
    hook_ms: list[float] = field(default_factory=list)
    hook_span: float = 0.0  # first to last webhook decision on a binding
    outcomes: dict[str, int] = field(default_factory=dict)
    moved: int = 0  # bindings whose spec.clusters changed
    errors: list[str] = field(default_factory=list)  # the controller-manager's error lines
    rss: dict[str, str] = field(default_factory=dict)


@dataclass
class Figures:
    described: str = ""
    load: tuple[float, float] = (0.0, 0.0)
    policies: str = ""
    created: float = 0.0  # policies created -> every binding scheduled (no fedplace)
    narrowed: float = 0.0  # the sync's readiness -> every binding narrowed and rescheduled
    first_hook_ms: list[float] = field(default_factory=list)
    baseline: Burst = field(default_factory=Burst)
    restart: Burst = field(default_factory=Burst)


class ControllerManager:
    """The controller-manager a Karmada start script left running, restartable with its own argv."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.pid_file = state / "controller-manager.pid"
        if not self.pid_file.exists():
            raise SystemExit(f"no {self.pid_file}: start real Karmada first (--karmada-state)")
        self.pid = int(self.pid_file.read_text().strip())
        try:
            self.argv = Path(f"/proc/{self.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            raise SystemExit(f"controller-manager pid {self.pid} ({self.pid_file}) is not running") from None
        self.health = f"http://127.0.0.1:{(state / 'controller-manager.healthz-port').read_text().strip()}/healthz"
        self.log = state / "logs" / "controller-manager.log"
        self.proc: subprocess.Popen[bytes] | None = None  # once restarted here: the child to reap

    def restart(self) -> float:
        """SIGTERM, wait for the exit, start the same command line again; returns the start time."""
        os.kill(self.pid, signal.SIGTERM)
        if self.proc is not None:
            self.proc.wait(timeout=60)
        else:
            deadline = time.monotonic() + 60
            while Path(f"/proc/{self.pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if Path(f"/proc/{self.pid}").exists():
                raise RuntimeError(f"controller-manager {self.pid} did not exit within 60 s of SIGTERM")
        if self.log.exists():
            self.log.rename(self.log.with_name(f"controller-manager.log.{int(time.time())}"))
        started = time.perf_counter()
        with open(self.log, "wb") as out:
            proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.proc, self.pid = proc, proc.pid
        self.pid_file.write_text(f"{proc.pid}\n")
        return started

    def errors(self) -> list[str]:
        """klog error lines (``E....``) of the current log."""
        return [line for line in self.log.read_text(errors="replace").splitlines() if line.startswith("E")]


async def binding_requests(api: Any) -> dict[str, float]:
    """The API server's requests on resourcebindings by "<verb> <code>" (reads excluded)."""
    resp = await kube_stream(api, "GET", "/metrics")
    try:
        text = (await resp.read()).decode()
    finally:
        resp.release()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "apiserver_request_total" and s.labels.get("resource") == "resourcebindings" \
                    and s.labels.get("verb") not in ("GET", "LIST", "WATCH"):
                sub = s.labels.get("subresource")
                key = f"{s.labels.get('verb')}{' ' + sub if sub else ''} {s.labels.get('code')}"
                out[key] = out.get(key, 0.0) + s.value
    return out


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


async def bindings(api: Any, namespaces: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for ns in namespaces:
        doc = await kube_json(api, "GET", f"/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings")
        out.update({f"{ns}/{o['metadata']['name']}": o for o in doc.get("items") or []})
    return out


def scheduled(b: dict[str, Any]) -> bool:
    return bool((b.get("spec") or {}).get("clusters"))


def clusters_of(b: dict[str, Any]) -> list[str]:
    return sorted(c.get("name", "") for c in (b.get("spec") or {}).get("clusters") or [])


def template_index(key: str) -> int:
    """i of the binding ``<namespace>/app<i>-deployment`` (its template app<i>)."""
    return int(key.split("/", 1)[1].removeprefix("app").split("-", 1)[0])


def narrowed(b: dict[str, Any], forbidden: set[str]) -> bool:
    """fedplace decided it, and the scheduler placed it on allowed clusters only."""
    ann = (b.get("metadata") or {}).get("annotations") or {}
    exclude = (((b.get("spec") or {}).get("placement") or {}).get("clusterAffinity") or {}).get("exclude") or []
    return EXCLUDED in ann and forbidden <= set(exclude) and scheduled(b) and not forbidden & set(clusters_of(b))


async def wait_for(what: str, check: Any, timeout: float, every: float = 2.0) -> float:
    """Poll ``check()`` (async) until true; returns the seconds waited."""
    t0 = time.perf_counter()
    while not await check():
        if time.perf_counter() - t0 > timeout:
            raise AssertionError(f"timed out ({timeout:.0f} s) waiting for {what}")
        await asyncio.sleep(every)
    return time.perf_counter() - t0


async def settle(api: Any, quiet: float, timeout: float) -> None:
    """Wait until the API server has seen no binding write for ``quiet`` seconds."""
    t0 = last_change = time.perf_counter()
    last = await binding_requests(api)
    while time.perf_counter() - last_change < quiet:
        await asyncio.sleep(0.5)
        now = await binding_requests(api)
        if now != last:
            last, last_change = now, time.perf_counter()
        if time.perf_counter() - t0 > timeout:
            raise AssertionError(f"binding writes did not stop within {timeout:.0f} s")


async def measure_restart(api: Any, cm: ControllerManager, hook: ServerProcess | None, namespaces: list[str],
                          quiet: float, timeout: float, min_wait: float) -> Burst:
    """Restart the controller-manager; wait until neither the API server saw a binding write nor
    the webhook decided a binding for ``quiet`` seconds, and at least ``min_wait`` seconds in all
    (the detector lists every template and policy before its first write: with thousands, that
    outlasts a short quiet window)."""
    b = Burst()
    await settle(api, quiet, timeout)
    before = await bindings(api, namespaces)
    writes0 = await binding_requests(api)
    hook_line = log_records(hook.log_path, 0)[1] if hook is not None else 0
    records: list[dict[str, Any]] = []
    t0 = cm.restart()
    last_change, last_writes, healthy = t0, writes0, None
    async with aiohttp.ClientSession() as s:
        while True:
            await asyncio.sleep(0.25)
            now = time.perf_counter()
            if healthy is None:
                try:
                    async with s.get(cm.health, timeout=aiohttp.ClientTimeout(total=1)) as r:
                        if r.status == 200:
                            healthy = now
                            last_change = max(last_change, now)
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
            writes = await binding_requests(api)
            if writes != last_writes:
                last_writes, last_change = writes, now
                b.first_after = now - t0 if b.first_after is None else b.first_after
            if hook is not None:
                new, hook_line = log_records(hook.log_path, hook_line)
                new = [r for r in new if "ResourceBinding" in str(r.get("object")) and "elapsed_ms" in r]
                if new:
                    records.extend(new)
                    last_change = now
                    b.first_after = now - t0 if b.first_after is None else b.first_after
            if healthy is not None and now - last_change >= quiet and now - t0 >= min_wait:
                break
            if now - t0 > timeout:
                raise AssertionError(f"not quiet {timeout:.0f} s after the restart")
    b.quiet_after, b.healthy_after = last_change - t0, (healthy or t0) - t0
    b.writes = delta(last_writes, writes0)
    b.hook_ms = [float(r["elapsed_ms"]) for r in records]
    for r in records:
        key = f"{r.get('operation')} {r.get('outcome')}"
        b.outcomes[key] = b.outcomes.get(key, 0) + 1
    if len(records) > 1:
        stamps = [time.mktime(time.strptime(r["ts"][:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + r["ts"][20:23])
                  for r in records if "ts" in r]
        b.hook_span = max(stamps) - min(stamps)
    after = await bindings(api, namespaces)
    b.moved = sum(1 for k, o in after.items() if k in before and clusters_of(o) != clusters_of(before[k]))
    b.errors = cm.errors()
    return b


async def run(args: argparse.Namespace, tmp: Path) -> Figures:
    if not (args.opa_url and args.kubeconfig):
        raise SystemExit("needs the real servers: --opa-url and --kubeconfig (real Karmada beside the API server)")
    state = Path(args.karmada_state or os.environ.get("KARMADA_REAL_STATE") or "")
    cm = ControllerManager(state)
    fig = Figures(load=(os.getloadavg()[0], 0.0))
    total, affected = args.bindings, args.affected
    async with servers(args, tmp) as srv:
        assert srv.opa is not None and srv.kube is not None
        opa, kube = srv.opa, srv.kube
        api = kube.api
        try:
            await kube_json(api, "GET", PROPAGATION_POLICIES.collection_path(None), query=[("limit", "1")])
        except KubeApiError:
            raise SystemExit("no PropagationPolicy API: start real Karmada first") from None
        namespaces = [await kube.namespace(f"ns{i}") for i in range(REM_NAMESPACES)]
        policy_ns, lease_ns = await kube.namespace("policy"), await kube.namespace("opa")
        opa.owns(documents=("kubernetes", "kubernetes_index", SENTINEL_PATH[0]),
                 policies=(f"{policy_ns}/", replicated_root.POLICY_ID))
        names = [f"{kube.run}-{n}" for n, _, _ in CLUSTER_SPECS]
        # What fedplace excludes: PCI ≥ 3 templates (the affected), the others PCI ≥ 2: every binding narrowed.
        forbidden = {level: {names[i] for i, (_, _, p) in enumerate(CLUSTER_SPECS) if int(p) < level} for level in (2, 3)}
        mwc, registered = f"{kube.run}-karmada-restart", False
        sync = hook = None
        try:
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            for name, (_, reg, pci) in zip(names, CLUSTER_SPECS, strict=True):
                await kube_json(api, "POST", KARMADA_CLUSTERS.collection_path(None), body={
                    "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                    "metadata": {"name": name, "labels": {"pci-compliance-level": pci}},
                    "spec": {"region": reg, "syncMode": "Push", "apiEndpoint": f"https://{name}.invalid:6443"}})
                await kube_json(api, "PATCH", f"{KARMADA_CLUSTERS.collection_path(None)}/{name}/status",
                                content_type="application/merge-patch+json", body={"status": {
                                    "kubernetesVersion": "v1.24.0", "apiEnablements": API_ENABLEMENTS,
                                    "conditions": [{"type": "Ready", "status": "True", "reason": "Bench",
                                                    "message": "no member API server", "lastTransitionTime": now},
                                                   {"type": "CompleteAPIEnablements", "status": "True",
                                                    "reason": "Bench", "message": "bench list",
                                                    "lastTransitionTime": now}],
                                    "resourceSummary": {"allocatable": {"cpu": "1000", "memory": "4Ti",
                                                                        "pods": "10000"}}}})
                try:
                    await kube_json(api, "POST", "/api/v1/namespaces", body={
                        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"karmada-es-{name}"}})
                except KubeApiError as exc:
                    if exc.status != 409:
                        raise
            await post_all(api, [(f"/apis/apps/v1/namespaces/{namespaces[i % REM_NAMESPACES]}/deployments",
                                  rem_template(i, "3" if i < affected else "2", namespaces)) for i in range(total)])
            t = time.perf_counter()
            for ns in namespaces:
                await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body={
                    "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                    "metadata": {"name": "bench", "namespace": ns},
                    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                             "placement": {"clusterAffinity": {"clusterNames": names},
                                           "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}})

            async def all_scheduled() -> bool:
                found = await bindings(api, namespaces)
                print(f"  bindings: {len(found):,} of {total:,}, scheduled {sum(map(scheduled, found.values())):,}",
                      file=sys.stderr)
                return len(found) == total and all(map(scheduled, found.values()))

            await wait_for("the detector's and scheduler's bindings", all_scheduled, args.timeout, 5.0)
            fig.created = time.perf_counter() - t
            await asyncio.sleep(args.quiet)

            # 1. Baseline: the restart without fedplace.
            print("  restart without fedplace", file=sys.stderr)
            fig.baseline = await measure_restart(api, cm, None, namespaces, args.quiet, args.timeout, args.min_wait)

            # 2. fedplace: policy ConfigMaps, the webhook, the sync.
            configmaps = {**shipped_policy_configmaps(), "fedplace-settings": {"settings.rego": SETTINGS}}
            fig.policies = policy_digest({replicated_root.POLICY_ID: replicated_root.render(),
                                          **{f"{policy_ns}/{cm_}/{k}": v for cm_, data in configmaps.items()
                                             for k, v in data.items()}})
            for name, data in configmaps.items():
                await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": policy_ns},
                    "data": data})
            ca_pem, cert_pem, key_pem = make_ca_and_cert(["127.0.0.1", "localhost"])
            for fname, pem in (("ca.crt", ca_pem), ("tls.crt", cert_pem), ("tls.key", key_pem)):
                (tmp / fname).write_bytes(pem)
            token = ["--opa-token-file", str(opa.token_file)] if opa.token_file else []
            hook = ServerProcess("admission", [
                "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}", "--tls-cert-file", str(tmp / "tls.crt"),
                "--tls-private-key-file", str(tmp / "tls.key"), "--kubeconfig", str(kube.kubeconfig),
                "--opa-url", opa.url, *token, "--policy-namespace", policy_ns],
                "/readyz", tmp, scheme="https", cafile=str(tmp / "ca.crt"))
            sync = ServerProcess("sync", [
                "-m", "fedplace.sync", *opa.sync_flags(), "--kubeconfig", str(kube.kubeconfig),
                "--listen", "127.0.0.1:{port}",
                "--replicate", "apps/v1/deployments", "--replicate", "work.karmada.io/v1alpha2/resourcebindings",
                "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters",
                "--replicate-ignore-namespaces", f"{policy_ns},{lease_ns}", "--policy-namespace", policy_ns,
                "--remediate", "enforce", "--remediate-resource", "work.karmada.io/v1alpha2/resourcebindings",
                "--remediate-max-fraction", "1", "--remediate-max-chunk", "1000",
                "--leader-election-namespace", lease_ns, "--log-level", "info", *args.sync_arg],
                "/healthz", tmp)
            hook.start(timeout=60)
            await kube_json(api, "POST", MWC_PATH, body={
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": mwc},
                "webhooks": [{
                    "name": "placement.fedplace.io",
                    "clientConfig": {"url": hook.url + "/mutate", "caBundle": base64.b64encode(ca_pem).decode()},
                    "rules": [{"apiGroups": ["work.karmada.io"], "apiVersions": ["v1alpha2"],
                               "resources": ["resourcebindings"], "operations": ["CREATE", "UPDATE"],
                               "scope": "Namespaced"}],
                    "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                    "admissionReviewVersions": ["v1"],
                    "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                "operator": "In", "values": namespaces}]},
                }]})
            registered = True
            await asyncio.sleep(1.0)
            sync.start(timeout=60)
            wait_http(sync.url + "/readyz", timeout=300, proc=sync.proc)
            t = time.perf_counter()

            async def all_narrowed() -> bool:
                found = await bindings(api, namespaces)
                done = sum(1 for k, o in found.items()
                           if narrowed(o, forbidden[3 if template_index(k) < affected else 2]))
                print(f"  narrowed and rescheduled: {done:,} of {total:,}", file=sys.stderr)
                return done == total

            await wait_for("every binding narrowed", all_narrowed, args.timeout, 5.0)
            fig.narrowed = time.perf_counter() - t
            recs, _ = log_records(hook.log_path, 0)
            fig.first_hook_ms = [float(r["elapsed_ms"]) for r in recs
                                 if "ResourceBinding" in str(r.get("object")) and "elapsed_ms" in r]
            await asyncio.sleep(args.quiet)

            # 3. The restart with fedplace.
            print("  restart with fedplace", file=sys.stderr)
            fig.restart = await measure_restart(api, cm, hook, namespaces, args.quiet, args.timeout, args.min_wait)
            fig.restart.rss = {"karmada-controller-manager": f"{proc_mb(cm.pid):.0f} MB (peak "
                                                             f"{proc_mb(cm.pid, 'VmHWM'):.0f} MB)",
                               "opa-kube-sync": rss_of(sync), "fedplace-admission": rss_of(hook),
                               "OPA": rss_of(opa.process, opa.url), "kube-apiserver": rss_of(None, kube.api.configuration.host)}
            # Reported before the clean-up: deleting thousands of Works can outlast the run.
            fig.described = srv.describe()
            fig.load = (fig.load[0], os.getloadavg()[0])
            report(fig, args)
            sys.stdout.flush()
        finally:
            for proc in (sync, hook):
                if proc is not None:
                    proc.stop()
            if registered:
                try:
                    await kube_json(api, "DELETE", f"{MWC_PATH}/{mwc}")
                except KubeApiError:
                    pass
            for ns in namespaces:
                try:
                    await kube_json(api, "DELETE", f"{PROPAGATION_POLICIES.collection_path(ns)}/bench")
                except KubeApiError:
                    pass
            for name in names:
                for path in (f"{KARMADA_CLUSTERS.collection_path(None)}/{name}",
                             f"/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-{name}/works"):
                    try:
                        await kube_json(api, "DELETE", path, timeout=300)
                    except KubeApiError:
                        pass
    return fig


def report(f: Figures, args: argparse.Namespace) -> None:
    total = args.bindings
    print("### Karmada — a controller-manager restart with every binding narrowed by fedplace\n")
    print(f"{f.described}; real Karmada (karmada-controller-manager, karmada-scheduler, karmada-webhook) "
          f"(load average {f.load[0]:.1f} → {f.load[1]:.1f}); {total:,} bindings ({args.affected:,} PCI ≥ 3); "
          f"policies: {f.policies}.\n")
    print("| measurement | without fedplace (baseline) | with fedplace |")
    print("|---|---:|---:|")
    b, r = f.baseline, f.restart
    print(f"| restart → quiet ({args.quiet:g} s without a binding write or webhook decision, at least "
          f"{args.min_wait:g} s in all) | {b.quiet_after:.2f} s | "
          f"**{r.quiet_after:.2f} s** ({r.quiet_after / max(b.quiet_after, 1e-9):.2f}×) |")
    print(f"| restart → the new controller-manager healthy | {b.healthy_after:.2f} s | {r.healthy_after:.2f} s |")

    def first(x: Burst) -> str:
        return "none" if x.first_after is None else f"{x.first_after:.2f} s"

    print(f"| restart → the first binding write or webhook decision | {first(b)} | {first(r)} |")

    def writes(x: Burst) -> str:
        return ", ".join(f"{k}: {v:,.0f}" for k, v in sorted(x.writes.items())) or "none"
    print(f"| binding writes at the API server (verb code: count) | {writes(b)} | {writes(r)} |")
    ms = r.hook_ms
    print(f"| webhook decisions on bindings (operation outcome: count) | — | "
          f"{', '.join(f'{k}: {v:,}' for k, v in sorted(r.outcomes.items())) or 'none'} |")
    if ms:
        print(f"| webhook decision time, p50 / p99 / max (its elapsed_ms) | — | **{pct(ms, 50):.1f} / "
              f"{pct(ms, 99):.1f}** / {max(ms):.1f} ms |")
        print(f"| webhook throughput during the burst (decisions / first-to-last span) | — | "
              f"{len(ms) / max(r.hook_span, 1e-3):,.0f}/s over {r.hook_span:.2f} s |")
    fm = f.first_hook_ms
    if fm:
        print(f"| baseline for the webhook: its decisions while the remediator narrowed all {total:,} "
              f"({f.narrowed:.1f} s), p50 / p99 | — | {pct(fm, 50):.1f} / {pct(fm, 99):.1f} ms "
              f"(burst p50 {pct(ms, 50) / max(pct(fm, 50), 1e-9):.2f}× that) |" if ms else "")
    print(f"| bindings whose spec.clusters changed | {b.moved:,} | {r.moved:,} |")
    print(f"| controller-manager error lines after the restart | {len(b.errors):,} | {len(r.errors):,} |")
    for line in r.errors[:3]:
        print(f"|   e.g. | | `{line[:160]}` |")
    print(f"| setup: policies → all {total:,} bindings scheduled (no fedplace) | {f.created:.1f} s | |")
    for name, value in r.rss.items():
        print(f"| {name} RSS after the restart | | {value} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bindings", type=int, default=5000)
    p.add_argument("--affected", type=int, default=1000, help="templates requiring PCI ≥ 3 (the rest PCI ≥ 2)")
    p.add_argument("--quiet", type=float, default=5.0, help="seconds without a binding write that count as quiet")
    p.add_argument("--min-wait", type=float, default=60.0,
                   help="seconds after a restart before it may count as quiet (the detector's start-up)")
    p.add_argument("--timeout", type=float, default=1800.0, help="longest wait for one step")
    p.add_argument("--karmada-state", help="real Karmada's state directory (default $KARMADA_REAL_STATE)")
    p.add_argument("--sync-arg", action="append", default=[], metavar="ARG",
                   help="one more opa-kube-sync argument (repeatable)")
    add_server_flags(p, opa=True, kube=True)
    args = p.parse_args()
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench-karmada-restart-"))  # kept: the services' logs
    asyncio.run(run(args, tmp))  # prints the report itself, before its clean-up
    print(f"- logs: {tmp}")
    print(f"\n- bench wall time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
