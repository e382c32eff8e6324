"""Kubernetes API access shared by every component.

* :func:`new_api_client` builds a kubernetes_asyncio ``ApiClient`` from a
  kubeconfig (flag, then ``$KUBECONFIG``) or, with neither, from the in-cluster
  service account: the services' rule.
* :func:`load_client_config` resolves the API server as kubectl does (the
  ``fedplace`` command's rule): ``--kubeconfig``, else ``$KUBECONFIG`` (several
  files, merged), else ``~/.kube/config``, else in-cluster; ``--context``; the
  context's namespace. Every problem with the kubeconfig is a
  :class:`KubeConfigError` with a one-line message.
* :class:`Resource` names a resource type (``[group/]version/plural``) and
  builds its URL paths, for built-in types and custom resources alike.
* :func:`kube_json` / :func:`kube_stream` make raw JSON calls through the
  ApiClient (its auth, TLS and connection pool), returning plain dicts: the
  generic code paths (replication, informers, patches) need no typed models.
  Non-2xx answers raise :class:`KubeApiError` carrying the ``Status`` fields.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import aiohttp
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_HOST_ENV_NAME,
    SERVICE_PORT_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
)
from kubernetes_asyncio.config.kube_config import ConfigNode, KubeConfigLoader

__all__ = ["ClientConfig", "KubeApiError", "KubeConfigError", "Resource", "kube_json", "kube_stream",
           "load_client_config", "new_api_client"]

SERVICE_NAMESPACE_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


async def new_api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """ApiClient from ``kubeconfig``, else ``$KUBECONFIG``, else in-cluster config."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        return await config.new_client_from_config(config_file=path, context=context)
    cfg = client.Configuration()
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(configuration=cfg)


class KubeConfigError(ValueError):
    """The kubeconfig cannot be used: missing or unreadable, not a kubeconfig, an unknown context, …
    The message is one line and names the file or the flag."""


@dataclass
class ClientConfig:
    """The API server as kubectl resolves it (:func:`load_client_config`); nothing is contacted yet."""

    source: str  # what it came from, for messages: "kubeconfig a.yaml", "in-cluster", …
    namespace: str  # the context's namespace; "default" when it names none
    context: str | None = None  # the context in use (None: in-cluster, or no kubeconfig)
    in_cluster: bool = False
    problem: str | None = None  # why no client can be built (no kubeconfig at all, no current context)
    merged: dict[str, Any] = field(default_factory=dict, repr=False)
    first_file: str | None = None

    async def api_client(self) -> client.ApiClient:
        """An ApiClient for the resolved server; raises :class:`KubeConfigError`."""
        if self.problem is not None:
            raise KubeConfigError(self.problem)
        cfg = client.Configuration()
        if self.in_cluster:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except (ConfigException, OSError, ValueError) as exc:
                raise KubeConfigError(f"in-cluster configuration: {_one_line(exc)}") from exc
            return _api_client(cfg, "in-cluster configuration")
        contexts = {e["name"]: e for e in self.merged["contexts"]}
        ctx = contexts[self.context]["context"]
        clusters = {e["name"]: e for e in self.merged["clusters"]}
        cluster_name = ctx.get("cluster")
        if not isinstance(cluster_name, str) or cluster_name not in clusters:
            raise KubeConfigError(f"{self.source}: context {self.context!r} names cluster {cluster_name!r}, "
                                  "which is not in it")
        server = clusters[cluster_name]["cluster"].get("server")
        if not isinstance(server, str) or not server.strip():
            raise KubeConfigError(f"{self.source}: cluster {cluster_name!r} has no server")
        user = ctx.get("user")
        if user is not None and user not in {e["name"] for e in self.merged["users"]}:
            raise KubeConfigError(f"{self.source}: context {self.context!r} names user {user!r}, which is not in it")
        # The entries keep the file they came from: relative certificate and token paths are
        # resolved against it, as kubectl does (kubernetes_asyncio's KubeConfigMerger does the same).
        node = ConfigNode(self.first_file or "kubeconfig", {
            **{k: v for k, v in self.merged.items() if k not in ("clusters", "contexts", "users", "_files")},
            **{kind: [ConfigNode(f"{self.merged['_files'][kind][e['name']]}/{e['name']}", e,
                                 self.merged["_files"][kind][e["name"]]) for e in self.merged[kind]]
               for kind in ("clusters", "contexts", "users")}}, self.first_file)
        try:
            loader = KubeConfigLoader(config_dict=node, config_base_path=None, active_context=self.context)
            await loader.load_and_set(cfg)
        except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError, AssertionError) as exc:
            # ValueError: bad base64 certificate data; the others: entries of the wrong shape
            raise KubeConfigError(f"{self.source}: context {self.context!r}: {_one_line(exc)}") from exc
        return _api_client(cfg, f"{self.source}: context {self.context!r}")


