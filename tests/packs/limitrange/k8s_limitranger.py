"""Kubernetes' LimitRanger on a Pod, ported to Python: the reference the pack is checked against.

A line-by-line port of what kube-apiserver does to a Pod in a namespace with
LimitRanges, from the Kubernetes sources (function names kept):

* ``pkg/apis/core/v1/defaults.go`` — ``SetDefaults_LimitRangeItem`` (how a
  LimitRange is stored: a Container item's missing default falls back to its
  max, a missing defaultRequest to the default, then to the min) and
  ``SetDefaults_Pod`` (a container's limits are copied to its missing
  requests, before admission).
* ``plugin/pkg/admission/limitranger/admission.go`` —
  ``defaultContainerResourceRequirements`` / ``mergeContainerResources`` /
  ``mergePodResourceRequirements`` (PodMutateLimitFunc: defaults, containers
  and init containers, the ``kubernetes.io/limit-ranger`` annotation),
  ``requestLimitEnforcedValues``, ``minConstraint``, ``maxConstraint``,
  ``limitRequestRatioConstraint``, ``podRequests`` / ``podLimits`` (sidecars,
  pod-level resources) and ``PodValidateLimitFunc``.
* ``pkg/apis/core/validation`` — ``ValidateResourceRequirements``: a request
  above its limit is refused after admission.

Two documented choices are parameters, so the reference can show Kubernetes'
own behaviour and the pack's:

* ``stop_at_first_limitrange`` — the plugin returns the errors of the first
  LimitRange that has any (``runLimitFunc``); the pack reports every one.
* ``exact_ratio`` — the plugin divides limit by request in float64 and can
  refuse a ratio exactly equal to the bound (limit 11, request 10, bound 1.1);
  the pack compares exactly.

LimitRanges are taken in the order given (Kubernetes takes the informer's,
which is unspecified; the pack uses name order).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tests.packs.limitrange.k8s_quantity import MAX_MILLI_VALUE, canonical, format_of, format_value, parse

CONTAINER, POD = "Container", "Pod"


@dataclass(frozen=True)
class Violation:
    """One error: who ("pod", ``container "x"``, ``init container "x"``), the
    resource, what failed (``min-request``, ``max-limit``, ``ratio``, …), the
    LimitRange, and Kubernetes' own message."""

    who: str
    resource: str
    what: str
    limitrange: str
    message: str = field(compare=False, default="")


@dataclass
class Outcome:
    pod: dict[str, Any]
    annotation: str | None
    violations: list[Violation]
    defaulted: set[tuple[str, str, str]]  # (who, kind, resource) set by the plugin

    @property
    def allowed(self) -> bool:
        return not self.violations


def q(text: Any) -> tuple[int, int]:
    return parse(str(text))


def value(x: tuple[int, int]) -> int:
    return x[0] + (1 if x[1] else 0)


