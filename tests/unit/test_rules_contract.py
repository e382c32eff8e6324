"""common/rules_contract.py: a placement rule set of the wrong shape is named, with its row,
from the module's text alone."""

from __future__ import annotations

import pytest

from fedplace.common.rego_scan import outline
from fedplace.common.rules_contract import contract_problems, source_problems


def problems(src: str) -> list[tuple[int, str]]:
    return [(p.row, p.message) for p in contract_problems(outline(src))]


def test_a_rule_set_of_partial_sets_is_fine():
    src = """package fedplace.rules.gpu

require contains {"id": "gpu", "cluster": {"label": "gpu", "in": ["a100"]}} if input.kind

forbid contains {"cluster": name, "id": "cordoned"} if {
	some name, c in data.kubernetes.clusters
	c.metadata.labels.cordoned == "true"
}

errors contains "bad" if input.metadata.annotations.gpu == ""

helper := 1
"""
    assert problems(src) == []


def test_modules_outside_the_rules_root_are_not_checked():
    assert problems("package io.k8s.federation.placement\n\nrequire := 1\n") == []
    assert problems("package fedplace.rulesets.x\n\nrequire := 1\n") == []


@pytest.mark.parametrize(("rule", "name", "kind"), [
    ('require := {"id": "x"}', "require", "complete"),
    ("default errors := []", "errors", "default"),
    ('forbid[name] := "x" if some name in ["a"]', "forbid", "partial object"),
    ("require(x) := x", "require", "function"),
])
def test_contract_rules_of_another_kind_are_named_with_their_row(rule, name, kind):
    found = problems(f"package fedplace.rules.odd\n\n# a comment\n{rule}\n")
    assert len(found) == 1
    row, message = found[0]
    assert row == 4
    assert message.startswith(f"{name} must be a partial set rule")
    assert message.endswith(f"not a {kind} rule")


def test_packages_the_library_does_not_read_are_named():
    (row, message), = problems("package fedplace.rules\n\nrequire contains 1 if true\n")
    assert row == 1 and "fedplace.rules.<name>" in message
    (row, message), = problems("\n# team rules\npackage fedplace.rules.team.gpu\n\nrequire contains 1 if true\n")
    assert row == 3 and "fedplace.rules.team" in message and "not read" in message


def test_source_problems_name_file_and_row_and_leave_unreadable_modules_to_opa():
    assert source_problems([
        ("ok.rego", "package fedplace.rules.ok\n\nrequire contains 1 if true\n"),
        ("odd.rego", "package fedplace.rules.odd\n\nforbid := []\n"),
        ("broken.rego", "package fedplace.rules.[\n"),
    ]) == ["odd.rego:3: forbid must be a partial set rule (`forbid contains ... if { ... }`), not a complete rule"]
