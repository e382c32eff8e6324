"""A seeded, time-bounded fuzz campaign against fedplace-admission and opa-kube-sync.

Both run as subprocesses (``python -m fedplace.admission``, ``python -m fedplace.sync``) against
the devstack engine and API server, so a crash is a process that exits and
memory is the process's own RSS. One ``random.Random(seed)`` drives every
choice, so a seed replays a campaign (timing aside).

Admission: malformed and hostile AdmissionReviews over HTTP — random JSON,
mutated reviews (wrong types, huge strings, deep nesting, NaN/Infinity and
overflowing numbers, invalid UTF-8, truncation), ``Content-Encoding`` lies,
oversized bodies — and over raw sockets: half-sent heads and bodies, clients
that leave mid-body, malformed HTTP. Every policy there denies every object but
the (marked) old object each UPDATE carries, so any ``allowed: true`` for a CREATE,
or an UPDATE whose old object is still the marked one, is a **fail-open**. Any 5xx
is counted; so is the webhook dying.

ConfigMaps: policy ConfigMaps created, updated and deleted with modules made
of valid Rego, ``package system…`` in every spelling the lexer must see
through (newlines, CRLF, BOM, comments, quoted refs), rule conflicts across
ConfigMaps, oversized and rule-heavy modules, enormous lines, random bytes and
``binaryData``. Afterwards every ConfigMap must carry a status annotation
within bounds, OPA must hold no module under ``data.system``, and the sync
must be alive, healthy and ready.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from devstack.launch import ServerProcess
from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.sync.policy_status import MAX_STATUS_BYTES, STATUS_ANNOTATION

__all__ = ["AdmissionFigures", "ConfigMapFigures", "fuzz_admission", "fuzz_configmaps", "proc_rss_mb"]

# The old object of every UPDATE sent carries this annotation, and only it is admitted: the
# webhook denies an UPDATE for the errors the old object does not have, so the old object
# must have none for the denial of every new object to be expected.
OLD_MARK = "fedplace.io/fuzz-old-object"
DENY_ALL = ('package io.k8s.federation.admission\n\n'
            f'errors contains "fuzz: every object is denied" if not input.metadata.annotations["{OLD_MARK}"] == "yes"\n')


def proc_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def proc_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


_OPEN_STATES = {"01", "08"}  # ESTABLISHED, CLOSE_WAIT (the peer closed, the server has not)


def open_connections(port: int) -> int:
    """TCP connections to local ``port`` still open on the server's side (Linux /proc/net), -1 when
    unknown. Unlike the process's fd count, this leaves out the server's own keep-alive pool to OPA,
    whose size follows the load."""
    count, found = 0, False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        found = True
        for row in rows:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in _OPEN_STATES:
                count += 1
    return count if found else -1


# -- admission ------------------------------------------------------------------------------------------


@dataclass
class AdmissionFigures:
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    server_errors: int = 0  # 5xx
    fail_opens: int = 0
    client_failures: int = 0  # the client saw no HTTP answer (expected for socket abuse)
    crashed: bool = False
    rss_start_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_end_mb: float = 0.0
    fds_start: int = 0
    fds_end: int = 0
    connections_end: int = 0  # connections to the webhook still open at the end (open_connections)
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["statuses"] = dict(self.statuses)
        return out

    def line(self) -> str:
        return (f"admission: {self.requests} requests in {self.seconds:.0f} s, statuses {dict(sorted(self.statuses.items()))}, "
                f"5xx {self.server_errors}, crashes {int(self.crashed)}, fail-opens {self.fail_opens}, "
                f"RSS {self.rss_start_mb:.0f} → peak {self.rss_peak_mb:.0f} → {self.rss_end_mb:.0f} MB, "
                f"open fds {self.fds_start} → {self.fds_end}, connections left open {self.connections_end}")


def replicaset(rng: random.Random) -> dict[str, Any]:
    name = f"fuzz-{rng.randrange(10**6)}"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "annotations": {"a": "b"}},
            "spec": {"replicas": rng.randrange(5), "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def review(rng: random.Random, obj: Any = None, operation: str | None = None) -> dict[str, Any]:
    obj = replicaset(rng) if obj is None else obj
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(uuid.UUID(int=rng.getrandbits(128))), "operation": operation or rng.choice(
                ["CREATE", "UPDATE", "CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH", ""]),
                "kind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"},
                "resource": {"group": "apps", "version": "v1", "resource": "replicasets"},
                "namespace": "default", "name": "x", "object": obj, "oldObject": old_version(obj),
                "userInfo": {"username": "fuzz"}, "dryRun": rng.random() < 0.3}}


def old_version(obj: Any) -> Any:
    """``obj`` as the old object of an UPDATE: marked with :data:`OLD_MARK`, which the policy admits."""
    if not isinstance(obj, dict):
        return obj
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return {**obj, "metadata": {**meta, "annotations": {OLD_MARK: "yes"}}}


def denial_expected(req: Any) -> bool:
    """Whether the webhook must deny ``req``: a CREATE, or an UPDATE whose old object is still
    the marked one (a mutated old object the policy denies too has the new object's error,
    which the update did not introduce: admitted by design, as DELETE and CONNECT are)."""
    if not isinstance(req, dict) or req.get("operation") in ("DELETE", "CONNECT"):
        return False
    if req.get("operation") != "UPDATE":
        return True
    old = req.get("oldObject")
    annotations = (old.get("metadata") or {}).get("annotations") if isinstance(old, dict) and \
        isinstance(old.get("metadata"), dict) else None
    return isinstance(annotations, dict) and annotations.get(OLD_MARK) == "yes"


def random_json(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 4 or r < 0.3:
        return rng.choice([None, True, False, rng.randrange(-10**20, 10**20), rng.random() * 1e308,
                           "x" * rng.randrange(50), "\u0000\ud7ff\ue000", "", "💥"])
    if r < 0.65:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "request", "object", "metadata", "", "🔑"]): random_json(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def mutate(rng: random.Random, doc: dict[str, Any]) -> None:
    """Replace one field somewhere in ``doc`` by something of the wrong kind."""
    target: Any = doc
    path = []
    while isinstance(target, dict) and target and rng.random() < 0.75:
        key = rng.choice(list(target))
        path.append(key)
        if not isinstance(target[key], (dict, list)) or rng.random() < 0.3:
            break
        if isinstance(target[key], list):
            break
        target = target[key]
    if isinstance(target, dict):
        key = rng.choice(list(target) or ["x"])
        target[key] = random_json(rng)


def http_case(rng: random.Random, max_body: int) -> tuple[str, bytes, dict[str, str]]:
    """(kind, body, headers) of one request sent with an HTTP client."""
    headers = {"Content-Type": "application/json"}
    kind = rng.choice(["valid", "valid", "mutated", "mutated", "random", "deep", "nonfinite", "bytes",
                       "truncated", "gzip-lie", "gzip", "huge-string", "oversized", "deep-object", "types"])
    doc = review(rng)
    if kind == "valid":
        body = json.dumps(doc).encode()
    elif kind == "mutated":
        for _ in range(rng.randrange(1, 4)):
            mutate(rng, doc)
        body = json.dumps(doc).encode()
    elif kind == "random":
        body = json.dumps(random_json(rng)).encode()
    elif kind == "deep":
        depth = rng.choice([90, 101, 500, 990, 1000, 5000, 50_000])
        inner = "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
        body = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":' + inner.encode() + b"}"
    elif kind == "deep-object":  # 500–990 levels broke the JSON Patch copy; built as text (json.dumps recurses)
        depth = rng.choice([50, 95, 300, 600, 990])
        deep = '{"n":' * depth + '"leaf"' + "}" * depth if rng.random() < 0.5 else "[" * depth + "]" * depth
        doc["request"]["object"]["spec"]["x"] = "__DEEP__"
        body = json.dumps(doc).encode().replace(b'"__DEEP__"', deep.encode())
    elif kind == "nonfinite":
        lit = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999", b"1" + b"0" * 5000])
        body = json.dumps(doc).encode().replace(b'"replicas": ', b'"replicas": ' + lit + b", \"was\": ", 1)
    elif kind == "bytes":
        body = rng.randbytes(rng.randrange(1, 2000))
    elif kind == "truncated":
        full = json.dumps(doc).encode()
        body = full[:rng.randrange(len(full))]
    elif kind == "gzip-lie":
        body = json.dumps(doc).encode()
        headers["Content-Encoding"] = rng.choice(["gzip", "deflate", "br", "gzip, gzip", "compress"])
    elif kind == "gzip":
        body = gzip.compress(json.dumps(doc).encode())
        headers["Content-Encoding"] = "gzip"
    elif kind == "huge-string":
        doc["request"]["object"]["metadata"]["annotations"]["big"] = "x" * rng.randrange(10_000, 2_000_000)
        body = json.dumps(doc).encode()
    elif kind == "oversized":
        body = b'{"pad":"' + b"x" * (max_body + rng.randrange(1, 100_000)) + b'"}'
    else:  # types: the right keys with values of the wrong type
        req = doc["request"]
        req[rng.choice(["uid", "name", "namespace", "dryRun", "object", "oldObject", "kind", "userInfo",
                        "subResource"])] = random_json(rng)
        body = json.dumps(doc).encode()
    if rng.random() < 0.05:
        headers["Content-Type"] = rng.choice(["text/plain", "application/x-www-form-urlencoded", "", "💥"])
    return kind, body, headers


SOCKET_CASES = ("half-head", "half-body", "leave-mid-body", "bad-header", "bad-request-line", "huge-header",
                "chunked-garbage", "pipelined")


async def socket_case(rng: random.Random, host: str, port: int, kind: str, read_timeout: float) -> int | None:
    """One raw-socket abuse; the HTTP status the server answered, or None."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if kind == "half-head":
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        elif kind == "half-body":
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"apiVersion\":")
        elif kind == "leave-mid-body":
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"a\":")
            await writer.drain()
            return None
        elif kind == "bad-header":
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + rng.randbytes(30).replace(b"\r", b"") + b"\r\n\r\n")
        elif kind == "bad-request-line":
            writer.write(rng.randbytes(40).replace(b"\n", b"") + b"\r\n\r\n")
        elif kind == "huge-header":
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        elif kind == "chunked-garbage":
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" +
                         rng.randbytes(20) + b"\r\n0\r\n\r\n")
        else:  # pipelined: two reviews back to back on one connection
            one = json.dumps(review(rng, operation="CREATE")).encode()
            req = (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                   + str(len(one)).encode() + b"\r\n\r\n" + one)
            writer.write(req + req)
        await writer.drain()
        data = b""
        async with asyncio.timeout(read_timeout * 3 + 5):
            while chunk := await reader.read(65536):
                data += chunk
        if data.startswith(b"HTTP/"):
            return int(data.split(b" ", 2)[1])
        return None
    except (ConnectionError, TimeoutError):
        return None
    finally:
        writer.close()


