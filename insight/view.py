"""The placement view: clusters, workloads with what the placement rules require and their placement, Karmada's
bindings with their exclusions, denials and remediations, the policy ConfigMaps that fail to
load — one JSON-able model for the page opa-kube-sync serves, ``fedplace report`` and the
what-if's before/after.

A workload's placement is read as the policy writes it, per kind: a ReplicaSet's
``federation.kubernetes.io/replica-set-preferences`` (the clusters it names), any kind of the
policy's ``selector_kinds`` (Deployments, Secrets, …) its
``federation.alpha.kubernetes.io/cluster-selector`` — the requirements matched against the
replicated clusters' labels (:mod:`fedplace.insight.reasons`); None is "any cluster". What
the placement rules say of each workload (and of each binding's template) is their answer
(:mod:`fedplace.insight.rules`), given by the caller, kept once per distinct answer in the
view's ``rules``.

The page's columns are the clusters grouped by a cluster property the operator chooses
(:func:`group_by`): the region (the default), the provider, or a label.

Pure functions; the callers gather the objects (from the sync's informers or
from OPA's replicated data), the remediator's records and the policy loaders' state.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from fedplace.common.annotations import canonical_value
from fedplace.insight.reasons import parse_selector, rules_key, selected, selector_words, settings_of

__all__ = ["BINDING_RESOURCES", "DEFAULT_GROUP_BY", "EXCLUDED", "PREFS", "SELECTOR", "SELECTOR_SOURCE", "SOURCE",
           "TEMPLATE_PLURALS", "WHY", "binding_entry", "build_view", "cluster_entries", "clusters_of",
           "effective_placement", "excluded_of", "group_by", "group_by_text", "iso", "placed_plurals", "policy_entry",
           "template_key", "template_text", "workload_entry"]

PREFS = "federation.kubernetes.io/replica-set-preferences"
SOURCE = "fedplace.io/replica-set-preferences-source"
# Every other kind the policy places (policies/federation/selector.rego).
SELECTOR = "federation.alpha.kubernetes.io/cluster-selector"
SELECTOR_SOURCE = "fedplace.io/cluster-selector-source"
VIA_PREFS, VIA_SELECTOR = "replica-set-preferences", "cluster-selector"
WORDS_LIMIT = 6  # cluster names in a selector's words
# The cluster property the page groups its columns by: "region", "provider" or "label:<key>".
DEFAULT_GROUP_BY = "region"
# What the Karmada pack (policies/karmada/) writes on a ResourceBinding / ClusterResourceBinding.
EXCLUDED = "fedplace.io/excluded-clusters"
WHY = "fedplace.io/placement"
# The replicated plurals of Karmada's bindings, as opa-kube-sync names them: (namespaced, cluster-scoped).
BINDING_RESOURCES = ("resourcebindings", "clusterresourcebindings")
# Template kind -> the plural it is replicated under: the pack's default (setting karmada_templates in
# policies/karmada/karmada.rego), used to find a binding's template among the replicated objects.
TEMPLATE_PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
                    "ReplicaSet": "replicasets", "Job": "jobs", "ConfigMap": "configmaps", "Secret": "secrets",
                    "Service": "services", "Ingress": "ingresses"}


def iso(stamp: float | None) -> str | None:
    """Wall-clock seconds as ``2026-01-02T03:04:05Z``."""
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def clusters_of(value: Any) -> list[str] | None:
    """The clusters a replica-set-preferences value names (a JSON string or an object), sorted;
    None when it names none in a readable way."""
    if isinstance(value, str):
        return list(_clusters_of_text(value)) if _clusters_of_text(value) is not None else None
    chosen = value.get("clusters") if isinstance(value, dict) else None
    return sorted(str(c) for c in chosen) if isinstance(chosen, dict) else None


@functools.lru_cache(maxsize=4096)
def _clusters_of_text(text: str) -> tuple[str, ...] | None:
    """Workloads placed alike carry the same annotation text: parsed once (1,000 clusters make
    it tens of kilobytes)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    chosen = value.get("clusters") if isinstance(value, dict) else None
    return tuple(sorted(str(c) for c in chosen)) if isinstance(chosen, dict) else None


