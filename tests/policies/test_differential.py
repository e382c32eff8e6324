"""Differential test: the server behind the ``opa`` fixture answers every shipped policy as OPA's evaluator does.

The shipped policies (every non-test module under policies/) are loaded into the
server behind the ``opa`` fixture (the devstack engine, or the real OPA server
``FEDPLACE_TEST_OPA_URL`` names) over its REST API, and into OPA's own evaluator
in process (``opa_bindings``, OPA 1.20); seeded random cases
(tests/policies/cases.py) are evaluated by both and must agree (see
:meth:`Outcome.agrees`: equal JSON, both undefined, or both an error). Against
the devstack engine, OPA's answer is compared as the engine sends it
(:meth:`Outcome.as_engine_sends`: numbers out of the float range as ``null``).

* placement — ``data.io.k8s.federation.admission`` for generated admission
  inputs, over generated ``data.kubernetes`` (absent, empty, odd clusters);
* remediation — ``data.io.k8s.federation.remediation.notifications`` for
  generated remediation inputs, over generated replicated objects and clusters;
* podspec — ``data.io.k8s.federation.podspec`` (the library packs use to find
  the pod spec) for generated pod-bearing and other objects;
* explain — ``data.io.k8s.federation.explain.packs`` (the placement explanation
  ``fedplace explain`` shows) for the placement cases.

Each data set is written once (whole, or object by object as opa-kube-sync
does, alternately) and many inputs are asked about it.

Separately, ``test_never_raises`` requires that no generated case makes the
shipped policies raise an evaluation error under OPA: the bindings evaluate with
strict builtin errors where a production OPA server would silently make the
rule undefined — a policy that raises would decide differently in production.

``FEDPLACE_DIFF_SEED`` replaces the seed (to explore; failures print it).
"""

from __future__ import annotations

import functools
import json
import os
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import aiohttp
import pytest

from tests.policies import cases
from tests.policies.differential import EngineSide, OpaSide, Outcome
from tests.policies.suite import modules

SEED = int(os.environ.get("FEDPLACE_DIFF_SEED", "20251123"))
ADMISSION = ("io", "k8s", "federation", "admission")
NOTIFICATIONS = ("io", "k8s", "federation", "remediation", "notifications")
PODSPEC = ("io", "k8s", "federation", "podspec")
EXPLAIN = ("io", "k8s", "federation", "explain", "packs")
PLACEMENT_DATA_SETS, INPUTS_PER_DATA_SET = 16, 40
REMEDIATION_DATA_SETS = 40
PODSPEC_INPUTS = 300

DataSets = list[tuple[dict[str, Any] | None, list[Any]]]


@dataclass(frozen=True)
class Case:
    """One query of both evaluators, with the data it ran on."""

    kubernetes: dict[str, Any] | None
    input: Any
    engine: Outcome | None  # None: asked OPA only
    opa: Outcome

    def agrees(self) -> bool:
        return self.engine is not None and self.engine.agrees(self.opa)

    def show(self) -> str:
        lines = [f"data.kubernetes = {json.dumps(self.kubernetes, ensure_ascii=False)}",
                 f"input = {json.dumps(self.input, ensure_ascii=False)}"]
        if self.engine is not None:
            lines.append(f"engine: {self.engine}")
        return "\n".join(lines + [f"OPA:    {self.opa}"])


@functools.cache
def placement_sets() -> DataSets:
    """The placement data sets, each with the admission inputs asked about it."""
    rng = random.Random(SEED)
    out: DataSets = []
    for doc in cases.placement_data(rng, PLACEMENT_DATA_SETS):
        names = list((doc or {}).get("clusters", {}))
        out.append((doc, [cases.admission_input(rng, names) for _ in range(INPUTS_PER_DATA_SET)]))
    return out


@functools.cache
def remediation_sets() -> DataSets:
    """The remediation data sets (replicated objects and clusters), each with its remediation inputs."""
    rng = random.Random(SEED + 1)
    out: DataSets = [(None, [None, {}]), ({}, [None, {"objects": []}])]
    for _ in range(REMEDIATION_DATA_SETS):
        out.append(cases.remediation_case(rng, objects=rng.randint(0, 12)))
    return out


@functools.cache
def podspec_sets() -> DataSets:
    """Admitted objects for the podspec library (it reads no data)."""
    rng = random.Random(SEED + 2)
    return [(None, [cases.pod_bearing_input(rng) for _ in range(PODSPEC_INPUTS)])]


async def run_both(opa, path: tuple[str, ...], sets: DataSets) -> list[Case]:
    """Every input of every data set, through the engine and through OPA."""
    mods = modules(tests=False)
    out: list[Case] = []
    async with aiohttp.ClientSession() as session:
        engine = EngineSide(opa, session)
        await engine.load_modules(mods)
        for index, (doc, inputs) in enumerate(sets):
            await engine.load_data(doc, per_object=index % 2 == 1)
            answers = await engine.evaluate_all(path, inputs)
            with OpaSide(mods, doc) as reference:
                expected = reference.evaluate_all(path, inputs)
            if not opa.external:  # the devstack engine: numbers out of the float range come as null
                expected = [e.as_engine_sends() for e in expected]
            out += [Case(doc, i, a, e) for i, a, e in zip(inputs, answers, expected, strict=True)]
    return out