async def fuzz_admission(*, rng: random.Random, requests: int, seconds: float, opa: Any, kube: Any, api: Any,
                         policy_ns: str, log_dir: Path, concurrency: int = 12,
                         read_timeout: float = 2.0) -> AdmissionFigures:
    """Run the webhook as a subprocess and send it ``requests`` requests (or stop after ``seconds``)."""
    await opa.put_policy("fuzz/deny-all.rego", DENY_ALL)
    await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deny-all"}, "data": {"p.rego": DENY_ALL}})
    max_body = 3 * 1024 * 1024
    config = log_dir / "admission-fuzz.yaml"
    config.write_text(json.dumps({"read_timeout": read_timeout, "deadline": 2.0, "opa": {"timeout": 1.0},
                                  "events": {"burst": 5, "refill_seconds": 60}}))
    hook = ServerProcess("admission-fuzz", ["-m", "fedplace.admission", "--config", str(config), "--listen",
                                            "127.0.0.1:{port}", "--opa-url", opa.url, "--kubeconfig",
                                            str(kube.kubeconfig), "--policy-namespace", policy_ns,
                                            "--log-level", "warning"], "/readyz", log_dir)
    hook.start(timeout=30)
    figs = AdmissionFigures()
    assert hook.proc is not None
    pid = hook.proc.pid
    figs.rss_start_mb = figs.rss_peak_mb = proc_rss_mb(pid)
    figs.fds_start = proc_fds(pid)
    started = time.monotonic()
    sent = 0
    lock = asyncio.Lock()
    cases = [(rng.random(), rng.getrandbits(64)) for _ in range(requests)]  # fixed by the seed

    async def one(session: aiohttp.ClientSession, r: float, seed: int) -> None:
        nonlocal sent
        local = random.Random(seed)
        status: int | None
        if r < 0.12:
            kind = local.choice(SOCKET_CASES)
            status = await socket_case(local, "127.0.0.1", hook.port, kind, read_timeout)
            doc, sent_review = None, None
        else:
            kind, body, headers = http_case(local, max_body)
            sent_review = None
            # What the webhook may have read: the body as sent, or gunzipped (an encoding it does not
            # decode is read as is).
            for decode in (gzip.decompress, lambda b: b):
                try:
                    parsed = json.loads(decode(body))
                except (ValueError, UnicodeDecodeError, RecursionError, OSError, EOFError):
                    continue
                if isinstance(parsed, dict):
                    sent_review = parsed
                    break
            try:
                async with session.post(hook.url + "/mutate", data=body, headers=headers,
                                        timeout=aiohttp.ClientTimeout(total=read_timeout * 3 + 10)) as resp:
                    status = resp.status
                    raw = await resp.read()
                doc = json.loads(raw) if status == 200 else None
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                status, doc = None, None
        async with lock:
            sent += 1
            figs.requests += 1
            socket = kind in SOCKET_CASES
            figs.statuses[str(status) if status is not None else
                          ("no answer (socket abuse)" if socket else f"no answer ({kind})")] += 1
            if status is None:
                figs.client_failures += 1
            elif status >= 500:
                figs.server_errors += 1
                if len(figs.examples) < 5:
                    figs.examples.append(f"5xx for {kind}")
            if isinstance(doc, dict):
                resp_doc = doc.get("response") or {}
                req = (sent_review or {}).get("request") if isinstance(sent_review, dict) else None
                # Every CREATE and UPDATE must be denied (but what denial_expected() excludes by design).
                if resp_doc.get("allowed") is True and denial_expected(req):
                    figs.fail_opens += 1
                    if len(figs.examples) < 5:
                        figs.examples.append(f"fail-open for {kind}: {str(sent_review)[:300]} -> {str(resp_doc)[:300]}")
            figs.rss_peak_mb = max(figs.rss_peak_mb, proc_rss_mb(pid))

    try:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            queue: asyncio.Queue[tuple[float, int]] = asyncio.Queue()
            for case in cases:
                queue.put_nowait(case)

            async def worker() -> None:
                while not queue.empty() and time.monotonic() - started < seconds:
                    r, seed = queue.get_nowait()
                    await one(session, r, seed)

            faults = asyncio.create_task(_opa_faults(rng.random, opa, started, seconds)) if not opa.external \
                else asyncio.create_task(asyncio.sleep(0))
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            faults.cancel()
            if not opa.external:
                await opa.clear_faults()
        figs.seconds = time.monotonic() - started
        await asyncio.sleep(read_timeout + 1)  # half-open connections time out
        figs.crashed = hook.proc.poll() is not None
        figs.rss_end_mb = proc_rss_mb(pid)
        figs.fds_end = proc_fds(pid)
        figs.connections_end = open_connections(hook.port)
    finally:
        hook.stop()
    return figs


