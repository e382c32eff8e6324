"""``fedplace``: one command for what the policies decide, and why.

    fedplace explain   the decision about one object and, per cluster, why (insight/explain.py)
    fedplace what-if   what a proposed policy or cluster label change would move or deny (insight/whatif.py)
    fedplace report    the placement page as a static HTML file (insight/report.py)
    fedplace limits    a namespace's effective limits and who breaks them (insight/limits.py;
                       also installed as fedplace-limits)

Every subcommand takes OPA's flags as the services do (``--opa-url``,
``--opa-token-file``, ``--opa-ca-file``, ``--opa-timeout``), and
``--kubeconfig`` where it reads the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Sequence

from fedplace.insight import explain, limits, report, whatif

__all__ = ["build_parser", "main"]

COMMANDS = (
    ("explain", explain, "the decision about one object, and per cluster why it is eligible or not"),
    ("what-if", whatif, "what a proposed policy or cluster label change would move, deny or fail to compile"),
    ("report", report, "the placement page (clusters, workloads, placement matrix, denials, remediations) "
                       "as a static HTML file"),
    ("limits", limits, "a namespace's effective LimitRanges and the workloads violating them now"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedplace", description="What the placement policies decide, and why.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module, text in COMMANDS:
        p = sub.add_parser(name, help=text, description=(module.__doc__ or text).strip().split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(args.module.run(args, sys.stdout, sys.stderr))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
