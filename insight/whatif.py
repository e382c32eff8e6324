"""``fedplace what-if``: what a proposed policy or cluster label change would do, before it is made.

    fedplace what-if --policy deploy/base/policies/policies.yaml --opa-url … [--max-moves 10]
    fedplace what-if --cluster-label 'cluster-7:tier=bronze'
    fedplace what-if --policy rules.rego --cluster-label 'gce-*:tier-' -o json

It copies the live OPA's state — every loaded module (bar ``package system``,
OPA's own configuration) and the replicated data under ``--replicate-path`` —
into an evaluator nobody else uses (:mod:`fedplace.insight.evaluate`: OPA in process, or
a scratch OPA), evaluates the admission decision for every workload, applies
the proposal there (modules the way opa-kube-sync loads them; label changes
on the copy of the clusters), evaluates again, and prints

* the modules that would not compile, with OPA's compiler errors (OPA keeps
  the version it has, as it would after the sync's PUT);
* the workloads that would move: their clusters before → after, for every
  kind placed — ReplicaSets (their replica-set-preferences), the kinds the
  policy places through the cluster selector (its requirements matched
  against the clusters' labels, before and after a label change) and
  Karmada's bindings (the clusters their fedplace.io/excluded-clusters
  leaves);
* the workloads that would be denied (and those no longer denied);
* other annotations the decisions would change;
* Karmada's bindings (``--resource-bindings``, ``--cluster-resource-bindings``)
  whose exclusions would change: the fedplace.io/excluded-clusters the
  placement decision computes for each, before → after, those that would
  exclude every cluster marked.

The live OPA is only read (``GET /v1/policies``, ``GET /v1/data/<root>``) and
no Kubernetes object is read or written. Workloads the policies cannot tell
apart (:mod:`fedplace.insight.inputs`) share one evaluation.

A proposed policy is given with ``--policy`` (repeatable):

* a YAML/JSON manifest with ConfigMaps (as deploy/ ships them): each one
  replaces the modules of the same ConfigMap in the policy namespace — ids
  ``<namespace>/<configmap>/<key>`` as opa-kube-sync loads them; keys it no
  longer has are deleted;
* ``ID=FILE``: that module id gets the file;
* a ``.rego`` file: the loaded module whose id ends in ``/<file name>`` (exactly
  one), else a new module ``what-if/<file name>``;
* a directory: each of its ``*.rego`` files but tests, as above.

The workloads are those of ``--resources``, by default ReplicaSets and every
replicated kind the policy places through the cluster selector (its setting
``selector_kinds``, as the live OPA has it).

Exit status (insight/command.py): 0; 1 when more workloads (bindings
included) would move than ``--max-moves`` or be newly denied than ``--max-denials`` (a binding that would
newly exclude every cluster counts as a denial: its workload could run
nowhere), more bindings' exclusions would change than
``--max-exclusion-changes`` (counts, or shares like ``5%``; all 0 by default),
or a proposed module would not compile; 2 on a usage or input error (nothing
proposed included); 3 when OPA cannot be reached.
"""

from __future__ import annotations

import argparse
import copy
import fnmatch
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO

from fedplace.common.annotations import canonical_value
from fedplace.common.opa_client import OpaClient
from fedplace.common.rules_contract import source_problems
from fedplace.insight.command import UsageError, guarded, warn
from fedplace.insight.evaluate import (
    BindingsEvaluator,
    Decision,
    Evaluator,
    EvaluatorUnavailable,
    ScratchOpaEvaluator,
    bindings_available,
    install_command,
    system_module,
)
from fedplace.insight.inputs import analyse, projection
from fedplace.insight.options import (
    DEFAULT_POLICY_NAMESPACE,
    add_data_arguments,
    add_opa_arguments,
    add_output_argument,
    check_namespace,
    check_token_file,
    decision_path,
    dump,
    http_url,
    opa_settings,
    prepare,
    read_documents,
    read_text,
    split_list,
)
from fedplace.insight.reasons import read_settings, settings_of
from fedplace.insight.view import (
    EXCLUDED,
    PREFS,
    SELECTOR,
    SELECTOR_SOURCE,
    SOURCE,
    WHY,
    cluster_entries,
    excluded_of,
    placed_plurals,
    template_key,
    template_text,
    workload_entry,
)

__all__ = ["DESCRIPTION", "EPILOG", "LabelChange", "PolicySource", "Proposal", "Snapshot", "Threshold", "Workload",
           "add_arguments", "bindings_of", "compare_bindings", "decide_workloads", "evaluate", "load_policies",
           "read_live", "read_proposal", "run"]

