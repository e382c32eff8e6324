"""The cluster index changes no decision.

opa-kube-sync keeps the clusters grouped by label value and region beside the
mirror (``data.kubernetes_index.clusters``, common/cluster_index.py); the
placement rules read it when it is there and every cluster when it is not
(policies/federation/lib.rego). Seeded random clusters and admission inputs
(tests/policies/cases.py, plus Karmada-style regions in ``spec``) are decided
both ways and must agree exactly: the admission decision, the explanation and
the sets the rules compute on the way. The index is the one the sync writes
(``cluster_index``), so the Python that builds it and the Rego that reads it
are checked together.

* In process (OPA's evaluator, ``opa_bindings``): every data set and input.
* Over HTTP, on the server behind the ``opa`` fixture (the devstack engine, or
  the real OPA server): a few data sets written as the sync writes them, the
  index PUT beside them, against OPA's answer without it.

``FEDPLACE_DIFF_SEED`` replaces the seed (failures print it).
"""

from __future__ import annotations

import functools
import json
import os
import random
from typing import Any

import aiohttp
import pytest

from fedplace.common.cluster_index import cluster_index
from tests.policies import cases
from tests.policies.differential import EngineSide, Outcome
from tests.policies.suite import data_ref, modules, opa_engine

SEED = int(os.environ.get("FEDPLACE_DIFF_SEED", "20261127"))
DATA_SETS, INPUTS_PER_DATA_SET, NAMED_DATA_SETS = 16, 20, 4
ADMISSION = ("io", "k8s", "federation", "admission")
EXPLAIN = ("io", "k8s", "federation", "explain", "packs")
PLACEMENT = ("io", "k8s", "federation", "placement")
# The sets the placement rules compute, read the two ways.
SETS = ("cluster_names", "eligible_clusters", "selector_eligible", "selector_admitted", "selector_allowed",
        "developer_selector_admits", "developer_requirements_admit")
ZONES = ["a", "b", "", "7", "007"]


