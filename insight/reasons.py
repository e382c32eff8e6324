"""Where a workload may run and why, per cluster, for the placement page's cells.

The placement rules are Rego only (the placement-rules contract,
policies/federation/contract.rego, and the rule sets loaded beside it): this
module knows none of them. For each workload the page holds the rules' answer
(``data.io.k8s.federation.page.answer``, policies/federation/page.rego, asked by
:mod:`fedplace.insight.rules`): whether some rule set constrains it, its
malformed-request errors, its requirements in words, and every cluster some rule
forbids with each failed requirement or forbid (requirement id, what it
requires, the cluster's value, rule set, who imposed it). A cell's state and
reason come from that answer, the placement annotation the workload carries, and
what the developer asked for.

What the policy's settings change (module ``io.k8s.federation.placement.settings``:
``selector_kinds``, ``cluster_name_label``, ``control_plane``) is in :data:`DEFAULT_SETTINGS`;
:func:`read_settings` asks OPA for the values in force (opa-kube-sync does after every policy
load).

* :func:`parse_selector`, :func:`requirement_matches`, :func:`selected`: the
  ``federation.alpha.kubernetes.io/cluster-selector`` annotation read with Kubernetes
  label-selector semantics, to show where a workload runs and the developer's choice (the
  decision itself is selector.rego's);
* :func:`selector_words`: a selector in words (``tier is gold; clusters eu-1, eu-2``);
* :class:`Rule`: one workload's answer and choices, and per cluster the state of its cell and why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["ALLOWED", "DEFAULT_SETTINGS", "NOT_ALLOWED", "PLACED", "PLACED_FORBIDDEN", "Rule", "answer_asks",
           "parse_selector", "read_settings", "reason_text", "requirement_matches", "requirement_words", "rules_key",
           "selected", "selector_words", "settings_of"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

DEFAULT_SETTINGS: dict[str, Any] = {
    # selector.rego's defaults (docs/policies.md, "Other kinds: the cluster selector")
    "selector_kinds": sorted(["Deployment", "StatefulSet", "DaemonSet", "Job", "ConfigMap", "Secret", "Service",
                              "Ingress"]),
    "cluster_name_label": "fedplace.io/cluster-name",
    "control_plane": "federation-v1",
    "from": "the policy's defaults",
}

# The cell states, as the page marks them.
PLACED = "placed"  # runs there, and the policy allows it
PLACED_FORBIDDEN = "forbidden"  # runs there, but the policy does not allow it now
ALLOWED = "allowed"  # the policy allows it; not used
NOT_ALLOWED = "no"  # neither


def settings_of(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """``value`` over :data:`DEFAULT_SETTINGS` (a view may come from an older sync)."""
    out = dict(DEFAULT_SETTINGS)
    if isinstance(value, Mapping):
        out.update({k: v for k, v in value.items() if k in DEFAULT_SETTINGS and v is not None})
    return out


async def read_settings(opa: Any) -> dict[str, Any]:
    """The placement settings in force, asked of OPA (``opa``: a :class:`fedplace.common.opa_client.OpaClient`):
    one small query (POST, without input: what opa-kube-sync's token may do) per setting, the
    values the rules of ``data.io.k8s.federation.placement`` hold. A value OPA does not give (the
    federation ConfigMaps not loaded) keeps its default; malformed ``selector_kinds`` place no
    other kind, as the policy says. Raises what the client raises when OPA cannot be asked."""
    root = "io/k8s/federation/placement/"
    out = dict(DEFAULT_SETTINGS, **{"from": "OPA"})
    kinds = await opa.query(root + "selector_kinds_collection")
    if isinstance(kinds, list) and all(isinstance(k, str) for k in kinds):
        out["selector_kinds"] = sorted(kinds)
    if await opa.query(root + "settings_errors"):
        out["selector_kinds"] = []  # malformed settings: the policy places no kind but ReplicaSet
    for name in ("cluster_name_label", "control_plane"):
        value = await opa.query(root + name)
        if isinstance(value, str) and value:
            out[name] = value
    return out


# -- the cluster selector ---------------------------------------------------------------------


def _whole_number(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9]{1,15}", value) is not None


def parse_selector(value: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The requirements of a cluster-selector annotation value (``(None, None)`` when absent),
    each ``{"key", "operator", "values"}``; or ``(None, why)`` when it is not one the policy reads
    (the policy then denies the object)."""
    if value is None:
        return None, None
    if not isinstance(value, str):
        return None, "not a string"
    try:
        doc = json.loads(value)
    except ValueError:
        return None, "not valid JSON"
    if not isinstance(doc, list):
        return None, "not a list of requirements"
    out = []
    for i, r in enumerate(doc, 1):
        if not isinstance(r, dict) or not isinstance(r.get("key"), str) or not r["key"]:
            return None, f"requirement {i} has no key"
        op = r.get("operator")
        if op not in OPERATORS:
            return None, f"requirement {i} ({r['key']}): operator {json.dumps(op)} is not one of {', '.join(OPERATORS)}"
        values = r.get("values")
        values = [] if values is None else values
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None, f"requirement {i} ({r['key']}): values must be a list of strings"
        if op in ("In", "NotIn") and not values:
            return None, f"requirement {i} ({r['key']}): {op} needs a value"
        if op in ("Gt", "Lt") and (len(values) != 1 or not _whole_number(values[0])):
            return None, f"requirement {i} ({r['key']}): {op} needs one whole number"
        if op in ("Exists", "DoesNotExist") and values:
            return None, f"requirement {i} ({r['key']}): {op} takes no values"
        out.append({"key": r["key"], "operator": op, "values": list(values)})
    return out, None


def requirement_matches(r: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics (selector.rego's ``requirement_matches``): ``NotIn`` and
    ``DoesNotExist`` match a cluster without the label; ``Gt`` and ``Lt`` need a whole number."""
    op, key, values = r["operator"], r["key"], r.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    value = labels.get(key)
    if not _whole_number(value) or not values or not _whole_number(values[0]):
        return False
    return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])


def selected(requirements: Sequence[Mapping[str, Any]], clusters: Sequence[Mapping[str, Any]]) -> list[str]:
    """The clusters (view entries: ``name``, ``labels``) every requirement admits, sorted."""
    return sorted(c["name"] for c in clusters if all(requirement_matches(r, c["labels"]) for r in requirements))


def _list(values: Sequence[str], limit: int | None = None) -> str:
    if limit is not None and len(values) > limit:
        return ", ".join(values[:limit]) + f" … +{len(values) - limit}"
    return ", ".join(values)


def requirement_words(r: Mapping[str, Any], name_label: str, limit: int | None = None) -> str:
    """One requirement in words: ``tier is gold``, ``clusters eu-1, eu-2`` (the name label);
    at most ``limit`` values named."""
    key, op, values = r["key"], r["operator"], list(r.get("values") or [])
    if key == name_label and op == "In":
        return ("cluster " if len(values) == 1 else "clusters ") + _list(values, limit)
    if key == name_label and op == "NotIn":
        return "not cluster" + ("s " if len(values) > 1 else " ") + _list(values, limit)
    if op == "In":
        return f"{key} is {values[0]}" if len(values) == 1 else f"{key} is one of {_list(values, limit)}"
    if op == "NotIn":
        return f"{key} is not {values[0]}" if len(values) == 1 else f"{key} is none of {_list(values, limit)}"
    if op == "Exists":
        return f"has label {key}"
    if op == "DoesNotExist":
        return f"no label {key}"
    return f"{key} {'>' if op == 'Gt' else '<'} {values[0] if values else '?'}"


def selector_words(requirements: Sequence[Mapping[str, Any]] | None, name_label: str,
                   limit: int | None = None) -> str:
    """A whole selector in words; the name label's requirement last."""
    if requirements is None:
        return "no cluster selector (any cluster)"
    if not requirements:
        return "an empty cluster selector (any cluster)"
    ordered = sorted(requirements, key=lambda r: r["key"] == name_label)
    return "; ".join(requirement_words(r, name_label, limit) for r in ordered)


# What identifies one object rather than what it asks: left out of the key objects share an answer by.
_IDENTITY = frozenset({"name", "generateName", "uid", "resourceVersion", "creationTimestamp", "generation",
                       "managedFields", "ownerReferences", "selfLink", "deletionTimestamp"})


def rules_key(obj: Mapping[str, Any]) -> str:
    """The object as the placement rules see it, less what identifies one object (name, uid,
    resource version, timestamps, owners) and its status: objects with the same key get the
    same answer from the placement rules (:mod:`fedplace.insight.rules`)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    doc = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    doc["metadata"] = {k: v for k, v in meta.items() if k not in _IDENTITY}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)



# -- the placement rules' answer, per cluster ----------------------------------------------------------


def reason_text(reason: Mapping[str, Any]) -> str:
    """One failed requirement or forbid of the contract (``cluster_reasons``: ``set``, ``id``,
    ``requires``, ``imposed_by``, ``value``) in words: the requirement, what it requires, the
    cluster's value, its rule set and who imposed it."""
    value = reason.get("value")
    shown = "none" if value is None or value == "" else value if isinstance(value, str) else json.dumps(value)
    requires = f" {reason['requires']}" if reason.get("requires") else ""
    return (f"{reason.get('id')} ✗{requires} (the cluster has {shown}; rule set {reason.get('set')}, "
            f"imposed by {reason.get('imposed_by')})")


def answer_asks(answer: Mapping[str, Any] | None) -> bool:
    """Whether the placement rules constrain the object: some rule set requires or forbids
    something of its clusters, its request is malformed, or they gave no answer (an answer not
    asked yet, or undecidable: it fails closed)."""
    return answer is None or bool(answer.get("asks") or answer.get("errors") or answer.get("error"))


@dataclass(frozen=True)
class Rule:
    """What the placement rules say about one workload (all workloads of a matrix row share it),
    and what the developer asked for.

    ``via``: ``"replica-set-preferences"``, ``"cluster-selector"`` or None (not placed by the
    policy: every cluster is allowed). ``answer``: the index of the placement rules' answer for
    the workload in the view's ``rules`` (:mod:`fedplace.insight.rules`), or None when it has
    none yet. ``developer``: for the cluster selector, the developer's requirements (those on
    other labels, and those on the name label unless the policy wrote them); for
    replica-set-preferences, the clusters the developer named (source not policy).
    """

    via: str | None
    answer: int | None
    developer_selector: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    developer_clusters: tuple[str, ...] | None = None

    def constrained(self, answers: Sequence[Mapping[str, Any]]) -> bool:
        return self.via is not None and answer_asks(self.rules(answers))

    def rules(self, answers: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        return answers[self.answer] if self.answer is not None and 0 <= self.answer < len(answers) else None

    @staticmethod
    def of(workload: Mapping[str, Any], settings: Mapping[str, Any]) -> "Rule":
        """The rule of a view's workload entry (:func:`fedplace.insight.view.workload_entry`)."""
        via = workload.get("via")
        name_label = settings["cluster_name_label"]
        dev_sel: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
        dev_clusters = None
        if via == "cluster-selector" and workload.get("selector"):
            policy_wrote = workload.get("source") == "policy"
            dev_sel = tuple((r["key"], r["operator"], tuple(r.get("values") or ())) for r in workload["selector"]
                            if not (policy_wrote and r["key"] == name_label))
        elif via == "replica-set-preferences" and workload.get("source") != "policy" and workload.get("placement"):
            dev_clusters = tuple(workload["placement"])
        return Rule(via=via, answer=workload.get("rules"), developer_selector=dev_sel,
                    developer_clusters=dev_clusters)

    def checks(self, cluster: Mapping[str, Any], settings: Mapping[str, Any],
               answers: Sequence[Mapping[str, Any]]) -> tuple[bool, bool, list[tuple[bool, str]]]:
        """``(allowed by the policy, chosen by the developer, the checks)`` for one cluster (a view
        entry: ``name``, ``labels``); each check ``(ok, in words)``: the placement rules' reasons
        (each failed requirement and forbid, from the contract), the name label the cluster
        selector selects by, each developer requirement, then whether the developer's
        replica-set-preferences name the cluster."""
        labels = cluster["labels"]
        out: list[tuple[bool, str]] = []
        if self.via is not None:
            answer = self.rules(answers)
            if answer is None:
                out.append((False, "the placement rules have not been asked about it yet"))
            elif answer.get("error"):
                out.append((False, f"the placement rules give no answer ({answer['error']}): it fails closed"))
            elif answer.get("errors"):
                out.append((False, "its placement request is malformed: " + "; ".join(answer["errors"])))
            else:
                reasons = (answer.get("forbidden") or {}).get(cluster["name"]) or ()
                out += [(False, reason_text(r)) for r in reasons]
                if not reasons and answer.get("asks"):
                    out.append((True, f"placement rules ✓ ({answer.get('requires') or 'no requirement'})"))
        if self.via == "cluster-selector" and self.constrained(answers):
            name_label = settings["cluster_name_label"]
            value = labels.get(name_label)
            if value == cluster["name"]:
                out.append((True, f"{name_label} ✓"))
            else:
                out.append((False, f"{name_label} {'missing' if value is None else f'names {value}'} ✗ "
                                   "(the policy cannot select this cluster)"))
        allowed = all(ok for ok, _ in out)
        chosen = True
        for key, op, values in self.developer_selector:
            ok = requirement_matches({"key": key, "operator": op, "values": list(values)}, labels)
            chosen &= ok
            has = f" ({key} {labels[key]})" if key in labels and key != settings["cluster_name_label"] else ""
            text = requirement_words({"key": key, "operator": op, "values": values}, settings["cluster_name_label"], 6)
            out.append((ok, f"the developer's selector: {text}{has} {'✓' if ok else '✗'}"))
        if self.developer_clusters is not None:
            ok = cluster["name"] in self.developer_clusters
            chosen &= ok
            out.append((ok, "named by the developer's replica-set-preferences ✓" if ok
                        else "not named by the developer's replica-set-preferences"))
        return allowed, chosen, out

    def cell(self, cluster: Mapping[str, Any], placed: bool, denied: bool, settings: Mapping[str, Any],
             answers: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
        """``(state, why)`` of the workload's cell for ``cluster``; ``placed``: it runs there."""
        allowed, chosen, checks = self.checks(cluster, settings, answers)
        words = [text for _, text in checks]
        if not self.constrained(answers):
            words.insert(0, "no placement rule constrains it: every cluster is allowed")
        why = "; ".join(words)
        if placed and allowed:
            return PLACED, f"runs here — {why}"
        if placed:
            left = " (its decision denies now: left where it was)" if denied else " (not re-placed yet)"
            return PLACED_FORBIDDEN, f"runs here, but the policy does not allow it now{left} — {why}"
        if allowed and not chosen:
            return ALLOWED, f"allowed by the policy, not chosen by the developer — {why}"
        if allowed:
            pending = ("its decision denies now" if denied
                       else "its placement annotation does not name it: older than the policy or the cluster's labels")
            return ALLOWED, f"allowed, not used ({pending}) — {why}"
        if not chosen:
            return NOT_ALLOWED, f"not chosen by the developer, not allowed — {why}"
        return NOT_ALLOWED, f"not allowed — {why}"
