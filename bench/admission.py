"""Benchmark fedplace-admission against the same decision asked directly of OPA, in the same run.

Usage: .venv/bin/python bench/admission.py [--seconds 10] [--rounds 5] [--client auto|wrk|python]
       [--workers N] [--event-loops auto|uvloop,asyncio] [--opa-url URL [--opa-token-file PATH]]
       [--kubeconfig PATH] [--speedup-ab]

The placement policy (policies/federation) over 10 replicated Clusters; the
admitted object is a ReplicaSet (~1.6 KB) asking for EU jurisdiction and PCI
level >= 2, so every decision computes preferences and the webhook answers
with a JSONPatch. Three targets, each at 1 and at 64 requests in flight:

* **direct OPA**: ``POST /v1/data/io/k8s/federation/admission`` with
  ``{"input": <the ReplicaSet>}`` (what the webhook sends), plain HTTP;
* **webhook, HTTP**: ``POST /mutate`` with the AdmissionReview, the webhook
  (``fedplace-admission``, a subprocess at ``--log-level info``, as deployed)
  serving plain HTTP and asking the same OPA over its keep-alive connections;
* **webhook, TLS**: the same over HTTPS (a throwaway CA, ECDSA P-256), as the
  API server calls it.

The load comes from a separate process: ``wrk`` (one thread, keep-alive
connections; Debian's ``wrk`` package) when it is on the PATH, else a Python
aiohttp client (``--client python``), which costs the shared cores more.
Each cell runs ``--warmup`` seconds unmeasured, then ``--seconds`` measured
(closed loop: N connections, each sends its next request when the answer
came), in ``--rounds`` slices: round after round every target runs one slice,
in alternating order, so that a busy interval of the shared machine hits
every target alike. A cell's p50 and p99 are the medians of its rounds'; what
the webhook adds is the median over rounds of its p50 minus direct OPA's p50
of the same round. After every webhook slice the webhook's own counters are
read from ``/metrics``: every request of the slice must have been answered
``patched`` (a fail-closed denial is an HTTP 200 too, and must not pass for
speed).

``--event-loops uvloop,asyncio`` runs each webhook twice, on uvloop (its
default) and on asyncio's own loop (``--event-loop``), as targets of the same
run: the comparison behind the webhook's default (docs/benchmarks.md).

``--speedup-ab`` adds webhooks over HTTP that each do one of the webhook's
hand-written speed-ups the library's way (``--speedups``: aiohttp's client
instead of ``lean-http``, the first OPA attempt inside tenacity's loop instead
of ``first-attempt``), one with none of them, and one on asyncio's own event
loop instead of uvloop, as targets of the same run; each speed-up's saving is
then the median over rounds of (its library-way p50 − the webhook's p50 of the
same round) at the lowest in-flight count, and the throughput ratio at the
highest. A speed-up keeps its place when it saves >= 0.05 ms p50 or >= 5 %
throughput.

Targets: the webhook adds <= 0.5 ms p50 at 1 in flight; at 64 in
flight its throughput is >= 0.75x direct OPA's of the same run. The
processes are not pinned: the OPA (the devstack engine, one Python process),
the webhook, the load generator and the devstack API server (idle during the
runs) share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import add_server_flags, cpu_seconds, servers  # noqa: E402
from devstack.launch import ServerProcess  # noqa: E402

QUERY = "/v1/data/io/k8s/federation/admission"
PREFERENCES = "federation.kubernetes.io/replica-set-preferences"
EU_REGIONS = ("europe-west1", "eu-central-1", "northeurope")
OTHER_REGIONS = ("us-east1", "us-west-2", "asia-east1")


def clusters(n: int = 10) -> dict[str, Any]:
    """``n`` Cluster objects, as the sync replicates them: regions and PCI levels mixed."""
    out = {}
    for i in range(n):
        name = f"cluster-{i:02d}"
        region = EU_REGIONS[i % 3] if i % 2 == 0 else OTHER_REGIONS[i % 3]
        out[name] = {"apiVersion": "fedplace.io/v1alpha1", "kind": "Cluster",
                     "metadata": {"name": name, "uid": f"5e1f0a3c-0000-4000-8000-{i:012d}",
                                  "resourceVersion": str(100 + i),
                                  "labels": {"pci-compliance-level": str(i % 4), "provider": "gce"}},
                     "spec": {"server": f"https://{name}.example.com:6443"},
                     "status": {"region": region, "ready": True}}
    return out


def replicaset() -> dict[str, Any]:
    """A ReplicaSet as the API server admits it (~1.6 KB), asking for EU jurisdiction and PCI >= 2."""
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": "checkout-7d9f8c6b5", "namespace": "shop", "generateName": "checkout-",
            "uid": "6f1c2b1e-3a4d-4b8e-9f00-1c2d3e4f5a6b", "creationTimestamp": "2026-11-23T10:00:00Z",
            "labels": {"app": "checkout", "tier": "web", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {
                "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true",
                "policy.federation.alpha.kubernetes.io/pci-compliance-level": "2",
                "deployment.kubernetes.io/revision": "3",
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "checkout",
                                 "uid": "0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "checkout", "pod-template-hash": "7d9f8c6b5"}},
            "template": {
                "metadata": {"labels": {"app": "checkout", "tier": "web", "pod-template-hash": "7d9f8c6b5"}},
                "spec": {
                    "containers": [{
                        "name": "checkout", "image": "registry.example.com/shop/checkout:1.42.0",
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu"}],
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                      "limits": {"cpu": "1", "memory": "512Mi"}},
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                        "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent",
                    }],
                    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                    "securityContext": {"runAsNonRoot": True}, "schedulerName": "default-scheduler",
                },
            },
        },
        "status": {"replicas": 0},
    }


def admission_review(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "0f6a1d2c-5b4e-4c3d-8a9b-7e6f5d4c3b2a",
        "kind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"},
        "resource": {"group": "apps", "version": "v1", "resource": "replicasets"},
        "requestKind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "replicasets"},
        "name": meta["name"], "namespace": meta["namespace"], "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "uid": "1b2c3d4e-0000-4000-8000-000000000001",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                "system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }}


# -- load generators (separate processes) -----------------------------------------

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
%(auth)s
local f = assert(io.open("%(body)s", "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\n{"requests":%%d,"seconds":%%.6f,"p50_ms":%%.4f,"p99_ms":%%.4f,'
    .. '"errors":%%d}\\n', summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, e.connect + e.read + e.write + e.status + e.timeout))
end
"""