PROG = "fedplace what-if"
DESCRIPTION = """\
Show what a proposed policy change or cluster label change would do before it
is made: the workloads that would move to other clusters, those that would be
denied (or no longer denied), other annotations that would change, Karmada
bindings whose excluded clusters would change, and policy modules that would
not compile. The live OPA is only read: the proposal is tried on a copy of its
policies and data, and no Kubernetes object is read or changed."""
EPILOG = """\
examples:
  fedplace what-if --policy policies.yaml --opa-url https://opa.example:8181 --opa-token-file reader.token
  fedplace what-if --cluster-label 'cluster-7:tier=bronze'
  fedplace what-if --policy rules.rego --cluster-label 'gce-*:tier-' -o json
  fedplace what-if --policy policies.yaml --max-moves 2% --max-denials 0    (a CI gate)

--policy takes a manifest with policy ConfigMaps (each replaces the modules of
the ConfigMap of that name, as opa-kube-sync would load it), a .rego file
(replacing the loaded module of that file name, else added), ID=FILE (that
module), or a directory of .rego files. --cluster-label CLUSTER:KEY=VALUE sets
a label, CLUSTER:KEY- removes it; CLUSTER is a name or a glob such as 'gce-*'.

exit status: 0 within the thresholds; 1 more moves, new denials or exclusion
changes than the thresholds allow, or a module would not compile; 2 usage or
input error (nothing proposed included); 3 OPA cannot be reached."""

SHOWN = 8  # cluster names shown per side of a move in the table
_ANALYSES: dict[Any, Any] = {}  # the last analysis, by decision and module set


@dataclass(frozen=True)
class LabelChange:
    """``CLUSTER:KEY=VALUE`` sets a label, ``CLUSTER:KEY-`` removes it; CLUSTER may be a glob."""

    clusters: str
    key: str
    value: str | None

    @classmethod
    def parse(cls, spec: str) -> "LabelChange":
        name, sep, rest = spec.partition(":")
        if not sep or not name or not rest:
            raise argparse.ArgumentTypeError(f"expected CLUSTER:KEY=VALUE or CLUSTER:KEY-, got {spec!r}")
        if "=" in rest:
            key, _, value = rest.partition("=")
            if key:
                return cls(name, key, value)
        elif rest.endswith("-") and len(rest) > 1:
            return cls(name, rest[:-1], None)
        raise argparse.ArgumentTypeError(f"expected CLUSTER:KEY=VALUE or CLUSTER:KEY-, got {spec!r}")

    def __str__(self) -> str:
        return f"{self.clusters}:{self.key}" + ("-" if self.value is None else f"={self.value}")


@dataclass
class Threshold:
    """A count (``10``) or a share of the workloads (``5%``)."""

    count: int | None = None
    share: float | None = None

    @classmethod
    def parse(cls, value: str) -> "Threshold":
        try:
            if value.endswith("%"):
                share = float(value[:-1]) / 100
                if not 0 <= share <= 1:
                    raise ValueError
                return cls(share=share)
            count = int(value)
            if count < 0:
                raise ValueError
            return cls(count=count)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a count or a percentage, got {value!r}") from None

    def limit(self, total: int) -> float:
        return float(self.count) if self.count is not None else (self.share or 0.0) * total

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{(self.share or 0) * 100:g}%"


@dataclass
class Proposal:
    puts: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    labels: list[LabelChange] = field(default_factory=list)
    described: list[str] = field(default_factory=list)


