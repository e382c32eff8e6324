"""A highly available fedplace against one API server, for tests/ha and bench/ha.py.

Three opa-kube-sync + OPA pairs (each sync its own OPA, as in one pod) and three
webhook processes — real OS processes (``python -m fedplace.sync``,
``python -m fedplace.admission``, OPA or the devstack engine), so a SIGKILL is
a real one — and, in this test process, each in its own thread:

* :class:`AuditProxy`: the API server as the syncs see it. Each sync reaches
  it with its own kubeconfig whose bearer token (``ha-0`` … ``ha-2``) the proxy
  reads, records and replaces by the upstream's credentials: every write (PATCH
  of a ReplicaSet, write of the Lease) with the replica that sent it, the
  status the API server answered, and when. HTTP only; the syncs are not
  touched.
* :class:`Front` over the three OPAs, as the OPA Service is to the webhooks: a
  round-robin HTTP front; a backend that refuses the connection is skipped (a
  dead pod is out of the endpoints), a request cut in flight is cut for the
  webhook too (its own retries must cope).
* :class:`Front` over the three webhooks, TLS-terminating with the webhooks'
  certificate: the one URL of the MutatingWebhookConfiguration. An
  AdmissionReview a webhook cannot answer (connection refused or cut) is sent
  to the next one — safe because the webhook has ``sideEffects: None`` — as an
  L7 load balancer with retries on connection failures does. Without it, the
  kube-apiserver would not retry (it never re-sends a webhook POST), and one
  API server cannot name three URLs for one webhook.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import aiohttp
import trustme
from aiohttp import web
from kubernetes_asyncio import client

from devstack.kube.status import status_body as kube_error_body
from devstack.launch import ServerProcess
from fedplace.common.kube_client import KubeApiError, kube_json, kube_stream
from tests.fixtures.proxy import FaultProxy, LoopThread, answer_headers, upstream_from_kubeconfig
from tests.fixtures.stack import eventually

__all__ = ["Admission", "AdmissionStream", "AuditProxy", "Front", "HaStack", "MWC_PATH", "OWNER", "Outcome", "Write",
           "kill_the_leader", "owner_policy", "replicaset", "seed", "start_opa_process"]

ROOT = Path(__file__).resolve().parents[2]
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
OWNER = "fedplace.io/owner"


def owner_policy(version: str, changed_ns: str) -> str:
    """The placement decision: every ReplicaSet's owner is ``team-v1``; in ``changed_ns``
    it is ``team-<version>`` (a policy edit v1 → v2 then affects those objects only)."""
    return (f'package io.k8s.federation.placement.decision\n\n'
            f'owner := "team-{version}" if {{\n\tinput.metadata.namespace == "{changed_ns}"\n}} '
            f'else := "team-v1"\n\n'
            f'annotations["{OWNER}"] := owner if input.kind == "ReplicaSet"\n')


def policy_configmap(version: str, changed_ns: str) -> dict[str, str]:
    return {"owner.rego": owner_policy(version, changed_ns),
            "admission.rego": (ROOT / "policies/federation/admission.rego").read_text(),
            "remediation.rego": (ROOT / "policies/lib/remediation.rego").read_text()}


def replicaset(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


# -- the API server, audited ---------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One write a sync sent through the proxy: answered ``status`` at ``t`` (time.monotonic())."""

    t: float
    replica: str
    method: str
    path: str
    status: int


