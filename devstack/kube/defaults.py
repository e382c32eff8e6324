"""Defaulting at decode, as kube-apiserver 1.24 does it before admission.

Every object of the kinds below is defaulted when a request body is decoded
(create, update, the result of a patch) and again after each mutating webhook
patch — the ``SetDefaults_*`` functions of ``pkg/apis/core/v1``,
``pkg/apis/apps/v1``, ``pkg/apis/batch/v1`` and ``pkg/apis/scheduling/v1``
(their generated ``SetObjectDefaults_*`` walk), plus the shape Go's JSON
encoding gives the decoded struct (``resources: {}``, a template's
``metadata.creationTimestamp: null``, a status' non-omitempty counters):

* Pod and every pod template (ReplicaSet, Deployment, StatefulSet, DaemonSet,
  Job, CronJob's ``jobTemplate``): PodSpec defaults (dnsPolicy, restartPolicy,
  securityContext, terminationGracePeriodSeconds, schedulerName, host ports
  under hostNetwork), containers of every kind (imagePullPolicy from the image's
  tag, termination message path and policy, port protocol, env fieldRef
  apiVersion, probes and lifecycle handlers, resources as ResourceLists),
  volumes (emptyDir when no source, modes, projected token expiry, hostPath
  type, ephemeral claim templates). A Pod alone also gets requests copied from
  limits and ``enableServiceLinks``.
* The workloads' own spec defaults: replicas, revisionHistoryLimit, strategy /
  updateStrategy, progressDeadlineSeconds, podManagementPolicy, StatefulSet
  claim templates, Job's completions/parallelism/backoffLimit/completionMode/
  suspend (and labels from its template), CronJob's concurrencyPolicy/suspend/
  history limits.
* LimitRange items (``SetDefaults_LimitRangeItem``) and PriorityClass'
  preemptionPolicy.
* Go's ``omitempty``: empty labels / annotations of built-in objects, empty
  ConfigMap / Secret data and the empty optional lists of pod specs and
  containers do not survive decoding.

Quantities in ResourceLists are stored as :mod:`.quantity` prints them. Pure
functions on plain dicts, applied in place; :class:`~.quantity.QuantityError`
means the body cannot be decoded (the caller answers 400).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .quantity import parse, resource_list_value

__all__ = ["apply", "image_tag"]

Obj = dict[str, Any]

CONTAINER_KINDS = ("initContainers", "containers", "ephemeralContainers")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
FILE_MODE = 420  # 0644, the default mode of secret, configMap, downwardAPI and projected volumes


def _obj(parent: Obj, key: str) -> Obj:
    """``parent[key]`` as a dict, created when absent or null (a Go struct field is always there)."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def _items(parent: Any, key: str) -> list[Obj]:
    value = parent.get(key) if isinstance(parent, dict) else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _unset(d: Obj, key: str, value: Any) -> None:
    """A pointer or number field: set when absent, null or zero-valued as Go sees it."""
    if d.get(key) in (None, 0) and not isinstance(d.get(key), bool):
        d[key] = value


def _empty(d: Obj, key: str, value: Any) -> None:
    """A string field: set when absent, null or ""."""
    if not d.get(key):
        d[key] = value


def _omit_empty(d: Obj, keys: tuple[str, ...]) -> None:
    """Go's ``omitempty``: these slices and maps do not survive decoding when empty or null."""
    for key in keys:
        if key in d and d[key] in (None, [], {}):
            del d[key]


META_OMITEMPTY = ("labels", "annotations", "finalizers", "ownerReferences")
POD_SPEC_OMITEMPTY = ("volumes", "initContainers", "ephemeralContainers", "imagePullSecrets", "tolerations",
                      "hostAliases", "readinessGates", "topologySpreadConstraints", "nodeSelector")
CONTAINER_OMITEMPTY = ("command", "args", "ports", "envFrom", "env", "volumeMounts", "volumeDevices")


def _pointer(d: Obj, key: str, value: Any) -> None:
    """A pointer field: set when absent or null (an explicit 0 / false stays)."""
    if d.get(key) is None:
        d[key] = value


# ---- images ------------------------------------------------------------------

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$")
_HEX64 = re.compile(r"^[a-f0-9]{64}$")