@dataclass
class Snapshot:
    """What the live OPA holds: modules (id → source, ``system`` ones left out) and the replicated root."""

    modules: dict[str, str]
    data: dict[str, Any]
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Workload:
    resource: str
    namespace: str
    name: str
    obj: Mapping[str, Any]

    @property
    def title(self) -> str:
        kind = self.obj.get("kind") if isinstance(self.obj.get("kind"), str) else self.resource
        return f"{kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the proposal (at least one)")
    group.add_argument("--policy", action="append", default=[], metavar="FILE|ID=FILE|DIR",
                       help="a proposed policy: a manifest with ConfigMaps, a .rego file, ID=FILE, or a directory "
                            "of .rego files (repeatable)")
    group.add_argument("--cluster-label", action="append", default=[], type=LabelChange.parse,
                       metavar="CLUSTER:KEY=VALUE|CLUSTER:KEY-",
                       help="a proposed label change on the clusters matching CLUSTER, a name or a glob "
                            "(repeatable)")
    group.add_argument("--policy-namespace", default=DEFAULT_POLICY_NAMESPACE, metavar="NAMESPACE",
                       help=f"the namespace of ConfigMaps that name none (default {DEFAULT_POLICY_NAMESPACE})")
    gate = parser.add_argument_group("thresholds (exit 1 above them)")
    gate.add_argument("--max-moves", type=Threshold.parse, default=Threshold(count=0), metavar="N|P%",
                      help="exit 1 when more workloads would move — ReplicaSets, cluster-selector kinds and "
                           "Karmada bindings alike (a count or a share; default 0)")
    gate.add_argument("--max-denials", type=Threshold.parse, default=Threshold(count=0), metavar="N|P%",
                      help="exit 1 when more workloads would be newly denied, or Karmada bindings newly "
                           "exclude every cluster (default 0)")
    gate.add_argument("--max-exclusion-changes", type=Threshold.parse, default=Threshold(count=0), metavar="N|P%",
                      help="exit 1 when the excluded clusters of more Karmada bindings would change (default 0; "
                           "a share is of the bindings)")
    where = parser.add_argument_group("where to evaluate")
    where.add_argument("--evaluator", choices=["auto", "opa-bindings", "scratch-opa"], default="auto",
                       help="OPA inside this command (opa-bindings, when installed) or an OPA server of your own "
                            "(scratch-opa, with --scratch-opa-url); auto: the server when its URL is given, "
                            "else OPA inside this command")
    where.add_argument("--scratch-opa-url", type=http_url, metavar="URL",
                       help="an OPA server of your own to evaluate in (its policies and data are replaced; "
                            "never the live OPA)")
    where.add_argument("--scratch-opa-token-file", metavar="FILE", help="bearer token for --scratch-opa-url")
    add_output_argument(parser)
    add_data_arguments(parser)
    add_opa_arguments(parser)


# -- the proposal ----------------------------------------------------------------------


def _rego_files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.glob("*.rego") if not p.name.endswith("_test.rego") and p.is_file())
    except OSError as exc:
        raise UsageError(f"--policy {directory}: {exc.strerror or exc}") from None


def _module_for(path: Path, live_ids: Sequence[str]) -> str:
    matches = [m for m in live_ids if m == path.name or m.endswith("/" + path.name)]
    if len(matches) > 1:
        raise UsageError(f"--policy {path}: several loaded modules are called {path.name} ({', '.join(matches)}); "
                         "say which with ID=FILE")
    return matches[0] if matches else f"what-if/{path.name}"


@dataclass
class PolicySource:
    """One proposed policy, read and checked (:func:`load_policies`), before it is matched with
    the live modules: a module of a given id, a .rego file (its id from the loaded modules), or
    a ConfigMap (its modules ``prefix + key``)."""

    origin: str
    module_id: str | None = None  # ID=FILE
    path: Path | None = None  # a .rego file
    source: str = ""
    prefix: str = ""  # a ConfigMap: "<namespace>/<name>/"
    modules: dict[str, str] | None = None  # a ConfigMap: key -> source


def _configmap(doc: Mapping[str, Any], spec: str, policy_namespace: str) -> PolicySource:
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise UsageError(f"--policy {spec}: a ConfigMap without metadata.name")
    namespace = meta.get("namespace") or policy_namespace
    if not isinstance(namespace, str):
        raise UsageError(f"--policy {spec}: ConfigMap {meta['name']}: metadata.namespace must be a string")
    data = doc.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"--policy {spec}: ConfigMap {namespace}/{meta['name']}: data must be a mapping of "
                         f"module names to Rego, found a {type(data).__name__}")
    modules = {}
    for key, source in data.items():
        if not isinstance(source, str):
            raise UsageError(f"--policy {spec}: ConfigMap {namespace}/{meta['name']}: data.{key} must be a string "
                             f"(the module's Rego), found a {type(source).__name__}")
        modules[str(key)] = source
    return PolicySource(spec, prefix=f"{namespace}/{meta['name']}/", modules=modules)


def load_policies(policies: Sequence[str], policy_namespace: str = DEFAULT_POLICY_NAMESPACE) -> list[PolicySource]:
    """Every ``--policy`` read and checked (no server is asked); raises :class:`UsageError`."""
    out: list[PolicySource] = []
    for spec in policies:
        if not spec:
            raise UsageError("--policy: empty file name")
        module_id, sep, file = spec.partition("=")
        if sep and module_id and not Path(spec).exists():
            if not file:
                raise UsageError(f"--policy {spec}: expected ID=FILE")
            out.append(PolicySource(f"{module_id} from {file}", module_id=module_id,
                                    source=read_text(file, f"--policy {module_id}=")))
            continue
        path = Path(spec)
        if path.is_dir():
            files = _rego_files(path)
            if not files:
                raise UsageError(f"--policy {spec}: no .rego files in this directory (tests aside)")
            out += [PolicySource(str(f), path=f, source=read_text(str(f), "--policy")) for f in files]
        elif path.suffix == ".rego":
            out.append(PolicySource(str(path), path=path, source=read_text(spec, "--policy")))
        else:
            found = [_configmap(doc, spec, policy_namespace) for doc in read_documents(spec, "--policy")
                     if isinstance(doc, dict) and doc.get("kind") == "ConfigMap"]
            if not found:
                raise UsageError(f"--policy {spec}: no ConfigMap in it (and not a .rego file or a directory)")
            out += found
    problems = source_problems(pair for source in out for pair in _named_sources(source))
    if problems:
        raise UsageError("--policy breaks the placement-rules contract (docs/policies.md): " + "; ".join(problems))
    return out