class AuditProxy(FaultProxy):
    """The API server behind a forwarding proxy that records every write and who sent it."""

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(lambda: upstream_from_kubeconfig(kubeconfig), kube_error_body, kube=True)
        self.writes: list[Write] = []

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        resp = await super()._forward(request)
        if request.method in ("POST", "PUT", "PATCH", "DELETE"):
            auth = request.headers.get("Authorization", "")
            self.writes.append(Write(time.monotonic(), auth.removeprefix("Bearer ").strip(), request.method,
                                     request.path, resp.status))  # list.append: atomic under the GIL
        return resp

    def kubeconfig(self, replica: str, path: Path) -> Path:
        """A kubeconfig for the proxy whose token names ``replica`` (the proxy puts the
        upstream's own credentials on what it forwards)."""
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "ha",
               "clusters": [{"name": "ha", "cluster": {"server": self.url}}],
               "users": [{"name": replica, "user": {"token": replica}}],
               "contexts": [{"name": "ha", "context": {"cluster": "ha", "user": replica}}]}
        path.write_text(json.dumps(doc))
        return path

    def patches(self, path_prefix: str) -> list[Write]:
        """Successful PATCHes of objects under ``path_prefix``, in order."""
        return [w for w in list(self.writes) if w.method == "PATCH" and w.path.startswith(path_prefix)
                and 200 <= w.status < 300]

    def lease_writes(self, lease_path: str) -> list[Write]:
        """Successful writes (create, takeover, renewal) of the Lease ``lease_path``."""
        collection = lease_path.rsplit("/", 1)[0]
        return [w for w in list(self.writes) if 200 <= w.status < 300 and (
            (w.method == "PUT" and w.path == lease_path) or (w.method == "POST" and w.path == collection))]


# -- fronts ---------------------------------------------------------------------------------------


class Front(LoopThread):
    """An HTTP(S) front over ``backends`` (base URLs), round-robin, in its own thread.

    A backend refusing the connection is skipped; with ``retry_cut`` a request whose
    connection was cut before an answer is sent to the next backend too. ``served``
    counts the answers per backend; ``failed`` the requests no backend answered."""

    def __init__(self, backends: Sequence[str], *, server_ssl: ssl.SSLContext | None = None,
                 client_ssl: ssl.SSLContext | None = None, retry_cut: bool = False) -> None:
        self.backends = list(backends)
        self.server_ssl, self.client_ssl, self.retry_cut = server_ssl, client_ssl, retry_cut
        self.served = {b: 0 for b in self.backends}
        self.failed = 0
        self.port = 0
        self._next = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.server_ssl else 'http'}://127.0.0.1:{self.port}"

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ssl=self.client_ssl),
                                              trust_env=False, auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.server_ssl)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        start, self._next = self._next, self._next + 1
        for i in range(len(self.backends)):
            backend = self.backends[(start + i) % len(self.backends)]
            try:
                async with self._session.request(request.method, backend + request.path_qs, data=body or None,
                                                 headers=headers, allow_redirects=False) as upstream:
                    raw = await upstream.read()
                    self.served[backend] += 1
                    return web.Response(status=upstream.status, body=raw, headers=answer_headers(upstream.headers))
            except aiohttp.ClientConnectorError:
                continue  # refused: not among the endpoints any more
            except (aiohttp.ClientConnectionError, OSError):
                if self.retry_cut:
                    continue
                break
        self.failed += 1
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=502)


# -- the stack ------------------------------------------------------------------------------------


StartOpa = Callable[[Path, str], ServerProcess]  # (log dir, name) → a started OPA


