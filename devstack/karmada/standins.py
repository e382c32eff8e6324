"""Devstack-only stand-ins for Karmada's resource detector and scheduler.

Not Karmada: just what its detector (in karmada-controller-manager) and karmada-scheduler do to
the binding objects, enough for fedplace's tests and demo to see policies turn into bindings and
bindings into cluster choices, on the test CRDs of ``crds.yaml``. Each works in passes: list
everything, write what differs. Nothing is watched, nothing cached between passes.

:class:`Detector` — for each template (an object of the kinds it is given) the policy that claims
it (:func:`choose_policy`), and the binding :func:`binding_name` of it: a ResourceBinding in the
template's namespace, a ClusterResourceBinding for a cluster-scoped template. Created or updated
as :func:`desired_binding` says: ``spec.resource``, ``spec.replicas``, ``spec.placement`` (the
policy's, copied whole: a full overwrite), the ownerReference to the template and the policy
annotations, merged into the binding's other annotations. Written with a PUT carrying the listed
resourceVersion, as Karmada's detector updates; the policy's permanent-id label is copied onto the
binding (the policy's uid stands for it when no karmada-webhook labelled the policy).
``spec.clusters`` is never touched; bindings are never deleted (nor are the templates labelled, as
Karmada's detector does when it claims them).

:class:`Scheduler` — for each binding the clusters its placement allows (:func:`choose_clusters`)
and their replicas (:func:`schedule`), written to ``spec.clusters`` with a merge patch, as
karmada-scheduler does: only bindings with a policy's permanent-id label; only when
``metadata.generation`` moved past ``status.schedulerObservedGeneration``, and then only when
``spec.placement`` differs from the ``policy.karmada.io/applied-placement`` annotation it writes
(or the replicas changed, or the binding is Duplicated); field selectors on ``zone`` read
``spec.zones`` (In: any overlap); ``clusterAffinities`` terms move forward only, each term with its
``overflowAffinities`` tiers (each with its own ``exclude``) filled in order by the clusters'
available pods; no cluster fits: ``spec.clusters`` emptied; replicas that fit nowhere: the old
result kept. Not modelled: taints and tolerations, spread constraints, weights, cluster readiness
and API enablements, ``rescheduleTriggeredAt``.

A pass does not stop at an object the server refuses (403 denied — by an admission webhook, say —,
404 gone since listed, 409 changed or created meanwhile, 422 invalid): it logs it, records it in
its :class:`PassReport` and moves on; the next pass tries again. Other errors end the pass.

Both take an ``ApiClient`` and an optional scope: the namespaces whose objects they handle (all by
default), so that tests sharing an API server leave each other's objects alone.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from kubernetes_asyncio import client

from devstack.karmada import (
    CLUSTER_PROPAGATION_POLICIES,
    CLUSTER_RESOURCE_BINDINGS,
    CLUSTERS,
    PROPAGATION_POLICIES,
    RESOURCE_BINDINGS,
)
from fedplace.common.kube_client import KubeApiError, Resource, kube_json

__all__ = ["CPP_NAME", "DEPLOYMENTS", "Detector", "PP_NAME", "PP_NAMESPACE", "PassReport", "Scheduler", "TemplateKind", "APPLIED_PLACEMENT", "Candidates",
           "NoClusterFits", "PERMANENT_ID_LABELS", "PP_PERMANENT_ID", "CPP_PERMANENT_ID", "Unschedulable",
           "always_rescheduled", "available_replicas", "candidates", "needs_scheduling", "permanent_id_label", "placement_changed", "schedule",
           "scheduled_replicas", "term_tiers",
           "binding_name", "choose_clusters", "choose_policy", "cluster_matches", "desired_binding",
           "field_selector_matches", "label_selector_matches", "policy_annotations", "policy_priority", "selector_priority",
           "target_clusters"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PP_NAME = "propagationpolicy.karmada.io/name"
PP_NAMESPACE = "propagationpolicy.karmada.io/namespace"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"
POLICY_ANNOTATIONS = (PP_NAME, PP_NAMESPACE, CPP_NAME)
# The policy's permanent id, which karmada-webhook puts on every policy and the detector copies onto
# its bindings; the scheduler ignores a binding without one.
PP_PERMANENT_ID = "propagationpolicy.karmada.io/permanent-id"
CPP_PERMANENT_ID = "clusterpropagationpolicy.karmada.io/permanent-id"
PERMANENT_ID_LABELS = (PP_PERMANENT_ID, CPP_PERMANENT_ID)
# The placement the scheduler last scheduled a binding for (JSON), written by the scheduler.
APPLIED_PLACEMENT = "policy.karmada.io/applied-placement"

PP_KIND = "PropagationPolicy"
CPP_KIND = "ClusterPropagationPolicy"
RB_KIND = "ResourceBinding"
CRB_KIND = "ClusterResourceBinding"
BINDING_API_VERSION = RESOURCE_BINDINGS.api_version

# Implicit priorities of a resource selector's match (Karmada's): by name, by label selector, all.
MATCH_NAME, MATCH_LABELS, MATCH_ALL = 3, 2, 1

REFUSALS = (403, 404, 409, 422)  # per-object answers a pass records and moves past


@dataclass(frozen=True)
class TemplateKind:
    """A kind of resource template the detector propagates: ``resource`` names its API path."""

    resource: Resource
    kind: str

    @property
    def api_version(self) -> str:
        return self.resource.api_version


DEPLOYMENTS = TemplateKind(Resource("apps", "v1", "deployments"), "Deployment")


@dataclass
class PassReport:
    """What one pass did, by object key (``namespace/name``, or ``name`` when cluster-scoped)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: dict[str, KubeApiError] = field(default_factory=dict)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name", ""))


