"""The placement view: clusters, workloads with their constraints and placement, denials and
remediations — one JSON-able model for the page opa-kube-sync serves, ``fedplace report``
and the what-if's before/after.

Pure functions; the callers gather the objects (from the sync's informers or
from OPA's replicated data) and the remediator's records.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any, Iterable, Mapping, Sequence

from fedplace.common.annotations import canonical_value

__all__ = ["CONSTRAINT_PREFIX", "PREFS", "SOURCE", "build_view", "clusters_of", "constraints", "effective_placement",
           "iso", "workload_entry"]

PREFS = "federation.kubernetes.io/replica-set-preferences"
SOURCE = "fedplace.io/replica-set-preferences-source"
CONSTRAINT_PREFIX = "policy.federation.alpha.kubernetes.io/"


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


def constraints(obj: Mapping[str, Any]) -> dict[str, str]:
    """The placement constraints the object asks for (``policy.federation.alpha.kubernetes.io/*``), short names."""
    return {k[len(CONSTRAINT_PREFIX):]: canonical_value(v) for k, v in sorted(_annotations(obj).items())
            if k.startswith(CONSTRAINT_PREFIX)}


def workload_entry(resource: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ann = _annotations(obj)
    source = ann.get(SOURCE)
    return {"resource": resource, "kind": str(obj.get("kind") or ""), "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""), "constraints": constraints(obj),
            "placement": effective_placement(obj), "source": source if isinstance(source, str) else None}


def _cluster_entry(name: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    region = status.get("region")
    return {"name": name, "region": region if isinstance(region, str) else "",
            "labels": {str(k): canonical_value(v) for k, v in sorted(labels.items())}}


def build_view(clusters: Mapping[str, Mapping[str, Any]], workloads: Iterable[tuple[str, Mapping[str, Any]]], *,
               source: str, denials: Sequence[Mapping[str, Any]] = (),
               remediations: Sequence[Mapping[str, Any]] = (), notes: Sequence[str] = (),
               generated: float | None = None) -> dict[str, Any]:
    """The model the page renders (see the module docstring).

    ``denials``: ``{"resource", "namespace", "name", "errors", "time"}`` — workloads whose
    decision now denies; ``remediations``: ``{"time", "resource", "namespace", "name",
    "changes", "old", "outcome"}`` — the remediator's records, newest first.
    """
    entries = sorted((workload_entry(r, o) for r, o in workloads),
                     key=lambda w: (w["namespace"], w["name"], w["resource"]))
    denied = {(d["resource"], d["namespace"], d["name"]): d for d in denials}
    for w in entries:
        d = denied.get((w["resource"], w["namespace"], w["name"]))
        w["denied"] = list(d["errors"]) if d else None
    cluster_list = sorted((_cluster_entry(n, o) for n, o in clusters.items() if isinstance(o, Mapping)),
                          key=lambda c: (c["region"], c["name"]))
    moves = []
    for r in remediations:
        changes = r.get("changes") or {}
        old = r.get("old") or {}
        moves.append({**r, "before": clusters_of(old.get(PREFS)) if PREFS in changes else None,
                      "after": clusters_of(changes.get(PREFS)) if PREFS in changes else None})
    return {"generated": iso(generated if generated is not None else time.time()), "source": source,
            "clusters": cluster_list, "workloads": entries,
            "denials": sorted(denials, key=lambda d: (d["namespace"], d["name"])),
            "remediations": moves, "notes": list(notes)}
