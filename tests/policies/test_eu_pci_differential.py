"""The EU/PCI rule set decides as the placement rules did before the placement-rules contract.

Before the contract, the EU/PCI example was wired into the placement rules
themselves; now it is one rule set (policies/rules-eu-pci) read through
policies/federation/contract.rego. The pre-contract policies are kept as a test
fixture (tests/policies/pre_contract/: policies/federation and policies/karmada
as they were, their packages moved under ``pre_contract``) beside a module that
decides each object of a batch with both (``with input as``), so that thousands
of cases cost a few queries.

Over HTTP, on the server behind the ``opa`` fixture (the devstack engine, or the
real OPA ``FEDPLACE_TEST_OPA_URL`` names): the shipped policies and the fixture
are loaded, and generated data sets (tests/policies/eu_pci_cases.py: 0–40
clusters each, every other one with opa-kube-sync's cluster index, every fifth
with the setting ``control_plane: karmada``) go in batches as the input of one
query each, which decides every object over its own set's data (``with``). For
every object (ReplicaSets, kinds placed through the cluster selector, Karmada
ResourceBindings) both must give the same eligible clusters and the same
decision: annotations, errors and patches. Forgiven, on purpose: the requirements in words
("EU jurisdiction required: true, PCI compliance level >= 2" is now
"EU jurisdiction required, PCI compliance level >= 2"; "EU jurisdiction
required: false, …" lists only what is required), a template with errors being
said to have "placement errors" (not "malformed placement annotations"), and the
cluster values a binding's why lists when no cluster is allowed (now each
cluster's failed requirements: the same clusters in the same order are
required).

``FEDPLACE_DIFF_SEED`` replaces the seed (failures print it).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fedplace.common.cluster_index import cluster_index
from tests.policies import eu_pci_cases
from tests.policies.differential import EngineSide
from tests.policies.suite import modules

SEED = int(os.environ.get("FEDPLACE_DIFF_SEED", "20261207"))
DATA_SETS, OBJECTS_PER_DATA_SET, SETS_PER_QUERY = 180, 30, 20
MINIMUM_CASES = 5000
FIXTURE = Path(__file__).resolve().parent / "pre_contract"
RESULTS = ("fedplace_test", "eu_pci_differential", "results")
WHY_VALUES = re.compile(r"^(no cluster satisfies the placement policy \([^()]*\)): (.*)$", re.S)


def fixture_modules() -> dict[str, str]:
    """The pre-contract policies and the batch module, under ids of their own."""
    return {f"pre_contract/{p.name}": p.read_text() for p in sorted(FIXTURE.glob("*.rego"))}


def _rewrite(value: Any, fix) -> Any:
    """``value`` with ``fix`` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, list):
        return [_rewrite(v, fix) for v in value]
    if isinstance(value, dict):
        return {fix(k): _rewrite(v, fix) for k, v in value.items()}
    return value


def _names_for_values(text: str) -> str:
    """A why listing cluster values, with only the clusters' names kept (the values changed on purpose)."""
    match = WHY_VALUES.match(text)
    if not match:
        return text
    return f"{match.group(1)}: clusters {eu_pci_cases.cluster_value_names(match.group(2))}"


def comparable(side: dict[str, Any], texts: tuple[str, str] | None) -> dict[str, Any]:
    """One side of a result with the forgiven differences removed: the pre-contract requirement text
    (``texts[0]``) written as the rule set writes it (``texts[1]``; None: the old side is not being
    rewritten), and a why's cluster values reduced to the clusters' names."""
    def fix(s: str) -> str:
        if texts is not None:
            s = s.replace(texts[0], texts[1]).replace("has malformed placement annotations", "has placement errors")
        return _names_for_values(s)
    return _rewrite(side, fix)


@dataclass(frozen=True)
class Case:
    """One object decided by both, over one data set."""

    data_set: int
    obj: dict[str, Any]
    requirements_from: Any  # the object whose annotations make the requirements (a binding's template)
    new: dict[str, Any]
    old: dict[str, Any]

    def agrees(self) -> bool:
        texts = eu_pci_cases.requirement_texts(self.requirements_from)
        return comparable(self.new, None) == comparable(self.old, texts)

    def show(self, query: dict[str, Any]) -> str:
        return "\n".join([
            f"data set {self.data_set}: {json.dumps({k: v for k, v in query.items() if k != 'objects'}, ensure_ascii=False)}",
            f"input = {json.dumps(self.obj, ensure_ascii=False)}",
            f"new: {json.dumps(self.new, ensure_ascii=False, sort_keys=True)}",
            f"old: {json.dumps(self.old, ensure_ascii=False, sort_keys=True)}",
        ])


def query_set(n: int, ds: eu_pci_cases.DataSet) -> dict[str, Any]:
    """Data set ``n`` as the batch module takes it: every other one with opa-kube-sync's cluster
    index beside the clusters, every fifth one with the setting control_plane "karmada"."""
    return {
        "kubernetes": ds.kubernetes,
        "index": {"clusters": cluster_index(ds.clusters)} if n % 2 == 0 else {},
        "settings": {"control_plane": "karmada"} if n % 5 == 4 else {},
        "objects": ds.objects,
    }


