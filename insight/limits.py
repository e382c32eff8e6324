"""``fedplace-limits``: the effective limits of a namespace, and who breaks them now.

``kubectl describe limitrange`` prints one LimitRange as stored. This shows
what the LimitRange pack makes of all of a namespace's LimitRanges together —
every Container and Pod bound, the defaults as the API server stores them
(a default may come from a max, a default request from a min) and which of
them containers actually get when several LimitRanges name the same resource
— and then every replicated workload of the namespace checked against them
now: the violations the webhook would answer, and the defaults it would add.
It asks OPA (``data.io.k8s.federation.limitrange.view.report``, computed from
the pack's own rules and the data opa-kube-sync replicates), so what it shows
is what the webhook decides.

    fedplace-limits --namespace shop --opa-url http://127.0.0.1:8181 --opa-token-file token
    fedplace-limits -n shop --output json
    fedplace-limits                 (the kubeconfig context's namespace)
    fedplace-limits -A              (every namespace with replicated LimitRanges)

Exit status (insight/command.py): 0; 1 with ``--fail-on-violations`` when a
workload violates a limit; 2 on a usage error or when OPA has no answer (the
pack not loaded); 3 when OPA cannot be reached. It is also ``fedplace limits``
(:mod:`fedplace.insight.cli`), built from the same :func:`add_arguments` and
:func:`run`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence, TextIO

from fedplace.common.opa_client import OpaClient, OpaError, OpaMalformedResponse, OpaSettings, OpaUnavailable
from fedplace.insight import command
from fedplace.insight.command import CliError, guarded
from fedplace.insight.options import (
    add_kube_arguments,
    add_opa_arguments,
    add_output_argument,
    check_namespace,
    dump,
    namespace_of,
    opa_settings,
    prepare,
    segment,
)

__all__ = ["DESCRIPTION", "EPILOG", "REPORT", "add_arguments", "build_parser", "main", "namespaces", "render",
           "report", "run"]

PROG = "fedplace-limits"
DESCRIPTION = """\
Show a namespace's effective limits — what all of its LimitRanges together
give containers and pods: every bound, the defaults as the API server stores
them and which of them apply — and every replicated workload of the namespace
checked against them now: the violations the admission webhook would answer,
and the defaults it would add. OPA is asked, so what is shown is what the
webhook decides."""
EPILOG = """\
examples:
  fedplace-limits -n shop --opa-url https://opa.example:8181 --opa-token-file reader.token
  fedplace-limits -o json
  fedplace-limits -A --fail-on-violations

exit status: 0 done; 1 a workload violates a limit (with --fail-on-violations);
2 usage or input error, or OPA has no answer (the LimitRange policies not
loaded); 3 OPA cannot be reached."""

REPORT = "io/k8s/federation/limitrange/view/report"
POD_BEARING = ("pods", "replicasets", "deployments", "statefulsets", "daemonsets", "jobs", "cronjobs")
COLUMNS = ("LimitRange", "Type", "Resource", "Min", "Max", "Default Request", "Default Limit",
           "Max Limit/Request Ratio")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resources", default=",".join(POD_BEARING), metavar="PLURAL[,PLURAL…]",
                        help="the replicated kinds to check (default: every kind that makes pods; "
                             "kinds opa-kube-sync does not replicate are skipped)")
    add_output_argument(parser)
    parser.add_argument("--fail-on-violations", action="store_true", help="exit 1 when a workload violates a limit")
    parser.add_argument("--replicate-path", type=segment, default="kubernetes", metavar="ROOT",
                        help="where opa-kube-sync puts the replicated objects in OPA, for -A (default kubernetes)")
    add_opa_arguments(parser)
    add_kube_arguments(parser, all_namespaces=True,
                       namespace_help="the namespace to show (default: the kubeconfig context's namespace; "
                                      "only the kubeconfig is read, not the cluster)")


async def report(settings: OpaSettings, namespace: str, resources: Sequence[str]) -> dict[str, Any]:
    """The pack's view of ``namespace``; raises :class:`OpaError` (undefined included)."""
    async with OpaClient(settings) as opa:
        result = await opa.query(REPORT, {"namespace": namespace, "resources": list(resources)}, undefined_ok=False)
    if not isinstance(result, dict):
        raise OpaError(f"{REPORT} is not an object")
    return result


