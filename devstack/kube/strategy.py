"""What kube-apiserver's registry strategies do to an admitted object before storing it.

Runs after admission (webhooks never see it), as ``PrepareForCreate`` /
``PrepareForUpdate`` and the Job strategy's selector generation do in 1.24:

* create: the status a client sent is replaced by the kind's empty status — a
  Pod's is ``{"phase": "Pending", "qosClass": …}`` (``GetPodQOS``), a
  ReplicaSet's ``{"replicas": 0}``, …; custom resources with a status
  subresource lose theirs.
* a Job (unless ``spec.manualSelector``) gets ``controller-uid`` / ``job-name``
  template labels and a ``controller-uid`` selector; its own labels, when
  defaulted from the template, show them too (Kubernetes shares the map).
* a DaemonSet carries ``deprecated.daemonset.template.generation``: ``1`` on
  create, bumped when an update changes the template.

Pure functions on plain dicts, applied in place.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .defaults import DS_GENERATION
from .quantity import QuantityError, parse
from .resources import ResourceType

__all__ = ["prepare_for_create", "prepare_for_update", "qos_class"]

Obj = dict[str, Any]
EMPTY_STATUS: dict[tuple[str, str], Obj] = {
    ("apps", "replicasets"): {"replicas": 0},
    ("apps", "deployments"): {},
    ("apps", "statefulsets"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "daemonsets"): {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                             "numberReady": 0},
    ("batch", "jobs"): {},
    ("batch", "cronjobs"): {},
    ("policy", "poddisruptionbudgets"): {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                                         "expectedPods": 0},
}
QOS_RESOURCES = ("cpu", "memory")


def _value(raw: Any) -> Fraction:
    try:
        return parse(raw).value
    except QuantityError:
        return Fraction(0)


def qos_class(spec: Obj) -> str:
    """``GetPodQOS``: Guaranteed, Burstable or BestEffort, from cpu and memory of every
    container and init container."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    containers = [c for kind in ("containers", "initContainers") for c in spec.get(kind) or []
                  if isinstance(c, dict)]
    for c in containers:
        res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
        for name, raw in (res.get("requests") or {}).items():
            if name in QOS_RESOURCES and _value(raw) > 0:
                requests[name] = requests.get(name, Fraction(0)) + _value(raw)
        found = set()
        for name, raw in (res.get("limits") or {}).items():
            if name in QOS_RESOURCES and _value(raw) > 0:
                found.add(name)
                limits[name] = limits.get(name, Fraction(0)) + _value(raw)
        if not found >= set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _job_selector(obj: Obj) -> None:
    """The Job strategy's ``generateSelector``."""
    spec = obj.setdefault("spec", {})
    if spec.get("manualSelector") is True:
        return
    meta = obj["metadata"]
    template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    labels = template_meta.get("labels")
    if not isinstance(labels, dict):
        labels = template_meta["labels"] = {}
    labels.setdefault("job-name", meta["name"])
    labels.setdefault("controller-uid", meta["uid"])
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    match = selector.get("matchLabels") if isinstance(selector.get("matchLabels"), dict) else {}
    match.setdefault("controller-uid", meta["uid"])
    selector["matchLabels"] = match
    spec["selector"] = selector
    if not meta.get("labels"):
        meta["labels"] = labels


def _template_generation(obj: Obj) -> int:
    raw = (obj["metadata"].get("annotations") or {}).get(DS_GENERATION)
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0


def _set_template_generation(obj: Obj, generation: int) -> None:
    meta = obj["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), DS_GENERATION: str(generation)}


def prepare_for_create(rt: ResourceType, obj: Obj) -> None:
    """The strategy's changes to a new object (its metadata.uid and name are set)."""
    key = rt.collection_key
    if key == ("", "pods"):
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
    elif key in EMPTY_STATUS:
        obj["status"] = dict(EMPTY_STATUS[key])
    elif rt.custom and rt.status_subresource:
        obj.pop("status", None)
    if key == ("batch", "jobs"):
        _job_selector(obj)
    elif key == ("apps", "daemonsets"):
        _set_template_generation(obj, max(1, _template_generation(obj)))


def prepare_for_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """The strategy's changes to an admitted update of the main resource."""
    if rt.collection_key == ("apps", "daemonsets"):
        generation = _template_generation(old)
        if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
            generation += 1
        if generation:
            _set_template_generation(new, generation)