def image_tag(image: str) -> str:
    """The tag ``parsers.ParseImageName`` finds: ``latest`` when neither tag nor digest is
    given, "" for a digest alone or an image it cannot parse (then ``IfNotPresent``)."""
    m = _REFERENCE.match(image) if isinstance(image, str) else None
    if m is None or len(m.group("name")) > 255 or _HEX64.match(m.group("name").rsplit("/", 1)[-1]):
        return ""
    if m.group("tag"):
        return m.group("tag")
    return "" if m.group("digest") else "latest"


# ---- containers --------------------------------------------------------------

def _resource_list(d: Obj, key: str) -> None:
    """A ResourceList field: each quantity stored as Kubernetes prints it; an empty map is omitted."""
    value = d.get(key)
    if value is None:
        d.pop(key, None)
        return
    if not isinstance(value, dict):
        return
    if not value:
        d.pop(key)
        return
    d[key] = {name: resource_list_value(q) for name, q in value.items()}


def _resources(container: Obj) -> None:
    res = _obj(container, "resources")
    _resource_list(res, "limits")
    _resource_list(res, "requests")


def _http_get(handler: Any) -> None:
    get = handler.get("httpGet") if isinstance(handler, dict) else None
    if isinstance(get, dict):
        _empty(get, "path", "/")
        _empty(get, "scheme", "HTTP")


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    _unset(probe, "timeoutSeconds", 1)
    _unset(probe, "periodSeconds", 10)
    _unset(probe, "successThreshold", 1)
    _unset(probe, "failureThreshold", 3)
    _http_get(probe)
    grpc = probe.get("grpc")
    if isinstance(grpc, dict):
        _pointer(grpc, "service", "")


def _container(c: Obj, host_network: bool) -> None:
    _omit_empty(c, CONTAINER_OMITEMPTY)
    if not c.get("imagePullPolicy"):
        c["imagePullPolicy"] = "Always" if image_tag(c.get("image") or "") == "latest" else "IfNotPresent"
    _empty(c, "terminationMessagePath", "/dev/termination-log")
    _empty(c, "terminationMessagePolicy", "File")
    for port in _items(c, "ports"):
        _empty(port, "protocol", "TCP")
        if host_network and not port.get("hostPort"):
            port["hostPort"] = port.get("containerPort")
    for env in _items(c, "env"):
        ref = (env.get("valueFrom") or {}).get("fieldRef") if isinstance(env.get("valueFrom"), dict) else None
        if isinstance(ref, dict):
            _empty(ref, "apiVersion", "v1")
    _resources(c)
    for name in PROBES:
        _probe(c.get(name))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            _http_get(lifecycle.get(hook))


# ---- volumes -----------------------------------------------------------------

def _field_refs(items: list[Obj]) -> None:
    for item in items:
        ref = item.get("fieldRef")
        if isinstance(ref, dict):
            _empty(ref, "apiVersion", "v1")


def _claim_spec(spec: Obj) -> None:
    _pointer(spec, "volumeMode", "Filesystem")
    res = spec.get("resources")
    if isinstance(res, dict):
        _resource_list(res, "limits")
        _resource_list(res, "requests")


def _volume(v: Obj) -> None:
    if all(value is None for key, value in v.items() if key != "name"):
        v["emptyDir"] = {}
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        source = v.get(key)
        if isinstance(source, dict):
            _pointer(source, "defaultMode", FILE_MODE)
    if isinstance(v.get("downwardAPI"), dict):
        _field_refs(_items(v["downwardAPI"], "items"))
    if isinstance(v.get("hostPath"), dict):
        _pointer(v["hostPath"], "type", "")
    empty_dir = v.get("emptyDir")
    if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
        empty_dir["sizeLimit"] = str(parse(empty_dir["sizeLimit"]))
    for source in _items(v.get("projected"), "sources"):
        if isinstance(source.get("downwardAPI"), dict):
            _field_refs(_items(source["downwardAPI"], "items"))
        if isinstance(source.get("serviceAccountToken"), dict):
            _pointer(source["serviceAccountToken"], "expirationSeconds", 3600)
    ephemeral = v.get("ephemeral")
    template = ephemeral.get("volumeClaimTemplate") if isinstance(ephemeral, dict) else None
    if isinstance(template, dict):
        _template_meta(template)
        _claim_spec(_obj(template, "spec"))


