"""Item 6: the pack against Kubernetes' own LimitRanger, case by case (reference.py).

For every case of the reference table:

* Kubernetes' outcome, as written in the table, is what the port of the
  plugin (k8s_limitranger.py, Kubernetes' semantics: first LimitRange with
  errors only, float64 ratio) computes — so the table's left column is
  checked against the source it claims to describe;
* the pack, under OPA's evaluator in process and under the ``opa`` fixture's
  server (the devstack engine, or a real OPA), ends with
  the resources the table says (its patch, then the API server's copying of
  limits to missing requests) or denies with exactly the messages it says;
* docs/policies.md shows the table as rendered from the cases.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packs.limitrange import harness, k8s_limitranger
from tests.packs.limitrange.harness import Evaluator
from tests.packs.limitrange.reference import CASES, Case, Outcome, render_table

ROOT = Path(__file__).resolve().parents[3]


def _texts(resources: dict[str, dict[str, dict]]) -> dict[str, dict[str, dict[str, str]]]:
    return {who: {k: {r: str(v) for r, v in vals.items()} for k, vals in kinds.items()}
            for who, kinds in resources.items()}


def kubernetes(case: Case) -> Outcome:
    out = k8s_limitranger.admit(case.pod, case.limitranges, stop_at_first_limitrange=True, exact_ratio=False)
    if out.violations:
        return Outcome(errors=tuple(v.message for v in out.violations))
    return Outcome(_texts(harness.resources_of(out.pod)))


async def fedplace(case: Case, evaluator: Evaluator) -> Outcome:
    decision = await evaluator.decide(case.pod, case.limitranges)
    if decision.get("errors"):
        return Outcome(errors=tuple(sorted(decision["errors"])))
    pod = k8s_limitranger.set_defaults_pod(harness.patched(case.pod, decision))
    return Outcome(_texts(harness.resources_of(pod)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kubernetes_column_is_what_the_plugin_does(case: Case):
    assert kubernetes(case) == case.kubernetes


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_fedplace_column_is_what_the_pack_does(case: Case, evaluator: Evaluator):
    assert await fedplace(case, evaluator) == Outcome(case.fedplace.resources, tuple(sorted(case.fedplace.errors)))


def test_differences_are_explained():
    for case in CASES:
        same_outcome = case.fedplace.allowed == case.kubernetes.allowed and (
            not case.kubernetes.allowed or case.fedplace.resources == case.kubernetes.resources)
        same_count = len(case.fedplace.errors) == len(case.kubernetes.errors)
        if not (same_outcome and same_count):
            assert case.note, f"{case.name}: the pack differs from Kubernetes without a note"


def test_docs_show_the_table():
    docs = (ROOT / "docs" / "policies.md").read_text()
    assert render_table() in docs, "docs/policies.md does not show reference.render_table(); paste it again"