@dataclass
class Result:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_ms: dict[int, float] = field(default_factory=dict)  # CPU milliseconds per request, by process

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass
class Target:
    name: str
    url: str  # the full URL POSTed to
    body: Path
    token: str = ""
    cafile: str = ""
    process: ServerProcess | None = None  # a webhook: its counters are checked
    pids: tuple[int, ...] = ()  # processes whose CPU time is measured: the webhook's, a devstack OPA's


def run_wrk(target: Target, conc: int, seconds: float, tmp: Path) -> Result:
    script = tmp / f"wrk-{abs(hash((target.name, conc)))}.lua"
    auth = f'wrk.headers["Authorization"] = "Bearer {target.token}"' if target.token else ""
    script.write_text(WRK_SCRIPT % {"auth": auth, "body": target.body})
    # wrk does not verify the server certificate (it would accept any): like the API server with a
    # caBundle, it still does the full TLS handshake and encrypts every request and answer.
    out = subprocess.run(["wrk", "-t1", f"-c{conc}", f"-d{max(1, round(seconds))}s", "--timeout", "5s",
                          "-s", str(script), target.url], capture_output=True, text=True, check=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
    return Result(**json.loads(line))


def run_python_client(target: Target, conc: int, seconds: float) -> Result:
    spec = {"url": target.url, "body": str(target.body), "token": target.token, "cafile": target.cafile,
            "conc": conc, "seconds": seconds}
    out = subprocess.run([sys.executable, __file__, "--load-client", json.dumps(spec)], capture_output=True,
                         text=True, check=True, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"})
    return Result(**json.loads(out.stdout.strip().splitlines()[-1]))


async def load_client(spec: dict[str, Any]) -> None:
    """The Python load generator (``--client python``), run as its own process."""
    import ssl

    import aiohttp

    body = Path(spec["body"]).read_bytes()
    headers = {"Content-Type": "application/json"}
    if spec["token"]:
        headers["Authorization"] = f"Bearer {spec['token']}"
    ctx = ssl.create_default_context(cafile=spec["cafile"]) if spec["cafile"] else None
    lat: list[float] = []
    errors = 0
    stop_at = time.monotonic() + spec["seconds"]
    connector = aiohttp.TCPConnector(limit=spec["conc"], ssl=ctx if ctx is not None else True)
    async with aiohttp.ClientSession(connector=connector) as s:
        async def worker() -> None:
            nonlocal errors
            while time.monotonic() < stop_at:
                t = time.perf_counter()
                async with s.post(spec["url"], data=body, headers=headers) as r:
                    await r.read()
                    if r.status != 200:
                        errors += 1
                lat.append((time.perf_counter() - t) * 1000)

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(spec["conc"])))
        took = time.monotonic() - started
    lat.sort()
    pick = lambda p: lat[min(len(lat) - 1, int(round(p / 100 * (len(lat) - 1))))]  # noqa: E731
    print(json.dumps({"requests": len(lat), "seconds": took, "p50_ms": pick(50), "p99_ms": pick(99),
                      "errors": errors}))


