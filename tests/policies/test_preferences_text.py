"""The policy's own replica-set-preferences come as the annotation's exact text.

The placement decision returns the preferences it computes as the string the
annotation will hold, joined from the sorted cluster names
(policies/federation/lib.rego, ``preferences_annotation``), instead of an
object OPA's server would serialise per cluster. That text must be exactly what
the webhook and the remediator would have written for the object
(``common.annotations.canonical_value``: keys sorted, no spaces, non-ASCII
kept), or every object placed before would flap once. Checked here against
Python's own serialisation on seeded random clusters (names in several
scripts, Kubernetes names and not) and inputs, with and without the cluster
index, in process (OPA's evaluator).

``FEDPLACE_DIFF_SEED`` replaces the seed (failures print it).
"""

from __future__ import annotations

import json
import os
import random

from fedplace.common.annotations import canonical_value
from tests.policies import cases
from tests.policies.suite import data_ref, modules, opa_engine
from tests.policies.test_cluster_index import CONSTRAINED, with_index

SEED = int(os.environ.get("FEDPLACE_DIFF_SEED", "20261127"))
DATA_SETS, INPUTS_PER_DATA_SET = 12, 12
QUERY = "{" + ", ".join(f"{json.dumps(name)}: [x | x := {ref}]" for name, ref in [
    ("annotation", data_ref(("io", "k8s", "federation", "admission", "annotations", cases.PREFS_KEY))),
    ("source", data_ref(("io", "k8s", "federation", "admission", "annotations", cases.SOURCE_KEY))),
    ("preferences", data_ref(("io", "k8s", "federation", "placement", "preferences")))]) + "}"


def test_the_policys_preferences_are_the_canonical_text_of_its_object():
    rng = random.Random(SEED)
    mods = modules(tests=False)
    texts = values = 0
    wrong = []
    for doc in cases.placement_data(rng, DATA_SETS):
        names = list((doc or {}).get("clusters", {}))
        inputs = [cases.admission_input(rng, names) for _ in range(INPUTS_PER_DATA_SET)] + CONSTRAINED
        for data in ({"kubernetes": doc} if doc is not None else None, with_index(doc)):
            engine = opa_engine(mods, data)
            try:
                for input_doc in inputs:
                    got = engine.eval_query(f"value := {QUERY}", input_doc)[0]["value"]
                    if not got["annotation"]:
                        continue
                    annotation, preferences = got["annotation"][0], got["preferences"][0]
                    if not isinstance(annotation, str):
                        values += 1  # the developer's, or a name JSON escapes: the webhook serialises it
                        continue
                    texts += 1
                    if got["source"] != ["policy"] or annotation != canonical_value(preferences) \
                            or json.loads(annotation) != preferences:
                        wrong.append(f"data = {json.dumps(doc)}\ninput = {json.dumps(input_doc)}\n"
                                     f"text:  {annotation}\nvalue: {canonical_value(preferences)}")
            finally:
                engine.close()
    assert not wrong, f"seed {SEED}: {len(wrong)} differ; first:\n" + "\n\n".join(wrong[:3])
    # Both forms were met, the text often.
    assert texts >= 50 and values >= 5, (texts, values)
