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

Exit status: 0; 1 with ``--fail-on-violations`` when a workload violates a
limit; 2 on a usage error or when OPA cannot answer (the pack not loaded
included). It is also ``fedplace limits`` (:mod:`fedplace.insight.cli`), built from the
same :func:`add_arguments` and :func:`run`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Sequence, TextIO

from fedplace.common.opa_client import OpaClient, OpaError, OpaSettings
from fedplace.insight.options import add_opa_arguments, opa_settings

__all__ = ["REPORT", "add_arguments", "main", "render", "report", "run"]

REPORT = "io/k8s/federation/limitrange/view/report"
POD_BEARING = ("pods", "replicasets", "deployments", "statefulsets", "daemonsets", "jobs", "cronjobs")
COLUMNS = ("LimitRange", "Type", "Resource", "Min", "Max", "Default Request", "Default Limit",
           "Max Limit/Request Ratio")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namespace", required=True, help="the namespace to show")
    parser.add_argument("--resources", default=",".join(POD_BEARING), metavar="PLURAL[,PLURAL…]",
                        help="the replicated kinds to check (default: every pod-bearing kind; "
                             "kinds opa-kube-sync does not replicate are skipped)")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    parser.add_argument("--fail-on-violations", action="store_true", help="exit 1 when a workload violates a limit")
    add_opa_arguments(parser)


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
        out.write(indent + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def _default(value: str, source: str, own: str, applies: bool) -> str:
    if not value:
        return "-"
    text = value if source == own else f"{value} (from {source})"
    return text if applies else f"{text} *"


def render(doc: dict[str, Any], out: TextIO) -> None:
    """The report as tables (what ``--output table`` prints)."""
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


async def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    settings = opa_settings(args)
    resources = [r.strip() for r in args.resources.split(",") if r.strip()]
    try:
        doc = await report(settings, args.namespace, resources)
    except OpaError as exc:
        err.write(f"fedplace-limits: cannot get the report from OPA: {exc}\n"
                  "(is the fedplace-limitrange ConfigMap loaded?)\n")
        return 2
    if args.output == "json":
        out.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        render(doc, out)
    violating = any(w["violations"] for w in doc.get("workloads") or [])
    return 1 if args.fail_on_violations and violating else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fedplace-limits",
        description="The effective limits of a namespace's LimitRanges, and the replicated workloads that "
                    "violate them now (asks OPA: the LimitRange pack's view).")
    add_arguments(parser)
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
