"""common.subject_index: RBAC bindings by subject name, the document opa-kube-sync writes beside the mirror."""

from __future__ import annotations

from typing import Any

from fedplace.common.indexes import index_path
from fedplace.common.kube_client import Resource
from fedplace.common.subject_index import indexed, subject_index
from fedplace.sync.replicate import layout

CRB = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)
RB = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True)


def binding(name: str, subjects: Any, namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": subjects}


def test_cluster_role_bindings_by_subject_name() -> None:
    objs = [
        binding("a", [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"}]),
        binding("b", [{"kind": "ServiceAccount", "name": "web", "namespace": "shop"},
                      {"kind": "ServiceAccount", "name": "web", "namespace": "blog"}]),
        binding("c", [{"kind": "Group", "name": "devs"}]),
    ]
    assert subject_index(CRB, layout(CRB, objs)) == {"alice": {"a": True}, "devs": {"a": True, "c": True},
                                                     "web": {"b": True}}


def test_role_bindings_by_namespace_then_subject_name() -> None:
    objs = [binding("r", [{"kind": "User", "name": "alice"}], "shop"),
            binding("s", [{"kind": "User", "name": "alice"}], "blog"),
            binding("t", [{"kind": "User", "name": "bob"}], "kube-system")]
    assert subject_index(RB, layout(RB, objs, frozenset({"kube-system"}))) == {
        "shop": {"alice": {"r": True}}, "blog": {"alice": {"s": True}}}


def test_bindings_without_usable_subjects_are_left_out() -> None:
    objs = [binding("none", None), binding("empty", []), binding("odd", ["x", {"name": 5}, {"name": ""}, {"kind": "User"}])]
    assert subject_index(CRB, layout(CRB, objs)) == {}
    assert subject_index(RB, layout(RB, [*objs, binding("y", [{"kind": "User", "name": "y"}], "shop")])) == {
        "shop": {"y": {"y": True}}}


def test_only_the_rbac_binding_types_are_indexed_beside_the_root() -> None:
    assert indexed(CRB) and indexed(RB)
    assert not indexed(Resource("rbac.authorization.k8s.io", "v1", "clusterroles", False))
    assert not indexed(Resource("example.com", "v1", "rolebindings", True))
    assert index_path("kubernetes", CRB) == ["kubernetes_index", "clusterrolebindings"]
