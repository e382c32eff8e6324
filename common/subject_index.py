"""RBAC bindings indexed by subject name, kept beside the replicated mirror.

A policy that asks "which bindings name this service account" (the
SchedulingPolicy pack's `use` check) would otherwise read every
ClusterRoleBinding on every decision: OPA keeps no state between queries, so
an index must be data. opa-kube-sync keeps the bindings grouped by subject
name as a document of its own, derived from the mirror and never part of it:

* ClusterRoleBindings: ``data.<root>_index.clusterrolebindings[<subject name>][<binding>] = true``
* RoleBindings: ``data.<root>_index.rolebindings[<namespace>][<subject name>][<binding>] = true``

(``<root>`` is ``--replicate-path``; ``data.<root>`` stays an exact mirror.) The
index is keyed by the subject's ``name`` alone — a User, a Group and a
ServiceAccount of any namespace with that name share an entry — so it narrows
the bindings to read, and a policy still checks the subjects of each binding
it finds. It is written after the collection it derives from: for the few
milliseconds between the two writes a new binding or subject may not be found
yet, as any replicated change is seen a moment after the API server made it.
"""

from __future__ import annotations

from typing import Any

from fedplace.common.kube_client import Resource

__all__ = ["INDEXED", "indexed", "subject_index"]

RBAC_GROUP = "rbac.authorization.k8s.io"
INDEXED = frozenset({"clusterrolebindings", "rolebindings"})


def indexed(resource: Resource) -> bool:
    """Whether ``resource`` gets a subject index (the RBAC binding types)."""
    return resource.group == RBAC_GROUP and resource.plural in INDEXED


def _subject_names(obj: dict[str, Any]) -> set[str]:
    subjects = obj.get("subjects")
    if not isinstance(subjects, list):
        return set()
    return {s["name"] for s in subjects if isinstance(s, dict) and isinstance(s.get("name"), str) and s["name"]}


def _by_subject(by_name: dict[str, Any]) -> dict[str, dict[str, bool]]:
    out: dict[str, dict[str, bool]] = {}
    for name, obj in by_name.items():
        for subject in _subject_names(obj):
            out.setdefault(subject, {})[name] = True
    return out


def subject_index(resource: Resource, collection: dict[str, Any]) -> dict[str, Any]:
    """The index document (see the module docstring) of ``collection``, the replicated
    collection document of ``resource`` (``{ns: {name: binding}}`` or ``{name: binding}``);
    bindings without subjects are left out."""
    if not resource.namespaced:
        return _by_subject(collection)
    return {ns: index for ns, by_name in collection.items() if (index := _by_subject(by_name))}