def _named_sources(source: PolicySource) -> list[tuple[str, str]]:
    """(where, Rego source) of each module of one proposed policy, for messages."""
    if source.modules is not None:
        return [(f"{source.origin} ({source.prefix}{key})", raw) for key, raw in source.modules.items()]
    return [(str(source.path or source.origin), source.source)]


def resolve_proposal(sources: Sequence[PolicySource], labels: Sequence[LabelChange],
                     live_ids: Sequence[str]) -> Proposal:
    """The module changes (matched with the live modules) and label changes asked for."""
    out = Proposal(labels=list(labels))
    for src in sources:
        if src.modules is not None:
            for key, source in src.modules.items():
                out.puts[src.prefix + key] = source
            gone = [m for m in live_ids if m.startswith(src.prefix) and m[len(src.prefix):] not in src.modules]
            out.deletes += gone
            out.described.append(f"ConfigMap {src.prefix.rstrip('/')} ({len(src.modules)} modules"
                                 f"{f', {len(gone)} deleted' if gone else ''}) from {src.origin}")
        elif src.module_id is not None:
            out.puts[src.module_id] = src.source
            out.described.append(src.origin)
        else:
            assert src.path is not None
            mid = _module_for(src.path, live_ids)
            out.puts[mid] = src.source
            out.described.append(f"{mid} from {src.origin}")
    return out


def read_proposal(policies: Sequence[str], labels: Sequence[LabelChange], live_ids: Sequence[str],
                  policy_namespace: str) -> Proposal:
    """The module changes and label changes asked for; raises :class:`UsageError` (unreadable input)."""
    return resolve_proposal(load_policies(policies, policy_namespace), labels, live_ids)


def apply_labels(clusters: Mapping[str, Any], changes: Sequence[LabelChange]) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``clusters`` with the label changes made (objects copied only where changed), and
    the clusters touched; raises ValueError when a change matches no cluster."""
    out = dict(clusters)
    touched: list[str] = []
    for change in changes:
        names = [n for n in clusters if fnmatch.fnmatchcase(n, change.clusters)]
        if not names:
            raise UsageError(f"--cluster-label {change}: no replicated cluster matches {change.clusters!r}")
        for name in names:
            obj = out[name] = copy.deepcopy(out[name]) if out[name] is clusters[name] else out[name]
            if not isinstance(obj, dict):
                continue
            if not isinstance(obj.get("metadata"), dict):
                obj["metadata"] = {}
            meta = obj["metadata"]
            labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
            meta["labels"] = labels
            if change.value is None:
                labels.pop(change.key, None)
            else:
                labels[change.key] = change.value
            if name not in touched:
                touched.append(name)
    return out, touched


# -- reading and deciding ---------------------------------------------------------------


async def read_live(opa: OpaClient, root: str) -> Snapshot:
    """The live OPA's modules and replicated root (read only)."""
    modules: dict[str, str] = {}
    skipped: list[str] = []
    for p in await opa.list_policies():
        path = ((p.get("ast") or {}).get("package") or {}).get("path") or []
        if system_module([str(t.get("value")) for t in path[1:]]):
            skipped.append(p["id"])
        else:
            modules[p["id"]] = p.get("raw") or ""
    data = await opa.get_data([root])
    return Snapshot(modules, data if isinstance(data, dict) else {}, skipped)


def workloads_of(data: Mapping[str, Any], resources: Sequence[str]) -> list[Workload]:
    out: list[Workload] = []
    for plural in resources:
        collection = data.get(plural)
        if not isinstance(collection, dict):
            continue
        for namespace, objects in sorted(collection.items()):
            if isinstance(objects, dict):
                out += [Workload(plural, namespace, name, obj) for name, obj in sorted(objects.items())
                        if isinstance(obj, dict)]
    return out