def _api_client(cfg: client.Configuration, source: str) -> client.ApiClient:
    try:  # the client loads the CA and client certificates now
        return client.ApiClient(configuration=cfg)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise KubeConfigError(f"{source}: the certificates cannot be loaded: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or exc.__class__.__name__


def _kubeconfig_files(explicit: str | None, environ: Mapping[str, str]) -> tuple[list[str], str]:
    """The files to merge, and how to name where they come from (kubectl's precedence)."""
    if explicit is not None:
        if not explicit:
            raise KubeConfigError("--kubeconfig: empty file name")
        path = os.path.expanduser(explicit)
        if not os.path.exists(path):
            raise KubeConfigError(f"--kubeconfig {explicit}: no such file")
        return [path], f"--kubeconfig {explicit}"
    listed = environ.get("KUBECONFIG", "")
    if listed:
        files: list[str] = []
        for item in listed.split(os.pathsep):
            path = os.path.expanduser(item) if item else ""
            if path and path not in files and os.path.exists(path):  # missing ones are skipped, as kubectl does
                files.append(path)
        return files, f"KUBECONFIG={listed}"
    home = os.path.expanduser("~/.kube/config")
    return ([home] if os.path.exists(home) else []), home


def _read_kubeconfig(path: str) -> dict[str, Any]:
    """One kubeconfig file, checked for the shape the merge and the loader rely on."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise KubeConfigError(f"kubeconfig {path}: is a directory") from None
    except OSError as exc:
        raise KubeConfigError(f"kubeconfig {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise KubeConfigError(f"kubeconfig {path}: not text (UTF-8)") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid"
        raise KubeConfigError(f"kubeconfig {path}: not valid YAML: {problem}{where}") from None
    if doc is None:
        doc = {}  # an empty file is an empty kubeconfig, as for kubectl
    if not isinstance(doc, dict):
        raise KubeConfigError(f"kubeconfig {path}: not a kubeconfig (a mapping with clusters, contexts and users "
                              f"is expected, found a {type(doc).__name__})")
    for kind, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
        entries = doc.get(kind)
        if entries is None:
            doc[kind] = []
            continue
        if not isinstance(entries, list):
            raise KubeConfigError(f"kubeconfig {path}: {kind} must be a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise KubeConfigError(f"kubeconfig {path}: {kind}[{i}] must be a mapping with a name")
            if entry.get(inner) is None:
                entry[inner] = {}
            if not isinstance(entry[inner], dict):
                raise KubeConfigError(f"kubeconfig {path}: {kind} {entry['name']!r}: {inner} must be a mapping")
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeConfigError(f"kubeconfig {path}: current-context must be a string")
    return doc


def _in_cluster_possible(environ: Mapping[str, str]) -> bool:
    return bool(environ.get(SERVICE_HOST_ENV_NAME) and environ.get(SERVICE_PORT_ENV_NAME)
                and os.path.exists(SERVICE_TOKEN_FILENAME))


def _in_cluster_namespace(environ: Mapping[str, str]) -> str:
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return Path(SERVICE_NAMESPACE_FILENAME).read_text(encoding="utf-8").strip() or "default"
    except (OSError, ValueError):
        return "default"


def load_client_config(kubeconfig: str | None = None, context: str | None = None, *,
                       environ: Mapping[str, str] | None = None) -> ClientConfig:
    """Resolve the API server as kubectl does; reads files only (raises :class:`KubeConfigError`).

    * ``kubeconfig`` (``--kubeconfig``): that file alone, which must exist;
    * else ``$KUBECONFIG``: its files (``:``-separated) merged, those missing skipped; for every
      cluster, context and user name — and for current-context — the first file that sets it wins;
    * else ``~/.kube/config``;
    * with no file at all: in-cluster (the pod's service account) when running in a pod.

    ``context`` (``--context``) replaces current-context; the namespace is the context's, else
    ``default`` (in-cluster: ``$POD_NAMESPACE``, else the service account's). With no kubeconfig
    and not in a pod the result still has a namespace (``default``), and :meth:`ClientConfig.api_client`
    says what is missing.
    """
    environ = os.environ if environ is None else environ
    if context is not None and not context:
        raise KubeConfigError("--context: empty context name")
    files, source = _kubeconfig_files(kubeconfig, environ)
    if not files:
        if _in_cluster_possible(environ):
            if context is not None:
                raise KubeConfigError(f"--context {context}: no kubeconfig found (in-cluster configuration has "
                                      "no contexts)")
            return ClientConfig("in-cluster", _in_cluster_namespace(environ), in_cluster=True)
        where = (f"KUBECONFIG names no existing file ({environ['KUBECONFIG']})" if environ.get("KUBECONFIG")
                 else f"no kubeconfig: {source} does not exist")
        problem = f"{where}; give --kubeconfig FILE or set KUBECONFIG (and not running in a pod)"
        if context is not None:
            raise KubeConfigError(f"--context {context}: {where}")
        return ClientConfig("no kubeconfig", "default", problem=problem)
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": [],
                              "_files": {"clusters": {}, "contexts": {}, "users": {}}}
    for path in files:
        doc = _read_kubeconfig(path)
        for kind in ("clusters", "contexts", "users"):
            for entry in doc[kind]:
                if entry["name"] not in merged["_files"][kind]:
                    merged[kind].append(entry)
                    merged["_files"][kind][entry["name"]] = path
        for key, value in doc.items():
            if key not in merged and value not in (None, ""):
                merged[key] = value  # current-context included: the first file setting it wins
    names = sorted(merged["_files"]["contexts"])
    name = context or merged.get("current-context")
    source = f"kubeconfig {', '.join(files)}" if kubeconfig is None else source
    if not name:
        return ClientConfig(source, "default", merged=merged, first_file=files[0],
                            problem=f"{source}: no current-context; give --context NAME "
                                    f"(contexts: {', '.join(names) or 'none'})")
    if name not in merged["_files"]["contexts"]:
        flag = "--context" if context else "current-context"
        raise KubeConfigError(f"{flag} {name!r}: no such context in {source} "
                              f"(contexts: {', '.join(names) or 'none'})")
    ctx = next(e for e in merged["contexts"] if e["name"] == name)["context"]
    namespace = ctx.get("namespace")
    return ClientConfig(source, namespace if isinstance(namespace, str) and namespace else "default",
                        context=name, merged=merged, first_file=files[0])


class KubeApiError(Exception):
    """A non-2xx answer from the API server, with its ``Status`` fields."""

    def __init__(self, status: int, reason: str = "", message: str = "", body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body


@dataclass(frozen=True)
class Resource:
    """A resource type: API group ('' for core), version, plural, scope."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @classmethod
    def parse(cls, spec: str, namespaced: bool = True) -> "Resource":
        """Parse kube-mgmt's ``[group/]version/resource`` form (``v1/configmaps``,
        ``apps/v1/replicasets``, ``core.federation.k8s.io/v1alpha1/clusters``)."""
        parts = [p for p in spec.strip().split("/")]
        if len(parts) == 2 and all(parts):
            return cls("", parts[0], parts[1], namespaced)
        if len(parts) == 3 and all(parts[1:]):
            group = "" if parts[0] in ("", "core") else parts[0]
            return cls(group, parts[1], parts[2], namespaced)
        raise ValueError(f"resource {spec!r}: expected [group/]version/resource, e.g. apps/v1/replicasets")

    def __str__(self) -> str:
        return f"{self.group + '/' if self.group else ''}{self.version}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """List/watch/create path; ``namespace=None`` lists across all namespaces."""
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{namespace}/{self.plural}"
        return f"{self.prefix}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace)}/{name}"

    def key(self, obj: dict[str, Any]) -> str:
        """Cache key of an object: ``namespace/name`` or ``name``."""
        meta = obj.get("metadata") or {}
        if self.namespaced:
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        return str(meta.get("name", ""))


async def kube_stream(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: aiohttp.ClientTimeout | float | None = None,
) -> aiohttp.ClientResponse:
    """Send a request and return the open response (the caller releases it).

    Raises :class:`KubeApiError` for a non-2xx status (the response is released).
    """
    headers = {"Accept": "application/json", "Content-Type": content_type}
    resp = await api.call_api(
        path,
        method,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    if not 200 <= resp.status < 300:
        raw = await resp.read()
        resp.release()
        raise _api_error(resp.status, raw)
    return resp


async def kube_json(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: aiohttp.ClientTimeout | float | None = 30.0,
) -> Any:
    """Send a request and return its parsed JSON body (None when empty)."""
    resp = await kube_stream(api, method, path, query=query, body=body, content_type=content_type,
                             timeout=timeout)
    try:
        raw = await resp.read()
    finally:
        resp.release()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise KubeApiError(resp.status, "MalformedResponse", f"{method} {path}: body is not JSON") from exc


def _api_error(status: int, raw: bytes) -> KubeApiError:
    try:
        doc = json.loads(raw) if raw.strip() else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    return KubeApiError(status, str(doc.get("reason", "")), str(doc.get("message", raw[:200].decode(errors="replace"))), doc)