async def _opa_faults(rand: Any, opa: Any, started: float, seconds: float) -> None:
    """Now and then OPA answers 500 or slowly: the webhook must still fail closed."""
    while time.monotonic() - started < seconds:
        await asyncio.sleep(1.0)
        r = rand()
        if r < 0.2:
            await opa.set_faults({"fail": {"path": "/v1/data", "status": 500, "count": 5}})
        elif r < 0.3:
            await opa.set_faults({"latency": 0.5})
            await asyncio.sleep(0.5)
            await opa.set_faults({"latency": 0})


# -- ConfigMaps -----------------------------------------------------------------------------------------


@dataclass
class ConfigMapFigures:
    writes: int = 0
    deletes: int = 0
    configmaps: int = 0
    statuses_missing: int = 0
    statuses_oversized: int = 0
    status_codes: Counter = field(default_factory=Counter)
    system_modules_in_opa: int = 0
    crashed: bool = False
    healthy: bool = True
    ready: bool = True
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["status_codes"] = dict(self.status_codes)
        return out

    def line(self) -> str:
        return (f"configmaps: {self.writes} writes + {self.deletes} deletes in {self.seconds:.0f} s, "
                f"{self.configmaps} left, statuses missing {self.statuses_missing}, oversized "
                f"{self.statuses_oversized}, codes {dict(sorted(self.status_codes.items()))}, system modules in "
                f"OPA {self.system_modules_in_opa}, crashes {int(self.crashed)}, healthy {self.healthy}, "
                f"ready {self.ready}, RSS {self.rss_start_mb:.0f} → {self.rss_end_mb:.0f} MB")