def effective_placement(obj: Mapping[str, Any], desired: Mapping[str, Any] | None = None) -> list[str] | None:
    """Where the object runs once ``desired`` annotations (a decision's) are merged: the clusters of
    its replica-set-preferences, or None for any cluster (no preferences)."""
    if desired is not None and PREFS in desired:
        return clusters_of(desired[PREFS])
    return clusters_of(_annotations(obj).get(PREFS))


def group_by(text: str) -> str:
    """The page's column grouping: ``region``, ``provider`` or ``label:KEY`` (an argparse type:
    raises its ArgumentTypeError otherwise)."""
    if text in ("region", "provider"):
        return text
    kind, sep, key = text.partition(":")
    if kind == "label" and sep and key.strip():
        return f"label:{key.strip()}"
    raise argparse.ArgumentTypeError(f"expected region, provider or label:KEY, got {text!r}")


def group_by_text(spec: str) -> str:
    """``region`` / ``provider`` / ``label tier``: the grouping in words."""
    return f"label {spec[len('label:'):]}" if spec.startswith("label:") else spec


def _via(kind: str, ann: Mapping[str, Any], settings: Mapping[str, Any]) -> str | None:
    """How the policy places an object of ``kind`` (lib.rego, selector.rego): None on Karmada
    (the bindings are decided there) or for a kind it does not place."""
    if settings["control_plane"] == "karmada":
        return None
    if kind == "ReplicaSet":
        return VIA_PREFS
    if kind in settings["selector_kinds"]:
        return VIA_SELECTOR
    return VIA_PREFS if PREFS in ann else VIA_SELECTOR if SELECTOR in ann else None


def workload_entry(resource: str, obj: Mapping[str, Any], clusters: Sequence[Mapping[str, Any]] = (),
                   settings: Mapping[str, Any] | None = None,
                   memo: dict[Any, Any] | None = None) -> dict[str, Any]:
    """A workload as the page lists it. ``placement``: the clusters it runs on — for the cluster
    selector, those of ``clusters`` (view entries) its requirements admit — or None (any
    cluster); ``via``: the annotation that says so; ``selector`` (its requirements),
    ``selector_text`` (in words) and ``selector_error`` (unreadable: the policy denies it) for
    the cluster selector; ``source``: who wrote it (policy or developer). ``memo``: a dict kept
    across the workloads of one view (workloads placed alike carry the same selector text)."""
    settings = settings_of(settings) if memo is None or "settings" not in memo else memo["settings"]
    meta = obj.get("metadata") or {}
    ann = _annotations(obj)
    kind = str(obj.get("kind") or "")
    via = _via(kind, ann, settings)
    entry: dict[str, Any] = {"resource": resource, "kind": kind, "namespace": str(meta.get("namespace") or ""),
                             "name": str(meta.get("name") or ""), "rules": None, "requires": None, "via": via,
                             "placement": None, "source": None, "selector": None, "selector_text": None,
                             "selector_error": None}
    if via == VIA_SELECTOR:
        text = ann.get(SELECTOR)
        key = ("selector", text if isinstance(text, str) else json.dumps(text, sort_keys=True, default=str))
        found = memo.get(key) if memo is not None else None
        if found is None:
            requirements, error = parse_selector(text)
            found = (requirements, error, f"unreadable: {error}" if error
                     else selector_words(requirements, settings["cluster_name_label"], WORDS_LIMIT),
                     selected(requirements, clusters) if requirements is not None else None)
            if memo is not None:
                memo[key] = found
        requirements, error, words, placement = found
        source = ann.get(SELECTOR_SOURCE)
        entry.update(selector=requirements, selector_error=error, selector_text=words,
                     placement=list(placement) if placement is not None else None)
    else:
        source = ann.get(SOURCE)
        entry["placement"] = effective_placement(obj)
    entry["source"] = source if isinstance(source, str) else None
    return entry