def karmada_style(rng: random.Random, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its region moved to ``spec`` (a Karmada Cluster), kept in both, or left alone,
    and sometimes a label only a cluster selector asks about."""
    region = (obj.get("status") or {}).get("region")
    roll = rng.random()
    if region is not None and roll < 0.3:
        obj = {**obj, "spec": {**(obj.get("spec") or {}), "region": region}}
        del obj["status"]
    elif roll < 0.45:
        obj = {**obj, "spec": {**(obj.get("spec") or {}), "region": rng.choice(cases.REGIONS)}}
    labels = (obj.get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and rng.random() < 0.4:
        labels["example.com/zone"] = rng.choice(ZONES)
    return obj


@functools.cache
def data_sets() -> list[tuple[dict[str, Any] | None, list[Any]]]:
    rng = random.Random(SEED)
    out = []
    for doc in cases.placement_data(rng, DATA_SETS):
        if doc and doc.get("clusters"):
            doc = {**doc, "clusters": {n: karmada_style(rng, c) for n, c in doc["clusters"].items()}}
        names = list((doc or {}).get("clusters", {}))
        out.append((doc, [cases.admission_input(rng, names) for _ in range(INPUTS_PER_DATA_SET)] + CONSTRAINED))
    # And the usual federation, every cluster labelled with its name (the selector's
    # clusters then come from two counts, not an intersection: selector.rego).
    named = [every_cluster_named(doc) for doc, _ in out if doc and len(doc.get("clusters", {})) >= 3][:NAMED_DATA_SETS]
    for doc in named:
        names = list(doc["clusters"])
        out.append((doc, [cases.admission_input(rng, names) for _ in range(INPUTS_PER_DATA_SET)] + CONSTRAINED))
    return out


# Every EU-and-PCI requirement the generated labels can meet exactly, for both ways of placing
# (random inputs seldom ask for EU jurisdiction and a level some EU cluster has).
CONSTRAINED = [{"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web", "namespace": "shop", "annotations": {
    "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true",
    "policy.federation.alpha.kubernetes.io/pci-compliance-level": level}}}
    for kind in ("ReplicaSet", "Deployment") for level in ("0", "1", "2", "3", "4", "10")]


def every_cluster_named(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every cluster object labelled ``cases.NAME_LABEL`` = its name."""
    clusters = {}
    for name, obj in doc["clusters"].items():
        if isinstance(obj, dict):
            metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {"name": name}
            labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
            obj = {**obj, "metadata": {**metadata, "labels": {**labels, cases.NAME_LABEL: name}}}
        clusters[name] = obj
    return {**doc, "clusters": clusters}


def with_index(doc: dict[str, Any] | None) -> dict[str, Any]:
    """``data`` as opa-kube-sync leaves it: the mirror, and the index of its clusters."""
    clusters = (doc or {}).get("clusters")
    index = {"clusters": cluster_index(clusters)} if isinstance(clusters, dict) else {}
    return {"kubernetes": doc or {}, "kubernetes_index": index}


def evaluate(engine: Any, query: str, input_doc: Any) -> Outcome:
    result = engine.eval_query(f"value := {query}", input_doc)
    return Outcome(result[0]["value"]) if result else Outcome()


# One query per input: every document compared, each as a list of its value (empty: undefined).
QUERY = "{" + ", ".join(f"{json.dumps(name)}: [x | x := {ref}]" for name, ref in [
    ("admission", data_ref(ADMISSION)), ("explain", data_ref(EXPLAIN)),
    *((name, data_ref((*PLACEMENT, name))) for name in SETS)]) + "}"


def test_every_decision_is_the_same_with_and_without_the_index():
    mods = modules(tests=False)
    compared = indexed = 0
    differences = []
    for doc, inputs in data_sets():
        scanning = opa_engine(mods, {"kubernetes": doc} if doc is not None else None)
        looking_up = opa_engine(mods, with_index(doc))
        try:
            ready = evaluate(looking_up, data_ref((*PLACEMENT, "cluster_index_ready")), None)
            assert evaluate(scanning, data_ref((*PLACEMENT, "cluster_index_ready")), None).value is not True
            indexed += ready.value is True
            for input_doc in inputs:
                a, b = evaluate(scanning, QUERY, input_doc), evaluate(looking_up, QUERY, input_doc)
                compared += 1
                if not a.agrees(b):
                    differences.append(f"data.kubernetes = {json.dumps(doc)}\n"
                                       f"input = {json.dumps(input_doc)}\nscan:  {a}\nindex: {b}")
        finally:
            scanning.close()
            looking_up.close()
    assert not differences, f"seed {SEED}: {len(differences)} differ; first:\n" + "\n\n".join(differences[:3])
    # The index was there (and read) for every data set that has a clusters document.
    assert indexed == sum(1 for doc, _ in data_sets() if isinstance((doc or {}).get("clusters"), dict))
    assert compared == sum(len(i) for _, i in data_sets())


@pytest.mark.asyncio
async def test_the_server_decides_the_same_with_the_index_the_sync_writes(opa):
    mods = modules(tests=False)
    chosen = [(doc, inputs) for doc, inputs in data_sets() if doc and len(doc.get("clusters", {})) >= 4][:4]
    assert chosen, "the seed gave no data set with four clusters"
    async with aiohttp.ClientSession() as session:
        server = EngineSide(opa, session)
        await server.load_modules(mods)
        for n, (doc, inputs) in enumerate(chosen):
            await server.load_data(doc, per_object=n % 2 == 1)
            async with session.put(f"{opa.url}/v1/data/kubernetes_index", json=with_index(doc)["kubernetes_index"],
                                   headers=opa.headers()) as resp:
                assert resp.status in (200, 204), await resp.text()
            assert (await server.evaluate((*PLACEMENT, "cluster_index_ready"), None)).value is True
            answers = await server.evaluate_all(ADMISSION, inputs)
            reference = opa_engine(mods, {"kubernetes": doc})
            try:
                expected = [evaluate(reference, data_ref(ADMISSION), i) for i in inputs]
            finally:
                reference.close()
            if not opa.external:
                expected = [e.as_engine_sends() for e in expected]
            wrong = [(i, a, e) for i, a, e in zip(inputs, answers, expected, strict=True) if not a.agrees(e)]
            assert not wrong, f"seed {SEED}: input {json.dumps(wrong[0][0])}\nserver: {wrong[0][1]}\nOPA: {wrong[0][2]}"
