"""Which Karmada bindings depend on an object (pure).

A ResourceBinding is decided from its template (policies/karmada/): a change of
the template changes the binding's decision although the binding itself did not
change. Karmada's detector names a template's binding after it —
``<name>-<lowercase kind>`` (``:`` written ``.``), in the template's namespace
(a ClusterResourceBinding for a cluster-scoped template) — so the binding of a
changed template is found without an index; its ``spec.resource`` confirms it.
The remediator re-evaluates those bindings with the template
(:meth:`fedplace.remediator.remediator.Remediator.on_replicated`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

__all__ = ["BINDING_RESOURCES", "binding_name", "dependent_bindings"]

BINDING_RESOURCES = ("resourcebindings", "clusterresourcebindings")

Key = tuple[str, str, str]  # (resource, namespace or "", name)
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


def binding_name(name: str, kind: str) -> str:
    """The name Karmada's detector gives the binding of template ``name`` of ``kind``."""
    return f"{name.replace(':', '.')}-{kind.lower()}"


def dependent_bindings(objects: Iterable[Mapping[str, Any]], remediated: Iterable[str], live: Lookup) -> set[Key]:
    """Keys of the remediated bindings (``remediated``: the remediated plurals) whose
    template is one of ``objects``, as ``live(resource, namespace, name)`` shows them."""
    plurals = [p for p in BINDING_RESOURCES if p in set(remediated)]
    if not plurals:
        return set()
    out: set[Key] = set()
    for obj in objects:
        meta = obj.get("metadata") or {}
        name, kind = meta.get("name"), obj.get("kind")
        if not isinstance(name, str) or not isinstance(kind, str) or not name or not kind:
            continue
        namespace = str(meta.get("namespace") or "")
        plural = "resourcebindings" if namespace else "clusterresourcebindings"
        if plural not in plurals:
            continue
        key = (plural, namespace, binding_name(name, kind))
        binding = live(*key)
        resource = ((binding or {}).get("spec") or {}).get("resource") or {}
        if resource.get("kind") == kind and resource.get("name") == name \
                and str(resource.get("namespace") or "") == namespace:
            out.add(key)
    return out