def _cluster_entry(name: str, obj: Mapping[str, Any], grouping: str) -> dict[str, Any]:
    """A cluster as the page lists it; ``group``: its value of the page's grouping ("" when it
    has none)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    # as the contract reads it (contract.rego's cluster_region): a Federation v1 Cluster's
    # status.region, else a Karmada Cluster's spec.region
    region = status.get("region") if "region" in status else spec.get("region")
    region = region if isinstance(region, str) else ""
    provider = spec.get("provider") if isinstance(spec.get("provider"), str) else ""
    shown = {str(k): canonical_value(v) for k, v in sorted(labels.items())}
    group = (region if grouping == "region" else provider if grouping == "provider"
             else shown.get(grouping[len("label:"):], ""))
    return {"name": name, "region": region, "provider": provider, "group": group, "labels": shown}


def cluster_entries(clusters: Mapping[str, Any], grouping: str = DEFAULT_GROUP_BY) -> list[dict[str, Any]]:
    """The clusters (name -> object) as the page lists them, in the page's column order: by their
    value of ``grouping`` (those without one last), then name."""
    return sorted((_cluster_entry(n, o, grouping) for n, o in clusters.items() if isinstance(o, Mapping)),
                  key=lambda c: (c["group"] == "", c["group"], c["name"]))


def placed_plurals(data: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """The replicated plurals (of ``data``, the replicated root) holding objects the policy places:
    ``replicasets`` and those whose objects are of one of the policy's ``selector_kinds``; none on
    Karmada (setting ``control_plane``: the bindings are placed there, not the templates)."""
    settings = settings_of(settings)
    if settings["control_plane"] == "karmada":
        return []
    kinds = set(settings["selector_kinds"])
    out = ["replicasets"]
    for plural, collection in sorted(data.items()):
        if plural == "replicasets" or not isinstance(collection, Mapping):
            continue
        for objects in collection.values():
            first = next(iter(objects.values()), None) if isinstance(objects, Mapping) else None
            if isinstance(first, Mapping) and first.get("kind") in kinds:
                out.append(plural)
                break
    return out


def policy_entry(namespace: str, configmap: str, modules: int, errors: Mapping[str, Sequence[Mapping[str, Any]]],
                 warnings: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A policy ConfigMap's load status (what its ``fedplace.io/policy-status`` annotation says):
    ``errors`` per module id, each OPA's ``code``, ``message``, ``location``."""
    failing = []
    for module, errs in sorted(errors.items()):
        for e in errs:
            loc = e.get("location") if isinstance(e.get("location"), Mapping) else {}
            failing.append({"module": module, "code": str(e.get("code") or ""), "message": str(e.get("message") or ""),
                            "row": loc.get("row"), "col": loc.get("col")})
    return {"namespace": namespace, "configmap": configmap, "modules": modules,
            "status": "error" if failing else "ok", "failing_modules": len(errors), "errors": failing,
            "warnings": [str(w.get("message") or "") for w in warnings]}


def excluded_of(value: Any, clusters: Iterable[str]) -> list[str] | None:
    """The clusters a fedplace.io/excluded-clusters value names, sorted; None when absent or
    unreadable. The value (the annotation's JSON text, or the decision's value) is a list of the
    excluded names, or ``{"allExcept": [names]}``: every one of ``clusters`` (the replicated
    clusters' names) but those."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, list):
        return sorted({str(c) for c in value})
    if isinstance(value, Mapping) and isinstance(value.get("allExcept"), list):
        return sorted(set(clusters) - {str(c) for c in value["allExcept"]})
    return None


def template_key(binding: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(kind, namespace, name)`` of the template a binding's spec.resource names ('' namespace
    for a cluster-scoped one), or None."""
    spec = binding.get("spec") if isinstance(binding.get("spec"), Mapping) else {}
    res = spec.get("resource") if isinstance(spec.get("resource"), Mapping) else {}
    kind, name, ns = res.get("kind"), res.get("name"), res.get("namespace") or ""
    if not isinstance(kind, str) or not isinstance(name, str) or not isinstance(ns, str):
        return None
    return kind, ns, name