# ---- pod specs -------------------------------------------------------------------

def _template_meta(holder: Obj) -> None:
    """An embedded ObjectMeta: always encoded, with ``creationTimestamp: null`` when unset."""
    meta = _obj(holder, "metadata")
    meta.setdefault("creationTimestamp", None)
    _omit_empty(meta, META_OMITEMPTY)


def pod_spec(spec: Obj) -> None:
    """``SetDefaults_PodSpec`` and the generated walk over volumes and containers."""
    _empty(spec, "dnsPolicy", "ClusterFirst")
    _empty(spec, "restartPolicy", "Always")
    _pointer(spec, "securityContext", {})
    _pointer(spec, "terminationGracePeriodSeconds", 30)
    _empty(spec, "schedulerName", "default-scheduler")
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]  # the deprecated alias, read as v1 converts it
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    else:
        spec.pop("serviceAccount", None)
    _omit_empty(spec, POD_SPEC_OMITEMPTY)
    host_network = spec.get("hostNetwork") is True
    for v in _items(spec, "volumes"):
        _volume(v)
    for kind in CONTAINER_KINDS:
        for c in _items(spec, kind):
            # Host ports follow container ports for init and regular containers only.
            _container(c, host_network and kind != "ephemeralContainers")
    _resource_list(spec, "overhead")


def _pod_template(holder: Obj, key: str = "template") -> None:
    template = _obj(holder, key)
    _template_meta(template)
    pod_spec(_obj(template, "spec"))


def _requests_from_limits(spec: Obj) -> None:
    """``SetDefaults_Pod``: a container's limits fill its missing requests (Pods only, not templates)."""
    for kind in ("containers", "initContainers"):
        for c in _items(spec, kind):
            res = c.get("resources")
            if not isinstance(res, dict) or not isinstance(res.get("limits"), dict):
                continue
            requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
            for name, value in res["limits"].items():
                requests.setdefault(name, value)
            res["requests"] = requests


def pod(obj: Obj) -> None:
    spec = _obj(obj, "spec")
    _requests_from_limits(spec)
    _pointer(spec, "enableServiceLinks", True)
    pod_spec(spec)
    _obj(obj, "status")


# ---- workloads -------------------------------------------------------------------

def _status(obj: Obj, *counters: str) -> None:
    """The decoded status: its non-omitempty counters are 0 when absent."""
    status = _obj(obj, "status")
    for name in counters:
        status.setdefault(name, 0)


def replica_set(obj: Obj) -> None:
    spec = _obj(obj, "spec")
    _pointer(spec, "replicas", 1)
    _pod_template(spec)
    _status(obj, "replicas")