SYSTEM_SPELLINGS = ["package system.authz", "package\nsystem.authz", "package\r\nsystem.authz",
                    "\ufeffpackage system.authz", "package # c\n  system.authz", 'package system["authz"]',
                    "package\tsystem", "#x\n\npackage   system.log", "package system[`authz`]",
                    'package system["a"]["b"]', "package\n\n# c\n\nsystem"]


def module(rng: random.Random) -> str:
    r = rng.random()
    pkg = f"fuzzcm.p{rng.randrange(6)}"
    if r < 0.2:
        return rng.choice(SYSTEM_SPELLINGS) + "\n\nallow if true\n"
    if r < 0.35:  # complete rules that conflict across ConfigMaps
        value = rng.choice(["true", "false", "1", '"x"'])
        return f"package {pkg}\n\nallow := {value}\n"
    if r < 0.45:
        return f"package {pkg}\n\n" + "".join(f"r{i} := {i}\n" for i in range(rng.choice([10, 1200, 6000])))
    if r < 0.5:
        return f"package {pkg}\n\nx := \"" + "y" * rng.choice([1000, 300_000]) + "\" garbage\n"
    if r < 0.6:
        return f"package {pkg}\n\nf(x) := 1 if x\n" if rng.random() < 0.5 else f"package {pkg}\n\nf := 2\n"
    if r < 0.7:
        return rng.randbytes(rng.randrange(1, 300)).decode("utf-8", "replace")
    if r < 0.8:  # a long bad line: OPA quotes it in its error
        return f"package {pkg}\n\nx := [" + ", ".join(str(i) for i in range(rng.choice([100, 30_000]))) + " ]]\n"
    if r < 0.85:
        return "package data.system.x\n\ny := 1\n"
    return f"package {pkg}\n\nv{rng.randrange(100)} := {rng.randrange(100)}\nok if input.x == {rng.randrange(9)}\n"


