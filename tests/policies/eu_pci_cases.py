"""Generated (object, clusters) cases for the EU/PCI differential (tests/policies/test_eu_pci_differential.py).

Contracts:

* Everything is drawn from the ``random.Random`` passed in: a seed fixes every case.
* :func:`data_set` — one ``data.kubernetes`` (0–40 clusters, and the Karmada
  templates its bindings name) and the objects decided over it: ReplicaSets,
  kinds placed through the cluster selector, and ResourceBindings of Karmada
  templates (some not replicated). Clusters carry their region in
  ``status.region`` or ``spec.region`` (both, neither; any case; sometimes not a
  string) and a ``pci-compliance-level`` label (whole numbers with and without
  leading zeros, past 15 digits, non-numeric, empty, missing, sometimes not a
  string). Objects carry the EU annotation (``true``, ``false``, malformed,
  absent) and the PCI one (whole numbers, malformed, absent), and sometimes a
  developer's replica-set-preferences or cluster selector
  (tests/policies/cases.py's, which also makes odd metadata).
* :func:`requirement_texts` — the requirements in words as the pre-contract
  policies wrote them and as the EU/PCI rule set writes them, for an object's
  annotations: the one difference between the two the differential forgives.
* No generated name or value holds ``(``, ``)`` or ``;``: the differential reads
  cluster names back out of a why's list of cluster values (:func:`cluster_value_names`).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from tests.policies import cases

__all__ = ["DataSet", "cluster_value_names", "data_set", "requirement_texts", "template_of"]

EU_KEY, PCI_KEY, PCI_LABEL, NAME_LABEL = cases.EU_KEY, cases.PCI_KEY, cases.PCI_LABEL, cases.NAME_LABEL
EU_MALFORMED = ["True", "TRUE", "yes", "1", "", " true", "false "]
PCI_WHOLE = ["0", "1", "2", "3", "4", "5", "03", "007", "00", "10", "999999999999999", "000000000000002"]
PCI_MALFORMED = ["abc", "-1", "1.5", "", " 2", "+1", "1e3", "0x10", "٣", "1000000000000000", "9007199254740993"]
LABEL_WHOLE = ["0", "1", "2", "3", "4", "5", "6", "02", "003", "10", "70", "000000000000004", "999999999999999"]
LABEL_ODD = ["", "abc", "-1", "1.5", " 3", "+2", "٣", "1e3", "1000000000000000", "18446744073709551616"]
NON_STRINGS: list[Any] = [5, 3.5, True, False, None, ["eu-west-1"], {"region": "eu-west-1"}]
REGION_CASES = [str.lower, str.upper, str.title, lambda s: s]
SELECTOR_KINDS = ["Deployment", "StatefulSet", "DaemonSet", "Job", "ConfigMap", "Secret", "Service", "Ingress"]
TEMPLATE_KINDS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ConfigMap": "configmaps",
                  "Service": "services", "ReplicaSet": "replicasets"}
NAMESPACES = ["shop", "web", "default"]
# Mostly few clusters (the cost of a case grows with them), up to 40.
CLUSTER_COUNTS = [0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 28, 40]


@dataclass
class DataSet:
    """One ``data.kubernetes`` document and the objects decided over it; ``kinds`` counts them by
    what they are ("ReplicaSet", "selector", "binding")."""

    kubernetes: dict[str, Any]
    objects: list[dict[str, Any]]
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def clusters(self) -> dict[str, Any]:
        return self.kubernetes["clusters"]


def _region(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice(NON_STRINGS)
    return rng.choice(REGION_CASES)(rng.choice(cases.REGIONS))


def cluster(rng: random.Random, name: str) -> dict[str, Any]:
    """A Federation v1 or Karmada Cluster with a region somewhere (or none) and maybe a PCI label."""
    obj: dict[str, Any] = {"apiVersion": rng.choice(["federation.fedplace.io/v1beta1", "cluster.karmada.io/v1alpha1"]),
                           "kind": "Cluster", "metadata": {"name": name}}
    labels: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.55:
        labels[PCI_LABEL] = rng.choice(LABEL_WHOLE)
    elif roll < 0.75:
        labels[PCI_LABEL] = rng.choice(LABEL_ODD)
    elif roll < 0.8:
        labels[PCI_LABEL] = rng.choice([3, 7, None, True])
    if rng.random() < 0.7:
        labels[NAME_LABEL] = name if rng.random() < 0.9 else rng.choice(cases.CLUSTER_NAMES)
    if rng.random() < 0.4:
        labels["tier"] = rng.choice(["gold", "silver", ""])
    if labels or rng.random() < 0.5:
        obj["metadata"]["labels"] = labels
    roll = rng.random()
    if roll < 0.5:
        obj["status"] = {"region": _region(rng)}
    elif roll < 0.75:
        obj["spec"] = {"region": _region(rng), "provider": "aws"}
    elif roll < 0.85:  # both: status.region wins
        obj["status"] = {"region": _region(rng)}
        obj["spec"] = {"region": _region(rng)}
    elif roll < 0.92:
        obj["status"] = {}
    return obj


def _constraints(rng: random.Random) -> dict[str, str]:
    out: dict[str, str] = {}
    roll = rng.random()
    if roll < 0.4:
        out[EU_KEY] = "true"
    elif roll < 0.55:
        out[EU_KEY] = "false"
    elif roll < 0.62:
        out[EU_KEY] = rng.choice(EU_MALFORMED)
    roll = rng.random()
    if roll < 0.5:
        out[PCI_KEY] = rng.choice(PCI_WHOLE)
    elif roll < 0.58:
        out[PCI_KEY] = rng.choice(PCI_MALFORMED)
    return out


def _with_constraints(rng: random.Random, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (tests/policies/cases.py's) with its EU and PCI annotations drawn again, when it has
    annotations at all."""
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        for key in (EU_KEY, PCI_KEY):
            annotations.pop(key, None)
        annotations.update(_constraints(rng))
    return obj