@dataclass
class HaStack:
    """Three sync + OPA pairs and three webhooks against the API server of ``kubeconfig``
    (see the module docstring). ``api`` talks to that server directly."""

    kubeconfig: Path
    api: client.ApiClient
    tmp: Path
    start_opa: StartOpa
    policy_ns: str  # policy ConfigMaps and the Lease
    changed_ns: str  # the objects the policy edit affects
    stream_ns: str  # where admissions stream (the webhook's namespace)
    replicas: int = 3
    rate: float = 10.0  # remediation patches per second (each sync's --remediate-rate)
    lease_duration: float = 15.0  # each sync's --leader-election-lease-duration
    opas: list[ServerProcess] = field(default_factory=list)
    syncs: list[ServerProcess] = field(default_factory=list)
    hooks: list[ServerProcess] = field(default_factory=list)
    proxy: AuditProxy | None = None
    opa_front: Front | None = None
    hook_front: Front | None = None
    mwc: str = ""

    @property
    def identities(self) -> list[str]:
        return [f"ha-{i}" for i in range(self.replicas)]

    @property
    def lease_path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.policy_ns}/leases/fedplace-remediator"

    @property
    def changed_path(self) -> str:
        return f"/apis/apps/v1/namespaces/{self.changed_ns}/replicasets"

    @property
    def stream_path(self) -> str:
        return f"/apis/apps/v1/namespaces/{self.stream_ns}/replicasets"

    async def put_policy(self, version: str) -> None:
        path = f"/api/v1/namespaces/{self.policy_ns}/configmaps"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "placement"},
                "data": policy_configmap(version, self.changed_ns)}
        try:
            current = await kube_json(self.api, "GET", f"{path}/placement")
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            await kube_json(self.api, "POST", path, body=body)
            return
        current["data"] = body["data"]
        await kube_json(self.api, "PUT", f"{path}/placement", body=current)

    async def start(self) -> None:
        tmp = self.tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.proxy = AuditProxy(self.kubeconfig).start()  # type: ignore[assignment]
        assert self.proxy is not None
        self.opas = list(await asyncio.gather(*(asyncio.to_thread(self.start_opa, tmp, f"opa-{i}")
                                                for i in range(self.replicas))))
        self.opa_front = Front([o.url for o in self.opas]).start()
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        ca.cert_pem.write_to_path(str(tmp / "ca.crt"))
        cert.cert_chain_pems[0].write_to_path(str(tmp / "tls.crt"))
        cert.private_key_pem.write_to_path(str(tmp / "tls.key"))
        for i, ident in enumerate(self.identities):
            kubeconfig = self.proxy.kubeconfig(ident, tmp / f"{ident}.kubeconfig")
            self.syncs.append(ServerProcess(f"sync-{i}", [
                "-m", "fedplace.sync", "--opa-url", self.opas[i].url + "/v1", "--kubeconfig", str(kubeconfig),
                "--listen", "127.0.0.1:{port}", "--opa-check-interval", "0.5", "--policy-namespace", self.policy_ns,
                "--replicate", "apps/v1/replicasets", "--remediate", "enforce",
                "--remediate-resource", "apps/v1/replicasets", "--remediate-max-fraction", "1",
                "--remediate-rate", str(self.rate), "--remediate-debounce", "0.1",
                "--leader-election-namespace", self.policy_ns, "--leader-election-identity", ident,
                "--leader-election-lease-duration", str(self.lease_duration),
                "--log-level", "info"], ready_path="/readyz", log_dir=tmp))
            self.hooks.append(ServerProcess(f"webhook-{i}", [
                "-m", "fedplace.admission", "--listen", "127.0.0.1:{port}", "--tls-cert-file", str(tmp / "tls.crt"),
                "--tls-private-key-file", str(tmp / "tls.key"), "--kubeconfig", str(self.kubeconfig),
                "--policy-namespace", self.policy_ns, "--opa-url", self.opa_front.url, "--opa-timeout", "2",
                "--deadline", "8", "--log-level", "warning"],
                ready_path="/readyz", log_dir=tmp, scheme="https", cafile=str(tmp / "ca.crt")))
        await asyncio.gather(*(asyncio.to_thread(p.start, 60) for p in self.syncs + self.hooks))
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(str(tmp / "tls.crt"), str(tmp / "tls.key"))
        client_ssl = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
        self.hook_front = Front([h.url for h in self.hooks], server_ssl=server_ssl, client_ssl=client_ssl,
                                retry_cut=True).start()
        self.mwc = f"fedplace-ha-{self.stream_ns}"
        await kube_json(self.api, "POST", MWC_PATH, body={
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.mwc},
            "webhooks": [{
                "name": "placement.fedplace.io",
                "clientConfig": {"url": self.hook_front.url + "/mutate",
                                 "caBundle": base64.b64encode(ca.cert_pem.bytes()).decode()},
                "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["replicasets"],
                           "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
                "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1"],
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                            "values": [self.stream_ns]}]}}]})

    async def stop(self) -> None:
        if self.mwc:
            try:
                await kube_json(self.api, "DELETE", f"{MWC_PATH}/{self.mwc}")
            except KubeApiError:
                pass
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in self.hooks + self.syncs + self.opas))
        for front in (self.hook_front, self.opa_front, self.proxy):
            if front is not None:
                front.stop()

    def logs(self) -> str:
        """The tail of every process's log (for a failure message)."""
        return "\n".join(f"--- {p.name} ---\n{p.log_tail(15)}" for p in self.syncs + self.hooks)

    # -- readings --

    async def lease(self) -> dict[str, Any]:
        return await kube_json(self.api, "GET", self.lease_path)

    async def policy_loaded_everywhere(self, version: str) -> bool:
        """Every OPA has the ``version`` of the policy (its decision for an object of changed_ns)."""
        doc = {"kind": "ReplicaSet", "metadata": {"name": "x", "namespace": self.changed_ns}}
        async with aiohttp.ClientSession(trust_env=False) as s:
            for opa in self.opas:
                if opa.proc is None or opa.proc.poll() is not None:
                    continue
                async with s.post(opa.url + "/v1/data/io/k8s/federation/admission/annotations",
                                  json={"input": doc}) as r:
                    if r.status != 200 or (await r.json()).get("result", {}).get(OWNER) != f"team-{version}":
                        return False
        return True

    def index_of(self, identity: str) -> int:
        return self.identities.index(identity)

    def kill_pod(self, identity: str) -> None:
        """SIGKILL the replica's sync and its OPA (its pod dies)."""
        i = self.index_of(identity)
        self.syncs[i].kill()
        self.opas[i].kill()