def _table(rows: list[Sequence[str]], out: TextIO, indent: str = "") -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write(indent + "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _default(value: str, source: str, own: str, applies: bool) -> str:
    if not value:
        return "-"
    text = value if source == own else f"{value} (from {source})"
    return text if applies else f"{text} *"


def render(doc: dict[str, Any], out: TextIO) -> None:
    """The report as tables (what ``--output text`` prints)."""
    ns = doc.get("namespace", "")
    names = doc.get("limitRanges") or []
    if not names:
        out.write(f'No LimitRanges in namespace "{ns}" in OPA\'s replicated data '
                  "(is opa-kube-sync run with --replicate v1/limitranges?).\n")
    else:
        out.write(f'Effective limits in namespace "{ns}" ({len(names)} LimitRange{"s" * (len(names) != 1)}: '
                  f'{", ".join(names)})\n\n')
        rows: list[Sequence[str]] = [COLUMNS, tuple("-" * len(c) for c in COLUMNS)]
        shadowed = False
        for r in doc.get("limits") or []:
            shadowed |= bool(r["default"] and not r["defaultApplies"]) or bool(
                r["defaultRequest"] and not r["defaultRequestApplies"])
            rows.append((r["limitRange"], r["type"], r["resource"], r["min"] or "-", r["max"] or "-",
                         _default(r["defaultRequest"], r["defaultRequestFrom"], "defaultRequest",
                                  r["defaultRequestApplies"]),
                         _default(r["default"], r["defaultFrom"], "default", r["defaultApplies"]),
                         r["maxLimitRequestRatio"] or "-"))
        _table(rows, out)
        if shadowed:
            out.write("\n* not applied: a LimitRange earlier by name sets this default\n")
    for error in doc.get("errors") or []:
        out.write(f"error: {error}\n")
    workloads = doc.get("workloads") or []
    violating = [w for w in workloads if w["violations"]]
    defaulted = [w for w in workloads if w["defaults"] and not w["violations"]]
    out.write(f"\nWorkloads: {len(workloads)} checked, {len(violating)} violating the limits now"
              f"{f', {len(defaulted)} missing defaults' if defaulted else ''}\n")
    for w in violating:
        out.write(f"\n  {w['kind']} {w['name']}: would be denied\n")
        for v in w["violations"]:
            out.write(f"    {v}\n")
    for w in defaulted:
        out.write(f"\n  {w['kind']} {w['name']}: would get defaults when next created or updated\n")
        for d in w["defaults"]:
            out.write(f"    {d}\n")


async def namespaces(settings: OpaSettings, root: str) -> list[str]:
    """The namespaces with replicated LimitRanges (for ``-A``)."""
    async with OpaClient(settings) as opa:
        found = await opa.get_data([root, "limitranges"])
    return sorted(ns for ns, items in found.items() if isinstance(items, dict) and items) \
        if isinstance(found, dict) else []


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    prepare(args, getattr(args, "prog", PROG), err)
    settings = opa_settings(args)
    resources = [r.strip() for r in args.resources.split(",") if r.strip()]
    every = getattr(args, "all_namespaces", False)
    if every and args.namespace is not None:
        raise CliError("give -n NAMESPACE or -A, not both")
    try:
        if every:
            names = [check_namespace(ns, "a replicated namespace")
                     for ns in await namespaces(settings, args.replicate_path)]
        else:
            names = [namespace_of(args)]
        docs = [await report(settings, ns, resources) for ns in names]
    except OpaError as exc:
        code = command.EXIT_UNREACHABLE if isinstance(exc, (OpaUnavailable, OpaMalformedResponse)) else command.EXIT_USAGE
        hint = "" if code == command.EXIT_UNREACHABLE else " (is the fedplace-limitrange ConfigMap loaded?)"
        raise CliError(f"cannot get the report from OPA: {exc}{hint}", code) from None
    if args.output in ("json", "yaml"):
        out.write(dump({"items": docs} if every else docs[0], args.output) + "\n")
    elif every and not docs:
        out.write("No LimitRanges in OPA's replicated data (is opa-kube-sync run with --replicate v1/limitranges?).\n")
    else:
        for i, doc in enumerate(docs):
            out.write("\n" if i else "")
            render(doc, out)
    violating = any(w["violations"] for doc in docs for w in doc.get("workloads") or [])
    return 1 if args.fail_on_violations and violating else 0


async def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command (exit status as the module docstring says; every error one line on ``err``)."""
    return await guarded(getattr(args, "prog", PROG), _run, args, out, err)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = command.Parser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {command.version()}")
    add_arguments(parser)
    parser.set_defaults(run=run, prog=prog)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
