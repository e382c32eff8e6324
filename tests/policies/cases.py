"""Generated inputs and replicated data for the differential test of the shipped policies.

Contracts:

* Everything is drawn from the ``random.Random`` passed in, so a seed fixes the
  whole case list (no other source of randomness).
* Generated values stay inside what production can send: annotation and label
  values are strings (the API server types them ``map[string]string``), a
  Cluster's ``status.region`` is a string when present (the CRD's schema), and
  the admission input is an object. Within that, anything goes: missing or
  ``null`` metadata/annotations, other kinds, malformed JSON in
  ``replica-set-preferences`` and JSON of the wrong type (``null``, a number, a
  string, an array) for the document or its ``clusters``, empty strings,
  unicode, and numbers at the edges — whole numbers with leading zeros, past
  2**53, past 2**64 - 1 and past the float range, as label and annotation text
  and as JSON numbers in preferences (``1e400``, ``-1e400``, ``1e-400`` and a
  401-digit integer among them).
* Every value goes with every kind, with or without the other constraint
  annotations, so a policy is also asked about values it should never read.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

__all__ = [
    "EU_KEY", "PCI_KEY", "PREFS_KEY", "SELECTOR_KEY", "SOURCE_KEY", "admission_input", "cluster", "placement_data",
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
# Number text at the edges: leading zeros (within and past 15 digits), past 2**53, around 2**64,
# past the float range.
BIG = ["007", "00", "000000000000003", "0000000000000003", "999999999999999", "1000000000000000",
       "9007199254740993", "9223372036854775808", "18446744073709551614", "18446744073709551615",
       "18446744073709551616", "1" + "0" * 30, "1" + "0" * 400, "1e400", "-1e400", "1e-400"]
PCI_LABELS = ["0", "1", "2", "3", "4", "10", "70", "", "abc", "-1", "1.5", " 2", "٣", "+1", "1e3", *BIG]
PCI_VALUES = ["0", "1", "2", "3", "4", "5", "10", "", "abc", "-1", "1.5", "0 7", "٣", "+1", " 2", "1e3", "true",
              "0x10", *BIG]
EU_VALUES = ["true", "false", "", "True", "TRUE", "yes", "1", " true", "true ", "ｔrue"]
SOURCE_VALUES = ["policy", "developer", "", "Policy"]
MALFORMED_JSON = ["", "{not json", "{", "}", "[}", "nul", "{'clusters': {}}", '{"clusters": {"a": 1,}}',
                  "\ufeff{}", '{"clusters": {}} trailing', " ", "{\"clusters\": {\"a\": NaN}}",
                  '{"clusters": 007}', '{"clusters": {"eu": {"weight": 01}}}',
                  '{"clusters": {"eu": {"weight": Infinity}}}']
ODD_JSON = ['{}', '{"clusters": {}}', '{"clusters": []}', '{"rebalance": true}', '{"clusters": {"eu": 5}}',
            '{"clusters": {"eu": null}}', ' {"clusters": {"europe": {}}} ', '{"clusters": {"eu": {}}, "clusters": {}}',
            '{"clusters": {"0": {"weight": 1}}}',
            # wrong types: the document, or its clusters
            "5", "null", "[1]", '"str"', "true", "1e400", '{"clusters": ["gce-europe-west1"]}',
            '{"clusters": [{"weight": 1}, {}]}', '{"clusters": null}', '{"clusters": 5}', '{"clusters": "eu"}',
            '{"clusters": true}', '{"clusters": 1e400}']
KINDS = ["Deployment", "ConfigMap", "Pod", "replicaset", "ReplicaSetList", "", "StatefulSet", "Secret", "Deployment",
         "ConfigMap", "Secret", "Service"]
SELECTOR_KEYS = [NAME_LABEL, PCI_LABEL, "tier", "example.com/zone", "Bad Key", "", "a/b/c"]
SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in", "==", "", "Equals"]
SELECTOR_VALUES = ["gold", "", "2", "007", "-1", "abc", "1" + "0" * 15, "-bad-", "x" * 64, "ü"]
ODD_SELECTORS = ["[]", "{}", "null", "5", '"str"', "[5]", "[null]", '[{"key": "tier"}]',
                 '[{"key": "tier", "operator": "In", "values": "gold"}]',
                 '[{"key": "tier", "operator": "In", "values": [1]}]',
                 '[{"key": "tier", "operator": "Exists", "values": null}]']
GT_LT_VALUES = ["0", "1", "2", "3", "02", "007", "18446744073709551616"]
NAMES = ["nginx", "web-1", "ünïcødé", "名前", "a" * 253, "0", "x.y", "🚀"]
NAMESPACES = ["default", "shop", "kube-system", "名前空間", "ns-ü"]


# JSON number text Python's json.dumps cannot write: out of the float range, or more precise than a float.
UNREPRESENTABLE = ["1e400", "-1e400", "1e-400", "1.00000000000000000001"]


def _number(rng: random.Random) -> int | float | str:
    """A JSON number for preferences: small, negative, fractional, large (past 2**64 - 1 and past the
    float range among them), or an :data:`UNREPRESENTABLE` text (as ``"@@<text>@@"``, see
    :func:`_preferences`)."""
    return rng.choice([
        rng.randint(0, 10), rng.randint(-5, 5), round(rng.uniform(0, 100), 3), 2 ** 53 + 1, 2 ** 62, 1e300,
        0.5, -0.0, 1.5e-10, 123456789012345678, 2 ** 64 - 1, 2 ** 64, -(2 ** 64), 10 ** 30, 10 ** 400,
        f"@@{rng.choice(UNREPRESENTABLE)}@@",
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
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]),
                      sort_keys=rng.random() < 0.5)
    return re.sub(r'"@@([^@"]*)@@"', r"\1", text)


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
            values = [rng.choice(GT_LT_VALUES)] if rng.random() < 0.8 else rng.sample(SELECTOR_VALUES, rng.randint(0, 2))
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


def _annotations(rng: random.Random, names: list[str]) -> dict[str, str]:
    """Annotations of a generated object: constraint, preference and unrelated keys, each maybe absent."""
    out: dict[str, str] = {}
    if rng.random() < 0.6:
        out[EU_KEY] = rng.choice(EU_VALUES)
    if rng.random() < 0.6:
        out[PCI_KEY] = rng.choice(PCI_VALUES)
    if rng.random() < 0.5:
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


def admission_input(rng: random.Random, names: list[str], *, kind: str | None = None,
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
        metadata["annotations"] = _annotations(rng, names)
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


def remediation_case(rng: random.Random, *, objects: int) -> tuple[dict[str, Any], list[Any]]:
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
        obj = admission_input(rng, names, kind=kind, namespace=ns, name=name)
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
