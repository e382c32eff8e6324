"""kube-apiserver 1.24's built-in admission plugins that concern the served types.

Mutating plugins run after decoding and defaulting, before mutating webhooks,
in kube-apiserver's order; validating plugins run after the webhooks:

* LimitRanger (Pods, CREATE): each LimitRange of the namespace (name order) fills
  missing container and init-container requests / limits from its Container
  items' ``defaultRequest`` / ``default`` and records what it set in the
  ``kubernetes.io/limit-ranger`` annotation; after the webhooks it checks
  ``min``, ``max`` and ``maxLimitRequestRatio`` of Container and Pod items —
  403 ``pods "x" is forbidden: <errors of the first LimitRange with any>``.
* ServiceAccount (Pods, CREATE): ``serviceAccountName`` defaults to ``default``;
  a service account that does not exist is 403 ``error looking up service
  account <ns>/<name>: serviceaccount "<name>" not found`` (checked again after
  the webhooks); unless ``automountServiceAccountToken`` is false (pod, then
  service account) every container and init container without a mount at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` gets the projected volume
  ``kube-api-access-<5 random>`` (token 3607 s, ``kube-root-ca.crt``, the
  namespace); a Pod without imagePullSecrets gets the service account's.
* Priority (Pods, CREATE; UPDATE keeps the old priority): the global default
  PriorityClass' name, value and preemptionPolicy, else priority 0 and
  ``PreemptLowerPriority``; a named class that does not exist, or a priority
  that differs from the class', is 403. PriorityClasses: a second global default
  is 403 after the webhooks.
* DefaultTolerationSeconds (Pods, CREATE and UPDATE): ``node.kubernetes.io/not-ready``
  and ``unreachable`` (Exists, NoExecute, 300 s) unless already tolerated.

Pure functions: the store is read through :class:`Lookup`; failures are raised
as :class:`~.status.ApiError` with kube-apiserver's wording.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from .quantity import MAX_MILLI_VALUE, Quantity, QuantityError, parse
from .status import forbidden
from .webhooks import Attributes

__all__ = ["Lookup", "mutate", "validate"]

Obj = dict[str, Any]
PODS = ("", "pods")
PRIORITY_CLASSES = ("scheduling.k8s.io", "priorityclasses")
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_VOLUME_PREFIX = "kube-api-access-"
LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet
TOLERATED_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
DEFAULT_TOLERATION_SECONDS = 300


class Lookup(Protocol):
    """What the plugins read from the store."""

    def service_account(self, namespace: str, name: str) -> Obj | None: ...

    def limit_ranges(self, namespace: str) -> list[Obj]: ...

    def priority_classes(self) -> list[Obj]: ...


def _is_pod(a: Attributes) -> bool:
    return a.rt.collection_key == PODS and not a.sub_resource and a.obj is not None


def _display_name(a: Attributes) -> str:
    """The name in a Forbidden message: the request's, else the object's, else its generateName."""
    meta = (a.obj or {}).get("metadata") or {}
    return a.name or meta.get("name") or meta.get("generateName") or "Unknown"


def _forbidden(a: Attributes, message: str) -> Exception:
    return forbidden(a.rt.group, a.rt.plural, _display_name(a), message)


def _containers(pod: Obj, kind: str) -> list[Obj]:
    return [c for c in (pod.get("spec") or {}).get(kind) or [] if isinstance(c, dict)]


# ---- LimitRanger -------------------------------------------------------------------

def _limit_items(limit_range: Obj) -> list[Obj]:
    return [i for i in (limit_range.get("spec") or {}).get("limits") or [] if isinstance(i, dict)]


def _merge_container(c: Obj, defaults: tuple[Obj, Obj], who: str) -> list[str]:
    """``mergeContainerResources``: the annotation parts for one container."""
    default_requests, default_limits = defaults
    res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
    limits = dict(res.get("limits") or {})
    requests = dict(res.get("requests") or {})
    set_limits = sorted(k for k in default_limits if k not in limits)
    set_requests = sorted(k for k in default_requests if k not in requests)
    for k in set_limits:
        limits[k] = default_limits[k]
    for k in set_requests:
        requests[k] = default_requests[k]
    res = {**res, **({"limits": limits} if limits else {}), **({"requests": requests} if requests else {})}
    c["resources"] = res
    parts = []
    if set_requests:
        parts.append(f"{', '.join(set_requests)} request for {who} {c.get('name', '')}")
    if set_limits:
        parts.append(f"{', '.join(set_limits)} limit for {who} {c.get('name', '')}")
    return parts


def limit_ranger_mutate(pod: Obj, limit_ranges: list[Obj]) -> None:
    """``PodMutateLimitFunc`` for each LimitRange in turn."""
    for limit_range in limit_ranges:
        requests: Obj = {}
        limits: Obj = {}
        for item in _limit_items(limit_range):
            if item.get("type") == "Container":
                requests.update(item.get("defaultRequest") or {})
                limits.update(item.get("default") or {})
        parts: list[str] = []
        for kind, who in (("containers", "container"), ("initContainers", "init container")):
            for c in _containers(pod, kind):
                parts += _merge_container(c, (requests, limits), who)
        if parts:
            meta = pod["metadata"]
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   LIMIT_RANGER_ANNOTATION: "LimitRanger plugin set: " + "; ".join(parts)}


def _q(raw: Any) -> Quantity:
    try:
        return parse(raw)
    except QuantityError:
        return parse(0)


def _enforced_values(req: Quantity | None, lim: Quantity | None, enforced: Quantity) -> tuple[int, int, int]:
    """``requestLimitEnforcedValues``: milli-units when they fit, else units."""
    zero = parse(0)
    req, lim = req or zero, lim or zero
    if max(req.int_value(), lim.int_value(), enforced.int_value()) <= MAX_MILLI_VALUE:
        return req.milli_value(), lim.milli_value(), enforced.milli_value()
    return req.int_value(), lim.int_value(), enforced.int_value()


def _min_error(kind: str, name: str, enforced: Quantity, requests: dict, limits: dict) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    r, l, e = _enforced_values(req, lim, enforced)
    if req is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    if r < e:
        return f"minimum {name} usage per {kind} is {enforced}, but request is {req}"
    if lim is not None and l < e:
        return f"minimum {name} usage per {kind} is {enforced}, but limit is {lim}"
    return None


def _max_error(kind: str, name: str, enforced: Quantity, requests: dict, limits: dict) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    r, l, e = _enforced_values(req, lim, enforced)
    if lim is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    if l > e:
        return f"maximum {name} usage per {kind} is {enforced}, but limit is {lim}"
    if req is not None and r > e:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return None


def _ratio_error(kind: str, name: str, enforced: Quantity, requests: dict, limits: dict) -> str | None:
    req, lim = requests.get(name), limits.get(name)
    r, l, _ = _enforced_values(req, lim, enforced)
    if req is None or r == 0:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
    if lim is None or l == 0:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
    observed = l / r
    shown = observed
    bound = float(enforced.int_value())
    if enforced.int_value() <= MAX_MILLI_VALUE:
        observed *= 1000
        bound = float(enforced.milli_value())
    if observed > bound:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {shown:f}"
    return None


def _quantities(lst: Any) -> dict[str, Quantity]:
    return {k: _q(v) for k, v in lst.items()} if isinstance(lst, dict) else {}


def _check(kind: str, item: Obj, requests: dict[str, Quantity], limits: dict[str, Quantity]) -> list[str]:
    errors = []
    for key, check in (("min", _min_error), ("max", _max_error), ("maxLimitRequestRatio", _ratio_error)):
        for name, enforced in sorted(_quantities(item.get(key)).items()):
            err = check(kind, name, enforced, requests, limits)
            if err:
                errors.append(err)
    return errors


def _pod_sums(pod: Obj) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """The Pod item's totals: ``sum`` over containers (a resource missing from any container is
    left out), then the max with each init container."""
    totals = []
    for field in ("requests", "limits"):
        lists = [_quantities((c.get("resources") or {}).get(field)) for c in _containers(pod, "containers")]
        names = {n for lst in lists for n in lst}
        total: dict[str, Quantity] = {}
        for name in sorted(names):
            if all(name in lst for lst in lists):
                if name == "cpu":
                    total[name] = parse(f"{sum(lst[name].milli_value() for lst in lists)}m")
                else:
                    total[name] = parse(str(sum(lst[name].int_value() for lst in lists)))
        for c in _containers(pod, "initContainers"):
            for name, q in _quantities((c.get("resources") or {}).get(field)).items():
                if name not in total or q.value > total[name].value:
                    total[name] = q
        totals.append(total)
    return totals[0], totals[1]


def limit_ranger_validate(pod: Obj, limit_ranges: list[Obj]) -> list[str]:
    """``PodValidateLimitFunc``: the errors of the first LimitRange that has any."""
    for limit_range in limit_ranges:
        errors: list[str] = []
        for item in _limit_items(limit_range):
            if item.get("type") == "Container":
                for kind in ("containers", "initContainers"):
                    for c in _containers(pod, kind):
                        res = c.get("resources") or {}
                        errors += _check("Container", item, _quantities(res.get("requests")),
                                         _quantities(res.get("limits")))
            elif item.get("type") == "Pod":
                requests, limits = _pod_sums(pod)
                errors += _check("Pod", item, requests, limits)
        if errors:
            unique = list(dict.fromkeys(errors))
            return unique
    return []


def _aggregate(errors: list[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


# ---- ServiceAccount ----------------------------------------------------------------

def token_volume(name: str) -> Obj:
    """The projected volume the plugin adds (``TokenVolumeSource``), as the API serves it."""
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}},
    ]}}


def _service_account(a: Attributes, lookup: Lookup, name: str) -> Obj:
    sa = lookup.service_account(a.namespace, name)
    if sa is None:
        raise _forbidden(a, f'error looking up service account {a.namespace}/{name}: serviceaccount "{name}" not found')
    return sa


def _automount(sa: Obj, spec: Obj) -> bool:
    if isinstance(spec.get("automountServiceAccountToken"), bool):
        return spec["automountServiceAccountToken"]
    if isinstance(sa.get("automountServiceAccountToken"), bool):
        return sa["automountServiceAccountToken"]
    return True


def _mount_token(pod: Obj, rng: random.Random) -> None:
    """``mountServiceAccountToken``."""
    spec = pod["spec"]
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
    existing = next((v.get("name") for v in volumes if str(v.get("name", "")).startswith(TOKEN_VOLUME_PREFIX)), None)
    name = existing or TOKEN_VOLUME_PREFIX + "".join(rng.choice(NAME_ALPHABET) for _ in range(5))
    mount = {"mountPath": TOKEN_MOUNT_PATH, "name": name, "readOnly": True}
    needed = False
    for kind in ("initContainers", "containers"):
        for c in _containers(pod, kind):
            mounts = [m for m in c.get("volumeMounts") or [] if isinstance(m, dict)]
            if not any(m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                c["volumeMounts"] = [*(c.get("volumeMounts") or []), dict(mount)]
                needed = True
    if existing is None and needed:
        spec["volumes"] = [*(spec.get("volumes") or []), token_volume(name)]


def service_account_mutate(a: Attributes, pod: Obj, lookup: Lookup, rng: random.Random) -> None:
    spec = pod["spec"]
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = "default"
    spec["serviceAccount"] = spec["serviceAccountName"]  # the deprecated field mirrors it in v1
    sa = _service_account(a, lookup, spec["serviceAccountName"])
    if _automount(sa, spec):
        _mount_token(pod, rng)
    if not spec.get("imagePullSecrets") and sa.get("imagePullSecrets"):
        spec["imagePullSecrets"] = [{"name": s.get("name", "")} for s in sa["imagePullSecrets"] if isinstance(s, dict)]


# ---- Priority ----------------------------------------------------------------------

def _default_priority_class(classes: list[Obj]) -> Obj | None:
    """The global default with the lowest value (there may be several after a race)."""
    defaults = [pc for pc in classes if pc.get("globalDefault") is True]
    return min(defaults, key=lambda pc: pc.get("value", 0)) if defaults else None


def priority_mutate(a: Attributes, pod: Obj, lookup: Lookup) -> None:
    spec = pod["spec"]
    if a.operation == "UPDATE":
        old_spec = (a.old or {}).get("spec") or {}
        for field in ("priority", "preemptionPolicy"):
            if spec.get(field) is None and old_spec.get(field) is not None:
                spec[field] = old_spec[field]
        return
    classes = lookup.priority_classes()
    if not spec.get("priorityClassName"):
        pc = _default_priority_class(classes)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
        value = pc.get("value", 0) if pc else 0
        policy = pc.get("preemptionPolicy") if pc else "PreemptLowerPriority"
    else:
        name = spec["priorityClassName"]
        pc = next((c for c in classes if c["metadata"]["name"] == name), None)
        if pc is None:
            raise _forbidden(a, f"no PriorityClass with name {name} was found")
        value, policy = pc.get("value", 0), pc.get("preemptionPolicy")
    if spec.get("priority") is not None and spec["priority"] != value:
        raise _forbidden(a, f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                            f"priority admission controller computed {value} from the given PriorityClass name")
    spec["priority"] = value
    if policy is not None:
        if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
            raise _forbidden(a, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be "
                                f"provided in pod spec; priority admission controller computed {policy} from the "
                                "given PriorityClass name")
        spec["preemptionPolicy"] = policy


def priority_class_validate(a: Attributes, lookup: Lookup) -> None:
    pc = a.obj or {}
    if pc.get("globalDefault") is not True:
        return
    current = _default_priority_class(lookup.priority_classes())
    if current is not None and (a.operation == "CREATE" or current["metadata"]["name"] != a.name):
        raise _forbidden(a, f"PriorityClass {current['metadata']['name']} is already marked as default. "
                            "Only one default can exist")


# ---- DefaultTolerationSeconds ------------------------------------------------------

def default_tolerations(pod: Obj) -> None:
    spec = pod["spec"]
    tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    added = []
    for key in TOLERATED_TAINTS:
        if not any(t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "") for t in tolerations):
            added.append({"effect": "NoExecute", "key": key, "operator": "Exists",
                          "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    if added:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *added]


# ---- the two phases ----------------------------------------------------------------

def mutate(a: Attributes, lookup: Lookup, rng: random.Random | None = None) -> Obj | None:
    """The mutating plugins, in kube-apiserver's order; returns the (changed in place) object."""
    if not _is_pod(a) or a.operation not in ("CREATE", "UPDATE"):
        return a.obj
    pod = a.obj
    assert pod is not None
    pod.setdefault("spec", {})
    if a.operation == "CREATE":
        limit_ranger_mutate(pod, lookup.limit_ranges(a.namespace))
        service_account_mutate(a, pod, lookup, rng or random.Random())
    priority_mutate(a, pod, lookup)
    default_tolerations(pod)
    return pod


def validate(a: Attributes, lookup: Lookup) -> None:
    """The validating plugins (after the webhooks)."""
    if a.rt.collection_key == PRIORITY_CLASSES and a.operation in ("CREATE", "UPDATE"):
        priority_class_validate(a, lookup)
    if not _is_pod(a) or a.operation != "CREATE":
        return
    pod = a.obj or {}
    errors = limit_ranger_validate(pod, lookup.limit_ranges(a.namespace))
    if errors:
        raise _forbidden(a, _aggregate(errors))
    spec = pod.get("spec") or {}
    if not spec.get("serviceAccountName"):
        raise _forbidden(a, f"no service account specified for pod {a.namespace}/{pod['metadata'].get('name', '')}")
    _service_account(a, lookup, spec["serviceAccountName"])