def _placement(rng: random.Random, names: list[str]) -> Any:
    """A binding's spec.placement: empty, one clusterAffinity, clusterAffinities terms, or absent."""
    def some_names() -> list[str]:
        return rng.sample(names, rng.randint(0, min(3, len(names)))) + (["zz-user"] if rng.random() < 0.2 else [])

    roll = rng.random()
    if roll < 0.3:
        return {}
    if roll < 0.7:
        affinity: dict[str, Any] = {"exclude": some_names()}
        if rng.random() < 0.3:
            affinity["clusterNames"] = some_names()
        return {"clusterAffinity": affinity}
    if roll < 0.95:
        return {"clusterAffinities": [{"affinityName": f"t{i}", "exclude": some_names()}
                                      for i in range(rng.randint(1, 2))]}
    return None


def _binding(rng: random.Random, names: list[str], kubernetes: dict[str, Any]) -> dict[str, Any]:
    """A ResourceBinding of a template that is replicated (mostly) or not."""
    kind = rng.choice(list(TEMPLATE_KINDS))
    namespace, name = rng.choice(NAMESPACES), f"t{rng.randint(0, 10 ** 6)}"
    if rng.random() < 0.92:
        template = _with_constraints(rng, cases.admission_input(rng, names, kind=kind, namespace=namespace, name=name))
        template.setdefault("metadata", {"name": name, "namespace": namespace})
        kubernetes.setdefault(TEMPLATE_KINDS[kind], {}).setdefault(namespace, {})[name] = template
    binding: dict[str, Any] = {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": f"{name}-{kind.lower()}", "namespace": namespace},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": kind, "namespace": namespace, "name": name}},
    }
    placement = _placement(rng, names)
    if placement is not None:
        binding["spec"]["placement"] = placement
    if rng.random() < 0.15:  # decided before
        excluded = rng.sample(names, rng.randint(0, len(names)))
        binding["metadata"]["annotations"] = {"fedplace.io/excluded-clusters": json.dumps(excluded)}
    return binding


def data_set(rng: random.Random, objects: int) -> DataSet:
    """Clusters (0–40) and ``objects`` objects decided over them (see the module docstring)."""
    count = rng.choice(CLUSTER_COUNTS) if rng.random() < 0.8 else rng.randint(0, 40)
    names = [f"c{i:02d}" for i in range(count)]
    for i, extra in enumerate(rng.sample(cases.CLUSTER_NAMES, min(count, rng.randint(0, 4)))):
        names[i] = extra
    kubernetes: dict[str, Any] = {"clusters": {n: cluster(rng, n) for n in names}}
    out = DataSet(kubernetes, [])
    for _ in range(objects):
        roll = rng.random()
        if roll < 0.4:
            what, obj = "ReplicaSet", _with_constraints(rng, cases.admission_input(rng, names, kind="ReplicaSet"))
        elif roll < 0.7:
            kind = rng.choice(SELECTOR_KINDS)
            what, obj = "selector", _with_constraints(rng, cases.admission_input(rng, names, kind=kind))
        else:
            what, obj = "binding", _binding(rng, names, kubernetes)
        out.objects.append(obj)
        out.kinds[what] = out.kinds.get(what, 0) + 1
    return out


def template_of(binding: dict[str, Any], kubernetes: dict[str, Any]) -> dict[str, Any] | None:
    """The replicated template a generated binding names, if any."""
    resource = binding["spec"]["resource"]
    plural = TEMPLATE_KINDS.get(resource["kind"], "")
    return kubernetes.get(plural, {}).get(resource["namespace"], {}).get(resource["name"])


_WHOLE = re.compile(r"[0-9]{1,15}")


def requirement_texts(obj: Any) -> tuple[str, str]:
    """(pre-contract text, rule-set text) of the requirements ``obj``'s annotations make: e.g.
    ("EU jurisdiction required: true, PCI compliance level >= 2",
    "EU jurisdiction required, PCI compliance level >= 2"). A malformed PCI level counts as 0 in both."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    annotations = annotations if isinstance(annotations, dict) else {}
    eu = annotations.get(EU_KEY) == "true"
    pci = annotations.get(PCI_KEY)
    level = int(pci) if isinstance(pci, str) and _WHOLE.fullmatch(pci) else 0
    old = f"EU jurisdiction required: {'true' if eu else 'false'}, PCI compliance level >= {level}"
    parts = (["EU jurisdiction required"] if eu else []) + \
        ([f"PCI compliance level >= {level}"] if PCI_KEY in annotations else [])
    return old, ", ".join(sorted(parts))


def cluster_value_names(values: str) -> list[str]:
    """The cluster names of a why's list of cluster values, e.g. "a (region x, pci-compliance-level 1);
    b (label pci-compliance-level: 1; region y); and 3 more" → ["a", "b", "and 3 more"]."""
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(values):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and values.startswith("; ", i):
            entries.append(values[start:i])
            start = i + 2
    entries.append(values[start:])
    return [e.split(" (", 1)[0] for e in entries]
