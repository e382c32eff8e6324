"""``fedplace explain``: the decision about one object, and per cluster why.

    fedplace explain -f rs.yaml --opa-url …
    fedplace explain -n shop replicaset/payments --kubeconfig … --opa-url …
    fedplace explain -n shop deployment/storefront --kubeconfig … --opa-url …
    fedplace explain -n shop resourcebinding/storefront-deployment --kubeconfig … --opa-url …

Asks OPA two read-only questions about the object (as admission sees it): the
decision (``--decision-path``, the webhook's ``data.io.k8s.federation.admission``:
annotations, patch, errors) and the explanation the policies expose beside it
(``--explain-path``, ``data.io.k8s.federation.explain.packs``: per pack, the
requirements and, per cluster, each requirement with the cluster's value and
the required one — docs/policies.md, "The explanation contract"). Prints

    ReplicaSet shop/payments: admitted
      federation.kubernetes.io/replica-set-preferences = {"clusters":{"gce-europe-west1":{"weight":1}},"rebalance":true}
    placement: EU jurisdiction required: true, PCI compliance level >= 2: 1 of 4 clusters eligible
      requires: region EU (annotation …: "true"); PCI >= 2 (annotation …: "2")
      ✓ gce-europe-west1  selected  region europe-west1 ✓ EU; PCI 2 ✓ >= 2
      ✗ aws-eu-central-1            region eu-central-1 ✓ EU; PCI 1 ✗ >= 2

A Karmada binding (``resourcebinding``/``rb``, ``clusterresourcebinding``/``crb``)
is explained from its template (policies/karmada/karmada_explain.rego): per cluster
each requirement with the cluster's value and whether the decision excludes
it, and per exclude list of the binding what it has and what it would get.

Exit status: 0; 1 with ``--fail-on-denial`` when the decision denies; 2 on a
usage error or when the object or OPA's answer cannot be had.
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping, TextIO

from fedplace.common.annotations import canonical_value
from fedplace.common.kube_client import KubeApiError, Resource, kube_json, new_api_client
from fedplace.common.opa_client import OpaClient, OpaError
from fedplace.common.secrets import without_secret_content
from fedplace.insight.evaluate import Decision
from fedplace.insight.options import (DECISION, add_kube_arguments, add_opa_arguments, dump, opa_settings,
                                      read_documents)

__all__ = ["EXPLAIN", "KINDS", "add_arguments", "explain", "render", "run"]

EXPLAIN = "io/k8s/federation/explain/packs"

# kubectl's names for the kinds a federation places (singular, plural, short) → resource.
KINDS: dict[str, Resource] = {}
for _names, _res in (
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
):
    for _n in _names:
        KINDS[_n] = _res


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("object", nargs="?", metavar="TYPE/NAME",
                        help="read the object from the API server, e.g. replicaset/payments (with -n)")
    parser.add_argument("-f", "--filename", metavar="FILE", help="the object from a YAML/JSON file (- for stdin)")
    parser.add_argument("-n", "--namespace", default="default", help="the object's namespace (default: default)")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")
    parser.add_argument("--fail-on-denial", action="store_true", help="exit 1 when the decision denies")
    parser.add_argument("--decision-path", default=DECISION, metavar="PATH", help="the admission decision")
    parser.add_argument("--explain-path", default=EXPLAIN, metavar="PATH", help="the explanation document")
    add_opa_arguments(parser)
    add_kube_arguments(parser)


async def read_object(args: argparse.Namespace) -> dict[str, Any]:
    """The object to explain; raises ValueError (usage), OSError, KubeApiError."""
    if bool(args.filename) == bool(args.object):
        raise ValueError("give either -f FILE or TYPE/NAME")
    if args.filename:
        docs = [d for d in read_documents(args.filename) if isinstance(d, dict)]
        if len(docs) != 1:
            raise ValueError(f"{args.filename}: expected one object, found {len(docs)}")
        return docs[0]
    kind, sep, name = args.object.partition("/")
    res = KINDS.get(kind.lower())
    if not sep or not name or res is None:
        raise ValueError(f"{args.object!r}: expected TYPE/NAME with TYPE one of {', '.join(sorted(KINDS))}")
    api = await new_api_client(args.kubeconfig)
    try:
        obj = await kube_json(api, "GET", res.object_path(name, args.namespace))
    finally:
        await api.close()
    obj.setdefault("kind", obj.get("kind") or kind)
    obj.setdefault("apiVersion", res.api_version)
    return obj


async def explain(opa: OpaClient, obj: Mapping[str, Any], decision_path: str = DECISION,
                  explain_path: str = EXPLAIN) -> dict[str, Any]:
    """``{"object", "decision", "explanation"}``: OPA's two answers (None when undefined).
    A Secret is sent without its content (:mod:`fedplace.common.secrets`)."""
    obj = without_secret_content(dict(obj))
    decision = await opa.query(decision_path, obj)
    packs = await opa.query(explain_path, obj)
    meta = obj.get("metadata") or {}
    return {"object": {"kind": obj.get("kind"), "namespace": meta.get("namespace"), "name": meta.get("name")},
            "decision": decision, "explanation": packs if isinstance(packs, dict) else None}


def _check(c: Mapping[str, Any]) -> str:
    mark = "✓" if c.get("ok") else "✗"
    value = c.get("value")
    shown = value if isinstance(value, str) else canonical_value(value)
    text = f"{c.get('label') or c.get('requirement', '')} {shown} {mark} {c.get('required', '')}".strip()
    return text + (f" ({c['note']})" if c.get("note") else "")


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
    lists = [entry for entry in ex.get("exclusions") or [] if isinstance(entry, dict)]
    if not lists:
        out.write("  exclude lists: none, and the decision adds none\n")
    for entry in lists:
        change = [f"+{c}" for c in entry.get("added") or []] + [f"-{c}" for c in entry.get("removed") or []]
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
    patches = [*(value.get("patch") or [])] + [op for ops in (value.get("patches") or {}).values() for op in ops or []]
    for op in patches:
        if isinstance(op, dict):
            out.write(f"  patch: {op.get('op')} {op.get('path')}"
                      f"{' = ' + canonical_value(op['value']) if 'value' in op else ''}\n")
    for event in value.get("events") or []:
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
        reqs = [f"{r.get('label') or r.get('name')} {r.get('required', '')}".strip()
                + (f" ({r['source']})" if r.get("source") else "") for r in ex.get("requirements") or []]
        if reqs:
            out.write("  requires: " + "; ".join(reqs) + "\n")
        for c in ex.get("checks") or []:
            out.write(f"  {'✓' if c.get('ok') else '✗'} {_check(c)}\n")
        _exclusions(ex, out)
        rows = []
        for name, entry in sorted((ex.get("clusters") or {}).items(), key=_cluster_order):
            flags = ["selected"] if entry.get("selected") else []
            if entry.get("requested") is not None:
                flags.append("requested" if entry["requested"] else "not requested")
            flags += [str(f) for f in entry.get("flags") or []]
            rows.append(("✓" if entry.get("eligible") else "✗", name, ", ".join(flags),
                         "; ".join(_check(c) for c in entry.get("checks") or [])))
        width = [max((len(r[i]) for r in rows), default=0) for i in (1, 2)]
        for mark, name, flags, checks in rows:
            out.write(f"  {mark} {name.ljust(width[0])}  {flags.ljust(width[1])}  {checks}".rstrip() + "\n")


async def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        obj = await read_object(args)
    except (ValueError, OSError) as exc:
        err.write(f"fedplace explain: {exc}\n")
        return 2
    except KubeApiError as exc:
        err.write(f"fedplace explain: cannot read {args.object} in {args.namespace}: {exc}\n")
        return 2
    try:
        async with OpaClient(opa_settings(args)) as opa:
            doc = await explain(opa, obj, args.decision_path, args.explain_path)
    except OpaError as exc:
        err.write(f"fedplace explain: OPA: {exc}\n")
        return 2
    if args.output == "json":
        out.write(dump(doc) + "\n")
    else:
        render(doc, out)
    return 1 if args.fail_on_denial and Decision(value=doc["decision"]).denied else 0