# ---- pure: selection -------------------------------------------------------------------------------

def binding_name(name: str, kind: str) -> str:
    """Karmada's binding name for a template: ``<name>-<kind>`` lowercased, ``:`` (which a
    custom resource's name may not hold, a ClusterRole's may) turned into ``.``."""
    return f"{name.replace(':', '.')}-{kind}".lower()


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """metav1.LabelSelector semantics: every matchLabels pair and every matchExpressions
    requirement (In, NotIn, Exists, DoesNotExist) holds. ``None`` and ``{}`` match everything;
    a requirement with another operator matches nothing (Karmada cannot parse it either)."""
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            ok = False
        if not ok:
            return False
    return True


def selector_priority(selector: Mapping[str, Any], template: Mapping[str, Any]) -> int:
    """How a policy's resource selector matches ``template`` (a full object, apiVersion and kind
    set): 0 not at all, else :data:`MATCH_NAME` (``name`` set and equal: the labelSelector is
    then ignored, as in Karmada), :data:`MATCH_LABELS` (``labelSelector`` matches) or
    :data:`MATCH_ALL` (neither set). apiVersion and kind must be equal, and ``namespace``,
    when set, the template's."""
    if selector.get("apiVersion") != template.get("apiVersion") or selector.get("kind") != template.get("kind"):
        return 0
    meta = template.get("metadata") or {}
    if selector.get("namespace") and selector["namespace"] != meta.get("namespace"):
        return 0
    if selector.get("name"):
        return MATCH_NAME if selector["name"] == meta.get("name") else 0
    if selector.get("labelSelector") is not None:
        return MATCH_LABELS if label_selector_matches(selector["labelSelector"], meta.get("labels")) else 0
    return MATCH_ALL


def policy_priority(policy: Mapping[str, Any], template: Mapping[str, Any]) -> int:
    """The best :func:`selector_priority` of the policy's selectors for ``template``; 0 when none
    matches. A PropagationPolicy (``kind`` set) matches only templates of its own namespace."""
    meta = template.get("metadata") or {}
    if policy.get("kind") == PP_KIND and (policy.get("metadata") or {}).get("namespace") != meta.get("namespace"):
        return 0
    selectors = (policy.get("spec") or {}).get("resourceSelectors") or []
    return max((selector_priority(s, template) for s in selectors), default=0)


