"""``fedplace what-if`` over HTTP against OPA: moves, denials, compile errors, thresholds.

The live OPA (the ``opa`` fixture: the devstack engine or a real OPA) holds the
shipped policies and a replicated federation (conftest.py). Every test also proves
the live OPA unchanged. The evaluator is OPA in process (opa_bindings) unless a
test gives a scratch OPA (``opa_process``: a real ``opa run`` with REAL_OPA_BIN).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedplace.insight import whatif
from tests.insight.conftest import EU, MANIFEST, NS, PCI, rs, run_command

LIB_ID = "kube-federation-scheduling-policy/fedplace-federation/lib.rego"
RULES_ID = "kube-federation-scheduling-policy/fedplace-rules-eu-pci/eu_pci.rego"
EU_PATTERN = "eu_region_pattern := `(?i)^(europe-|eu-)|europe$`"


async def what_if(federation: Any, *argv: str) -> tuple[int, dict[str, Any], str]:
    """Run what-if with JSON output; returns (exit status, document, stderr) and checks the live OPA."""
    before = await federation.state()
    code, out, err = await run_command(whatif, [*argv, "-o", "json", *federation.flags()])
    assert await federation.state() == before, "what-if changed the live OPA"
    return code, (json.loads(out) if out else {}), err


def moved(doc: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {m["name"]: (m["before"], m["after"]) for m in doc["moves"]}


async def test_a_label_change_moves_what_it_affects(federation: Any):
    code, doc, err = await what_if(federation, "--cluster-label", "aws-eu-central-1:pci-compliance-level=1")
    assert code == 1, err
    assert moved(doc) == {
        "payments": (["aws-eu-central-1", "gce-europe-west1"], ["gce-europe-west1"]),
        "ledger": (["aws-eu-central-1", "gce-us-central1"], ["gce-us-central1"]),
    }
    assert doc["denied"] == [] and doc["undenied"] == [] and doc["compile_errors"] == {}
    assert doc["proposal"]["clusters_changed"] == ["aws-eu-central-1"]
    s = doc["summary"]
    assert s["workloads"] == 4 and s["clusters"] == 4
    assert s["evaluator"] == "OPA 1.20 in process (opa_bindings)"
    assert s["over_threshold"] == ["2 moves > --max-moves 0"]
    # workloads the policy cannot tell apart share an evaluation: 4 workloads, at most 4 each side
    assert s["evaluations"]["before"] <= 4
    code, doc, _ = await what_if(federation, "--cluster-label", "aws-eu-central-1:pci-compliance-level=1",
                                 "--max-moves", "50%")
    assert code == 0 and doc["summary"]["over_threshold"] == []


async def test_removing_a_label_and_globs_can_deny(federation: Any):
    code, doc, _ = await what_if(federation, "--cluster-label", "*:pci-compliance-level-", "--max-moves", "10")
    assert code == 1
    # unlabelled clusters count as level 0: PCI-constrained workloads have nowhere to go
    denied = {d["name"]: d["errors"] for d in doc["denied"]}
    assert set(denied) == {"payments", "ledger"}
    assert "PCI compliance level >= 2" in denied["payments"][0] and "PCI compliance level >= 3" in denied["ledger"][0]
    assert doc["summary"]["over_threshold"] == ["2 new denials > --max-denials 0"]
    code, doc, _ = await what_if(federation, "--cluster-label", "*:pci-compliance-level-", "--max-denials", "2")
    assert code == 0
    code, _, err = await what_if(federation, "--cluster-label", "nope-*:a=b")
    assert code == 2 and "no replicated cluster matches 'nope-*'" in err


async def test_a_proposed_configmap(federation: Any, tmp_path: Path):
    """The EU/PCI rule set's ConfigMap as a pull request would change it: EU now means europe-* only."""
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    cm = next(d for d in docs if d["metadata"]["name"] == "fedplace-rules-eu-pci")
    rules = cm["data"]["eu_pci.rego"]
    assert EU_PATTERN in rules
    cm["data"]["eu_pci.rego"] = rules.replace(EU_PATTERN, "eu_region_pattern := `^europe-`")
    proposal = tmp_path / "pr.yaml"
    proposal.write_text(yaml.safe_dump(cm))
    code, doc, err = await what_if(federation, "--policy", str(proposal), "--max-moves", "5")
    assert code == 0, err
    assert moved(doc) == {
        "web-eu": (["aws-eu-central-1", "azure-westeurope", "gce-europe-west1"], ["gce-europe-west1"]),
        "payments": (["aws-eu-central-1", "gce-europe-west1"], ["gce-europe-west1"]),
    }
    assert doc["proposal"]["modules"] == [
        f"ConfigMap kube-federation-scheduling-policy/fedplace-rules-eu-pci ({len(cm['data'])} modules) from {proposal}"]
    # The same change given as a .rego file, matched to the loaded module by its name.
    rego = tmp_path / "eu_pci.rego"
    rego.write_text(cm["data"]["eu_pci.rego"])
    code, doc2, _ = await what_if(federation, "--policy", str(rego), "--max-moves", "5")
    assert code == 0 and moved(doc2) == moved(doc)
    assert doc2["proposal"]["modules"] == [f"{RULES_ID} from {rego}"]