def bindings_of(data: Mapping[str, Any], namespaced: str, cluster_scoped: str) -> list[Workload]:
    """Karmada's replicated bindings: ``{ns: {name: obj}}`` under ``namespaced``, ``{name: obj}``
    under ``cluster_scoped`` (namespace ""); a plural given as '' is skipped."""
    out = workloads_of(data, [namespaced]) if namespaced else []
    collection = data.get(cluster_scoped) if cluster_scoped else None
    if isinstance(collection, dict):
        out += [Workload(cluster_scoped, "", name, obj) for name, obj in sorted(collection.items())
                if isinstance(obj, dict)]
    return out


async def decide_workloads(evaluator: Evaluator, path: Sequence[str], objects: Sequence[Mapping[str, Any]],
                           asts: Mapping[str, Any] | None,
                           memo: dict[Any, str] | None = None) -> tuple[list[Decision], int]:
    """The decision for every object, each distinct projection evaluated once (insight/inputs.py),
    in an evaluator given only the data the decision reads; returns the decisions and how many
    evaluations it took. Without ``asts`` (no parser at hand) every object is evaluated. ``memo``
    keeps projections for another call on the same objects (the after side of a what-if)."""
    kinds = [obj.get("kind") if isinstance(obj.get("kind"), str) else None for obj in objects]
    data_paths = None
    analysis = None
    if asts is not None:
        # The same modules (before and after a label change): the same analysis, new answers.
        key = (tuple(path), frozenset(evaluator.modules.items())) if evaluator.modules else None
        analysis = (_ANALYSES.get(key) if key is not None else None) or analyse(asts, path)
        _ANALYSES.clear()
        if key is not None:
            _ANALYSES[key] = analysis
        guards = analysis.guards()
        analysis.learn(await evaluator.values(guards, analysis.data_reads([], guards)))
        data_paths = analysis.data_reads(set(kinds), guards)
    keys: list[str] = []
    first: dict[str, int] = {}
    memo = {} if memo is None else memo
    for i, obj in enumerate(objects):
        paths = analysis.paths(kinds[i]) if analysis is not None else None
        key = memo.get((i, paths))
        if key is None:
            key = memo[(i, paths)] = f"{kinds[i]}\0{projection(obj, paths)}"
        keys.append(key)
        first.setdefault(key, i)
    unique = list(first)
    decided = await evaluator.decide(path, [objects[first[k]] for k in unique], data_paths)
    by_key = dict(zip(unique, decided, strict=True))
    return [by_key[k] for k in keys], len(unique)


def _choose(args: argparse.Namespace) -> Evaluator:
    if args.evaluator == "scratch-opa" or (args.evaluator == "auto" and args.scratch_opa_url):
        if not args.scratch_opa_url:
            raise EvaluatorUnavailable("--evaluator scratch-opa needs --scratch-opa-url")
        settings = opa_settings(args)
        settings.url, settings.token_file = args.scratch_opa_url, args.scratch_opa_token_file
        return ScratchOpaEvaluator(settings, live_url=args.opa_url)
    if args.evaluator == "auto" and not bindings_available():
        raise EvaluatorUnavailable(f"no evaluator: install opa_bindings ({install_command()}) "
                                   "or give --scratch-opa-url")
    return BindingsEvaluator()


# -- comparing -----------------------------------------------------------------------------


PLACEMENT_ANNOTATIONS = (PREFS, SOURCE, SELECTOR, SELECTOR_SOURCE)


def _other_annotations(decision: Decision, placement_moved: bool) -> dict[str, str]:
    """The decision's annotations but those saying where the workload runs (the cluster selector's
    only when the placement moved: a selector rewritten to the same clusters still shows)."""
    skip = PLACEMENT_ANNOTATIONS if placement_moved else (PREFS, SOURCE)
    return {k: canonical_value(v) for k, v in decision.annotations.items() if k not in skip}


