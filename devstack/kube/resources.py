"""Resource types the server knows, and the discovery documents built from them.

A :class:`ResourceType` is one (group, version, plural) the server serves. Objects
live in one collection per (group, plural), shared by every served version of a
CRD (the apiVersion is rewritten on the way out, as with conversion strategy None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
META_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    has_generation: bool = False
    custom: bool = False                 # a custom resource: unstructured lists, no SMP
    allow_create_on_update: bool = False
    return_deleted_object: bool = False
    extra_fields: tuple[str, ...] = ()   # field selectors beyond metadata.name/namespace
    name_rule: str = "subdomain"         # "subdomain" | "label" | "none"
    watch_cache: bool = True             # False: kube-apiserver watches etcd directly (events)
    # a custom resource version's openAPIV3Schema (:mod:`.crdschema`); not part of the type's identity
    schema: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def collection_key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def field_selectors(self) -> tuple[str, ...]:
        return META_FIELDS + self.extra_fields

    def discovery(self) -> list[dict[str, Any]]:
        """APIResource entries for this type (and its status subresource)."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        if self.status_subresource:
            out.append({"name": f"{self.plural}/status", "singularName": "", "namespaced": self.namespaced,
                        "kind": self.kind, "verbs": ["get", "patch", "update"]})
        return out


_EVENT_FIELDS = tuple(f"involvedObject.{f}" for f in
                      ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")) + (
    "reason", "reportingComponent", "source", "type")

BUILTIN: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "namespace", "Namespace", False, ("ns",), status_subresource=True,
                 return_deleted_object=True, extra_fields=("status.phase",), name_rule="label"),
    ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, ("cm",)),
    ResourceType("", "v1", "secrets", "secret", "Secret", True, extra_fields=("type",)),
    ResourceType("", "v1", "limitranges", "limitrange", "LimitRange", True, ("limits",)),
    ResourceType("", "v1", "events", "event", "Event", True, ("ev",), allow_create_on_update=True,
                 extra_fields=_EVENT_FIELDS, watch_cache=False),
    ResourceType("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ("sa",),
                 return_deleted_object=True),
    ResourceType("", "v1", "services", "service", "Service", True, ("svc",), ("all",), status_subresource=True,
                 name_rule="label"),
    ResourceType("", "v1", "pods", "pod", "Pod", True, ("po",), ("all",), status_subresource=True,
                 return_deleted_object=True, extra_fields=("spec.nodeName", "status.phase")),
    ResourceType("apps", "v1", "deployments", "deployment", "Deployment", True, ("deploy",), ("all",),
                 status_subresource=True, has_generation=True),
    ResourceType("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True, ("rs",), ("all",),
                 status_subresource=True, has_generation=True, extra_fields=("status.replicas",)),
    # The other pod-bearing workloads the admission webhook receives, and the RBAC
    # objects the SchedulingPolicy pack decides `use` from: stored as they come.
    ResourceType("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True, ("sts",), ("all",),
                 status_subresource=True, has_generation=True),
    ResourceType("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True, ("ds",), ("all",),
                 status_subresource=True, has_generation=True),
    ResourceType("batch", "v1", "jobs", "job", "Job", True, (), ("all",), status_subresource=True,
                 has_generation=True),
    ResourceType("batch", "v1", "cronjobs", "cronjob", "CronJob", True, ("cj",), ("all",),
                 status_subresource=True, has_generation=True),
    # RBAC names are path segments ("sp:restricted"), not DNS subdomains: unchecked here.
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True, name_rule="none"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", True,
                 name_rule="none"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", False,
                 name_rule="none"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
                 "ClusterRoleBinding", False, name_rule="none"),
    ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True, allow_create_on_update=True),
    ResourceType("events.k8s.io", "v1", "events", "event", "Event", True, ("ev",), allow_create_on_update=True,
                 watch_cache=False),
    # What a Deployment's disruption budget is stored as (deploy/, the Helm chart): no eviction here.
    ResourceType("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", True,
                 ("pdb",), status_subresource=True, has_generation=True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", False, ("pc",),
                 has_generation=True),
    ResourceType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                 "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", False, has_generation=True,
                 categories=("api-extensions",)),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                 "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", False, has_generation=True,
                 categories=("api-extensions",)),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
                 "CustomResourceDefinition", False, ("crd", "crds"), ("api-extensions",),
                 status_subresource=True, has_generation=True),
)

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple:
    """Sort key: GA before beta before alpha, higher numbers first, others last (alphabetically)."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, version)


@dataclass
class Registry:
    """Served resource types, keyed by (group, version, plural)."""

    types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)

    def add(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt

    def remove_collection(self, group: str, plural: str) -> None:
        for key in [k for k in self.types if k[0] == group and k[2] == plural]:
            del self.types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def group_versions(self, group: str) -> list[str]:
        versions = {v for (g, v, _) in self.types if g == group}
        return sorted(versions, key=version_priority)

    def groups(self) -> list[str]:
        """Non-core groups, in a stable order (built-ins first, as registered)."""
        seen: dict[str, None] = {}
        for (g, _, _) in self.types:
            if g:
                seen.setdefault(g, None)
        return list(seen)

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self.types.items() if g == group and v == version]

    def kinds_for(self, group: str, plural: str) -> Iterable[ResourceType]:
        return [rt for (g, _, p), rt in self.types.items() if g == group and p == plural]


def api_group(registry: Registry, group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in registry.group_versions(group)]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
            "preferredVersion": versions[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = []
    for g in registry.groups():
        doc = api_group(registry, g)
        doc.pop("kind")
        doc.pop("apiVersion")
        groups.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources = [entry for rt in sorted(types, key=lambda t: t.plural) for entry in rt.discovery()]
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def api_versions(address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


# The release whose behaviour the server follows (defaulting, admission plugins, wording were
# measured against kube-apiserver 1.24; selector pagination as fixed in 1.24.3).
VERSION_INFO = {
    "major": "1",
    "minor": "24",
    "gitVersion": "v1.24.17-fedplace-devstack",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2023-08-23T00:00:00Z",
    "goVersion": "go1.20.7",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def crd_types(crd: dict[str, Any]) -> list[ResourceType]:
    """ResourceTypes for every served version of a (validated) CRD."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for v in spec["versions"]:
        if not v.get("served", False):
            continue
        out.append(ResourceType(
            group=spec["group"], version=v["name"], plural=names["plural"],
            singular=names.get("singular") or names["kind"].lower(), kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            status_subresource="status" in ((v.get("subresources") or {})),
            has_generation=True, custom=True, name_rule="subdomain",
            extra_fields=tuple(f.get("jsonPath", "").lstrip(".") for f in v.get("selectableFields") or ()),
            schema=(v.get("schema") or {}).get("openAPIV3Schema"),
        ))
    return out


def storage_version(crd: dict[str, Any]) -> str:
    for v in crd["spec"]["versions"]:
        if v.get("storage"):
            return v["name"]
    return crd["spec"]["versions"][0]["name"]
