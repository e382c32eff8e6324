"""What the benchmarks share: the servers they measure, percentiles, RSS, concurrent creation.

Servers. By default a benchmark starts the devstack servers it needs and stops
them at the end. ``--opa-url`` (+ ``--opa-token-file``) and ``--kubeconfig``
(:func:`add_server_flags`) run it against external servers instead, which must
be scratch servers: the benchmark refuses to start when ``data.kubernetes``
(OPA) or a collection it measures (Kubernetes) already holds objects, writes
its own, and deletes them at the end. Its namespaces are named
``bench-<random>-…`` and emptied explicitly, never waited for: a kube-apiserver
without kube-controller-manager never finishes deleting a namespace
(``devstack/scratch.py``). What needs the devstack (its ``/_devstack``
endpoints, an engine started with other flags, a server's RSS) is skipped
against an external server, and the output says so. Every benchmark prints
which servers produced its figures (:meth:`Servers.describe`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Sequence
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio import client, config

from devstack.launch import ServerProcess
from devstack.scratch import delete_crd, delete_namespace, install_crd, unique_name
from fedplace.common.kube_client import KubeApiError, kube_json

__all__ = ["IGNORED", "Kube", "Opa", "Servers", "add_server_flags", "devstack_only", "listener_pid", "pct", "post_all",
           "proc_mb", "server_rss", "servers"]


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``; NaN for none."""
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def proc_mb(pid: int, field_name: str = "VmRSS") -> float:
    """A memory figure of a local process from /proc (``VmRSS``, ``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU time a local process has used so far (0 once it is gone), from /proc; with
    ``children``, that of its children still running too (a webhook's workers)."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        if children:
            for task in Path(f"/proc/{pid}/task").iterdir():
                for child in (task / "children").read_text().split():
                    total += cpu_seconds(int(child), children=True)
    except (OSError, ValueError, IndexError):
        pass
    return total


def listener_pid(url: str) -> int | None:
    """The pid of the local process listening on ``url``'s loopback port (this user's), else None."""
    parsed = urlsplit(url)
    if parsed.hostname not in ("127.0.0.1", "localhost") or parsed.port is None:
        return None
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == parsed.port:  # 0A: LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:
            continue
    return None


def server_rss(process: ServerProcess | None) -> str:
    """RSS of a server the benchmark started, or why there is none."""
    if process is None or process.proc is None:
        return "n/a (external server)"
    return f"{proc_mb(process.proc.pid):.0f} MB"


def devstack_only(what: str) -> str:
    """The line a benchmark prints instead of a figure only the devstack can give."""
    return f"skipped ({what}: devstack only, and an external server was given)"


async def post_all(api: client.ApiClient, items: list[tuple[str, dict[str, Any]]], conc: int = 64) -> None:
    """POST every (path, body) to the API server with ``conc`` workers; any non-2xx raises."""
    queue = list(items)

    async def worker() -> None:
        while queue:
            path, body = queue.pop()
            await kube_json(api, "POST", path, body=body)

    await asyncio.gather(*(worker() for _ in range(conc)))


IGNORED = "not used by this benchmark (accepted so that one set of flags fits every benchmark)"


def add_server_flags(parser: argparse.ArgumentParser, *, opa: bool = False, kube: bool = False) -> None:
    """``--opa-url``, ``--opa-token-file``, ``--kubeconfig``; ``opa`` and ``kube`` say which
    servers the benchmark uses (:func:`servers` starts or connects those)."""
    group = parser.add_argument_group(
        "servers", "default: start devstack servers; with these flags, use external ones (scratch servers: "
                   "see docs/benchmarks.md)")
    group.add_argument("--opa-url", metavar="URL", help=IGNORED if not opa else
                       "an external OPA, server root (e.g. http://127.0.0.1:8181), instead of a devstack engine")
    group.add_argument("--opa-token-file", metavar="PATH", help=IGNORED if not opa else "bearer token for --opa-url")
    group.add_argument("--kubeconfig", metavar="PATH", help=IGNORED if not kube else
                       "an external Kubernetes API server, instead of the devstack one")
    parser.set_defaults(uses_opa=opa, uses_kube=kube)


class _Server:
    """A server this benchmark started (``process``), or an external one (``process`` None)."""

    process: ServerProcess | None

    @property
    def external(self) -> bool:
        return self.process is None


@dataclass
class Opa(_Server):
    """An OPA: a devstack engine this benchmark started (``process``), or an external one."""

    url: str
    token_file: Path | None = None
    process: ServerProcess | None = None
    documents: set[str] = field(default_factory=set)
    policy_prefixes: set[str] = field(default_factory=set)

    @classmethod
    def start(cls, tmp: Path, name: str = "engine", *extra: str) -> "Opa":
        """A devstack engine (stop it with :meth:`close`)."""
        proc = ServerProcess(name, ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}", "--log-level", "warning",
                                    *extra], "/health", tmp).start()
        return cls(proc.url, process=proc)

    def describe(self) -> str:
        if self.external:
            return f"OPA: external {self.url}"
        return "OPA: devstack engine (OPA 1.20's compiler and evaluator in process), started by the benchmark"

    def headers(self) -> dict[str, str]:
        token = self.token_file.read_text().strip() if self.token_file else ""
        return {"Authorization": f"Bearer {token}"} if token else {}

    def session(self) -> aiohttp.ClientSession:
        """An HTTP session sending this OPA's token, asking for answers uncompressed as fedplace's
        clients do (OPA gzips answers over 1 KiB for a client that accepts it: about 0.2 ms of a
        6 KB decision that no fedplace component pays)."""
        return aiohttp.ClientSession(headers=self.headers(), skip_auto_headers=("Accept-Encoding",))

    def sync_flags(self) -> list[str]:
        """opa-kube-sync's flags for this OPA."""
        token = ["--opa-token-file", str(self.token_file)] if self.token_file else []
        return ["--opa-url", self.url + "/v1", *token]

    def owns(self, documents: Sequence[str] = (), policies: Sequence[str] = ()) -> None:
        """What the benchmark writes (top-level documents, policy id prefixes): deleted
        by :meth:`close` on an external OPA."""
        self.documents.update(documents)
        self.policy_prefixes.update(policies)

    async def require_scratch(self) -> None:
        """Refuse an external OPA whose ``data.kubernetes`` holds anything: benchmarks overwrite it."""
        async with self.session() as s, s.get(self.url + "/v1/data/kubernetes") as r:
            r.raise_for_status()
            if (await r.json()).get("result"):
                raise SystemExit(f"refusing to run: data.kubernetes on {self.url} is not empty, and this benchmark "
                                 "overwrites it; point --opa-url at a scratch OPA")

    async def close(self) -> None:
        if self.process is not None:
            self.process.stop()
            return
        async with self.session() as s:
            for doc in self.documents:
                async with s.delete(f"{self.url}/v1/data/{doc}") as r:
                    assert r.status in (204, 404), (doc, r.status)
            for _ in range(10):  # OPA refuses to delete a module others still use (400): repeat
                async with s.get(self.url + "/v1/policies") as r:
                    ids = [p["id"] for p in (await r.json()).get("result") or []
                           if p["id"].startswith(tuple(self.policy_prefixes))]
                if not ids:
                    return
                for pid in ids:
                    async with s.delete(f"{self.url}/v1/policies/{pid}") as r:
                        assert r.status in (200, 400), (pid, r.status)
            raise RuntimeError(f"could not delete the benchmark's policies from {self.url}: {ids}")