def placement_of(w: Workload, decision: Decision, clusters: Sequence[Mapping[str, Any]],
                 settings: Mapping[str, Any], memo: dict[Any, Any]) -> list[str] | None:
    """Where ``w`` runs once the decision's annotations are merged, read as the page reads it
    (:func:`fedplace.insight.view.workload_entry`): a ReplicaSet's replica-set-preferences, a
    cluster-selector kind's selector matched against ``clusters`` (page entries); None for any
    cluster. ``memo``: kept across the workloads of one side (before or after)."""
    meta = w.obj.get("metadata") if isinstance(w.obj.get("metadata"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    merged = {**annotations, **{k: canonical_value(v) for k, v in decision.annotations.items()}}
    obj = {**w.obj, "metadata": {**meta, "annotations": merged}}
    memo.setdefault("settings", settings_of(settings))
    return workload_entry(w.resource, obj, clusters, settings, memo)["placement"]


def _excluded(decision: Decision, clusters: Iterable[str]) -> list[str] | None:
    """The clusters (of ``clusters``) the decision excludes for a binding (its
    fedplace.io/excluded-clusters), or None."""
    return excluded_of(decision.annotations.get(EXCLUDED), clusters) if decision.error is None else None


def compare_bindings(bindings: Sequence[Workload], before: Sequence[Decision], after: Sequence[Decision],
                     clusters: Sequence[str]) -> list[dict[str, Any]]:
    """The bindings whose excluded clusters would change, with what is added and removed and
    whether every cluster is excluded before and after (of ``clusters``, the replicated ones)."""
    names = set(clusters)

    def every(excluded: list[str] | None) -> bool:
        return bool(names) and excluded is not None and names <= set(excluded)

    out = []
    for b, x, y in zip(bindings, before, after, strict=True):
        was, will = _excluded(x, names), _excluded(y, names)
        if was == will:
            continue
        why = y.annotations.get(WHY) if y.error is None else None
        out.append({"resource": b.resource, "kind": b.obj.get("kind"), "namespace": b.namespace, "name": b.name,
                    "template": template_text(template_key(b.obj)), "before": was, "after": will,
                    "added": sorted(set(will or ()) - set(was or ())),
                    "removed": sorted(set(was or ()) - set(will or ())),
                    "every_cluster_before": every(was), "every_cluster": every(will),
                    "why": why if isinstance(why, str) else None,
                    **({"error": y.error} if y.error is not None else {})})
    return out


def binding_moves(exclusions: Sequence[Mapping[str, Any]], clusters: Sequence[str]) -> list[dict[str, Any]]:
    """Each binding whose exclusions change, as a move: the clusters Karmada may schedule it on
    (the replicated ones its fedplace.io/excluded-clusters leaves) before → after; None while
    not decided."""
    def allowed(excluded: list[str] | None) -> list[str] | None:
        return None if excluded is None else sorted(set(clusters) - set(excluded))

    return [{"resource": e["resource"], "kind": e["kind"], "namespace": e["namespace"], "name": e["name"],
             "template": e["template"], "before": allowed(e["before"]), "after": allowed(e["after"])}
            for e in exclusions]


def compare(workloads: Sequence[Workload], before: Sequence[Decision], after: Sequence[Decision],
            clusters: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]] = ((), ()),
            settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Moves, new denials, denials lifted and other annotation changes of the workloads;
    ``clusters``: the page's cluster entries before and after the proposal (a cluster-selector
    kind's placement is its selector matched against them); ``settings``: the placement
    policy's (which kinds it places by the cluster selector)."""
    moves, denied, undenied, annotated = [], [], [], []
    memos: tuple[dict[Any, Any], dict[Any, Any]] = ({}, {})
    for w, b, a in zip(workloads, before, after, strict=True):
        item = {"resource": w.resource, "kind": w.obj.get("kind"), "namespace": w.namespace, "name": w.name}
        if a.denied and not b.denied:
            denied.append({**item, "errors": a.errors})
        elif b.denied and not a.denied:
            undenied.append({**item, "errors_before": b.errors})
        elif not a.denied:
            was = placement_of(w, b, clusters[0], settings or {}, memos[0])
            will = placement_of(w, a, clusters[1], settings or {}, memos[1])
            if was != will:
                moves.append({**item, "before": was, "after": will})
            old, new = _other_annotations(b, was != will), _other_annotations(a, was != will)
            changed = {k: {"before": old.get(k), "after": new.get(k)} for k in sorted(old.keys() | new.keys())
                       if old.get(k) != new.get(k)}
            if changed:
                annotated.append({**item, "annotations": changed})
    return {"moves": moves, "denied": denied, "undenied": undenied, "annotations": annotated,
            "still_denied": sum(1 for b, a in zip(before, after, strict=True) if b.denied and a.denied)}


async def evaluate(args: argparse.Namespace, err: TextIO, prog: str = PROG) -> dict[str, Any]:
    """The whole what-if (see the module docstring); raises OpaError, EvaluatorUnavailable, UsageError.
    The proposed files are read, and the evaluator found, before OPA is asked."""
    started = time.monotonic()
    root, path = args.replicate_path.strip("/"), decision_path(args)
    sources = load_policies(args.policy, args.policy_namespace)
    if not args.scratch_opa_url and args.evaluator != "scratch-opa" and not bindings_available():
        _choose(args)  # says what to install
    async with OpaClient(opa_settings(args)) as live:
        snapshot = await read_live(live, root)
        settings = await read_settings(live)
    read = time.monotonic()
    proposal = resolve_proposal(sources, args.cluster_label, list(snapshot.modules))
    clusters = snapshot.data.get(args.clusters_resource)
    clusters = clusters if isinstance(clusters, dict) else {}
    changed_clusters, touched = apply_labels(clusters, proposal.labels)
    resources = split_list(args.resources) if args.resources else placed_plurals(snapshot.data, settings)
    workloads = workloads_of(snapshot.data, resources)
    bindings = bindings_of(snapshot.data, args.resource_bindings, args.cluster_resource_bindings)
    # One list: workloads and bindings share the analysis and the evaluator's engines.
    objects = [w.obj for w in workloads] + [b.obj for b in bindings]

    evaluator = _choose(args)
    phases: dict[str, float] = {"read": read - started}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = now - mark
        mark = now

    try:
        broken = await evaluator.load(snapshot.modules, root, snapshot.data)
        if broken:
            warn(err, prog, "modules the live OPA holds do not load into the evaluator: " + ", ".join(sorted(broken)))
        phase("load")
        memo: dict[Any, str] = {}
        before, before_evals = await decide_workloads(evaluator, path, objects, await evaluator.parse(), memo)
        failed = next((d.error for d in before if d.error is not None), None)
        if failed is not None:
            warn(err, prog, f"the current policies fail to evaluate in {evaluator.name} for some workloads "
                            f"(counted as denied): {failed}")
        phase("before")
        compile_errors = await evaluator.change(proposal.puts, proposal.deletes)
        if touched:
            await evaluator.set_data(root, {**snapshot.data, args.clusters_resource: changed_clusters})
        phase("change")
        after, after_evals = await decide_workloads(evaluator, path, objects, await evaluator.parse(), memo)
        phase("after")
    finally:
        await evaluator.close()
    phase("close")
    n = len(workloads)
    result = compare(workloads, before[:n], after[:n], (cluster_entries(clusters), cluster_entries(changed_clusters)),
                     settings)
    exclusions = compare_bindings(bindings, before[n:], after[n:], sorted(changed_clusters))
    result["moves"] += binding_moves(exclusions, sorted(changed_clusters))
    phase("compare")
    total = len(workloads) + len(bindings)  # what --max-moves and --max-denials shares are of
    stranded = sum(1 for e in exclusions if e["every_cluster"] and not e["every_cluster_before"])
    denials = len(result["denied"]) + stranded
    over = []
    if len(result["moves"]) > args.max_moves.limit(total):
        over.append(f"{len(result['moves'])} moves > --max-moves {args.max_moves}")
    if denials > args.max_denials.limit(total):
        of_them = f" ({stranded} of them bindings excluding every cluster)" if stranded else ""
        over.append(f"{denials} new denials{of_them} > --max-denials {args.max_denials}")
    if len(exclusions) > args.max_exclusion_changes.limit(len(bindings)):
        over.append(f"{len(exclusions)} binding exclusion changes > --max-exclusion-changes "
                    f"{args.max_exclusion_changes}")
    if compile_errors:
        over.append(f"{len(compile_errors)} module(s) would not compile")
    return {
        **result,
        "exclusions": exclusions,
        "compile_errors": {m: e for m, e in sorted(compile_errors.items())},
        "proposal": {"modules": proposal.described, "deleted": proposal.deletes,
                     "cluster_labels": [str(c) for c in proposal.labels], "clusters_changed": touched},
        "summary": {"workloads": len(workloads), "bindings": len(bindings), "clusters": len(clusters),
                    "evaluator": evaluator.name,
                    "evaluations": {"before": before_evals, "after": after_evals},
                    "skipped_modules": snapshot.skipped,
                    "seconds": {**{k: round(v, 3) for k, v in phases.items()},
                                "total": round(time.monotonic() - started, 3)},
                    "over_threshold": over},
    }


# -- printing -------------------------------------------------------------------------------


def _names(clusters: list[str] | None) -> str:
    if clusters is None:
        return "(any cluster)"
    if not clusters:
        return "(none)"
    shown = ", ".join(clusters[:SHOWN])
    return shown + (f", … {len(clusters) - SHOWN} more" if len(clusters) > SHOWN else "")


def _move(before: list[str] | None, after: list[str] | None) -> str:
    text = f"{_names(before)} → {_names(after)}"
    if before is not None and after is not None:
        gone, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
        diff = [f"-{c}" for c in gone[:SHOWN]] + [f"+{c}" for c in new[:SHOWN]]
        if len(gone) + len(new) > len(diff):
            diff.append("…")
        text += f"   ({' '.join(diff)})"
    return text


def _excluded_names(clusters: list[str] | None) -> str:
    return "(not decided)" if clusters is None else _names(clusters)


def _exclusion(e: Mapping[str, Any]) -> str:
    text = f"excluded {_excluded_names(e['before'])} → {_excluded_names(e['after'])}"
    diff = [f"+{c}" for c in e["added"][:SHOWN]] + [f"-{c}" for c in e["removed"][:SHOWN]]
    if len(e["added"]) + len(e["removed"]) > len(diff):
        diff.append("…")
    if diff:
        text += f"   ({' '.join(diff)})"
    if e["every_cluster"] and not e["every_cluster_before"]:
        text += "   EVERY CLUSTER EXCLUDED: the workload could run nowhere"
    elif e["every_cluster_before"] and not e["every_cluster"]:
        text += "   (no longer every cluster)"
    return text


def render(doc: dict[str, Any], out: TextIO) -> None:
    s = doc["summary"]
    p = doc["proposal"]
    karmada = f", {s['bindings']} Karmada bindings" if s.get("bindings") else ""
    out.write(f"What-if: {len(p['modules'])} policy change(s), {len(p['cluster_labels'])} cluster label change(s); "
              f"{s['workloads']} workloads{karmada} over {s['clusters']} clusters\n")
    for line in p["modules"]:
        out.write(f"  policy: {line}\n")
    for line in p["cluster_labels"]:
        out.write(f"  label:  {line}\n")
    if p["clusters_changed"]:
        out.write(f"  clusters changed: {_names(p['clusters_changed'])}\n")
    ev = s["evaluations"]
    out.write(f"Evaluated with {s['evaluator']}: {ev['before']} + {ev['after']} distinct inputs, "
              f"{s['seconds']['total']:.2f} s\n")
    if doc["compile_errors"]:
        out.write(f"\nWould not compile ({len(doc['compile_errors'])}; OPA keeps the version it has):\n")
        for module_id, errors in doc["compile_errors"].items():
            out.write(f"  {module_id}\n")
            for e in errors:
                loc = e.get("location") or {}
                where = ":".join(str(loc[k]) for k in ("file", "row", "col") if loc.get(k) is not None)
                out.write(f"    {where + ': ' if where else ''}{e.get('code', '')}: {e.get('message', '')}\n")
    sections = (("Would move", "moves", lambda m: _move(m["before"], m["after"])),
                ("Would be denied", "denied", lambda m: "; ".join(m["errors"])),
                ("No longer denied", "undenied", lambda m: "was: " + "; ".join(m["errors_before"])),
                ("Other annotations would change", "annotations",
                 lambda m: "; ".join(f"{k}: {v['before']!r} → {v['after']!r}" for k, v in m["annotations"].items())))
    if s.get("bindings"):
        sections += (("Binding exclusions would change", "exclusions", _exclusion),)
    for title, key, describe in sections:
        items = doc[key]
        out.write(f"\n{title} ({len(items)})" + (":\n" if items else "\n"))
        for m in items:
            where = f"{m['namespace']}/{m['name']}" if m["namespace"] else m["name"]
            template = f" ({m['template']})" if m.get("template") else ""
            out.write(f"  {m['kind'] or m['resource']} {where}{template}: {describe(m)}\n")
    if doc["still_denied"]:
        out.write(f"\n{doc['still_denied']} workload(s) denied before and after\n")
    verdict = "; ".join(s["over_threshold"]) if s["over_threshold"] else "within the thresholds"
    out.write(f"\nResult: {verdict}\n")


def check(args: argparse.Namespace) -> None:
    """What can be refused before OPA is asked (raises :class:`UsageError`)."""
    if not args.policy and not args.cluster_label:
        raise UsageError("nothing proposed: give --policy FILE and/or --cluster-label CLUSTER:KEY=VALUE")
    check_namespace(args.policy_namespace, "--policy-namespace")
    if args.evaluator == "scratch-opa" and not args.scratch_opa_url:
        raise UsageError("--evaluator scratch-opa needs --scratch-opa-url")
    if args.evaluator == "opa-bindings" and args.scratch_opa_url:
        raise UsageError("--scratch-opa-url is for --evaluator scratch-opa (or auto), not opa-bindings")
    if args.scratch_opa_token_file is not None and not args.scratch_opa_url:
        raise UsageError("--scratch-opa-token-file is for --scratch-opa-url")
    check_token_file(args.scratch_opa_token_file, "--scratch-opa-token-file")


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    prog = getattr(args, "prog", PROG)
    prepare(args, prog, err)
    check(args)
    doc = await evaluate(args, err, prog=prog)
    if args.output in ("json", "yaml"):
        out.write(dump(doc, args.output) + "\n")
    else:
        render(doc, out)
    return 1 if doc["summary"]["over_threshold"] else 0


async def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command (exit status as the module docstring says; every error one line on ``err``)."""
    return await guarded(getattr(args, "prog", PROG), _run, args, out, err)
