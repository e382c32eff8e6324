"""The derived documents opa-kube-sync keeps beside the mirror, per replicated type.

OPA keeps no state between queries, so a lookup a policy makes on every
decision is cheap only if it is data. Two types get an index, rewritten from
the informer's cache after each write of their collection and before anything
is told of the change, at ``data.<root>_index.<plural>`` (``data.<root>``
stays an exact mirror):

* the RBAC bindings, by subject name (:mod:`fedplace.common.subject_index`);
* the clusters, by label value and region (:mod:`fedplace.common.cluster_index`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Mapping

from fedplace.common import cluster_index, subject_index
from fedplace.common.kube_client import Resource

__all__ = ["Index", "index_of", "index_path", "indexes_of"]

Index = Callable[[dict[str, Any]], dict[str, Any]]

# The mirror names a type by its plural alone: the indexed types by theirs.
_BY_PLURAL = {
    "clusters": Resource("", "v1", "clusters", False),
    "clusterrolebindings": Resource(subject_index.RBAC_GROUP, "v1", "clusterrolebindings", False),
    "rolebindings": Resource(subject_index.RBAC_GROUP, "v1", "rolebindings", True),
}


def index_of(resource: Resource) -> Index | None:
    """The function computing ``resource``'s index from its collection document
    (``{ns: {name: obj}}`` or ``{name: obj}``), or None when it has none."""
    if subject_index.indexed(resource):
        return partial(subject_index.subject_index, resource)
    if cluster_index.indexed(resource):
        return cluster_index.cluster_index
    return None


def index_path(root: str, resource: Resource) -> list[str]:
    """Where the index of ``resource`` lives in OPA's data: ``[<root>_index, plural]``."""
    return [f"{root}_index", resource.plural]


def indexes_of(mirror: Mapping[str, Any]) -> dict[str, Any]:
    """``data.<root>_index`` as opa-kube-sync leaves it beside ``mirror`` (``data.<root>``,
    ``{plural: collection}``): the index of every indexed type the mirror holds, by plural
    (for a copy of the replicated data that nothing syncs, such as ``fedplace what-if``'s)."""
    out: dict[str, Any] = {}
    for plural, collection in mirror.items():
        resource = _BY_PLURAL.get(plural)
        index = index_of(resource) if resource is not None else None
        if index is not None and isinstance(collection, dict):
            out[plural] = index(collection)
    return out