# -- the webhook's own account of a run ------------------------------------------------

def outcome_counts(target: Target) -> dict[str, float]:
    """``fedplace_admission_requests_total`` by outcome, from the webhook's /metrics."""
    import ssl
    import urllib.request

    assert target.process is not None
    ctx = ssl.create_default_context(cafile=target.cafile) if target.cafile else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    with opener.open(target.process.url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r'^fedplace_admission_requests_total\{outcome="(\w+)"\} (\S+)$', text, re.M)}


def settled_counts(target: Target) -> dict[str, float]:
    """The counts once the requests a stopped client left in flight have been answered."""
    counts = outcome_counts(target)
    while True:
        time.sleep(0.3)
        again = outcome_counts(target)
        if again == counts:
            return counts
        counts = again


def load(target: Target, conc: int, seconds: float, args: argparse.Namespace, tmp: Path) -> Result:
    """One closed-loop run of ``seconds`` against ``target`` with ``conc`` in flight."""
    if args.client == "wrk":
        return run_wrk(target, conc, seconds, tmp)
    return run_python_client(target, conc, seconds)


def measure(target: Target, conc: int, seconds: float, args: argparse.Namespace, tmp: Path) -> tuple[Result, int]:
    """One measured slice, with the webhook's own account of it checked: (the client's result, the
    requests the webhook answered ``patched``; 0 for direct OPA)."""
    before = settled_counts(target) if target.process else {}
    cpu_before = {pid: cpu_seconds(pid, children=True) for pid in target.pids}
    result = load(target, conc, seconds, args, tmp)
    result.cpu_ms = {pid: (cpu_seconds(pid, children=True) - was) * 1000 / max(1, result.requests)
                     for pid, was in cpu_before.items()}
    patched = 0
    if target.process is not None:
        after = settled_counts(target)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        patched, others = int(delta.pop("patched", 0)), {k: int(v) for k, v in delta.items() if v}
        # a closed-loop client may have a last request of the run answered after it stopped counting
        if others or not result.requests <= patched <= result.requests + conc:
            raise SystemExit(f"{target.name}: {result.requests} requests counted by the client, the webhook "
                             f"answered {patched} patched and {others}: the figures would not be decisions")
    return result, patched


# -- set-up -----------------------------------------------------------------------------