def milli_value(x: tuple[int, int]) -> int:
    return x[0] * 1000 + -(-x[1] // 10**6)


# -- pkg/apis/core/v1/defaults.go ---------------------------------------------------------

def set_defaults_limit_range_item(item: dict[str, Any]) -> dict[str, Any]:
    item = copy.deepcopy(item)
    if item.get("type") == CONTAINER:
        default = item.setdefault("default", {})
        default_request = item.setdefault("defaultRequest", {})
        for k, v in (item.get("max") or {}).items():
            default.setdefault(k, v)
        for k, v in default.items():
            default_request.setdefault(k, v)
        for k, v in (item.get("min") or {}).items():
            default_request.setdefault(k, v)
    return item


def set_defaults_pod(pod: dict[str, Any]) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    for key in ("containers", "initContainers"):
        for c in pod["spec"].get(key) or []:
            limits = (c.get("resources") or {}).get("limits")
            if limits:
                requests = c.setdefault("resources", {}).setdefault("requests", {})
                for k, v in limits.items():
                    requests.setdefault(k, v)
    return pod


# -- the plugin: mutation ---------------------------------------------------------------------

def default_container_resource_requirements(lr: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for item in lr["spec"]["limits"]:
        if item.get("type") == CONTAINER:
            requests.update(item.get("defaultRequest") or {})
            limits.update(item.get("default") or {})
    return requests, limits


def merge_container_resources(c: dict[str, Any], requests: dict[str, Any], limits: dict[str, Any], prefix: str,
                              annotations: list[str], defaulted: set[tuple[str, str, str]]) -> None:
    res = c.setdefault("resources", {})
    if res.get("limits") is None:
        res["limits"] = {}
    if res.get("requests") is None:
        res["requests"] = {}
    set_limits = [k for k in limits if k not in res["limits"]]
    set_requests = [k for k in requests if k not in res["requests"]]
    who = f'{prefix} "{c.get("name", "")}"'
    for k in set_limits:
        res["limits"][k] = limits[k]
        defaulted.add((who, "limits", k))
    for k in set_requests:
        res["requests"][k] = requests[k]
        defaulted.add((who, "requests", k))
    if set_requests:
        annotations.append(", ".join(sorted(set_requests)) + f" request for {prefix} {c.get('name', '')}")
    if set_limits:
        annotations.append(", ".join(sorted(set_limits)) + f" limit for {prefix} {c.get('name', '')}")


def pod_mutate_limit_func(lr: dict[str, Any], pod: dict[str, Any], defaulted: set[tuple[str, str, str]]) -> str | None:
    requests, limits = default_container_resource_requirements(lr)
    annotations: list[str] = []
    for c in pod["spec"].get("containers") or []:
        merge_container_resources(c, requests, limits, "container", annotations, defaulted)
    for c in pod["spec"].get("initContainers") or []:
        merge_container_resources(c, requests, limits, "init container", annotations, defaulted)
    return "LimitRanger plugin set: " + "; ".join(annotations) if annotations else None


# -- the plugin: validation -------------------------------------------------------------------

def request_limit_enforced_values(req: tuple[int, int] | None, lim: tuple[int, int] | None,
                                  enforced: tuple[int, int]) -> tuple[int, int, int]:
    zero = (0, 0)
    r, l_, e = req or zero, lim or zero, enforced
    if all(value(x) <= MAX_MILLI_VALUE for x in (r, l_, e)):
        return milli_value(r), milli_value(l_), milli_value(e)
    return value(r), value(l_), value(e)


def _observed(name: str, enforced_text: str, request: dict[str, Any], limit: dict[str, Any]) -> tuple[Any, ...]:
    """The request and limit of ``name`` (None when absent) and the three values as compared."""
    req = q(request[name]) if name in request else None
    lim = q(limit[name]) if name in limit else None
    return (req, lim, *request_limit_enforced_values(req, lim, q(enforced_text)))


def min_constraint(limit_type: str, name: str, enforced_text: str, request: dict[str, Any],
                   limit: dict[str, Any]) -> tuple[str, str] | None:
    req, lim, r, l_, e = _observed(name, enforced_text, request, limit)
    usage = f"minimum {name} usage per {limit_type} is {canonical(enforced_text)}"
    if req is None:
        return "min-no-request", f"{usage}.  No request is specified"
    if r < e:
        return "min-request", f"{usage}, but request is {canonical(request[name])}"
    if lim is not None and l_ < e:
        return "min-limit", f"{usage}, but limit is {canonical(limit[name])}"
    return None


def max_constraint(limit_type: str, name: str, enforced_text: str, request: dict[str, Any],
                   limit: dict[str, Any]) -> tuple[str, str] | None:
    req, lim, r, l_, e = _observed(name, enforced_text, request, limit)
    usage = f"maximum {name} usage per {limit_type} is {canonical(enforced_text)}"
    if lim is None:
        return "max-no-limit", f"{usage}.  No limit is specified"
    if l_ > e:
        return "max-limit", f"{usage}, but limit is {canonical(limit[name])}"
    if req is not None and r > e:
        return "max-request", f"{usage}, but request is {canonical(request[name])}"
    return None


def limit_request_ratio_constraint(limit_type: str, name: str, enforced_text: str, request: dict[str, Any],
                                   limit: dict[str, Any], exact: bool) -> tuple[str, str] | None:
    req, lim, r, l_, _ = _observed(name, enforced_text, request, limit)
    enforced = q(enforced_text)
    ratio = f"{name} max limit to request ratio per {limit_type} is {canonical(enforced_text)}"
    if req is None or r == 0:
        return "ratio-no-request", f"{ratio}, but no request is specified or request is 0"
    if lim is None or l_ == 0:
        return "ratio-no-limit", f"{ratio}, but no limit is specified or limit is 0"
    if exact:
        bound = milli_value(enforced) if value(enforced) <= MAX_MILLI_VALUE else value(enforced) * 1000
        exceeded = l_ * 1000 > bound * r
    else:
        observed = float(l_) / float(r)
        bound_f = float(value(enforced))
        if value(enforced) <= MAX_MILLI_VALUE:
            observed, bound_f = observed * 1000, float(milli_value(enforced))
        exceeded = observed > bound_f
    if exceeded:
        return "ratio", f"{ratio}, but provided ratio is {l_ / r:f}"
    return None


def _add(total: dict[str, tuple[int, int]], formats: dict[str, str], resources: dict[str, Any]) -> None:
    """addResourceList: a sum keeps the format of its first operand."""
    for k, v in resources.items():
        a, b = total.get(k, (0, 0)), q(v)
        nanos = a[1] + b[1]
        total[k] = (a[0] + b[0] + nanos // 10**9, nanos % 10**9)
        formats.setdefault(k, format_of(str(v)))


def _max(total: dict[str, tuple[int, int]], formats: dict[str, str], other: dict[str, tuple[int, int]],
         other_formats: dict[str, str]) -> None:
    """maxResourceList."""
    for k, v in other.items():
        if k not in total or v > total[k]:
            total[k] = v
            formats[k] = other_formats[k]


def pod_totals(pod: dict[str, Any], kind: str) -> dict[str, str]:
    """podRequests / podLimits, as quantity texts."""
    total: dict[str, tuple[int, int]] = {}
    fmt: dict[str, str] = {}
    for c in pod["spec"].get("containers") or []:
        _add(total, fmt, (c.get("resources") or {}).get(kind) or {})
    restartable: dict[str, tuple[int, int]] = {}
    restartable_fmt: dict[str, str] = {}
    init: dict[str, tuple[int, int]] = {}
    init_fmt: dict[str, str] = {}
    for c in pod["spec"].get("initContainers") or []:
        own = (c.get("resources") or {}).get(kind) or {}
        if c.get("restartPolicy") == "Always":
            _add(total, fmt, own)
            _add(restartable, restartable_fmt, own)
            phase, phase_fmt = dict(restartable), dict(restartable_fmt)
        else:
            phase, phase_fmt = {}, {}
            _add(phase, phase_fmt, own)
            _add(phase, phase_fmt, {k: format_value(v, restartable_fmt[k]) for k, v in restartable.items()})
        _max(init, init_fmt, phase, phase_fmt)
    _max(total, fmt, init, init_fmt)
    for k, v in ((pod["spec"].get("resources") or {}).get(kind) or {}).items():
        if k in ("cpu", "memory"):
            total[k], fmt[k] = q(v), format_of(str(v))
    return {k: format_value(v, fmt[k]) for k, v in total.items()}


def pod_validate_limit_func(lr: dict[str, Any], pod: dict[str, Any], exact_ratio: bool) -> list[Violation]:
    name = lr["metadata"]["name"]
    out: list[Violation] = []

    def check(limit_type: str, item: dict[str, Any], who: str, requests: dict[str, Any], limits: dict[str, Any]) -> None:
        for k, v in (item.get("min") or {}).items():
            if found := min_constraint(limit_type, k, str(v), requests, limits):
                out.append(Violation(who, k, found[0], name, found[1]))
        for k, v in (item.get("max") or {}).items():
            if found := max_constraint(limit_type, k, str(v), requests, limits):
                out.append(Violation(who, k, found[0], name, found[1]))
        for k, v in (item.get("maxLimitRequestRatio") or {}).items():
            if found := limit_request_ratio_constraint(limit_type, k, str(v), requests, limits, exact_ratio):
                out.append(Violation(who, k, found[0], name, found[1]))

    for item in lr["spec"]["limits"]:
        if item.get("type") == CONTAINER:
            for key, prefix in (("containers", "container"), ("initContainers", "init container")):
                for c in pod["spec"].get(key) or []:
                    res = c.get("resources") or {}
                    check(CONTAINER, item, f'{prefix} "{c.get("name", "")}"', res.get("requests") or {},
                          res.get("limits") or {})
        if item.get("type") == POD:
            check(POD, item, "pod", pod_totals(pod, "requests"), pod_totals(pod, "limits"))
    return out


def validate_resource_requirements(pod: dict[str, Any], defaulted: set[tuple[str, str, str]]) -> list[Violation]:
    """A request above its limit (API validation), where the plugin set one of the two."""
    out = []
    for key, prefix in (("containers", "container"), ("initContainers", "init container")):
        for c in pod["spec"].get(key) or []:
            res = c.get("resources") or {}
            who = f'{prefix} "{c.get("name", "")}"'
            for k, v in (res.get("requests") or {}).items():
                lim = (res.get("limits") or {}).get(k)
                if lim is not None and q(v) > q(lim) and (
                        (who, "requests", k) in defaulted or (who, "limits", k) in defaulted):
                    out.append(Violation(who, k, "request-above-limit", "",
                                         f"Invalid value: {v!r}: must be less than or equal to {k} limit of {lim}"))
    return out


def admit(pod: dict[str, Any], limitranges: list[dict[str, Any]], *, stop_at_first_limitrange: bool = False,
          exact_ratio: bool = True) -> Outcome:
    """What kube-apiserver does to ``pod`` (as submitted) with ``limitranges`` (in that order)."""
    stored = [{**lr, "spec": {"limits": [set_defaults_limit_range_item(i) for i in lr["spec"]["limits"]]}}
              for lr in limitranges]
    pod = set_defaults_pod(pod)
    defaulted: set[tuple[str, str, str]] = set()
    annotation = None
    for lr in stored:  # the mutating pass (Admit): every LimitRange
        annotation = pod_mutate_limit_func(lr, pod, defaulted) or annotation
    violations: list[Violation] = []
    for lr in stored:  # the validating pass (Validate)
        found = pod_validate_limit_func(lr, pod, exact_ratio)
        violations += found
        if found and stop_at_first_limitrange:
            break
    violations += validate_resource_requirements(pod, defaulted)
    return Outcome(pod, annotation, violations, defaulted)