def template_text(key: tuple[str, str, str] | None) -> str:
    """``Deployment shop/web`` (as the policy's messages name a template)."""
    if key is None:
        return "(no template)"
    kind, ns, name = key
    return f"{kind} {ns + '/' if ns else ''}{name}"


def binding_entry(resource: str, obj: Mapping[str, Any], template: Mapping[str, Any] | None,
                  cluster_names: Iterable[str]) -> dict[str, Any]:
    """A Karmada binding as the page lists it: its template, the clusters the placement decision excluded (its fedplace.io/excluded-clusters;
    None when it has none yet), why (fedplace.io/placement), the clusters Karmada's scheduler chose
    (spec.clusters), and whether every cluster is excluded."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    ann = _annotations(obj)
    key = template_key(obj)
    names = set(cluster_names)
    excluded = excluded_of(ann.get(EXCLUDED), names)
    why = ann.get(WHY)
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    targets = spec.get("clusters") if isinstance(spec.get("clusters"), list) else []
    scheduled = sorted({str(t["name"]) for t in targets if isinstance(t, Mapping) and isinstance(t.get("name"), str)})
    return {"resource": resource, "kind": str(obj.get("kind") or ""), "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""),
            "template": ({"kind": key[0], "namespace": key[1], "name": key[2], "text": template_text(key),
                          "replicated": template is not None} if key is not None else None),
            "rules": None, "requires": None,
            "excluded": excluded, "why": why if isinstance(why, str) else None, "scheduled": scheduled,
            "every_cluster_excluded": bool(names) and excluded is not None and names <= set(excluded)}


def _template(template_of: Callable[[tuple[str, str, str]], Mapping[str, Any] | None] | None,
              binding: Mapping[str, Any]) -> Mapping[str, Any] | None:
    key = template_key(binding)
    found = template_of(key) if template_of is not None and key is not None else None
    return found if isinstance(found, Mapping) else None


def _selector_change(r: Mapping[str, Any], name_label: str) -> dict[str, Any]:
    """A remediation of a cluster selector, in words (before → after)."""
    changes, old = r.get("changes") or {}, r.get("old") or {}

    def words(value: Any) -> str:
        if value is None:
            return "none (any cluster)"
        requirements, error = parse_selector(value)
        return f"unreadable ({error})" if error else selector_words(requirements, name_label, WORDS_LIMIT)

    return {"before_text": words(old.get(SELECTOR)), "after_text": words(changes.get(SELECTOR))}


def build_view(clusters: Mapping[str, Mapping[str, Any]], workloads: Iterable[tuple[str, Mapping[str, Any]]], *,
               source: str, denials: Sequence[Mapping[str, Any]] = (),
               remediations: Sequence[Mapping[str, Any]] = (), notes: Sequence[str] = (),
               generated: float | None = None, bindings: Iterable[tuple[str, Mapping[str, Any]]] | None = None,
               template_of: Callable[[tuple[str, str, str]], Mapping[str, Any] | None] | None = None,
               settings: Mapping[str, Any] | None = None, policies: Sequence[Mapping[str, Any]] | None = None,
               stuck: Sequence[Mapping[str, Any]] = (), answers: Mapping[str, Mapping[str, Any]] | None = None,
               grouping: str = DEFAULT_GROUP_BY) -> dict[str, Any]:
    """The model the page renders (see the module docstring).

    ``denials``: ``{"resource", "namespace", "name", "errors", "time"}`` — workloads whose
    decision now denies; ``remediations``: ``{"time", "resource", "namespace", "name",
    "changes", "old", "outcome"}`` — the remediator's records, newest first.
    ``bindings``: Karmada's (Cluster)ResourceBindings as ``(plural, object)`` (None: no binding
    type is replicated; the view then has ``"bindings": None``); ``template_of``: the replicated
    template of a :func:`template_key`, or None. Bindings with every cluster excluded come first.
    ``settings``: the placement policy's (:func:`fedplace.insight.reasons.read_settings`; its
    defaults when None). ``policies``: the policy ConfigMaps' load status (:func:`policy_entry`),
    failing ones first; None when not known (only opa-kube-sync knows it). ``stuck``:
    ``{"resource", "namespace", "name", "targets", "reason", "message", "time"}`` — objects
    whose current placement still uses targets the policy forbids (the remediator's record
    of the policy's ``stuck``; the message is the policy's).
    ``answers``: the placement rules' answers by :func:`fedplace.insight.rules.rules_key` (of
    the workloads and the bindings' templates); the view keeps each one used once, in
    ``rules``, and each workload and binding the index of its own (``rules``: None when it has
    none) and its requirements in words (``requires``). ``grouping``: :func:`group_by`.
    Clusters are ordered as the page's columns: by their value of ``grouping`` (those without
    one last), then name.
    """
    settings = settings_of(settings)
    cluster_list = cluster_entries(clusters, grouping)
    memo: dict[Any, Any] = {"settings": settings}
    rules: list[Mapping[str, Any]] = []
    index: dict[str, int] = {}  # an answer (its JSON) -> its place in rules: objects answered alike share one
    placed: dict[int, int] = {}  # id(answer) -> its place in rules (each answer serialised once)

    def attach(entry: dict[str, Any], obj: Mapping[str, Any] | None) -> dict[str, Any]:
        answer = answers.get(rules_key(obj)) if answers is not None and obj is not None else None
        if answer is not None:
            at = placed.get(id(answer))
            if at is None:
                at = placed[id(answer)] = index.setdefault(json.dumps(answer, sort_keys=True), len(rules))
            if at == len(rules):
                rules.append(answer)
            entry["rules"], entry["requires"] = at, answer.get("requires")
        return entry

    entries = sorted((attach(workload_entry(r, o, cluster_list, settings, memo), o) for r, o in workloads),
                     key=lambda w: (w["namespace"], w["name"], w["resource"]))
    denied = {(d["resource"], d["namespace"], d["name"]): d for d in denials}
    for w in entries:
        d = denied.get((w["resource"], w["namespace"], w["name"]))
        w["denied"] = list(d["errors"]) if d else None
    moves = []
    for r in remediations:
        changes = r.get("changes") or {}
        old = r.get("old") or {}
        move = {**r, "before": clusters_of(old.get(PREFS)) if PREFS in changes else None,
                "after": clusters_of(changes.get(PREFS)) if PREFS in changes else None}
        if SELECTOR in changes:
            move.update(_selector_change(r, settings["cluster_name_label"]))
        moves.append(move)
    names = [c["name"] for c in cluster_list]
    binding_list = None
    if bindings is not None:
        binding_list = sorted(
            (attach(binding_entry(r, o, _template(template_of, o), names), _template(template_of, o))
             for r, o in bindings),
            key=lambda b: (not b["every_cluster_excluded"], b["namespace"], b["name"], b["resource"]))
    policy_list = (sorted((dict(p) for p in policies),
                          key=lambda p: (p["status"] == "ok", p["namespace"], p["configmap"]))
                   if policies is not None else None)
    return {"generated": iso(generated if generated is not None else time.time()), "source": source,
            "settings": settings, "group_by": grouping, "rules": rules, "policies": policy_list,
            "clusters": cluster_list, "workloads": entries, "bindings": binding_list,
            "denials": sorted(denials, key=lambda d: (d["namespace"], d["name"])),
            "stuck": sorted(stuck, key=lambda d: (d["namespace"], d["name"], d["resource"])),
            "remediations": moves, "notes": list(notes)}