def opa_only(path: tuple[str, ...], sets: DataSets) -> list[Case]:
    """Every input of every data set through OPA alone."""
    mods = modules(tests=False)
    out: list[Case] = []
    for doc, inputs in sets:
        with OpaSide(mods, doc) as reference:
            out += [Case(doc, i, None, o) for i, o in zip(inputs, reference.evaluate_all(path, inputs), strict=True)]
    return out


def divergences(found: list[Case], limit: int = 5) -> str:
    """The first ``limit`` cases where the evaluators disagree (their JSON is kept short by sorting on size)."""
    bad = sorted((c for c in found if not c.agrees()), key=lambda c: len(c.show()))
    shown = "\n\n".join(c.show() for c in bad[:limit])
    return f"{len(bad)} of {len(found)} cases diverge (seed {SEED}); the smallest:\n\n{shown}"


def raised(found: list[Case]) -> str:
    """One smallest case (data and input) per distinct OPA error (the error's first line)."""
    smallest: dict[str, Case] = {}
    for case in sorted((c for c in found if c.opa.error), key=lambda c: len(c.show())):
        smallest.setdefault(case.opa.error.splitlines()[0], case)
    shown = "\n\n".join(c.show() for c in smallest.values())
    return f"the shipped policies raise on {sum(1 for c in found if c.opa.error)} generated cases (seed {SEED}):\n\n{shown}"


def placement_shapes(found: list[Case]) -> None:
    """The generator reaches every branch of the decision, not one of them hundreds of times."""
    shapes: Counter[str] = Counter()
    for case in found:
        value = case.opa.value
        if not isinstance(value, dict):
            continue
        shapes["errors" if value.get("errors") else "no errors"] += 1
        shapes["source=" + str(value.get("annotations", {}).get(cases.SOURCE_KEY))] += 1
    for shape in ("errors", "no errors", "source=policy", "source=developer", "source=None"):
        assert shapes[shape] >= 20, shapes


def remediation_shapes(found: list[Case]) -> None:
    """Passes with no, one and several notifications all occur."""
    sizes = Counter(min(len(c.opa.value), 3) for c in found if isinstance(c.opa.value, list))
    assert sizes[0] >= 20 and sizes[1] >= 20 and sizes[3] >= 20, sizes


def podspec_shapes(found: list[Case]) -> None:
    """Objects with and without a pod spec at their kind's path both occur."""
    with_spec = sum(1 for c in found if isinstance(c.opa.value, dict) and "spec" in c.opa.value)
    assert 20 <= with_spec <= len(found) - 20, with_spec


def explain_shapes(found: list[Case]) -> None:
    """The placement explanation: not applicable, unconstrained, and clusters eligible and not, all occur."""
    shapes: Counter[str] = Counter()
    for case in found:
        doc = case.opa.value.get("placement") if isinstance(case.opa.value, dict) else None
        if not isinstance(doc, dict):
            continue
        shapes["applies" if doc.get("applies") else "not applicable"] += 1
        for entry in (doc.get("clusters") or {}).values():
            shapes["eligible" if entry.get("eligible") else "ineligible"] += 1
    for shape in ("applies", "not applicable", "eligible", "ineligible"):
        assert shapes[shape] >= 20, shapes


@dataclass(frozen=True)
class Subject:
    """A shipped policy document under test: its path, its generated data sets, a check of their spread."""

    name: str
    path: tuple[str, ...]
    sets: Callable[[], DataSets]
    spread: Callable[[list[Case]], None]
    minimum: int


SUBJECTS = [
    Subject("placement", ADMISSION, placement_sets, placement_shapes, PLACEMENT_DATA_SETS * INPUTS_PER_DATA_SET),
    Subject("remediation", NOTIFICATIONS, remediation_sets, remediation_shapes, 300),
    Subject("podspec", PODSPEC, podspec_sets, podspec_shapes, PODSPEC_INPUTS),
    Subject("explain", EXPLAIN, placement_sets, explain_shapes, PLACEMENT_DATA_SETS * INPUTS_PER_DATA_SET),
]


@pytest.mark.parametrize("subject", SUBJECTS, ids=[s.name for s in SUBJECTS])
async def test_engine_agrees_with_opa(opa, subject: Subject):
    found = await run_both(opa, subject.path, subject.sets())
    assert len(found) >= subject.minimum
    assert all(c.agrees() for c in found), divergences(found)
    subject.spread(found)


@pytest.mark.parametrize("subject", SUBJECTS, ids=[s.name for s in SUBJECTS])
def test_never_raises(subject: Subject):
    found = opa_only(subject.path, subject.sets())
    assert not any(c.opa.error for c in found), raised(found)
