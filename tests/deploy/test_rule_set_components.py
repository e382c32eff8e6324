"""The placement rule sets shipped off by default (policies/rules-<set> but the EU/PCI example):
each is a component, deploy/components/placement-rules-<set>, adding exactly its policy ConfigMap
``fedplace-rules-<set>`` (the folder's modules, no tests) to any overlay and changing nothing
else; the base ships none of them, and replicates the Namespaces they read (with the RBAC to).
The Helm chart's ``placementRules.<set>.enabled`` renders the same objects (tests/deploy/test_helm.py
compares the two builds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY, OVERLAYS, ROOT, Rendered, rego_sources, rule_set_off, with_components
from tests.deploy.test_semantics import sync_config

POLICY_NS = "kube-federation-scheduling-policy"
SETS = sorted(p.name.removeprefix("rules-") for p in (ROOT / "policies").iterdir() if p.is_dir() and rule_set_off(p.name))


def policy_configmaps(r: Rendered) -> dict[str, dict[str, str]]:
    return {o["metadata"]["name"]: o.get("data") or {} for o in r.of_kind("ConfigMap")
            if o["metadata"].get("namespace") == POLICY_NS}


def identities(r: Rendered) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in r.objects}


def test_the_three_sets_are_off_by_default():
    assert SETS == ["hardware", "residency", "tenancy"]
    assert "fedplace-rules-eu-pci" in rego_sources(), "the EU/PCI example is on by default"


@pytest.mark.parametrize("base", OVERLAYS)
@pytest.mark.parametrize("rule_set", SETS)
def test_a_component_adds_its_configmap_alone(kubectl: str, workspace: Path, rendered: dict[str, Rendered],
                                              base: str, rule_set: str):
    without = rendered[base]
    assert f"fedplace-rules-{rule_set}" not in policy_configmaps(without), "off by default"
    got = with_components(kubectl, workspace, f"../{base}", f"placement-rules-{rule_set}", prefix="test-rule-sets")
    added = {k: v for k, v in policy_configmaps(got).items() if k not in policy_configmaps(without)}
    sources = rego_sources(off_by_default=True)
    assert added == {f"fedplace-rules-{rule_set}": sources[f"fedplace-rules-{rule_set}"]}
    assert not any(k.endswith("_test.rego") for data in added.values() for k in data)
    assert identities(got) - identities(without) == {("ConfigMap", POLICY_NS, f"fedplace-rules-{rule_set}")}
    assert identities(without) <= identities(got)


def test_all_three_together(kubectl: str, workspace: Path, rendered: dict[str, Rendered]):
    got = with_components(kubectl, workspace, "../self-signed", *[f"placement-rules-{s}" for s in SETS],
                          prefix="test-rule-sets")
    assert {k: v for k, v in policy_configmaps(got).items() if k.startswith("fedplace-rules-")} == {
        **rego_sources(off_by_default=True), "fedplace-rules-eu-pci": rego_sources()["fedplace-rules-eu-pci"]}


def test_every_rule_set_component_comes_from_a_rule_set():
    folders = {p.name for p in (DEPLOY / "components").glob("placement-rules-*")}
    assert folders == {f"placement-rules-{s}" for s in SETS}


def test_the_base_replicates_the_namespaces_the_rule_sets_read(overlay: Rendered):
    config = sync_config(overlay)
    namespaces = [r for r in config.resources if r.plural == "namespaces"]
    assert [(r.group, r.version, r.namespaced) for r in namespaces] == [("", "v1", False)]
    role = overlay.get("ClusterRole", "fedplace:opa-kube-sync")
    assert any("" in rule["apiGroups"] and "namespaces" in rule["resources"]
               and {"list", "watch"} <= set(rule["verbs"]) for rule in role["rules"])