async def prepare(srv: Any, tmp: Path) -> str:
    """Policy and 10 clusters into OPA, a policy ConfigMap into a fresh namespace; the namespace."""
    opa, kube = srv.opa, srv.kube
    opa.owns(documents=("kubernetes", "fedplace_sync"), policies=("bench-admission/", "opa-kube-sync/"))
    async with opa.session() as s:
        for name in ("lib.rego", "placement.rego", "admission.rego"):
            src = (ROOT / "policies/federation" / name).read_text()
            async with s.put(f"{opa.url}/v1/policies/bench-admission/federation/{name}", data=src) as r:
                assert r.status == 200, await r.text()
        async with s.put(f"{opa.url}/v1/data/kubernetes", json={"clusters": clusters()}) as r:
            assert r.status in (200, 204), await r.text()
        async with s.post(opa.url + QUERY, json={"input": replicaset()}) as r:
            result = (await r.json()).get("result") or {}
    prefs = (result.get("annotations") or {}).get(PREFERENCES) or {}
    prefs = json.loads(prefs) if isinstance(prefs, str) else prefs  # the policy's own text, or an object
    assert not result.get("errors") and len(prefs.get("clusters", {})) == 2, result  # EU and PCI >= 2: 2 of 10

    from fedplace.common.kube_client import kube_json
    from fedplace.sync import loaded

    ns = await kube.namespace("policy")
    async with opa.session() as s:  # what opa-kube-sync writes once it has loaded the ConfigMap (docs/sync.md)
        async with s.put(f"{opa.url}/v1/policies/{loaded.POLICY_ID}", data=loaded.render()) as r:
            assert r.status == 200, await r.text()
        async with s.put(f"{opa.url}/v1/data/fedplace_sync", json={
                "generation": "bench", "loaded": loaded.record_document({ns: {"placement"}}, {"clusters"})}) as r:
            assert r.status in (200, 204), await r.text()
    await kube_json(kube.api, "POST", f"/api/v1/namespaces/{ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "placement"},
        "data": {name: (ROOT / "policies/federation" / name).read_text() for name in ("placement.rego", "admission.rego")}})
    return ns


# --speedup-ab: target name → (the webhook's --speedups, its event loop); each does one speed-up the library's way.
SPEEDUP_VARIANTS = {
    "library way: aiohttp's client (no lean-http)": ("first-attempt", "auto"),
    "library way: first attempt in tenacity (no first-attempt)": ("lean-http", "auto"),
    "library way: asyncio's event loop (no uvloop)": ("lean-http,first-attempt", "asyncio"),
    "library way: none of them": ("none", "asyncio"),
}
SPEEDUP_SAVES_MS, SPEEDUP_SAVES_THROUGHPUT = 0.05, 0.05  # what earns a speed-up its place


def start_webhook(name: str, srv: Any, ns: str, tmp: Path, args: argparse.Namespace,
                  tls: tuple[Path, Path, Path] | None, event_loop: str = "auto",
                  speedups: str | None = None) -> ServerProcess:
    flags = ["-m", "fedplace.admission", "--listen", "127.0.0.1:{port}", "--kubeconfig", str(srv.kube.kubeconfig),
             "--opa-url", srv.opa.url, "--policy-namespace", ns, "--log-level", "info", "--event-loop", event_loop]
    if speedups is not None:
        flags += ["--speedups", speedups]
    if srv.opa.token_file:
        flags += ["--opa-token-file", str(srv.opa.token_file)]
    if args.workers != 1:
        flags += ["--workers", str(args.workers)]
    proc = ServerProcess(name, flags, "/readyz", tmp)
    if tls is not None:
        ca, crt, key = tls
        proc.args += ["--tls-cert-file", str(crt), "--tls-private-key-file", str(key)]
        proc.scheme, proc.cafile = "https", str(ca)
    return proc.start(timeout=60)


def check_webhook_answer(url: str, body: bytes, cafile: str) -> None:
    """One answer, by hand: allowed, with the preferences patch."""
    import base64
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=cafile) if cafile else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with opener.open(req, timeout=10) as resp:
        answer = json.loads(resp.read())["response"]
    patch = json.loads(base64.b64decode(answer.get("patch", "")) or b"[]")
    assert answer["allowed"] and any(PREFERENCES.replace("/", "~1") in op["path"] for op in patch), answer


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


@dataclass
class Cell:
    """One target at one concurrency: its rounds."""
    rounds: list[Result] = field(default_factory=list)
    patched: int = 0  # the webhook's count of patched answers over the rounds

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.rounds)

    @property
    def rps(self) -> float:
        seconds = sum(r.seconds for r in self.rounds)
        return sum(r.requests for r in self.rounds) / seconds if seconds else 0.0

    def cpu_ms(self, pid: int) -> float:
        requests = sum(r.requests for r in self.rounds)
        return sum(r.cpu_ms[pid] * r.requests for r in self.rounds) / requests if requests else 0.0


