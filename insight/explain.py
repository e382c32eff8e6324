"""``fedplace explain``: the decision about one object, and per cluster why.

    fedplace explain -f rs.yaml --opa-url …
    fedplace explain replicaset payments -n shop --opa-url …      (kubectl's TYPE NAME)
    fedplace explain -n shop deployment/storefront --context prod --opa-url …
    fedplace explain -n shop resourcebinding/storefront-deployment --kubeconfig … --opa-url …

Asks OPA two read-only questions about the object (as admission sees it): the
decision (``--decision-path``, the webhook's ``data.io.k8s.federation.admission``:
annotations, patch, errors) and the explanation the policies expose beside it
(``--explain-path``, ``data.io.k8s.federation.explain.packs``: per pack, the
requirements and, per cluster, each requirement with the cluster's value and
the required one — docs/policies.md, "The explanation contract"; a failed
check of a placement rule also names its requirement id, its rule set and who
imposed it). Prints, for example

    ReplicaSet shop/payments: admitted
      federation.kubernetes.io/replica-set-preferences = {"clusters":{"gce-west1":{"weight":1}},"rebalance":true}
    placement: gpu a100, tier gold: 1 of 4 clusters eligible
      requires: gold: tier gold (reads label tier; rule set tiers, imposed by namespace); gpu: gpu a100 (…)
      ✓ gce-west1  selected  label tier gold ✓ tier gold; label gpu a100 ✓ gpu a100
      ✗ aws-east1            label tier silver ✗ tier gold [gold: rule set tiers, imposed by namespace]; …

A Karmada binding (``resourcebinding``/``rb``, ``clusterresourcebinding``/``crb``)
is explained from its template (policies/karmada/karmada_explain.rego): per cluster
each requirement with the cluster's value and whether the decision excludes
it, and per exclude list of the binding what it has and what it would get.

Exit status (insight/command.py): 0; 1 with ``--fail-on-denial`` when the
decision denies; 2 on a usage or input error (the object not found included);
3 when OPA or the API server cannot be reached.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping, Sequence, TextIO

import aiohttp

from fedplace.common.annotations import canonical_value
from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from fedplace.common.opa_client import OpaClient
from fedplace.common.secrets import without_secret_content
from fedplace.insight.command import Unreachable, UsageError, guarded
from fedplace.insight.evaluate import Decision
from fedplace.insight.options import (
    DECISION,
    add_kube_arguments,
    add_opa_arguments,
    add_output_argument,
    check_name,
    check_namespace,
    client_config,
    data_path,
    dump,
    namespace_of,
    opa_settings,
    prepare,
    read_documents,
    seconds,
)

__all__ = ["DESCRIPTION", "EPILOG", "EXPLAIN", "KINDS", "add_arguments", "explain", "render", "resolve_type",
           "run"]

PROG = "fedplace explain"
DESCRIPTION = """Show what the placement policies decide about one object, and why: the
decision the admission webhook would make (admitted or denied, the annotations
and changes it adds) and, for every cluster, whether the object may run there
and which requirement each cluster meets or misses. The object is read from
the cluster (TYPE NAME, as kubectl takes it) or from a file (-f). OPA is only
asked; nothing is changed."""
EPILOG = """examples:
  fedplace explain replicaset payments -n shop
  fedplace explain rs/payments --context prod
  fedplace explain -f rs.yaml -o json
  kubectl get rs payments -o yaml | fedplace explain -f -

TYPE is a kind as kubectl names it (replicaset or rs, deployment or deploy,
statefulset, daemonset, job, cronjob, pod, configmap, secret, service,
ingress, and Karmada's resourcebinding or rb, clusterresourcebinding or crb,
propagationpolicy or pp, clusterpropagationpolicy or cpp).

