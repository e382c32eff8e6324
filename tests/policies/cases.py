"""Generated inputs and replicated data for the differential test of the shipped policies.

Contracts:

* Everything is drawn from the ``random.Random`` passed in, so a seed fixes the
  whole case list (no other source of randomness).
* Generated values stay inside what production can send: annotation and label
  values are strings (the API server types them ``map[string]string``), a
  Cluster's ``status.region`` is a string when present (the CRD's schema), and
  the admission input is an object. Within that, anything goes: missing or
  ``null`` metadata/annotations, other kinds, malformed or wrongly-typed JSON in
  ``replica-set-preferences``, empty strings, unicode, numbers past 2**53.
* ``hostile`` is the share of ReplicaSets carrying a value from :data:`RAISING`
  (always together with a PCI annotation, so the policy is constrained and
  reads it): values on which the shipped placement policy raises an evaluation
  error under OPA and the engine alike. They are generated so the differential
  test compares error against error, and so ``test_*_never_raises`` lists them
  until the policy handles them.
* Values on which the engine is known to answer differently from OPA (pinned in
  tests/policies/test_engine_divergences.py) are NOT generated: whole numbers
  with leading zeros or beyond 2**64 - 1, JSON numbers out of the float range,
  ``{"clusters": <null|number|string>}`` preferences, and RAISING values where
  OPA would not evaluate them (the engine evaluates every rule of an imported
  package).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

__all__ = [
    "EU_KEY", "PCI_KEY", "PREFS_KEY", "RAISING", "SELECTOR_KEY", "SOURCE_KEY", "admission_input", "cluster", "placement_data",
    "pod_bearing_input", "remediation_case",
]

EU_KEY = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI_KEY = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
PREFS_KEY = "federation.kubernetes.io/replica-set-preferences"
SOURCE_KEY = "fedplace.io/replica-set-preferences-source"
PCI_LABEL = "pci-compliance-level"
SELECTOR_KEY = "federation.alpha.kubernetes.io/cluster-selector"
SELECTOR_SOURCE_KEY = "fedplace.io/cluster-selector-source"
NAME_LABEL = "fedplace.io/cluster-name"

CLUSTER_NAMES = [
    "gce-europe-west1", "aws-eu-central-1", "azure-westeurope", "gce-us-central1", "aws-eu-west-1", "eu", "europe",
    "集群-eu-1", "ünïcødé", "🚀-cluster", "a b", "dot.name", "UPPER", "x" * 63, "0", "test_x", "%2F", "emoji-😀",
]
REGIONS = [
    "europe-west1", "EUROPE-WEST4", "eu-central-1", "Eu-West-1", "westeurope", "NorthEurope", "europe", "eu-",
    "europe-", "us-central1", "useurope-x", "neu-1", "euro", "", "ÉUROPE-ouest", "eu\u2010west", "westeurope\n",
    "asia-east1", "européen", "EU-", "europe-wést",
]
# Whole numbers only as far as the engine keeps them exactly (see the module docstring).
BIG = ["9007199254740993", "9223372036854775808", "18446744073709551614", "18446744073709551615"]
PCI_LABELS = ["0", "1", "2", "3", "4", "10", "70", "", "abc", "-1", "1.5", " 2", "٣", "+1", "1e3", *BIG]
PCI_VALUES = ["0", "1", "2", "3", "4", "5", "10", "", "abc", "-1", "1.5", "0 7", "٣", "+1", " 2", "1e3", "true",
              "0x10", *BIG]
EU_VALUES = ["true", "false", "", "True", "TRUE", "yes", "1", " true", "true ", "ｔrue"]
SOURCE_VALUES = ["policy", "developer", "", "Policy"]
MALFORMED_JSON = ["", "{not json", "{", "}", "[}", "nul", "{'clusters': {}}", '{"clusters": {"a": 1,}}',
                  "\ufeff{}", '{"clusters": {}} trailing', " ", "{\"clusters\": {\"a\": NaN}}"]
ODD_JSON = ['{}', '{"clusters": {}}', '{"clusters": []}', '{"rebalance": true}', '{"clusters": {"eu": 5}}',
            '{"clusters": {"eu": null}}', ' {"clusters": {"europe": {}}} ', '{"clusters": {"eu": {}}, "clusters": {}}',
            '{"clusters": {"0": {"weight": 1}}}']
# Values on which the shipped placement policy raises (see the module docstring).
RAISING: dict[str, list[str]] = {
    PREFS_KEY: ["5", "null", "[1]", '"str"', "true", '{"clusters": ["gce-europe-west1"]}',
                '{"clusters": [{"weight": 1}, {}]}'],
    PCI_KEY: ["1" + "0" * 400],
}
KINDS = ["Deployment", "ConfigMap", "Pod", "replicaset", "ReplicaSetList", "", "StatefulSet", "Secret", "Deployment",
         "ConfigMap", "Secret", "Service"]
SELECTOR_KEYS = [NAME_LABEL, PCI_LABEL, "tier", "example.com/zone", "Bad Key", "", "a/b/c"]
SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in", "==", "", "Equals"]
SELECTOR_VALUES = ["gold", "", "2", "007", "-1", "abc", "1" + "0" * 15, "-bad-", "x" * 64, "ü"]
ODD_SELECTORS = ["[]", "{}", "null", "5", '"str"', "[5]", "[null]", '[{"key": "tier"}]',
                 '[{"key": "tier", "operator": "In", "values": "gold"}]',
                 '[{"key": "tier", "operator": "In", "values": [1]}]',
                 '[{"key": "tier", "operator": "Exists", "values": null}]']
NAMES = ["nginx", "web-1", "ünïcødé", "名前", "a" * 253, "0", "x.y", "🚀"]
NAMESPACES = ["default", "shop", "kube-system", "名前空間", "ns-ü"]


def _number(rng: random.Random) -> int | float:
    """A JSON number for preferences: small, negative, fractional, or large (below 2**63)."""
    return rng.choice([
        rng.randint(0, 10), rng.randint(-5, 5), round(rng.uniform(0, 100), 3), 2 ** 53 + 1, 2 ** 62, 1e300,
        0.5, -0.0, 1.5e-10, 123456789012345678,
    ])


def _preferences(rng: random.Random, names: list[str]) -> str:
    """A valid replica-set-preferences document naming some of ``names`` and some other clusters."""
    pool = names + rng.sample(CLUSTER_NAMES, 3)
    clusters: dict[str, Any] = {}
    for name in rng.sample(pool, rng.randint(0, min(4, len(pool)))):
        pref = {k: _number(rng) for k in rng.sample(["weight", "minReplicas", "maxReplicas"], rng.randint(0, 3))}
        clusters[name] = pref if rng.random() < 0.9 else rng.choice([5, "x", None, [], True])
    doc: dict[str, Any] = {"clusters": clusters}
    if rng.random() < 0.4:
        doc["rebalance"] = rng.choice([True, False])
    if rng.random() < 0.1:
        doc["extra"] = {"nested": [1, "ü", None]}
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]),
                      sort_keys=rng.random() < 0.5)


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _selector(rng: random.Random, names: list[str]) -> str:
    """A cluster-selector annotation: mostly well formed requirements over cluster labels
    (names through the name label among them), sometimes malformed or odd."""
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(MALFORMED_JSON)
    if roll < 0.2:
        return rng.choice(ODD_SELECTORS)
    reqs: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 3)):
        key = rng.choice(SELECTOR_KEYS) if rng.random() < 0.3 else rng.choice([NAME_LABEL, PCI_LABEL, "tier"])
        op = rng.choice(SELECTOR_OPERATORS) if rng.random() < 0.2 else rng.choice(SELECTOR_OPERATORS[:6])
        req: dict[str, Any] = {"key": key, "operator": op}
        if op in ("Gt", "Lt"):
            values = [rng.choice(["0", "1", "2", "3", "02"])] if rng.random() < 0.8 else \
                rng.sample(SELECTOR_VALUES, rng.randint(0, 2))
        elif key == NAME_LABEL:
            pool = [n for n in names + CLUSTER_NAMES[:4] if rng.random() < 0.1 or _LABEL_VALUE.fullmatch(n)]
            values = rng.sample(pool, rng.randint(0, min(3, len(pool))))
        elif op in ("Exists", "DoesNotExist") and rng.random() < 0.8:
            values = []
        else:
            values = rng.sample(SELECTOR_VALUES, rng.randint(0, 2)) if rng.random() < 0.3 else \
                rng.sample(["gold", "silver", "1", "3"], rng.randint(1, 2))
        if values or rng.random() < 0.5:
            req["values"] = values
        reqs.append(req)
    return json.dumps(reqs, ensure_ascii=rng.random() < 0.5)


def _annotations(rng: random.Random, names: list[str], hostile: float) -> dict[str, str]:
    """Annotations of a generated object: constraint, preference and unrelated keys, each maybe absent.

    With probability ``hostile`` one value comes from :data:`RAISING`, with a PCI annotation present.
    """
    out: dict[str, str] = {}
    raising = rng.random() < hostile
    if rng.random() < 0.6:
        out[EU_KEY] = rng.choice(EU_VALUES)
    if raising or rng.random() < 0.6:
        out[PCI_KEY] = rng.choice(PCI_VALUES)
    if raising:
        key = rng.choice(list(RAISING))
        out[key] = rng.choice(RAISING[key])
    elif rng.random() < 0.5:
        roll = rng.random()
        if roll < 0.6:
            out[PREFS_KEY] = _preferences(rng, names)
        elif roll < 0.8:
            out[PREFS_KEY] = rng.choice(ODD_JSON)
        else:
            out[PREFS_KEY] = rng.choice(MALFORMED_JSON)
    if rng.random() < 0.3:
        out[SOURCE_KEY] = rng.choice(SOURCE_VALUES)
    if rng.random() < 0.3:
        out["team"] = rng.choice(["web", "", "ü"])
    if rng.random() < 0.4:
        out[SELECTOR_KEY] = _selector(rng, names)
    if rng.random() < 0.3:
        out[SELECTOR_SOURCE_KEY] = rng.choice(SOURCE_VALUES)
    return out


def admission_input(rng: random.Random, names: list[str], *, hostile: float = 0.05, kind: str | None = None,
                    namespace: str | None = None, name: str | None = None) -> dict[str, Any]:
    """An object as the webhook sends it to OPA; ``names`` are cluster names preferences may mention."""
    obj: dict[str, Any] = {"apiVersion": rng.choice(["apps/v1", "v1", "extensions/v1beta1"])}
    kind = kind if kind is not None else ("ReplicaSet" if rng.random() < 0.6 else rng.choice(KINDS))
    if kind or rng.random() < 0.5:
        obj["kind"] = kind
    if rng.random() < 0.03 and name is None:
        return obj  # no metadata at all
    metadata: dict[str, Any] = {"name": name if name is not None else rng.choice(NAMES)}
    if namespace is not None or rng.random() < 0.8:
        metadata["namespace"] = namespace if namespace is not None else rng.choice(NAMESPACES)
    roll = rng.random()
    if roll < 0.05:
        metadata["annotations"] = None
    elif roll < 0.1:
        metadata["annotations"] = {}
    elif roll < 0.95:
        metadata["annotations"] = _annotations(rng, names, hostile if kind == "ReplicaSet" else 0.0)
    if rng.random() < 0.2:
        metadata["labels"] = {"app": rng.choice(NAMES)}
    obj["metadata"] = metadata
    if rng.random() < 0.7:
        obj["spec"] = {"replicas": rng.choice([0, 1, 3, 2 ** 31 - 1])}
    return obj


def cluster(rng: random.Random, name: str) -> dict[str, Any]:
    """A replicated Cluster object with a random region and PCI label (either may be missing)."""
    obj: dict[str, Any] = {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster"}
    if rng.random() < 0.95:
        metadata: dict[str, Any] = {"name": name}
        roll = rng.random()
        if roll < 0.7:
            metadata["labels"] = {PCI_LABEL: rng.choice(PCI_LABELS), "tier": rng.choice(["gold", ""])}
        elif roll < 0.85:
            metadata["labels"] = {"tier": "x"}
        if "labels" in metadata and rng.random() < 0.7:  # how the cluster selector names a cluster
            metadata["labels"][NAME_LABEL] = name if rng.random() < 0.9 else rng.choice(CLUSTER_NAMES)
        obj["metadata"] = metadata
    roll = rng.random()
    if roll < 0.85:
        status: dict[str, Any] = {"region": rng.choice(REGIONS)}
        if rng.random() < 0.3:
            status["zones"] = [status["region"] + "-a"]
        obj["status"] = status
    elif roll < 0.92:
        obj["status"] = {}
    if rng.random() < 0.5:
        obj["spec"] = {"serverAddress": f"https://{len(name)}.example"}
    return obj


def _clusters(rng: random.Random) -> dict[str, Any]:
    return {n: cluster(rng, n) for n in rng.sample(CLUSTER_NAMES, rng.randint(1, 8))}


def placement_data(rng: random.Random, count: int) -> list[dict[str, Any] | None]:
    """``count`` values of ``data.kubernetes`` (None: not written at all), the empty shapes first."""
    fixed: list[dict[str, Any] | None] = [None, {}, {"clusters": {}}]
    out = fixed[:count]
    while len(out) < count:
        doc: dict[str, Any] = {"clusters": _clusters(rng)}
        if rng.random() < 0.3:
            doc["replicasets"] = {"default": {"other": {"kind": "ReplicaSet"}}}
        out.append(doc)
    return out


def _resources(rng: random.Random) -> dict[str, Any]:
    """A remediation query input: default, explicit resources, and/or targeted objects."""
    rs = {"plural": "replicasets", "namespaced": True}
    options: list[Any] = [rs, {"plural": "replicasets"}, {"plural": "deployments", "namespaced": True},
                          {"plural": "clusters", "namespaced": False}, {"plural": "missing", "namespaced": True}]
    return {"resources": rng.sample(options, rng.randint(1, 3))}


def remediation_case(rng: random.Random, *, objects: int, hostile: float) -> tuple[dict[str, Any], list[Any]]:
    """One ``data.kubernetes`` with replicated objects and clusters, and the remediation inputs to ask about it.

    Inputs: none (None), ``{}``, explicit ``resources``, and targeted ``objects``
    naming existing and missing objects, namespaced and cluster-scoped.
    """
    clusters = _clusters(rng) if rng.random() < 0.9 else {}
    names = list(clusters)
    doc: dict[str, Any] = {"clusters": clusters, "replicasets": {}}
    refs: list[dict[str, str]] = []
    for _ in range(objects):
        plural = "replicasets" if rng.random() < 0.8 else "deployments"
        ns, name = rng.choice(NAMESPACES), rng.choice(NAMES)
        kind = "ReplicaSet" if plural == "replicasets" else "Deployment"
        obj = admission_input(rng, names, hostile=hostile, kind=kind, namespace=ns, name=name)
        doc.setdefault(plural, {}).setdefault(ns, {})[name] = obj
        refs.append({"resource": plural, "namespace": ns, "name": name})
    refs += [{"resource": "replicasets", "namespace": "default", "name": "gone"},
             {"resource": "clusters", "name": rng.choice(CLUSTER_NAMES)},
             {"resource": "clusters", "namespace": "", "name": rng.choice(names or ["none"])}]
    inputs: list[Any] = [None, {}, _resources(rng), _resources(rng)]
    for _ in range(4):
        targeted: dict[str, Any] = {"objects": rng.sample(refs, rng.randint(0, min(4, len(refs))))}
        if rng.random() < 0.5:
            targeted.update(_resources(rng))
        inputs.append(targeted)
    return doc, inputs


POD_KINDS = ["Pod", "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"]
POD_SPEC = {"containers": [{"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}]}


def _nest(path: list[str], leaf: Any) -> Any:
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


def pod_bearing_input(rng: random.Random) -> dict[str, Any]:
    """An admitted object for the podspec library: a pod spec at its kind's path, at another kind's, or odd."""
    kind = rng.choice(POD_KINDS + ["ConfigMap", "pod", "cronjob", "", "Service"])
    where = rng.choice([["spec"], ["spec", "template", "spec"], ["spec", "jobTemplate", "spec", "template", "spec"]])
    leaf = rng.choice([POD_SPEC, {}, None, [], "spec", 5, {"containers": []}, {"ü": "名前"}])
    obj: dict[str, Any] = {"apiVersion": "v1", "metadata": {"name": rng.choice(NAMES)}}
    if kind or rng.random() < 0.5:
        obj["kind"] = kind
    if rng.random() < 0.9:
        obj.update(_nest(where, leaf))
    elif rng.random() < 0.5:
        obj["spec"] = rng.choice([None, [], "x", {"template": None}, {"jobTemplate": {"spec": 1}}])
    return obj