async def fuzz_configmaps(*, rng: random.Random, operations: int, seconds: float, opa: Any, kube: Any, api: Any,
                          policy_ns: str, log_dir: Path) -> ConfigMapFigures:
    sync = ServerProcess("sync-fuzz", ["-m", "fedplace.sync", "--opa-url", opa.url + "/v1", "--kubeconfig",
                                       str(kube.kubeconfig), "--listen", "127.0.0.1:{port}", "--enable-data", "false",
                                       "--policy-namespace", policy_ns, "--opa-check-interval", "0.5",
                                       "--opa-timeout", "5", "--log-level", "warning"], "/healthz", log_dir)
    sync.start(timeout=30)
    assert sync.proc is not None
    figs = ConfigMapFigures(rss_start_mb=proc_rss_mb(sync.proc.pid))
    started = time.monotonic()
    path = f"/api/v1/namespaces/{policy_ns}/configmaps"
    names = [f"cm-{i}" for i in range(12)]
    try:
        for _ in range(operations):
            if time.monotonic() - started > seconds:
                break
            name = rng.choice(names)
            r = rng.random()
            try:
                if r < 0.12:
                    await kube_json(api, "DELETE", f"{path}/{name}")
                    figs.deletes += 1
                    continue
                body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
                if r < 0.18:
                    body["binaryData"] = {"p.rego": base64.b64encode(rng.randbytes(40)).decode()}
                else:
                    body["data"] = {f"k{j}.rego": module(rng) for j in range(rng.randrange(1, 4))}
                try:
                    await kube_json(api, "POST", path, body=body)
                except KubeApiError as exc:
                    if exc.status != 409:
                        raise
                    cur = await kube_json(api, "GET", f"{path}/{name}")
                    cur["data"], cur["binaryData"] = body.get("data"), body.get("binaryData")
                    await kube_json(api, "PUT", f"{path}/{name}", body=cur)
                figs.writes += 1
            except KubeApiError as exc:
                if exc.status not in (404, 409):
                    figs.problems.append(f"API server: {exc}")
            await asyncio.sleep(rng.random() * 0.2)
        # Settle: every ConfigMap gets the status of its current data.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            doc = await kube_json(api, "GET", path)
            missing = [c for c in doc["items"] if STATUS_ANNOTATION not in (c["metadata"].get("annotations") or {})]
            if not missing and await _ready(sync.url):
                break
            await asyncio.sleep(0.5)
        figs.seconds = time.monotonic() - started
        doc = await kube_json(api, "GET", path)
        figs.configmaps = len(doc["items"])
        for cm in doc["items"]:
            raw = (cm["metadata"].get("annotations") or {}).get(STATUS_ANNOTATION)
            if raw is None:
                figs.statuses_missing += 1
                continue
            if len(raw.encode()) > MAX_STATUS_BYTES:
                figs.statuses_oversized += 1
            status = json.loads(raw)
            for err in status.get("errors") or [{"code": "ok"}]:
                figs.status_codes[err.get("code", "?")] += 1
        _, body = await opa.request("GET", "/v1/policies")
        for p in body["result"]:
            path_terms = ((p.get("ast") or {}).get("package") or {}).get("path") or []
            if len(path_terms) > 1 and path_terms[1].get("value") == "system":
                figs.system_modules_in_opa += 1
                figs.problems.append(f"system module loaded: {p['id']}")
        figs.crashed = sync.proc.poll() is not None
        figs.healthy = await _get_ok(sync.url + "/healthz")
        figs.ready = await _ready(sync.url)
        figs.rss_end_mb = proc_rss_mb(sync.proc.pid)
    finally:
        sync.stop()
    return figs


async def _get_ok(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
                return r.status == 200
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return False


async def _ready(url: str) -> bool:
    return await _get_ok(url + "/readyz")