exit status: 0 done; 1 the decision denies (with --fail-on-denial);
2 usage or input error (the object not found included); 3 OPA or the
Kubernetes API server cannot be reached."""

EXPLAIN = "io/k8s/federation/explain/packs"

# kubectl's names for the kinds a federation places (singular, plural, short) → resource.
KINDS: dict[str, Resource] = {}
_KIND_NAMES = (
    (("replicaset", "replicasets", "rs"), Resource("apps", "v1", "replicasets")),
    (("deployment", "deployments", "deploy"), Resource("apps", "v1", "deployments")),
    (("statefulset", "statefulsets", "sts"), Resource("apps", "v1", "statefulsets")),
    (("daemonset", "daemonsets", "ds"), Resource("apps", "v1", "daemonsets")),
    (("job", "jobs"), Resource("batch", "v1", "jobs")),
    (("cronjob", "cronjobs", "cj"), Resource("batch", "v1", "cronjobs")),
    (("pod", "pods", "po"), Resource("", "v1", "pods")),
    # Placed through the cluster selector (policies/federation/selector.rego).
    (("configmap", "configmaps", "cm"), Resource("", "v1", "configmaps")),
    (("secret", "secrets"), Resource("", "v1", "secrets")),
    (("service", "services", "svc"), Resource("", "v1", "services")),
    (("ingress", "ingresses", "ing"), Resource("networking.k8s.io", "v1", "ingresses")),
    # Karmada (policies/karmada/): the bindings the webhook narrows, and the policies it may deny.
    (("resourcebinding", "resourcebindings", "rb"), Resource("work.karmada.io", "v1alpha2", "resourcebindings")),
    (("clusterresourcebinding", "clusterresourcebindings", "crb"),
     Resource("work.karmada.io", "v1alpha2", "clusterresourcebindings", namespaced=False)),
    (("propagationpolicy", "propagationpolicies", "pp"),
     Resource("policy.karmada.io", "v1alpha1", "propagationpolicies")),
    (("clusterpropagationpolicy", "clusterpropagationpolicies", "cpp"),
     Resource("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", namespaced=False)),
)
for _names, _res in _KIND_NAMES:
    for _n in _names:
        KINDS[_n] = _res


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", nargs="*", metavar="TYPE NAME | TYPE/NAME",
                        help="the object to read from the cluster, e.g. replicaset payments or rs/payments")
    parser.add_argument("-f", "--filename", metavar="FILE",
                        help="read the object from a YAML or JSON file instead (- for standard input)")
    add_output_argument(parser)
    parser.add_argument("--fail-on-denial", action="store_true", help="exit 1 when the decision denies the object")
    parser.add_argument("--decision-path", type=data_path, default=DECISION, metavar="PATH",
                        help=f"the webhook's decision in OPA (default {DECISION})")
    parser.add_argument("--explain-path", type=data_path, default=EXPLAIN, metavar="PATH",
                        help=f"the explanation the policies give beside it (default {EXPLAIN})")
    parser.add_argument("--request-timeout", type=seconds, default=30.0, metavar="SECONDS",
                        help="how long to wait for the Kubernetes API server (default 30; 30s, 1m also work)")
    add_opa_arguments(parser)
    add_kube_arguments(parser, namespace_help="the object's namespace (default: the kubeconfig context's "
                                              "namespace; with -f, filled in when the file has none)")


def resolve_type(text: str) -> tuple[str, Resource]:
    """kubectl's TYPE: a name of :data:`KINDS`, any case, optionally with its group
    (``replicasets.apps``, ``rb.work.karmada.io``) or version and group (``deployments.v1.apps``)."""
    name, _, qualifier = text.lower().partition(".")
    res = KINDS.get(name)
    if res is not None and qualifier in ("", res.group, f"{res.version}.{res.group}".strip(".")):
        return name, res
    kinds = sorted(names[0] for names, _ in _KIND_NAMES)
    raise UsageError(f"unknown TYPE {text!r}: expected one of {', '.join(kinds)} (or their plurals and short names)")


def object_reference(words: Sequence[str]) -> tuple[str, Resource, str, str]:
    """``TYPE NAME`` or ``TYPE/NAME`` → (what the user wrote, resource, type, name)."""
    if len(words) == 1:
        kind, sep, name = words[0].partition("/")
        if not sep:
            raise UsageError(f"{words[0]!r}: expected TYPE NAME or TYPE/NAME, e.g. replicaset payments")
        if not kind or not name:
            raise UsageError(f"{words[0]!r}: expected TYPE/NAME, e.g. rs/payments")
    elif len(words) == 2 and "/" not in words[0]:
        kind, name = words
    else:
        raise UsageError(f"{' '.join(words)!r}: explain takes one object, as TYPE NAME or TYPE/NAME")
    kind, res = resolve_type(kind)
    return f"{kind}/{name}", res, kind, check_name(name)


async def read_object(args: argparse.Namespace) -> dict[str, Any]:
    """The object to explain; raises :class:`UsageError` (and the errors of the API server)."""
    if bool(args.filename) == bool(args.object):
        raise UsageError("give the object as TYPE NAME (or TYPE/NAME), or -f FILE" if not args.filename
                         else "give either -f FILE or TYPE NAME, not both")
    if args.filename:
        return _from_file(args)
    text, res, kind, name = object_reference(args.object)
    namespace = namespace_of(args) if res.namespaced else None
    where = f" in namespace {namespace}" if namespace else ""
    config = client_config(args)
    api = await config.api_client()
    try:
        obj = await kube_json(api, "GET", res.object_path(name, namespace), timeout=args.request_timeout)
    except KubeApiError as exc:
        if exc.status == 404:
            raise UsageError(f"cannot read {text}{where}: not found") from None
        raise KubeApiError(exc.status, exc.reason, f"cannot read {text}{where}: {exc.message}", exc.body) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else f"{exc.__class__.__name__}: {exc}"
        raise Unreachable(f"cannot reach the Kubernetes API server {api.configuration.host} "
                          f"({config.source}): {reason}") from None
    finally:
        await api.close()
    if not isinstance(obj, dict):
        raise Unreachable(f"cannot read {text}{where}: the API server's answer is not an object")
    obj.setdefault("kind", obj.get("kind") or kind)
    obj.setdefault("apiVersion", res.api_version)
    return obj


def _from_file(args: argparse.Namespace) -> dict[str, Any]:
    docs = list(read_documents(args.filename))
    objects = [d for d in docs if isinstance(d, dict)]
    name = "standard input" if args.filename == "-" else args.filename
    if len(objects) != 1 or len(docs) != 1:
        raise UsageError(f"{name}: expected one object (a YAML or JSON mapping), found "
                         + (f"{len(objects)} objects" if len(objects) != 1 else f"{len(docs)} documents"))
    obj = objects[0]
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise UsageError(f"{name}: metadata must be a mapping")
    if args.namespace is not None:  # kubectl's rule for -f: -n fills the namespace in, or must agree with it
        check_namespace(args.namespace)
        res = KINDS.get(str(obj.get("kind", "")).lower())
        own = (meta or {}).get("namespace")
        if own and own != args.namespace:
            raise UsageError(f"{name}: the object's namespace {own!r} does not match -n {args.namespace}")
        if not own and (res is None or res.namespaced):
            obj["metadata"] = {**(meta or {}), "namespace": args.namespace}
    return obj


async def explain(opa: OpaClient, obj: Mapping[str, Any], decision_path: str = DECISION,
                  explain_path: str = EXPLAIN) -> dict[str, Any]:
    """``{"object", "decision", "explanation"}``: OPA's two answers (None when undefined).
    A Secret is sent without its content (:mod:`fedplace.common.secrets`). Both are asked with
    strict builtin errors, as the webhook asks: a rule failing on this object raises
    :class:`~fedplace.common.opa_client.OpaEvaluationError` rather than explaining a decision
    the webhook would not take."""
    obj = without_secret_content(dict(obj))
    decision = await opa.query(decision_path, obj, strict=True)
    packs = await opa.query(explain_path, obj, strict=True)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    return {"object": {"kind": text(obj.get("kind")), "namespace": text(meta.get("namespace")),
                       "name": text(meta.get("name"))},
            "decision": decision, "explanation": packs if isinstance(packs, dict) else None}


def _list(value: Any) -> list[Any]:
    """A list from OPA's answer, or none (the answer of another path than the policies' may be anything)."""
    return value if isinstance(value, list) else []


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in _list(value) if isinstance(v, dict)]


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "(none)"
    return value if isinstance(value, str) else canonical_value(value)


def _origin(entry: Mapping[str, Any]) -> str:
    """Who imposed a placement rule and which rule set holds it (the contract's ``imposed_by``
    and ``set``), in words; empty for a check that names neither."""
    parts = ([f"rule set {entry['set']}"] if entry.get("set") else []) + (
        [f"imposed by {entry['imposed_by']}"] if entry.get("imposed_by") else [])
    return ", ".join(parts)


def _check(c: Mapping[str, Any]) -> str:
    """One check of a cluster: the cluster's value of what it reads, ✓ or ✗, what is required;
    a failed check of a placement rule also names the rule (its requirement id), its rule set
    and who imposed it."""
    mark = "✓" if c.get("ok") else "✗"
    text = f"{c.get('label') or c.get('requirement', '')} {_shown(c.get('value'))} {mark} {c.get('required', '')}"
    text = text.strip()
    origin = _origin(c)
    if not c.get("ok") and origin:
        text += f" [{c.get('requirement')}: {origin}]"
    return text + (f" ({c['note']})" if c.get("note") else "")


def _requirement(r: Mapping[str, Any]) -> str:
    """One requirement of the object: its id, what it requires, of which cluster property, where
    it comes from, its rule set and who imposed it."""
    name, label, required = r.get("name"), r.get("label"), r.get("required", "")
    text = f"{name}: {required}" if name and (r.get("set") or r.get("imposed_by")) else f"{label or name} {required}"
    details = [d for d in (f"reads {label}" if label and name and (r.get("set") or r.get("imposed_by")) else "",
                           str(r.get("source") or ""), _origin(r)) if d]
    return text.strip() + (f" ({'; '.join(details)})" if details else "")


def _cluster_order(item: tuple[str, Mapping[str, Any]]) -> tuple[int, str]:
    name, entry = item
    return (0 if entry.get("selected") else 1 if entry.get("eligible") else 2), name


def _names(names: Any) -> str:
    if names is None:
        return "(none)"
    if not isinstance(names, list):
        return canonical_value(names)
    return ", ".join(str(n) for n in names) if names else "(none)"


def _exclusions(ex: Mapping[str, Any], out: TextIO) -> None:
    """A binding's exclusions (the karmada pack): the excluded clusters it has and the decision
    gives, and each exclude list of its placement before → after the decision's patch."""
    if "excluded" not in ex:
        return
    if ex.get("every_cluster_excluded"):
        out.write("  ! every cluster excluded: the workload can run nowhere\n")
    out.write(f"  excluded clusters: the binding has {_names(ex.get('annotated'))} (fedplace.io/excluded-clusters); "
              f"the decision gives {_names(ex.get('excluded'))}\n")
    lists = _dicts(ex.get("exclusions"))
    if not lists:
        out.write("  exclude lists: none, and the decision adds none\n")
    for entry in lists:
        change = [f"+{c}" for c in _list(entry.get("added"))] + [f"-{c}" for c in _list(entry.get("removed"))]
        parts = [" ".join(change)] if change else ["unchanged"]
        if entry.get("policy"):
            parts.append(f"policy: {_names(entry['policy'])}")
        if entry.get("user"):
            parts.append(f"the binding's own: {_names(entry['user'])}")
        out.write(f"  exclude list {entry.get('list')}: {_names(entry.get('has'))} → {_names(entry.get('after'))}"
                  f"   ({'; '.join(parts)})\n")