def choose_policy(policies: Iterable[Mapping[str, Any]], template: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The policy that claims ``template``, among PropagationPolicies and ClusterPropagationPolicies
    (each with its ``kind``), or None. As Karmada: a PropagationPolicy before any
    ClusterPropagationPolicy; then the higher ``spec.priority``; then the better match
    (:func:`selector_priority`); then the name first in alphabetical order. (Karmada keeps an
    existing claim unless preemption says otherwise; this stand-in has no memory.)"""
    best: tuple[Any, ...] | None = None
    chosen = None
    for policy in policies:
        implicit = policy_priority(policy, template)
        if not implicit:
            continue
        rank = (policy.get("kind") != PP_KIND, -int((policy.get("spec") or {}).get("priority") or 0), -implicit,
                (policy.get("metadata") or {}).get("name", ""))
        if best is None or rank < best:
            best, chosen = rank, policy
    return chosen


def policy_annotations(policy: Mapping[str, Any]) -> dict[str, str]:
    """The annotations Karmada's detector puts on a binding of ``policy``."""
    meta = policy.get("metadata") or {}
    if policy.get("kind") == PP_KIND:
        return {PP_NAME: meta["name"], PP_NAMESPACE: meta["namespace"]}
    return {CPP_NAME: meta["name"]}


def permanent_id_label(policy: Mapping[str, Any]) -> dict[str, str]:
    """The permanent-id label the detector copies from ``policy`` onto its bindings: the policy's
    own (karmada-webhook sets it when the policy is created), else — no webhook in front of the
    stand-ins — the policy's uid standing for it; ``{}`` when it has neither."""
    meta = policy.get("metadata") or {}
    label = PP_PERMANENT_ID if policy.get("kind") == PP_KIND else CPP_PERMANENT_ID
    value = (meta.get("labels") or {}).get(label) or meta.get("uid")
    return {label: str(value)} if value else {}


def desired_binding(template: Mapping[str, Any], policy: Mapping[str, Any],
                    existing: Mapping[str, Any] | None = None) -> Obj:
    """The binding of ``template`` (apiVersion and kind set) claimed by ``policy``: ``existing``
    with the detector's fields replaced, or a new object when there is none.

    Replaced: ``spec.resource`` (apiVersion, kind, namespace when set, name, uid,
    resourceVersion), ``spec.replicas`` (the template's ``spec.replicas`` when an integer, else
    absent), ``spec.placement`` (the policy's, whole; ``{}`` when the policy has none), ``spec.propagateDeps``
    (the policy's, omitted when false), the
    ownerReference to the template, and the policy annotations — those of another policy
    removed, every other annotation kept (the ownerReference only when the template has a uid).
    Everything else (``spec.clusters``, labels, status)
    is kept as it is. Neither argument is modified."""
    meta = template["metadata"]
    namespaced = bool(meta.get("namespace"))
    out: Obj = copy.deepcopy(dict(existing)) if existing is not None else {
        "apiVersion": BINDING_API_VERSION, "kind": RB_KIND if namespaced else CRB_KIND,
        "metadata": {"name": binding_name(meta["name"], template["kind"]),
                     **({"namespace": meta["namespace"]} if namespaced else {})},
        "spec": {},
    }
    out_meta = out.setdefault("metadata", {})
    annotations = {k: v for k, v in (out_meta.get("annotations") or {}).items() if k not in POLICY_ANNOTATIONS}
    out_meta["annotations"] = {**annotations, **policy_annotations(policy)}
    labels = {k: v for k, v in (out_meta.get("labels") or {}).items() if k not in PERMANENT_ID_LABELS}
    out_meta["labels"] = {**labels, **permanent_id_label(policy)}
    if not out_meta["labels"]:
        del out_meta["labels"]
    if meta.get("uid"):  # an object read from a server has one; the reference needs it
        out_meta["ownerReferences"] = [{"apiVersion": template["apiVersion"], "kind": template["kind"],
                                        "name": meta["name"], "uid": meta["uid"], "controller": True}]
    spec = out.setdefault("spec", {})
    resource = {"apiVersion": template["apiVersion"], "kind": template["kind"],
                **({"namespace": meta["namespace"]} if namespaced else {}), "name": meta["name"]}
    for src, dst in (("uid", "uid"), ("resourceVersion", "resourceVersion")):
        if meta.get(src):
            resource[dst] = meta[src]
    spec["resource"] = resource
    replicas = (template.get("spec") or {}).get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool):
        spec["replicas"] = replicas
    else:
        spec.pop("replicas", None)
    placement = (policy.get("spec") or {}).get("placement")
    # Karmada's detector always writes a placement (its binding without one is the
    # dependencies distributor's): {} when the policy has none.
    spec["placement"] = copy.deepcopy(placement) if placement is not None else {}
    if (policy.get("spec") or {}).get("propagateDeps") is True:  # copied as the detector does (omitted: false)
        spec["propagateDeps"] = True
    else:
        spec.pop("propagateDeps", None)
    return out


