"""remediator/bindings.py: the Karmada bindings a changed template re-evaluates (pure)."""

from __future__ import annotations

from typing import Any

from fedplace.remediator.bindings import binding_name, dependent_bindings


def template(kind: str, name: str, namespace: str = "shop") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta}


def binding(kind: str, name: str, namespace: str = "shop") -> dict[str, Any]:
    return {"spec": {"resource": {"apiVersion": "apps/v1", "kind": kind, "name": name,
                                  **({"namespace": namespace} if namespace else {})}}}


LIVE = {
    ("resourcebindings", "shop", "web-deployment"): binding("Deployment", "web"),
    ("resourcebindings", "shop", "db-statefulset"): binding("StatefulSet", "other"),  # not db's
    ("clusterresourcebindings", "", "a.b-clusterrole"): binding("ClusterRole", "a:b", ""),
}


def live(resource: str, namespace: str, name: str) -> Any:
    return LIVE.get((resource, namespace, name))


ALL = ["deployments", "resourcebindings", "clusterresourcebindings"]


def test_binding_names_follow_karmadas_detector() -> None:
    assert binding_name("web", "Deployment") == "web-deployment"
    assert binding_name("a:b", "ClusterRole") == "a.b-clusterrole"


def test_a_templates_binding_is_found_and_confirmed_by_its_resource() -> None:
    assert dependent_bindings([template("Deployment", "web")], ALL, live) == {("resourcebindings", "shop", "web-deployment")}
    assert dependent_bindings([template("ClusterRole", "a:b", "")], ALL, live) == {
        ("clusterresourcebindings", "", "a.b-clusterrole")}
    # a binding of that name for another template, or none at all: nothing
    assert dependent_bindings([template("StatefulSet", "db")], ALL, live) == set()
    assert dependent_bindings([template("Deployment", "api")], ALL, live) == set()
    assert dependent_bindings([template("Deployment", "web", "other")], ALL, live) == set()


def test_only_remediated_bindings_and_well_formed_objects() -> None:
    assert dependent_bindings([template("Deployment", "web")], ["deployments"], live) == set()
    assert dependent_bindings([template("Deployment", "web")], ["clusterresourcebindings"], live) == set()
    assert dependent_bindings([{"kind": "Deployment"}, {"metadata": {"name": "web"}}, {}], ALL, live) == set()