async def decide_all(opa) -> tuple[list[Case], list[eu_pci_cases.DataSet]]:
    """Every object of every generated data set, decided by both policies on the server, a batch of
    data sets per query."""
    rng = random.Random(SEED)
    sets = [eu_pci_cases.data_set(rng, OBJECTS_PER_DATA_SET) for _ in range(DATA_SETS)]
    found: list[Case] = []
    async with aiohttp.ClientSession() as session:
        server = EngineSide(opa, session)
        await server.load_modules({**modules(tests=False), **fixture_modules()})
        batches = [range(first, min(first + SETS_PER_QUERY, len(sets))) for first in range(0, len(sets), SETS_PER_QUERY)]
        outcomes = await asyncio.gather(*(server.evaluate(RESULTS, {"sets": [query_set(n, sets[n]) for n in batch]})
                                          for batch in batches))
        for batch, outcome in zip(batches, outcomes, strict=True):
            assert outcome.error is None, f"data sets {batch} (seed {SEED}): {outcome.error}"
            for n, results in zip(batch, outcome.value, strict=True):
                ds = sets[n]
                for obj, result in zip(ds.objects, results, strict=True):
                    source = eu_pci_cases.template_of(obj, ds.kubernetes) if obj.get("kind") == "ResourceBinding" \
                        else obj
                    found.append(Case(n, obj, source, result["new"], result["old"]))
    return found, sets


def spread(found: list[Case]) -> Counter[str]:
    """What the cases exercise: objects placed somewhere, placed nowhere, denied, bindings narrowed."""
    shapes: Counter[str] = Counter()
    for case in found:
        new = case.new
        shapes["errors" if new["errors"] else "no errors"] += 1
        eligible = new["eligible"]
        if isinstance(eligible, list):
            shapes["some eligible" if eligible else "none eligible"] += 1
        annotations = new["annotations"]
        if isinstance(annotations, dict) and "fedplace.io/excluded-clusters" in annotations:
            shapes["binding decided"] += 1
            if WHY_VALUES.match(annotations.get("fedplace.io/placement", "")):
                shapes["binding placed nowhere"] += 1
        if isinstance(annotations, dict) and "federation.kubernetes.io/replica-set-preferences" in annotations:
            shapes["preferences"] += 1
        if isinstance(annotations, dict) and "federation.alpha.kubernetes.io/cluster-selector" in annotations:
            shapes["selector"] += 1
    return shapes


# 5,400 objects decided twice: seconds on an idle machine, minutes on a busy one.
@pytest.mark.timeout(600)
async def test_the_eu_pci_rule_set_decides_as_the_pre_contract_rules(opa):
    found, sets = await decide_all(opa)
    kinds = sum((Counter(ds.kinds) for ds in sets), Counter())
    assert len(found) >= MINIMUM_CASES and all(kinds[k] >= 1000 for k in ("ReplicaSet", "selector", "binding")), kinds
    bad = sorted((c for c in found if not c.agrees()), key=lambda c: len(json.dumps(c.obj)))
    shown = "\n\n".join(c.show(query_set(c.data_set, sets[c.data_set])) for c in bad[:3])
    assert not bad, f"{len(bad)} of {len(found)} cases decided differently (seed {SEED}); the smallest:\n\n{shown}"
    # each case was decided over its own data set's clusters (not the store's, not another set's)
    strays = [c for c in found if isinstance(c.new["eligible"], list) and not set(c.new["eligible"]) <= set(sets[c.data_set].clusters)]
    assert not strays, strays[0].show(query_set(strays[0].data_set, sets[strays[0].data_set]))
    shapes = spread(found)
    for shape in ("errors", "no errors", "some eligible", "none eligible", "binding decided", "binding placed nowhere",
                  "preferences", "selector"):
        assert shapes[shape] >= 50, shapes


def test_the_forgiven_differences_are_only_the_texts():
    """The comparison forgives the requirement text and a why's cluster values, nothing else."""
    old_why = "no cluster satisfies the placement policy (EU jurisdiction required: true, PCI compliance level >= 2): " \
              "a (region us-east-1, pci-compliance-level 1); b (region eu-west-1, pci-compliance-level none)"
    new_why = "no cluster satisfies the placement policy (EU jurisdiction required, PCI compliance level >= 2): " \
              "a (label pci-compliance-level: 1; region us-east-1); b (label pci-compliance-level: none)"
    obj = {"metadata": {"annotations": {eu_pci_cases.EU_KEY: "true", eu_pci_cases.PCI_KEY: "02"}}}
    texts = eu_pci_cases.requirement_texts(obj)
    assert texts == ("EU jurisdiction required: true, PCI compliance level >= 2",
                     "EU jurisdiction required, PCI compliance level >= 2")
    side = {"annotations": {"fedplace.io/placement": old_why}, "errors": []}
    assert comparable(side, texts) == comparable({"annotations": {"fedplace.io/placement": new_why}, "errors": []}, None)
    other_clusters = new_why.replace("; b (", "; c (")
    assert comparable(side, texts) != comparable({"annotations": {"fedplace.io/placement": other_clusters}}, None)
    assert eu_pci_cases.requirement_texts({"metadata": {"annotations": {eu_pci_cases.PCI_KEY: "x"}}}) == \
        ("EU jurisdiction required: false, PCI compliance level >= 0", "PCI compliance level >= 0")