def _detector_fields(binding: Mapping[str, Any]) -> tuple[Any, ...]:
    meta, spec = binding.get("metadata") or {}, binding.get("spec") or {}
    return (meta.get("annotations") or {}, meta.get("labels") or {}, meta.get("ownerReferences") or [],
            spec.get("resource"),
            spec.get("replicas"), spec.get("placement"))


# ---- pure: scheduling ------------------------------------------------------------------------------

def field_selector_matches(field_selector: Mapping[str, Any] | None, cluster: Mapping[str, Any]) -> bool:
    """Karmada's field selector: every requirement holds. ``provider`` and ``region`` compare
    ``spec.provider`` / ``spec.region`` (In: the value is listed; NotIn: it is not); ``zone``
    compares the cluster's ``spec.zones`` (the deprecated ``spec.zone`` is not read, as the real
    scheduler does not) — In: at least one of them is listed; NotIn: none is. Another key or
    operator matches nothing."""
    spec = cluster.get("spec") or {}
    for req in (field_selector or {}).get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op not in ("In", "NotIn") or key not in ("provider", "region", "zone"):
            return False
        if key == "zone":
            overlap = any(z in values for z in spec.get("zones") or [])
            ok = overlap if op == "In" else not overlap
        else:
            ok = (spec.get(key) in values) == (op == "In")
        if not ok:
            return False
    return True


def cluster_matches(affinity: Mapping[str, Any], cluster: Mapping[str, Any]) -> bool:
    """A cluster affinity (or affinity term, or overflow tier) admits ``cluster``: its name is not
    in ``exclude``, is in ``clusterNames`` when that is non-empty, and the label and field
    selectors match."""
    meta = cluster.get("metadata") or {}
    name = meta.get("name")
    if name in (affinity.get("exclude") or []):
        return False
    names = affinity.get("clusterNames") or []
    if names and name not in names:
        return False
    return (label_selector_matches(affinity.get("labelSelector"), meta.get("labels"))
            and field_selector_matches(affinity.get("fieldSelector"), cluster))


def term_tiers(term: Mapping[str, Any], clusters: Iterable[Mapping[str, Any]], workload: bool) -> dict[str, int]:
    """The clusters a ``clusterAffinities`` term admits, by name, each with its tier: 0 when the
    term itself admits it, ``i`` when the ``i``-th of its ``overflowAffinities`` is the first to
    (each tier judged by its own ``exclude``, ``clusterNames`` and selectors). Overflow tiers count
    only for a workload (a binding with replicas), as in Karmada."""
    tiers = [term, *((term.get("overflowAffinities") or []) if workload else [])]
    out: dict[str, int] = {}
    for cluster in clusters:
        for index, tier in enumerate(tiers):
            if cluster_matches(tier, cluster):
                out[str((cluster.get("metadata") or {}).get("name"))] = index
                break
    return out


@dataclass(frozen=True)
class Candidates:
    """What the filter left: cluster name → tier (0 unless overflow tiers are in use), and the
    ``affinityName`` of the ``clusterAffinities`` term used ("" without terms)."""

    tiers: dict[str, int]
    affinity_name: str = ""


def candidates(placement: Mapping[str, Any] | None, clusters: Iterable[Mapping[str, Any]], *,
               workload: bool = False, observed_affinity: str = "") -> Candidates:
    """The clusters ``placement`` allows. ``clusterAffinity``: those it admits
    (:func:`cluster_matches`). ``clusterAffinities`` (when there is no clusterAffinity): the
    terms are tried in order from the one named ``observed_affinity`` (the binding's
    ``status.schedulerObservingAffinityName``; the first term when absent or unknown) — never
    back —, the first that admits at least one cluster (:func:`term_tiers`) is used; none admits
    any: no candidates, the last term named. Neither: every cluster."""
    clusters = list(clusters)
    placement = placement or {}
    if placement.get("clusterAffinity") is not None:
        return Candidates({str(c["metadata"]["name"]): 0 for c in clusters
                           if cluster_matches(placement["clusterAffinity"], c)})
    terms = placement.get("clusterAffinities")
    if terms:
        names = [t.get("affinityName", "") for t in terms]
        start = names.index(observed_affinity) if observed_affinity in names else 0
        for term in terms[start:]:
            tiers = term_tiers(term, clusters, workload)
            if tiers:
                return Candidates(tiers, term.get("affinityName", ""))
        return Candidates({}, terms[-1].get("affinityName", ""))
    return Candidates({str(c["metadata"]["name"]): 0 for c in clusters})


