"""The generated module that puts the record of a complete load into the admission decision,
checked with OPA's own compiler and evaluator beside the shipped admission packs."""

from __future__ import annotations

from pathlib import Path

import pytest
from opa_bindings import OpaEngine

from fedplace.admission.loading import LOADED_KEY, check_loaded
from fedplace.common.opa_query import OpaOutcome
from fedplace.sync import loaded, replicated_root

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
RECORD = loaded.record_document({"policies": {"fedplace-federation", "fedplace-lib"}}, {"clusters"})


def engine(package: str = loaded.DEFAULT_PACKAGE) -> OpaEngine:
    e = OpaEngine()
    e.add_policy(replicated_root.POLICY_ID, replicated_root.render())
    e.add_policy(loaded.POLICY_ID, loaded.render(package))
    for rel in ("federation/admission.rego", "federation/contract.rego", "federation/lib.rego",
                "federation/placement.rego", "rules-eu-pci/eu_pci.rego",
                "federation/selector.rego", "limitrange/admission.rego", "limitrange/quantity.rego",
                "limitrange/ranger.rego", "lib/podspec.rego"):
        e.add_policy(rel, (POLICIES / rel).read_text())
    return e


def test_the_decision_carries_the_record_once_written() -> None:
    e = engine()
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "a", "namespace": "shop"}}
    before = e.eval_document("io.k8s.federation.admission", rs)
    assert LOADED_KEY not in before and before["errors"] == []
    assert check_loaded(OpaOutcome.ok(before), "policies", ["fedplace-lib"]).loading
    e.add_data({"fedplace_sync": {"generation": "g", "loaded": RECORD}})
    after = e.eval_document("io.k8s.federation.admission", rs)
    assert after[LOADED_KEY] == RECORD
    check = check_loaded(OpaOutcome.ok(after), "policies", ["fedplace-lib", "fedplace-federation"])
    assert check.loading == "" and check.outcome.result == before


def test_another_package() -> None:
    e = OpaEngine()
    e.add_policy(loaded.POLICY_ID, loaded.render("example.admission"))
    e.add_data({"fedplace_sync": {"loaded": RECORD}})
    assert e.eval_document("example.admission") == {LOADED_KEY: RECORD}


@pytest.mark.parametrize("package", ["", "io..k8s", "io.k8s-x", "data.x", "input", "system.authz", "a b"])
def test_a_package_that_is_not_one_is_refused(package: str) -> None:
    with pytest.raises(ValueError, match="dotted Rego package name"):
        loaded.render(package)