async def test_a_module_that_does_not_compile(federation: Any, tmp_path: Path):
    broken = tmp_path / "lib.rego"
    broken.write_text("package io.k8s.federation.placement\n\neligible_clusters contains name if {\n")
    new = tmp_path / "extra.rego"
    new.write_text('package io.k8s.federation.admission\n\nerrors contains "no" if input.metadata.name == "blog"\n')
    code, doc, _ = await what_if(federation, "--policy", f"{LIB_ID}={broken}", "--policy", str(new))
    assert code == 1
    assert list(doc["compile_errors"]) == [LIB_ID]
    [error] = doc["compile_errors"][LIB_ID]
    assert error["code"] == "rego_parse_error" and error["location"]["file"] == LIB_ID
    assert error["location"]["row"] >= 3
    # OPA keeps the version it had: nothing moves; the module that compiles takes effect
    assert doc["moves"] == []
    assert [(d["name"], d["errors"]) for d in doc["denied"]] == [("blog", ["no"])]
    assert "1 module(s) would not compile" in doc["summary"]["over_threshold"]


async def test_table_output(federation: Any, tmp_path: Path):
    before = await federation.state()
    code, out, err = await run_command(whatif, ["--cluster-label", "aws-eu-central-1:pci-compliance-level=1",
                                                *federation.flags()])
    assert await federation.state() == before
    assert code == 1, err
    assert "What-if: 0 policy change(s), 1 cluster label change(s); 4 workloads over 4 clusters" in out
    assert "  label:  aws-eu-central-1:pci-compliance-level=1" in out
    assert "Would move (2):" in out
    assert ("  ReplicaSet insight-shop/payments: aws-eu-central-1, gce-europe-west1 → gce-europe-west1   "
            "(-aws-eu-central-1)") in out
    assert "Would be denied (0)" in out
    assert "Result: 2 moves > --max-moves 0" in out


async def test_workloads_alike_share_one_evaluation(federation: Any):
    """300 more ReplicaSets in five shapes: the policies read kind, namespace, annotations and the pod
    spec, not names or labels, so each side evaluates a handful of inputs for 304 workloads."""
    shapes = [{EU: "true"}, {PCI: "1"}, {PCI: "3"}, {EU: "true", PCI: "2"}, {}]
    many = [await federation.admitted(rs(f"rs-{i}", shapes[i % 5])) for i in range(300)]
    many += [await federation.admitted(rs(n, a)) for n, a in
             (("web-eu", {EU: "true"}), ("payments", {EU: "true", PCI: "2"}), ("ledger", {PCI: "3"}), ("blog", {}))]
    await federation.put_workloads(many)
    code, doc, _ = await what_if(federation, "--cluster-label", "aws-eu-central-1:pci-compliance-level=1",
                                 "--max-moves", "100%")
    assert code == 0
    assert doc["summary"]["workloads"] == 304
    assert doc["summary"]["evaluations"]["before"] <= 6
    assert len(doc["moves"]) == 60 + 60 + 2  # PCI 3 (60 + ledger), EU+PCI 2 (60 + payments)