@dataclass
class Kube(_Server):
    """A Kubernetes API server: the devstack one this benchmark started (``process``), or an external one."""

    api: client.ApiClient
    kubeconfig: Path
    process: ServerProcess | None = None
    version: str = ""
    run: str = field(default_factory=lambda: unique_name("bench"))
    namespaces: list[str] = field(default_factory=list)
    crds: list[tuple[str, str, bool]] = field(default_factory=list)  # (name, collection, created by us)

    @classmethod
    async def connect(cls, kubeconfig: str | None, tmp: Path, extra: Sequence[str] = ()) -> "Kube":
        """The server of ``kubeconfig``, else a devstack one started with ``extra`` flags."""
        process = None
        path = Path(kubeconfig) if kubeconfig else tmp / "kubeconfig"
        if not kubeconfig:
            process = ServerProcess("kube", ["-m", "devstack.kube", "--listen", "127.0.0.1:{port}",
                                             "--write-kubeconfig", str(path), "--log-level", "warning", *extra],
                                    "/version", tmp).start()
        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(path), client_configuration=cfg, persist_config=False)
        cfg.connection_pool_maxsize = 128  # the benchmarks send up to 64 requests at a time
        api = client.ApiClient(cfg)
        version = (await kube_json(api, "GET", "/version"))["gitVersion"]
        return cls(api, path, process, version)

    def describe(self) -> str:
        if self.external:
            return f"Kubernetes API: external {self.api.configuration.host} ({self.version})"
        return f"Kubernetes API: devstack fedplace-kube ({self.version}), started by the benchmark"

    async def namespace(self, suffix: str) -> str:
        """Create namespace ``<run>-<suffix>`` (``run`` is ``bench-<random>``); removed by :meth:`close`."""
        name = f"{self.run}-{suffix}"
        await kube_json(self.api, "POST", "/api/v1/namespaces",
                        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.namespaces.append(name)
        return name

    async def require_empty(self, collection: str, why: str) -> None:
        """Refuse a server whose ``collection`` (a list path) already holds objects."""
        try:
            doc = await kube_json(self.api, "GET", collection, query=[("limit", "1")])
        except KubeApiError as exc:
            if exc.status == 404:
                return
            raise
        if doc.get("items"):
            raise SystemExit(f"refusing to run: {collection} on {self.api.configuration.host} already holds objects "
                             f"({why}); point --kubeconfig at a scratch server")

    async def install_crd(self, body: dict[str, Any], collection: str) -> None:
        """Install a cluster-scoped CRD unless present; refuse when ``collection`` already
        has objects. :meth:`close` removes the CRD if it was installed here, else its objects."""
        created = await install_crd(self.api, body)
        if not created:
            await self.require_empty(collection, "the figures assume only the benchmark's own objects")
        self.crds.append((body["metadata"]["name"], collection, created))

    async def close(self) -> None:
        try:
            if self.process is not None:
                self.process.stop()
                return
            for name in self.namespaces:
                await delete_namespace(self.api, name, empty=True)
            for name, collection, created in self.crds:
                if created:
                    await delete_crd(self.api, name)
                else:
                    await kube_json(self.api, "DELETE", collection, timeout=300)
        finally:
            await self.api.close()


@dataclass
class Servers:
    opa: Opa | None = None
    kube: Kube | None = None

    def describe(self) -> str:
        """Which servers produced the figures, for the benchmark's output."""
        return "Servers: " + "; ".join(s.describe() for s in (self.opa, self.kube) if s is not None)


@asynccontextmanager
async def servers(args: argparse.Namespace, tmp: Path, kube_args: Sequence[str] = ()) -> AsyncIterator[Servers]:
    """The servers the benchmark uses (see :func:`add_server_flags`): external ones
    (checked to be scratch, cleaned up after) or devstack ones (stopped after)."""
    for flag, used in (("opa_url", args.uses_opa), ("opa_token_file", args.uses_opa), ("kubeconfig", args.uses_kube)):
        if getattr(args, flag) and not used:
            print(f"note: --{flag.replace('_', '-')} ignored: {IGNORED}", file=sys.stderr)
    found = Servers()
    try:
        if args.uses_opa:
            if args.opa_url:
                external = Opa(args.opa_url.rstrip("/").removesuffix("/v1"),
                               Path(args.opa_token_file) if args.opa_token_file else None)
                await external.require_scratch()
                found.opa = external
            else:
                found.opa = Opa.start(tmp)
        if args.uses_kube:
            found.kube = await Kube.connect(args.kubeconfig, tmp, kube_args)
        yield found
    finally:
        for server in (found.kube, found.opa):
            if server is not None:
                await server.close()
