"""The generated replicated-root module, checked with OPA's own compiler and evaluator.

The remediation library reads replicated objects only through this module, so
real OPA must accept the pair for any ``--replicate-path`` root and the
library must find the objects there, in full and targeted passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opa_bindings import OpaEngine

from fedplace.sync import replicated_root

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"


def engine_for(root: str) -> OpaEngine:
    """OPA's engine holding the shipped placement policy, the remediation library and ``render(root)``."""
    engine = OpaEngine()
    engine.add_policy(replicated_root.POLICY_ID, replicated_root.render(root))
    for rel in ("federation/contract.rego", "federation/placement.rego", "federation/lib.rego",
                "rules-eu-pci/eu_pci.rego", "lib/remediation.rego"):
        engine.add_policy(rel, (POLICIES / rel).read_text())
    return engine


def replicaset(ns: str, name: str, level: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": ns, "annotations": {PCI: level}}}


def test_committed_copy_is_the_default_rendering():
    """policies/lib/generated/ holds what the sync writes for the default root (no drift)."""
    committed = (POLICIES / "lib/generated/replicated_root.rego").read_text()
    assert committed == replicated_root.render(replicated_root.DEFAULT_ROOT)


@pytest.mark.parametrize("root", ["", "a/b"])
def test_root_must_be_one_segment(root):
    with pytest.raises(ValueError, match="one path segment"):
        replicated_root.render(root)


@pytest.mark.parametrize("root", ["kubernetes", "mirror-root", "if", "données", 'q"uote'])
def test_opa_compiles_and_remediation_reads_any_root(root):
    engine = engine_for(root)
    clusters = {"eu-a": {"metadata": {"name": "eu-a", "labels": {"pci-compliance-level": "3"}},
                         "status": {"region": "europe-west1"}}}
    engine.add_data({root: {"replicasets": {"shop": {"a": replicaset("shop", "a", "2"),
                                                     "b": replicaset("shop", "b", "1")}},
                            "globalsets": {"g": replicaset("", "g", "1")}}})
    engine.add_data({"kubernetes": {"clusters": clusters}})  # the placement policy's own (fixed) read
    full = engine.eval_document("io.k8s.federation.remediation.notifications")
    assert sorted((n["namespace"], n["name"]) for n in full) == [("shop", "a"), ("shop", "b")]
    assert all(n["annotations"] and n["errors"] == [] for n in full)

    targeted = engine.eval_document("io.k8s.federation.remediation.notifications", {
        "resources": [{"plural": "replicasets", "namespaced": True}, {"plural": "globalsets", "namespaced": False}],
        "objects": [{"resource": "replicasets", "namespace": "shop", "name": "b"},
                    {"resource": "replicasets", "namespace": "shop", "name": "gone"},
                    {"resource": "globalsets", "name": "g"}]})
    assert sorted((n["resource"], n["name"]) for n in targeted) == [("globalsets", "g"), ("replicasets", "b")]