def choose_clusters(placement: Mapping[str, Any] | None, clusters: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the clusters ``placement`` allows (:func:`candidates`, from the first term), in
    name order."""
    return sorted(candidates(placement, clusters).tiers)


def available_replicas(cluster: Mapping[str, Any]) -> int:
    """How many more replicas ``cluster`` takes: ``status.resourceSummary`` allocatable pods minus
    allocated (and allocating) pods, as Karmada's general estimator counts for a replica without
    resource requests; 0 when the cluster reports no pod count (its estimator's answer then)."""
    summary = (cluster.get("status") or {}).get("resourceSummary") or {}
    try:
        allocatable = int((summary.get("allocatable") or {})["pods"])
    except (KeyError, TypeError, ValueError):
        return 0
    used = 0
    for part in ("allocated", "allocating"):
        try:
            used += int((summary.get(part) or {}).get("pods") or 0)
        except (TypeError, ValueError):
            pass
    return max(allocatable - used, 0)


def target_clusters(names: Sequence[str], placement: Mapping[str, Any] | None, replicas: int | None) -> list[Obj]:
    """``spec.clusters`` for the chosen ``names``: ``[{name, replicas}]`` in their order.

    Duplicated (Karmada's behaviour when ``replicaScheduling`` is absent, too): each gets
    ``replicas``. Divided (also when replicaScheduling has no type, Karmada's default): the
    replicas split evenly, the first clusters getting one more when they do not divide (weights
    and preferences are ignored). As Karmada's ``omitempty``, no ``replicas`` key where it is 0
    or the binding has none; a cluster given 0 of a Divided binding's replicas is left out."""
    scheduling = (placement or {}).get("replicaScheduling")
    total = replicas if isinstance(replicas, int) and replicas > 0 else 0
    if not names or not total:
        return [{"name": n} for n in names]
    if scheduling is None or scheduling.get("replicaSchedulingType") == "Duplicated":
        counts = [total] * len(names)
    else:
        share, extra = divmod(total, len(names))
        counts = [share + (1 if i < extra else 0) for i in range(len(names))]
    return [{"name": n, **({"replicas": c} if c else {})} for n, c in zip(names, counts, strict=True)
            if c or total == 0]


class NoClusterFits(Exception):
    """No cluster passes the filter (Karmada's FitError): the result is empty ``spec.clusters``."""


class Unschedulable(Exception):
    """Clusters pass the filter but the replicas cannot be placed (too little room in every tier):
    Karmada keeps the previous ``spec.clusters``."""


def schedule(placement: Mapping[str, Any] | None, clusters: Sequence[Mapping[str, Any]], replicas: int | None,
             observed_affinity: str = "") -> tuple[list[Obj], str]:
    """``(spec.clusters, affinity name used)`` for a binding, or :class:`NoClusterFits` /
    :class:`Unschedulable`.

    The candidates are :func:`candidates`'. With overflow tiers in use (a workload whose term has
    ``overflowAffinities``), tiers fill in order: each takes at most its clusters'
    :func:`available_replicas` of what is left (a Divided split within the tier), and replicas
    left over after the last tier are :class:`Unschedulable`. Otherwise :func:`target_clusters`
    over every candidate, in name order."""
    workload = isinstance(replicas, int) and replicas > 0
    found = candidates(placement, clusters, workload=workload, observed_affinity=observed_affinity)
    if not found.tiers:
        raise NoClusterFits("no cluster fits the placement")
    by_name = {str(c["metadata"]["name"]): c for c in clusters}
    tiered = workload and any(t.get("affinityName") == found.affinity_name and t.get("overflowAffinities")
                              for t in (placement or {}).get("clusterAffinities") or [])
    if not tiered:
        return target_clusters(sorted(found.tiers), placement, replicas), found.affinity_name
    remaining = int(replicas or 0)
    out: list[Obj] = []
    for tier in sorted(set(found.tiers.values())):
        names = sorted(n for n, t in found.tiers.items() if t == tier)
        take = min(remaining, sum(available_replicas(by_name[n]) for n in names))
        if take:
            out += target_clusters(names, placement, take)
            remaining -= take
        if remaining <= 0:
            break
    if remaining > 0:
        raise Unschedulable("clusters' available replicas are not enough to schedule")
    return out, found.affinity_name


def scheduled_replicas(binding: Mapping[str, Any]) -> int:
    """The replicas ``spec.clusters`` holds in all."""
    return sum(int(t.get("replicas") or 0) for t in (binding.get("spec") or {}).get("clusters") or [])


def always_rescheduled(binding: Mapping[str, Any]) -> bool:
    """Duplicated or not a workload (no replicas): karmada-scheduler reschedules such a binding
    whenever anything triggers it — a matching Cluster's labels or spec changing, too."""
    spec = binding.get("spec") or {}
    replicas = spec.get("replicas")
    if not (isinstance(replicas, int) and replicas > 0):
        return True
    scheduling = (spec.get("placement") or {}).get("replicaScheduling")
    return scheduling is None or scheduling.get("replicaSchedulingType") == "Duplicated"


def needs_scheduling(binding: Mapping[str, Any]) -> bool:
    """Whether the scheduler looks at ``binding`` at all: it carries a policy's permanent-id label
    (:data:`PERMANENT_ID_LABELS`), and its ``metadata.generation`` differs from
    ``status.schedulerObservedGeneration`` or it is :func:`always_rescheduled` (a stand-in for
    the Cluster events that wake the real scheduler: it reschedules those bindings then, and
    leaves a Divided one whose placement did not change as it is)."""
    meta, status = binding.get("metadata") or {}, binding.get("status") or {}
    if not any((meta.get("labels") or {}).get(label) for label in PERMANENT_ID_LABELS):
        return False
    return meta.get("generation") != status.get("schedulerObservedGeneration") or always_rescheduled(binding)


def placement_changed(binding: Mapping[str, Any]) -> bool:
    """Whether a binding's work is more than acknowledging its generation: its ``spec.placement``
    differs from the one in :data:`APPLIED_PLACEMENT`, its replicas differ from what
    ``spec.clusters`` holds (Divided), or it is Duplicated or not a workload (always
    rescheduled, as Karmada does)."""
    meta, spec = binding.get("metadata") or {}, binding.get("spec") or {}
    applied = (meta.get("annotations") or {}).get(APPLIED_PLACEMENT)
    placement = spec.get("placement") or {}
    try:
        if applied is None or json.loads(applied) != placement:
            return True
    except ValueError:
        return True
    return always_rescheduled(binding) or scheduled_replicas(binding) != spec.get("replicas")


# ---- I/O -------------------------------------------------------------------------------------------

async def _list(api: client.ApiClient, resource: Resource, namespace: str | None = None,
                label_selector: str | None = None) -> list[Obj]:
    query = [("labelSelector", label_selector)] if label_selector else None
    return (await kube_json(api, "GET", resource.collection_path(namespace), query=query))["items"]


async def _list_scoped(api: client.ApiClient, resource: Resource, namespaces: Sequence[str] | None,
                       label_selector: str | None = None) -> list[Obj]:
    """Objects of ``resource``: every namespace when ``namespaces`` is None, else those listed
    (a cluster-scoped resource: all of them either way)."""
    if not resource.namespaced or namespaces is None:
        return await _list(api, resource, None, label_selector)
    pages = await asyncio.gather(*(_list(api, resource, ns, label_selector) for ns in namespaces))
    return [item for page in pages for item in page]


def _refused(report: PassReport, key: str, what: str, exc: KubeApiError) -> None:
    log.warning("%s %s refused: %s", what, key, exc)
    report.refused[key] = exc


async def _passes(one_pass: Callable[[], Awaitable[PassReport]], what: str, interval: float) -> None:
    """``one_pass`` every ``interval`` seconds until cancelled; a failed pass is logged."""
    while True:
        try:
            await one_pass()
        except Exception:  # noqa: BLE001 — a stand-in loop: log and go on
            log.exception("%s pass failed", what)
        await asyncio.sleep(interval)


class Detector:
    """Policies → bindings, one pass at a time (see the module docstring).

    ``templates``: the kinds to propagate (e.g. :data:`DEPLOYMENTS`). ``namespaces``: the
    namespaces whose templates and PropagationPolicies it reads (None: all); cluster-scoped
    templates and ClusterPropagationPolicies are read whatever it says.
    """

    def __init__(self, api: client.ApiClient, templates: Sequence[TemplateKind], *,
                 namespaces: Sequence[str] | None = None) -> None:
        self.api = api
        self.templates = tuple(templates)
        self.namespaces = tuple(namespaces) if namespaces is not None else None

    async def _templates(self) -> list[Obj]:
        out = []
        for tk in self.templates:
            for item in await _list_scoped(self.api, tk.resource, self.namespaces):
                out.append({**item, "apiVersion": tk.api_version, "kind": tk.kind})  # lists may omit them
        return out

    async def _policies(self) -> list[Obj]:
        pps, cpps = await asyncio.gather(_list_scoped(self.api, PROPAGATION_POLICIES, self.namespaces),
                                         _list(self.api, CLUSTER_PROPAGATION_POLICIES))
        return [{**p, "kind": PP_KIND} for p in pps] + [{**p, "kind": CPP_KIND} for p in cpps]

    async def _bindings(self) -> dict[str, Obj]:
        rbs, crbs = await asyncio.gather(_list_scoped(self.api, RESOURCE_BINDINGS, self.namespaces),
                                         _list(self.api, CLUSTER_RESOURCE_BINDINGS))
        return {_key(b): b for b in rbs + crbs}

    async def reconcile_once(self) -> PassReport:
        """One pass: list templates, policies and bindings; create or update (PUT, with the
        listed resourceVersion) each binding whose detector fields differ from
        :func:`desired_binding`'s. Refusals are logged and recorded; other errors raise."""
        templates, policies, bindings = await asyncio.gather(self._templates(), self._policies(), self._bindings())
        report = PassReport()
        for template in templates:
            policy = choose_policy(policies, template)
            if policy is None:
                continue
            meta = template["metadata"]
            name = binding_name(meta["name"], template["kind"])
            namespace = meta.get("namespace")
            key = f"{namespace}/{name}" if namespace else name
            existing = bindings.get(key)
            want = desired_binding(template, policy, existing)
            resource = RESOURCE_BINDINGS if namespace else CLUSTER_RESOURCE_BINDINGS
            try:
                if existing is None:
                    await kube_json(self.api, "POST", resource.collection_path(namespace), body=want)
                    report.created.append(key)
                elif _detector_fields(existing) != _detector_fields(want):
                    await kube_json(self.api, "PUT", resource.object_path(name, namespace), body=want)
                    report.updated.append(key)
                else:
                    report.unchanged.append(key)
            except KubeApiError as exc:
                if exc.status not in REFUSALS:
                    raise
                _refused(report, key, "binding", exc)
        return report

    async def run(self, interval: float = 1.0) -> None:
        """:meth:`reconcile_once` every ``interval`` seconds until cancelled; a pass that fails is
        logged and the next one goes on."""
        await _passes(self.reconcile_once, "detector", interval)


class Scheduler:
    """Bindings → ``spec.clusters``, one pass at a time (see the module docstring).

    ``namespaces``: the namespaces whose ResourceBindings it schedules (None: all).
    ``cluster_bindings``: whether it schedules ClusterResourceBindings too. ``binding_selector``
    and ``cluster_selector``: label selectors (the API's string form) restricting the bindings
    it schedules and the Clusters it considers; the candidates are every Cluster otherwise.
    """

    def __init__(self, api: client.ApiClient, *, namespaces: Sequence[str] | None = None,
                 cluster_bindings: bool = True, binding_selector: str | None = None,
                 cluster_selector: str | None = None) -> None:
        self.api = api
        self.namespaces = tuple(namespaces) if namespaces is not None else None
        self.cluster_bindings = cluster_bindings
        self.binding_selector = binding_selector
        self.cluster_selector = cluster_selector

    async def _bindings(self) -> list[tuple[Resource, Obj]]:
        rbs = await _list_scoped(self.api, RESOURCE_BINDINGS, self.namespaces, self.binding_selector)
        crbs = (await _list(self.api, CLUSTER_RESOURCE_BINDINGS, None, self.binding_selector)
                if self.cluster_bindings else [])
        return [(RESOURCE_BINDINGS, b) for b in rbs] + [(CLUSTER_RESOURCE_BINDINGS, b) for b in crbs]

    async def schedule_once(self) -> PassReport:
        """One pass: list the Clusters and the bindings; each binding :func:`needs_scheduling` is
        handled, the others are left alone (``unchanged``). A binding whose
        :func:`placement_changed` is false only gets ``status.schedulerObservedGeneration`` set
        (``unchanged``). Else :func:`schedule`: on success one merge patch of ``spec.clusters``
        and :data:`APPLIED_PLACEMENT`, then the status (observed generation, the term in use, a
        ``Scheduled`` condition) — ``updated``, or only the status when the result is what is
        stored; on :class:`NoClusterFits` ``spec.clusters`` removed and the placement recorded,
        a ``NoClusterFit`` condition, the generation left unobserved — ``updated``; on
        :class:`Unschedulable` ``spec.clusters`` and the recorded placement are kept and only the
        condition is written, the generation left unobserved (``unchanged``). Karmada retries a
        binding it failed: so does the next pass. Refusals
        are logged and recorded; other errors raise."""
        clusters, bindings = await asyncio.gather(_list(self.api, CLUSTERS, None, self.cluster_selector),
                                                  self._bindings())
        report = PassReport()
        for resource, binding in bindings:
            key = _key(binding)
            try:
                if await self._schedule_one(resource, binding, clusters):
                    report.updated.append(key)
                else:
                    report.unchanged.append(key)
            except KubeApiError as exc:
                if exc.status not in REFUSALS:
                    raise
                _refused(report, key, "binding", exc)
        return report

    async def _schedule_one(self, resource: Resource, binding: Obj, clusters: Sequence[Obj]) -> bool:
        """Schedule one binding as :meth:`schedule_once` says; whether spec.clusters was written."""
        if not needs_scheduling(binding):
            return False
        meta, spec, status = binding["metadata"], binding.get("spec") or {}, binding.get("status") or {}
        path = resource.object_path(meta["name"], meta.get("namespace"))
        if not placement_changed(binding):
            await self._status(path, meta["generation"], status.get("schedulerObservingAffinityName", ""), None)
            return False
        placement = spec.get("placement")
        applied = json.dumps(placement or {}, separators=(",", ":"))
        observed_affinity = status.get("schedulerObservingAffinityName", "")
        try:
            targets, affinity = schedule(placement, clusters, spec.get("replicas"), observed_affinity)
        except Unschedulable as exc:
            await self._status(path, None, observed_affinity, ("False", "Unschedulable", str(exc)))
            return False
        except NoClusterFits as exc:
            # Karmada's FitError: spec.clusters dropped and the placement recorded, the generation
            # left unobserved (the binding is retried).
            if spec.get("clusters") or (meta.get("annotations") or {}).get(APPLIED_PLACEMENT) != applied:
                await kube_json(self.api, "PATCH", path, content_type="application/merge-patch+json", body={
                    "metadata": {"annotations": {APPLIED_PLACEMENT: applied}}, "spec": {"clusters": None}})
                await self._status(path, None, observed_affinity, ("False", "NoClusterFit", str(exc)))
                return True
            return False
        if targets == (spec.get("clusters") or []) and (meta.get("annotations") or {}).get(APPLIED_PLACEMENT) == applied:
            if meta["generation"] != status.get("schedulerObservedGeneration"):
                await self._status(path, meta["generation"], affinity,
                                   ("True", "Success", "Binding has been scheduled successfully."))
            return False  # rescheduled to the same result: nothing else to write
        written = await kube_json(self.api, "PATCH", path, content_type="application/merge-patch+json", body={
            "metadata": {"annotations": {APPLIED_PLACEMENT: applied}}, "spec": {"clusters": targets}})
        await self._status(path, written["metadata"]["generation"], affinity,
                           ("True", "Success", "Binding has been scheduled successfully."))
        return True

    async def _status(self, path: str, generation: int | None, affinity: str,
                      condition: tuple[str, str, str] | None) -> None:
        """Merge-patch the binding's status: the observed generation (when given), the term in
        use (when any) and the ``Scheduled`` condition (when given)."""
        status: Obj = {}
        if generation is not None:
            status["schedulerObservedGeneration"] = generation
        if affinity:
            status["schedulerObservingAffinityName"] = affinity
        if condition is not None:
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            state, reason, message = condition
            status["conditions"] = [{"type": "Scheduled", "status": state, "reason": reason, "message": message,
                                     "lastTransitionTime": now}]
            if state == "True":
                status["lastScheduledTime"] = now
        if status:
            await kube_json(self.api, "PATCH", path + "/status", content_type="application/merge-patch+json",
                            body={"status": status})

    async def run(self, interval: float = 1.0) -> None:
        """:meth:`schedule_once` every ``interval`` seconds until cancelled; a pass that fails is
        logged and the next one goes on."""
        await _passes(self.schedule_once, "scheduler", interval)