# -- the scenario ---------------------------------------------------------------------------------


@dataclass
class Admission:
    t: float  # sent (time.monotonic())
    seconds: float
    ok: bool
    error: str = ""


@dataclass
class Outcome:
    """What :func:`kill_the_leader` saw; times are time.monotonic()."""

    objects: list[str]
    leader: str
    new_leader: str | None
    t_edit: float
    t_kill: float
    t_takeover: float | None  # the new leader's first write of the Lease
    t_first_patch: float | None  # the new leader's first PATCH
    t_done: float | None  # every affected object carried the new annotation
    patches: dict[str, list[Write]]  # object name → its successful PATCHes (changed_ns)
    stray_patches: list[Write]  # successful PATCHes of ReplicaSets elsewhere
    modified: dict[str, int]  # object name → MODIFIED events on a watch (the API server's view)
    admissions: list[Admission]
    lease: dict[str, Any]

    def phase(self, name: str) -> list[Admission]:
        """Admissions sent before the kill, between it and the remediation's end, after that."""
        end = self.t_done if self.t_done is not None else float("inf")
        bounds = {"before": (float("-inf"), self.t_kill), "during": (self.t_kill, end), "after": (end, float("inf"))}
        lo, hi = bounds[name]
        return [a for a in self.admissions if lo <= a.t < hi]


class AdmissionStream:
    """Create ReplicaSets in ``path`` at ``rate`` per second, open loop (each on its own
    task, so a slow answer does not slow the stream), until :meth:`stop`."""

    def __init__(self, api: client.ApiClient, path: str, rate: float) -> None:
        self.api, self.path, self.rate = api, path, rate
        self.done: list[Admission] = []
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()

    async def _one(self, i: int) -> None:
        t = time.monotonic()
        try:
            obj = await kube_json(self.api, "POST", self.path, body=replicaset(f"adm-{i}"))
            got = (obj["metadata"].get("annotations") or {}).get(OWNER)
            ok, error = got == "team-v1", "" if got == "team-v1" else f"not mutated by the webhook: {OWNER}={got!r}"
        except KubeApiError as exc:
            ok, error = False, f"{exc.status} {exc.message}"
        except Exception as exc:  # noqa: BLE001 - any failure is a failed admission
            ok, error = False, repr(exc)
        self.done.append(Admission(t, time.monotonic() - t, ok, error))

    async def _run(self) -> None:
        i, start = 0, time.monotonic()
        while True:
            task = asyncio.create_task(self._one(i))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            i += 1
            await asyncio.sleep(max(0.0, start + i / self.rate - time.monotonic()))

    def start(self) -> "AdmissionStream":
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> list[Admission]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*list(self._inflight), return_exceptions=True)
        return sorted(self.done, key=lambda a: a.t)