def deployment(obj: Obj) -> None:
    spec = _obj(obj, "spec")
    _pointer(spec, "replicas", 1)
    strategy = _obj(spec, "strategy")
    _empty(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _obj(strategy, "rollingUpdate")
        _pointer(rolling, "maxUnavailable", "25%")
        _pointer(rolling, "maxSurge", "25%")
    _pointer(spec, "revisionHistoryLimit", 10)
    _pointer(spec, "progressDeadlineSeconds", 600)
    _pod_template(spec)
    _status(obj)


def stateful_set(obj: Obj) -> None:
    spec = _obj(obj, "spec")
    _empty(spec, "podManagementPolicy", "OrderedReady")
    strategy = _obj(spec, "updateStrategy")
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        _obj(strategy, "rollingUpdate")
    rolling = strategy.get("rollingUpdate")
    if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
        _pointer(rolling, "partition", 0)
    _pointer(spec, "replicas", 1)
    _pointer(spec, "revisionHistoryLimit", 10)
    spec.setdefault("serviceName", "")
    _pod_template(spec)
    for claim in _items(spec, "volumeClaimTemplates"):
        claim.setdefault("apiVersion", "v1")
        claim.setdefault("kind", "PersistentVolumeClaim")
        _template_meta(claim)
        _claim_spec(_obj(claim, "spec"))
        _empty(_obj(claim, "status"), "phase", "Pending")
    _status(obj, "replicas", "availableReplicas")


DS_GENERATION = "deprecated.daemonset.template.generation"


def daemon_set(obj: Obj) -> None:
    meta = _obj(obj, "metadata")
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    try:
        generation = int(annotations.get(DS_GENERATION, 0))
    except (TypeError, ValueError):
        generation = 0
    # v1 carries the internal spec.templateGeneration in this annotation, 0 until the strategy sets it
    meta["annotations"] = {**annotations, DS_GENERATION: str(generation)}
    spec = _obj(obj, "spec")
    strategy = _obj(spec, "updateStrategy")
    _empty(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _obj(strategy, "rollingUpdate")
        _pointer(rolling, "maxUnavailable", 1)
        _pointer(rolling, "maxSurge", 0)
    _pointer(spec, "revisionHistoryLimit", 10)
    _pod_template(spec)
    _status(obj, "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady")


def job(obj: Obj) -> None:
    spec = _obj(obj, "spec")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    _pointer(spec, "parallelism", 1)
    _pointer(spec, "backoffLimit", 6)
    _pod_template(spec)
    labels = spec["template"]["metadata"].get("labels")
    meta = _obj(obj, "metadata")
    if isinstance(labels, dict) and not meta.get("labels"):
        meta["labels"] = labels  # the same map, as in Go: labels the Job's selector adds show here too
    _pointer(spec, "completionMode", "NonIndexed")
    _pointer(spec, "suspend", False)
    _status(obj)


def cron_job(obj: Obj) -> None:
    spec = _obj(obj, "spec")
    _empty(spec, "concurrencyPolicy", "Allow")
    _pointer(spec, "suspend", False)
    _pointer(spec, "successfulJobsHistoryLimit", 3)
    _pointer(spec, "failedJobsHistoryLimit", 1)
    job_template = _obj(spec, "jobTemplate")
    _template_meta(job_template)
    _pod_template(_obj(job_template, "spec"))
    _status(obj)


# ---- policy objects --------------------------------------------------------------

LIMIT_LISTS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def limit_range(obj: Obj) -> None:
    """``SetDefaults_LimitRangeItem``: a Container item's default falls back to its max, its
    defaultRequest to its default, then to its min; every list is a ResourceList."""
    for item in _items(_obj(obj, "spec"), "limits"):
        if item.get("type") == "Container":
            lists = {k: item.get(k) if isinstance(item.get(k), dict) else {} for k in LIMIT_LISTS}
            default, request = dict(lists["default"]), dict(lists["defaultRequest"])
            for name, value in lists["max"].items():
                default.setdefault(name, value)
            for name, value in default.items():
                request.setdefault(name, value)
            for name, value in lists["min"].items():
                request.setdefault(name, value)
            item["default"], item["defaultRequest"] = default, request
        for key in LIMIT_LISTS:
            _resource_list(item, key)


def priority_class(obj: Obj) -> None:
    _pointer(obj, "preemptionPolicy", "PreemptLowerPriority")


def config_map(obj: Obj) -> None:
    _omit_empty(obj, ("data", "binaryData"))


def secret(obj: Obj) -> None:
    _omit_empty(obj, ("data",))


_BY_TYPE: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "configmaps"): config_map,
    ("", "secrets"): secret,
    ("", "pods"): pod,
    ("", "limitranges"): limit_range,
    ("apps", "replicasets"): replica_set,
    ("apps", "deployments"): deployment,
    ("apps", "statefulsets"): stateful_set,
    ("apps", "daemonsets"): daemon_set,
    ("batch", "jobs"): job,
    ("batch", "cronjobs"): cron_job,
    ("scheduling.k8s.io", "priorityclasses"): priority_class,
}


def apply(group: str, plural: str, obj: Obj, builtin: bool = True) -> None:
    """Default ``obj`` (of resource ``group``/``plural``; ``builtin`` unless a custom resource)
    in place; raises QuantityError."""
    if builtin and isinstance(obj.get("metadata"), dict):
        _omit_empty(obj["metadata"], META_OMITEMPTY)
    fn = _BY_TYPE.get((group, plural))
    if fn is not None:
        fn(obj)
