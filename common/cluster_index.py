"""Clusters grouped by the properties placement policies test, kept beside the mirror.

A placement decision asks, for instance, "which clusters in a region matching
a pattern have a label's value >= 2": read cluster by cluster, every decision costs time linear in the
number of clusters (10 ms at 1,000 on a real OPA). OPA keeps no state between
queries, so opa-kube-sync keeps the clusters grouped by property value as a
document of its own, derived from the mirror and never part of it, at
``data.<root>_index.clusters``::

    {"layout": 2,
     "names":   {<cluster>: true},                       # every replicated cluster
     "labels":  {<label key>: {<value>: {<cluster>: true}}},
     "regions": {<region>: {<cluster>: true}},
     "region_labels": {<region>: {<label key>: {<value>: {<cluster>: true}}}},
     "named_by": {<label key>: {<cluster>: true}}}

* ``labels`` holds every label of every cluster. Label values are strings (the
  API server refuses anything else); a value that is not one is left out.
* ``regions``: a cluster's region as the placement policy reads it — a
  Federation v1 Cluster's ``status.region``, else a Karmada Cluster's
  ``spec.region`` — when it is a string. A cluster whose ``status`` has a
  ``region`` that is not a string has no region (its ``spec`` is not read).
* ``region_labels``: ``labels`` for each region's clusters alone, so that "a
  label's value >= 2 in a region matching a pattern" is a union of groups that hold exactly the
  answer, with no intersection of two large sets (an intersection costs OPA
  time in the number of clusters on each side, the union only in the answer).
* ``named_by``: the clusters whose label ``key`` is their own name (how a
  cluster selector names clusters: the setting ``cluster_name_label``).
* ``names``: every replicated cluster (an entry that is not an object is none).
* ``layout`` names this layout; a policy uses the index only when it knows the
  layout, and reads every cluster otherwise (so does a policy when the index
  is absent, as in ``opa test`` or beside another sync).

It is a cluster-scoped type whose plural is ``clusters`` (the federation's
``clusters.federation.fedplace.io``, Karmada's ``clusters.cluster.karmada.io``) that
gets the index. Like the subject index (:mod:`fedplace.common.subject_index`) it
is written after the collection it derives from and before the remediator is
told of the change, so for a few milliseconds an admission may see the clusters
of a moment before.
"""

from __future__ import annotations

from typing import Any

from fedplace.common.kube_client import Resource

__all__ = ["LAYOUT", "cluster_index", "indexed", "region"]

LAYOUT = 2
_ABSENT = object()


def indexed(resource: Resource) -> bool:
    """Whether ``resource`` gets a cluster index (a cluster-scoped ``clusters`` type)."""
    return resource.plural == "clusters" and not resource.namespaced


def _get(obj: Any, *path: str) -> Any:
    """``object.get(obj, path, <absent>)`` as Rego has it: absent unless every step is an object key."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _ABSENT
        obj = obj[key]
    return obj


def region(cluster: Any) -> str | None:
    """The cluster's region as the placement policy reads it (``status.region``, else
    ``spec.region``), or None when that is not a string."""
    value = _get(cluster, "status", "region")
    if value is _ABSENT:
        value = _get(cluster, "spec", "region")
    return value if isinstance(value, str) else None


def cluster_index(collection: dict[str, Any]) -> dict[str, Any]:
    """The index document (see the module docstring) of ``collection``, the replicated
    ``{name: cluster}`` document."""
    labels: dict[str, dict[str, dict[str, bool]]] = {}
    regions: dict[str, dict[str, bool]] = {}
    region_labels: dict[str, dict[str, dict[str, dict[str, bool]]]] = {}
    named_by: dict[str, dict[str, bool]] = {}
    for name, cluster in collection.items():
        where = region(cluster)
        if where is not None:
            regions.setdefault(where, {})[name] = True
        cluster_labels = _get(cluster, "metadata", "labels")
        if isinstance(cluster_labels, dict):
            for key, value in cluster_labels.items():
                if isinstance(value, str):
                    labels.setdefault(key, {}).setdefault(value, {})[name] = True
                    if where is not None:
                        region_labels.setdefault(where, {}).setdefault(key, {}).setdefault(value, {})[name] = True
                if value == name:
                    named_by.setdefault(key, {})[name] = True
    names = {name: True for name, cluster in collection.items() if isinstance(cluster, dict)}
    return {"layout": LAYOUT, "names": names, "labels": labels, "regions": regions, "region_labels": region_labels,
            "named_by": named_by}