async def watch_modified(api: client.ApiClient, path: str, counts: dict[str, int], opened: asyncio.Event) -> None:
    """Count MODIFIED events per object name on a watch of ``path`` (from now) until cancelled."""
    rv = (await kube_json(api, "GET", path))["metadata"]["resourceVersion"]
    resp = await kube_stream(api, "GET", path, query=[("watch", "true"), ("resourceVersion", rv)],
                             timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
    opened.set()
    try:
        async for line in resp.content:
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "MODIFIED":
                name = event["object"]["metadata"]["name"]
                counts[name] = counts.get(name, 0) + 1
    finally:
        resp.release()


async def kill_the_leader(stack: HaStack, *, objects: int, kill_after: int, stream_rate: float,
                          before: float = 2.0, after: float = 2.0, complete_within: float = 45.0,
                          kill_webhook: bool = True) -> Outcome:
    """The policy edit affects ``objects`` ReplicaSets (seeded before :meth:`HaStack.start`);
    admissions stream meanwhile; once the leader has patched ``kill_after`` of them its
    sync and OPA (and, with ``kill_webhook``, the webhook of the same index) are
    SIGKILLed. Returns what happened; asserts nothing beyond the remediation finishing."""
    assert stack.proxy is not None
    api, proxy = stack.api, stack.proxy
    names = [f"rs-{i}" for i in range(objects)]
    await eventually(lambda: stack.policy_loaded_everywhere("v1"), 60, "policy v1 in every OPA")
    await eventually(lambda: _holder(stack), 30, "a leader")
    stream = AdmissionStream(api, stack.stream_path, stream_rate).start()
    modified: dict[str, int] = {}
    opened = asyncio.Event()
    watcher = asyncio.create_task(watch_modified(api, stack.changed_path, modified, opened))
    t_done: float | None = None
    prefix = stack.changed_path + "/"
    try:
        await asyncio.wait_for(opened.wait(), 10)
        await asyncio.sleep(before)
        t_edit = time.monotonic()
        await stack.put_policy("v2")
        await eventually(lambda: _ready(len(proxy.patches(prefix)) >= kill_after), 30,
                       f"the leader's first {kill_after} patches")
        leader = proxy.patches(prefix)[0].replica
        t_kill = time.monotonic()
        stack.kill_pod(leader)
        if kill_webhook:
            stack.hooks[stack.index_of(leader)].kill()

        async def all_changed() -> bool:
            doc = await kube_json(api, "GET", stack.changed_path)
            return sum((i["metadata"].get("annotations") or {}).get(OWNER) == "team-v2" for i in doc["items"]) \
                == objects

        try:
            await eventually(all_changed, complete_within, "every affected object remediated")
            t_done = time.monotonic()
        except AssertionError:
            pass  # reported by the caller (t_done None)
        await asyncio.sleep(after)
    finally:
        admissions = await stream.stop()
        await asyncio.sleep(1.0)  # a stray late patch would show now
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    writes = proxy.patches("/apis/apps/v1/")
    patches: dict[str, list[Write]] = {n: [] for n in names}
    stray = []
    for w in writes:
        if w.path.startswith(prefix) and w.path[len(prefix):] in patches:
            patches[w.path[len(prefix):]].append(w)
        else:
            stray.append(w)
    takeovers = [w for w in proxy.lease_writes(stack.lease_path) if w.t > t_kill and w.replica != leader]
    new_leader = takeovers[0].replica if takeovers else None
    later = [w for w in writes if w.t > t_kill and w.replica == new_leader]
    return Outcome(names, leader, new_leader, t_edit, t_kill, takeovers[0].t if takeovers else None,
                   later[0].t if later else None, t_done, patches, stray, modified, admissions, await stack.lease())


async def _holder(stack: HaStack) -> str | None:
    return ((await stack.lease()).get("spec") or {}).get("holderIdentity")


async def _ready(value: bool) -> bool:
    return value


async def seed(api: client.ApiClient, path: str, objects: int) -> None:
    """``objects`` ReplicaSets ``rs-<i>`` under ``path``, already as policy v1 wants them."""
    sem = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        async with sem:
            await kube_json(api, "POST", path, body=replicaset(f"rs-{i}", {OWNER: "team-v1"}))

    await asyncio.gather(*(one(i) for i in range(objects)))


def start_opa_process(log_dir: Path, name: str) -> ServerProcess:
    """A scratch OPA: real (``REAL_OPA_BIN``) or a devstack engine (tests/fixtures/opa.py's)."""
    from tests.fixtures.opa import _start_dedicated

    server = _start_dedicated(log_dir, name)
    assert server.process is not None
    return server.process