async def test_scratch_opa_gives_the_same_answers(federation: Any, opa_process: Any, tmp_path: Path):
    argv = ["--cluster-label", "aws-eu-central-1:pci-compliance-level=1", "--max-moves", "10"]
    code, in_process, _ = await what_if(federation, *argv)
    code2, scratch, err = await what_if(federation, *argv, "--scratch-opa-url", opa_process.url)
    assert (code, code2) == (0, 0), err
    assert scratch["summary"]["evaluator"] == f"scratch OPA at {opa_process.url}"
    for key in ("moves", "denied", "undenied", "annotations"):
        assert scratch[key] == in_process[key], key
    # the copied data is gone from the scratch OPA (its modules stay until the next run replaces them)
    status, body = await opa_process.request("GET", "/v1/data/kubernetes")
    assert status == 200 and "result" not in body


async def test_refuses_a_scratch_opa_that_is_live(federation: Any, opa_process: Any):
    label = ("--cluster-label", "aws-eu-central-1:tier=gold")
    code, _, err = await what_if(federation, *label, "--scratch-opa-url", federation.opa.url + "/v1/")
    assert code == 2 and "is the live OPA" in err
    status, _ = await opa_process.request("PUT", "/v1/data/fedplace_sync", json_body={"generation": "x"})
    assert status == 204  # as opa-kube-sync marks the OPA it feeds
    code, _, err = await what_if(federation, *label, "--scratch-opa-url", opa_process.url)
    assert code == 2 and "holds opa-kube-sync's sentinel" in err


@pytest.mark.parametrize("bad", ["--max-moves=-1", "--max-moves=abc", "--cluster-label=nocolon"])
async def test_usage_errors(federation: Any, bad: str):
    with pytest.raises(SystemExit):
        await run_command(whatif, [bad, *federation.flags()])


# -- Karmada: the bindings' exclusions ---------------------------------------------------------


