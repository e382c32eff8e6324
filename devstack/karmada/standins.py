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
resourceVersion, as Karmada's detector updates. ``spec.clusters`` is never touched; bindings are never deleted (nor are the
templates labelled, as Karmada's detector does when it claims them).

:class:`Scheduler` — for each binding the clusters its placement allows (:func:`choose_clusters`)
and their replicas (:func:`target_clusters`), written to ``spec.clusters`` with a merge patch.
Not modelled: taints and tolerations, spread constraints, weights, cluster resources, and
Karmada's keeping of a previous result (every pass computes afresh).

A pass does not stop at an object the server refuses (403 denied — by an admission webhook, say —,
404 gone since listed, 409 changed or created meanwhile, 422 invalid): it logs it, records it in
its :class:`PassReport` and moves on; the next pass tries again. Other errors end the pass.

Both take an ``ApiClient`` and an optional scope: the namespaces whose objects they handle (all by
default), so that tests sharing an API server leave each other's objects alone.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from devstack.karmada import (CLUSTERS, CLUSTER_PROPAGATION_POLICIES, CLUSTER_RESOURCE_BINDINGS, PROPAGATION_POLICIES,
                              RESOURCE_BINDINGS)

__all__ = ["CPP_NAME", "DEPLOYMENTS", "Detector", "PP_NAME", "PP_NAMESPACE", "PassReport", "Scheduler", "TemplateKind",
           "binding_name", "choose_clusters", "choose_policy", "cluster_matches", "desired_binding",
           "field_selector_matches", "label_selector_matches", "policy_annotations", "policy_priority", "selector_priority",
           "target_clusters"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PP_NAME = "propagationpolicy.karmada.io/name"
PP_NAMESPACE = "propagationpolicy.karmada.io/namespace"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"
POLICY_ANNOTATIONS = (PP_NAME, PP_NAMESPACE, CPP_NAME)

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
    return (meta.get("annotations") or {}, meta.get("ownerReferences") or [], spec.get("resource"),
            spec.get("replicas"), spec.get("placement"))


# ---- pure: scheduling ------------------------------------------------------------------------------

def _cluster_zones(spec: Mapping[str, Any]) -> list[str]:
    zones = list(spec.get("zones") or [])
    return zones or ([spec["zone"]] if spec.get("zone") else [])


def field_selector_matches(field_selector: Mapping[str, Any] | None, cluster: Mapping[str, Any]) -> bool:
    """Karmada's field selector: every requirement holds. ``provider`` and ``region`` compare
    ``spec.provider`` / ``spec.region`` (In: the value is listed; NotIn: it is not); ``zone``
    compares the cluster's zones (``spec.zones``, else ``spec.zone``) — In: it has some and all
    are listed; NotIn: none is listed. Another key or operator matches nothing."""
    spec = cluster.get("spec") or {}
    for req in (field_selector or {}).get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op not in ("In", "NotIn") or key not in ("provider", "region", "zone"):
            return False
        if key == "zone":
            zones = _cluster_zones(spec)
            ok = (bool(zones) and all(z in values for z in zones)) if op == "In" else not any(z in values for z in zones)
        else:
            ok = (spec.get(key) in values) == (op == "In")
        if not ok:
            return False
    return True


def cluster_matches(affinity: Mapping[str, Any], cluster: Mapping[str, Any]) -> bool:
    """A cluster affinity (or affinity term) admits ``cluster``: its name is not in ``exclude``,
    is in ``clusterNames`` when that is non-empty, and the label and field selectors match."""
    meta = cluster.get("metadata") or {}
    name = meta.get("name")
    if name in (affinity.get("exclude") or []):
        return False
    names = affinity.get("clusterNames") or []
    if names and name not in names:
        return False
    return (label_selector_matches(affinity.get("labelSelector"), meta.get("labels"))
            and field_selector_matches(affinity.get("fieldSelector"), cluster))


def choose_clusters(placement: Mapping[str, Any] | None, clusters: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the clusters ``placement`` allows, in name order. ``clusterAffinity``: those
    it admits (:func:`cluster_matches`). ``clusterAffinities`` (when there is no
    clusterAffinity): those of the first term, in order, that admits at least one; none when no
    term does. Neither: every cluster."""
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in clusters}
    names = sorted(by_name)
    placement = placement or {}
    if placement.get("clusterAffinity") is not None:
        return [n for n in names if cluster_matches(placement["clusterAffinity"], by_name[n])]
    terms = placement.get("clusterAffinities")
    if terms:
        for term in terms:
            chosen = [n for n in names if cluster_matches(term, by_name[n])]
            if chosen:
                return chosen
        return []
    return names


def target_clusters(names: Sequence[str], placement: Mapping[str, Any] | None, replicas: int | None) -> list[Obj]:
    """``spec.clusters`` for the chosen ``names``: ``[{name, replicas}]`` in their order.

    Duplicated (Karmada's behaviour when ``replicaScheduling`` is absent, too): each gets
    ``replicas``. Divided (also when replicaScheduling has no type, Karmada's default): the
    replicas split evenly, the first clusters getting one more when they do not divide (weights
    and preferences are ignored). As Karmada's ``omitempty``, no ``replicas`` key where it is 0
    or the binding has none."""
    scheduling = (placement or {}).get("replicaScheduling")
    total = replicas if isinstance(replicas, int) and replicas > 0 else 0
    if not names or not total:
        return [{"name": n} for n in names]
    if scheduling is None or scheduling.get("replicaSchedulingType") == "Duplicated":
        counts = [total] * len(names)
    else:
        share, extra = divmod(total, len(names))
        counts = [share + (1 if i < extra else 0) for i in range(len(names))]
    return [{"name": n, **({"replicas": c} if c else {})} for n, c in zip(names, counts)]


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
        """One pass: list the Clusters and the bindings; for each binding whose ``spec.clusters``
        differs from :func:`target_clusters` of :func:`choose_clusters`, a merge patch of
        ``{"spec": {"clusters": [...]}}`` on the binding (``[]`` when no cluster fits).
        Refusals are logged and recorded; other errors raise."""
        clusters, bindings = await asyncio.gather(_list(self.api, CLUSTERS, None, self.cluster_selector),
                                                  self._bindings())
        report = PassReport()
        for resource, binding in bindings:
            spec = binding.get("spec") or {}
            placement = spec.get("placement")
            want = target_clusters(choose_clusters(placement, clusters), placement, spec.get("replicas"))
            key = _key(binding)
            if spec.get("clusters") == want:
                report.unchanged.append(key)
                continue
            meta = binding["metadata"]
            try:
                await kube_json(self.api, "PATCH", resource.object_path(meta["name"], meta.get("namespace")),
                                body={"spec": {"clusters": want}}, content_type="application/merge-patch+json")
                report.updated.append(key)
            except KubeApiError as exc:
                if exc.status not in REFUSALS:
                    raise
                _refused(report, key, "binding", exc)
        return report

    async def run(self, interval: float = 1.0) -> None:
        """:meth:`schedule_once` every ``interval`` seconds until cancelled; a pass that fails is
        logged and the next one goes on."""
        await _passes(self.schedule_once, "scheduler", interval)