def render(doc: Mapping[str, Any], out: TextIO) -> None:
    o = doc["object"]
    title = f"{o.get('kind') or 'object'} {o.get('namespace') + '/' if o.get('namespace') else ''}{o.get('name') or '(no name)'}"
    decision = Decision(value=doc["decision"])
    out.write(f"{title}: {'DENIED' if decision.denied else 'admitted'}\n")
    for e in decision.errors:
        out.write(f"  error: {e}\n")
    if decision.denied and decision.annotations:
        out.write("  annotations the decision also holds (not applied: the request is denied):\n")
    for k, v in sorted(decision.annotations.items()):
        out.write(f"  {k} = {canonical_value(v)}\n")
    value = doc["decision"] if isinstance(doc["decision"], dict) else {}
    patches = _list(value.get("patch")) + [op for ops in _dict(value.get("patches")).values() for op in _list(ops)]
    for op in patches:
        if isinstance(op, dict):
            out.write(f"  patch: {op.get('op')} {op.get('path')}"
                      f"{' = ' + canonical_value(op['value']) if 'value' in op else ''}\n")
    for event in _list(value.get("events")):
        if isinstance(event, dict):
            about = event.get("object") if isinstance(event.get("object"), dict) else {}
            where = f"{about.get('namespace')}/{about.get('name')}" if about.get("namespace") else about.get("name")
            out.write(f"  event: {event.get('type', '')} {event.get('reason', '')} on {about.get('kind', '')} "
                      f"{where}: {event.get('message', '')}\n")
    packs = doc.get("explanation")
    if not packs:
        out.write("\nThe loaded policies expose no explanation (data.io.k8s.federation.explain.packs is undefined).\n")
        return
    for pack, ex in sorted(packs.items()):
        if not isinstance(ex, dict):
            continue
        out.write(f"\n{pack}: {ex.get('summary') or ''}\n")
        if not ex.get("applies", True):
            continue
        reqs = [_requirement(r) for r in _dicts(ex.get("requirements"))]
        if reqs:
            out.write("  requires: " + "; ".join(reqs) + "\n")
        for c in _dicts(ex.get("checks")):
            out.write(f"  {'✓' if c.get('ok') else '✗'} {_check(c)}\n")
        for warning in _list(ex.get("warnings")):
            out.write(f"  ! {warning}\n")
        _exclusions(ex, out)
        rows = []
        clusters = {str(k): v for k, v in _dict(ex.get("clusters")).items() if isinstance(v, dict)}
        for name, entry in sorted(clusters.items(), key=_cluster_order):
            flags = ["selected"] if entry.get("selected") else []
            if entry.get("requested") is not None:
                flags.append("requested" if entry["requested"] else "not requested")
            flags += [str(f) for f in _list(entry.get("flags"))]
            rows.append(("✓" if entry.get("eligible") else "✗", name, ", ".join(flags),
                         "; ".join(_check(c) for c in _dicts(entry.get("checks")))))
        width = [max((len(r[i]) for r in rows), default=0) for i in (1, 2)]
        for mark, name, flags, checks in rows:
            out.write(f"  {mark} {name.ljust(width[0])}  {flags.ljust(width[1])}  {checks}".rstrip() + "\n")


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    prepare(args, getattr(args, "prog", PROG), err)
    obj = await read_object(args)
    async with OpaClient(opa_settings(args)) as opa:
        doc = await explain(opa, obj, args.decision_path, args.explain_path)
    if args.output in ("json", "yaml"):
        out.write(dump(doc, args.output) + "\n")
    else:
        render(doc, out)
    return 1 if args.fail_on_denial and Decision(value=doc["decision"]).denied else 0


async def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command (exit status as the module docstring says; every error one line on ``err``)."""
    return await guarded(getattr(args, "prog", PROG), _run, args, out, err)