def added_p50(cell: Cell, direct: Cell) -> float:
    """What the webhook adds: the median over rounds of its p50 minus direct OPA's p50 of the same round."""
    return statistics.median(r.p50_ms - d.p50_ms for r, d in zip(cell.rounds, direct.rounds, strict=True))


async def run(args: argparse.Namespace) -> None:
    if args.client == "auto":
        args.client = "wrk" if shutil.which("wrk") else "python"
    t0 = time.perf_counter()
    load_before = load_average()
    cells: dict[tuple[str, int], Cell] = {}
    loops = args.event_loops
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        async with servers(args, tmp) as srv:
            ns = await prepare(srv, tmp)
            from devstack.tls import make_ca_and_cert

            ca, crt, key = tmp / "ca.crt", tmp / "tls.crt", tmp / "tls.key"
            for path, pem in zip((ca, crt, key), make_ca_and_cert(["127.0.0.1", "localhost"]), strict=True):
                path.write_bytes(pem)
            direct_body, review_body = tmp / "direct.json", tmp / "review.json"
            direct_body.write_text(json.dumps({"input": replicaset()}))
            review_body.write_text(json.dumps(admission_review(replicaset())))
            token = srv.opa.token_file.read_text().strip() if srv.opa.token_file else ""
            opa_pid = (srv.opa.process.proc.pid,) if srv.opa.process and srv.opa.process.proc else ()
            targets = [Target("direct OPA", srv.opa.url + QUERY, direct_body, token=token, pids=opa_pid)]
            hooks: list[ServerProcess] = []
            try:
                for loop in loops:
                    suffix = "" if len(loops) == 1 else f", {loop}"
                    for proto, tls in (("HTTP", None), ("TLS", (ca, crt, key))):
                        hook = start_webhook(f"admission-{proto.lower()}-{loop}", srv, ns, tmp, args, tls, loop)
                        hooks.append(hook)
                        targets.append(Target(f"webhook, {proto}{suffix}", hook.url + "/mutate", review_body,
                                              cafile=str(ca) if tls else "", process=hook,
                                              pids=(hook.proc.pid, *opa_pid)))
                if args.speedup_ab:
                    for i, (name, (speedups, loop)) in enumerate(SPEEDUP_VARIANTS.items()):
                        hook = start_webhook(f"admission-library-{i}", srv, ns, tmp, args, None, loop, speedups)
                        hooks.append(hook)
                        targets.append(Target(f"webhook, HTTP, {name}", hook.url + "/mutate", review_body,
                                              process=hook, pids=(hook.proc.pid, *opa_pid)))
                for t in targets[1:]:
                    check_webhook_answer(t.url, t.body.read_bytes(), t.cafile)
                per_round = args.seconds / args.rounds
                for conc in args.in_flight:
                    for target in targets:
                        load(target, conc, args.warmup, args, tmp)
                        cells[target.name, conc] = Cell()
                    for i in range(args.rounds):  # every target once per round, the order reversed every other
                        for target in (targets if i % 2 == 0 else targets[::-1]):
                            result, patched = measure(target, conc, per_round, args, tmp)
                            cells[target.name, conc].rounds.append(result)
                            cells[target.name, conc].patched += patched
            finally:
                for hook in hooks:
                    hook.stop()
            described = srv.describe()

    size = len(json.dumps(admission_review(replicaset())))
    client = ("wrk (1 thread), a separate process" if args.client == "wrk"
              else "Python aiohttp client, a separate process")
    print(f"### Admission webhook vs direct OPA — placement policy, 10 clusters, {args.seconds:g} s per cell "
          f"in {args.rounds} rounds\n")
    print(f"{described}")
    print(f"Load generator: {client}; {os.cpu_count()} cores shared by every process, none pinned; "
          f"webhook workers: {args.workers}; webhook event loop: {', '.join(loops)}; AdmissionReview {size:,} bytes "
          f"(OPA input {len(json.dumps({'input': replicaset()})):,} bytes); load average before / after: "
          f"{load_before} / {load_average()}\n")
    print("| target | in flight | p50 (ms) | p99 (ms) | throughput (req/s) | webhook CPU (ms/req) "
          "| OPA CPU (ms/req) | errors | webhook's count |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for conc in args.in_flight:
        for target in targets:
            cell = cells[target.name, conc]
            pids = list(target.pids)
            hook_cpu = f"{cell.cpu_ms(pids.pop(0)):.3f}" if target.process else "—"
            opa_cpu = f"{cell.cpu_ms(pids[0]):.3f}" if pids else "n/a (external)"
            print(f"| {target.name} | {conc} | {cell.median('p50_ms'):.2f} | {cell.median('p99_ms'):.2f} "
                  f"| {cell.rps:,.0f} | {hook_cpu} | {opa_cpu} | {sum(r.errors for r in cell.rounds)} "
                  f"| {f'{cell.patched:,} patched' if target.process else '—'} |")
    print()
    lo, hi = min(args.in_flight), max(args.in_flight)
    direct_lo, direct_hi = cells["direct OPA", lo], cells["direct OPA", hi]
    for target in targets[1:]:
        added = added_p50(cells[target.name, lo], direct_lo)
        per_round = " ".join(f"{r.p50_ms - d.p50_ms:.2f}" for r, d in zip(cells[target.name, lo].rounds,
                                                                          direct_lo.rounds, strict=True))
        ratio = cells[target.name, hi].rps / direct_hi.rps if direct_hi.rps else float("nan")
        print(f"- {target.name}: adds {added:.2f} ms p50 at {lo} in flight (rounds: {per_round}; target <= 0.5: "
              f"{'met' if added <= 0.5 else 'NOT met'}); at {hi} in flight {ratio:.2f}x direct OPA's throughput "
              f"(target >= 0.75: {'met' if ratio >= 0.75 else 'NOT met'})")
    if args.speedup_ab:
        base = "webhook, HTTP" if len(loops) == 1 else f"webhook, HTTP, {loops[0]}"
        print("\nEach speed-up against the library way (same run; saving = library way − webhook, "
              f"p50 at {lo} in flight as the median over rounds, throughput at {hi}):\n")
        print("| speed-up replaced | p50 saved (ms) | throughput saved | earns its place |")
        print("|---|---:|---:|---|")
        for name in SPEEDUP_VARIANTS:
            variant = f"webhook, HTTP, {name}"
            saved = added_p50(cells[variant, lo], cells[base, lo])
            gain = cells[base, hi].rps / cells[variant, hi].rps - 1 if cells[variant, hi].rps else float("nan")
            keep = saved >= SPEEDUP_SAVES_MS or gain >= SPEEDUP_SAVES_THROUGHPUT
            print(f"| {name.removeprefix('library way: ')} | {saved:.3f} | {gain:+.1%} | "
                  f"{'yes' if keep else 'no'} |")
    print(f"- bench wall time: {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per cell (default 10)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="slices each cell is measured in, targets alternating (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each cell (default 1)")
    parser.add_argument("--in-flight", type=lambda s: [int(x) for x in s.split(",")], default=[1, 64],
                        help="comma-separated requests in flight (default 1,64)")
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto",
                        help="load generator: wrk when on the PATH (auto), else a Python aiohttp client")
    parser.add_argument("--workers", type=int, default=1, help="the webhook's --workers (default 1)")
    parser.add_argument("--event-loops", type=lambda s: s.split(","), default=["auto"],
                        help="the webhook's --event-loop; several (e.g. uvloop,asyncio): a webhook pair for each")
    parser.add_argument("--speedup-ab", action="store_true",
                        help="also run webhooks doing each speed-up the library's way (same run; see above)")
    parser.add_argument("--load-client", help=argparse.SUPPRESS)  # internal: run as the Python load generator
    add_server_flags(parser, opa=True, kube=True)
    args = parser.parse_args()
    if args.load_client:
        asyncio.run(load_client(json.loads(args.load_client)))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