def exclusions(doc: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {e["name"]: (e["before"], e["after"]) for e in doc["exclusions"]}


async def test_a_label_change_changes_bindings_exclusions(karmada: Any):
    """eu-1 downgraded to PCI 1: vault (EU, PCI 2) has no cluster left, ledger (PCI 3) loses eu-1,
    the IngressClass's ClusterResourceBinding (EU, PCI 3) too; web (EU) and blog are untouched."""
    code, doc, err = await what_if(karmada, "--cluster-label", "eu-1:pci-compliance-level=1")
    assert code == 1, err
    assert exclusions(doc) == {
        "vault-deployment": (["eu-2", "us-1"], ["eu-1", "eu-2", "us-1"]),
        "ledger-deployment": (["eu-2"], ["eu-1", "eu-2"]),
        "gate-ingressclass": (["eu-2", "us-1"], ["eu-1", "eu-2", "us-1"]),
    }
    by_name = {e["name"]: e for e in doc["exclusions"]}
    vault = by_name["vault-deployment"]
    assert (vault["kind"], vault["namespace"], vault["template"]) == ("ResourceBinding", NS, f"Deployment {NS}/vault")
    assert vault["added"] == ["eu-1"] and vault["removed"] == []
    assert vault["every_cluster"] is True and vault["every_cluster_before"] is False
    assert "PCI compliance level >= 2" in vault["why"]
    assert by_name["ledger-deployment"]["every_cluster"] is False
    gate = by_name["gate-ingressclass"]
    assert (gate["kind"], gate["namespace"], gate["template"]) == ("ClusterResourceBinding", "", "IngressClass gate")
    s = doc["summary"]
    assert (s["workloads"], s["bindings"], s["clusters"]) == (0, 5, 3)
    assert s["over_threshold"] == ["3 moves > --max-moves 0",
                                   "2 new denials (2 of them bindings excluding every cluster) > --max-denials 0",
                                   "3 binding exclusion changes > --max-exclusion-changes 0"]
    # each binding whose exclusions change moves too: the clusters Karmada may use, before → after
    assert moved(doc) == {"vault-deployment": (["eu-1"], []), "ledger-deployment": (["eu-1", "us-1"], ["us-1"]),
                          "gate-ingressclass": (["eu-1"], [])}
    assert doc["annotations"] == []
    code, doc, err = await what_if(karmada, "--cluster-label", "eu-1:pci-compliance-level=1", "--max-moves", "3",
                                   "--max-exclusion-changes", "60%", "--max-denials", "2")
    assert code == 0, err
    code, doc, _ = await what_if(karmada, "--cluster-label", "eu-1:pci-compliance-level=1", "--max-moves", "60%",
                                 "--max-exclusion-changes", "40%", "--max-denials", "2")
    assert doc["summary"]["over_threshold"] == ["3 binding exclusion changes > --max-exclusion-changes 40%"]

    # Taken back: eu-2 upgraded to PCI 3 is allowed to vault, ledger and the IngressClass again.
    code, doc, _ = await what_if(karmada, "--cluster-label", "eu-2:pci-compliance-level=3")
    assert {name: (e["added"], e["removed"]) for name, e in ((e["name"], e) for e in doc["exclusions"])} == {
        "vault-deployment": ([], ["eu-2"]), "ledger-deployment": ([], ["eu-2"]),
        "gate-ingressclass": ([], ["eu-2"])}
    assert doc["summary"]["over_threshold"] == ["3 moves > --max-moves 0",
                                                "3 binding exclusion changes > --max-exclusion-changes 0"]


async def test_a_proposed_policy_changes_bindings_exclusions(karmada: Any, tmp_path: Path):
    """EU now means europe-* only: eu-1 (eu-west-1) is excluded for the EU templates."""
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    cm = next(d for d in docs if d["metadata"]["name"] == "fedplace-rules-eu-pci")
    rules = tmp_path / "eu_pci.rego"
    rules.write_text(cm["data"]["eu_pci.rego"].replace(EU_PATTERN, "eu_region_pattern := `^europe-`"))
    code, doc, err = await what_if(karmada, "--policy", str(rules), "--max-exclusion-changes", "100%",
                                   "--max-moves", "100%")
    assert code == 1, err
    assert exclusions(doc) == {
        "web-deployment": (["us-1"], ["eu-1", "us-1"]),
        "vault-deployment": (["eu-2", "us-1"], ["eu-1", "eu-2", "us-1"]),
        "gate-ingressclass": (["eu-2", "us-1"], ["eu-1", "eu-2", "us-1"]),
    }
    assert doc["summary"]["over_threshold"] == [
        "2 new denials (2 of them bindings excluding every cluster) > --max-denials 0"]


async def test_bindings_in_the_table_and_without_them(karmada: Any):
    before = await karmada.state()
    code, out, err = await run_command(whatif, ["--cluster-label", "eu-1:pci-compliance-level=1", *karmada.flags()])
    assert await karmada.state() == before
    assert code == 1, err
    assert "What-if: 0 policy change(s), 1 cluster label change(s); 0 workloads, 5 Karmada bindings over 3 clusters" \
        in out
    assert "Binding exclusions would change (3):" in out
    assert (f"  ResourceBinding {NS}/vault-deployment (Deployment {NS}/vault): excluded eu-2, us-1 → eu-1, eu-2, us-1"
            "   (+eu-1)   EVERY CLUSTER EXCLUDED: the workload could run nowhere") in out
    assert (f"  ResourceBinding {NS}/ledger-deployment (Deployment {NS}/ledger): "
            "excluded eu-2 → eu-1, eu-2   (+eu-1)\n") in out
    assert "  ClusterResourceBinding gate-ingressclass (IngressClass gate): excluded eu-2, us-1 → " in out
    # Bindings not looked at (--resource-bindings '' --cluster-resource-bindings ''): no section, no threshold.
    code, out, err = await run_command(whatif, ["--cluster-label", "eu-1:pci-compliance-level=1",
                                                "--resource-bindings", "", "--cluster-resource-bindings", "",
                                                *karmada.flags()])
    assert code == 0, err
    assert "Binding exclusions" not in out and "0 workloads over 3 clusters" in out


async def test_scratch_opa_gives_the_same_exclusions(karmada: Any, opa_process: Any):
    argv = ["--cluster-label", "eu-1:pci-compliance-level=1", "--max-exclusion-changes", "100%", "--max-denials", "5",
            "--max-moves", "100%"]
    code, in_process, err = await what_if(karmada, *argv)
    code2, scratch, err2 = await what_if(karmada, *argv, "--scratch-opa-url", opa_process.url)
    assert (code, code2) == (0, 0), err + err2
    assert scratch["exclusions"] == in_process["exclusions"] and len(scratch["exclusions"]) == 3
