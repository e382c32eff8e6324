"""``fedplace``: one command for what the policies decide, and why.

    fedplace explain   the decision about one object and, per cluster, why (insight/explain.py)
    fedplace what-if   what a proposed policy or cluster label change would move or deny (insight/whatif.py)
    fedplace report    the placement page, or its data (insight/report.py)
    fedplace limits    a namespace's effective limits and who breaks them (insight/limits.py;
                       also installed as fedplace-limits)

Every subcommand takes OPA's flags as the services do (``--opa-url``,
``--opa-token-file``, ``--opa-ca-file``, ``--opa-timeout``), and kubectl's
(``--kubeconfig``, ``--context``, ``-n``) where it needs the cluster; ``-o
text|json|yaml`` everywhere. Exit codes, one-line errors and a closed pipe:
insight/command.py. The conventions are in docs/insight.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence, TextIO

from fedplace.insight import command, explain, limits, report, whatif

__all__ = ["build_parser", "execute", "main"]

COMMANDS = (
    ("explain", explain, "why an object may run on each cluster, and what the policies decide about it"),
    ("what-if", whatif, "what a proposed policy or cluster label change would move, deny or fail to compile"),
    ("report", report, "the placement page: clusters, workloads, where they run, what is denied"),
    ("limits", limits, "a namespace's effective LimitRanges, and the workloads that break them now"),
)

DESCRIPTION = "What the placement policies decide, and why: read-only questions to OPA and the cluster."
EPILOG = """\
Run 'fedplace COMMAND --help' for a command's flags.

exit status: 0 done; 1 the command found what it checks for (what-if: changes
over the thresholds; explain --fail-on-denial, limits --fail-on-violations);
2 usage or input error; 3 a server (OPA, the Kubernetes API server,
opa-kube-sync) cannot be reached; 4 internal error (a bug)."""


def build_parser() -> argparse.ArgumentParser:
    parser = command.Parser(prog="fedplace", description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {command.version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=command.Parser)
    for name, module, text in COMMANDS:
        p = sub.add_parser(name, help=text, description=module.DESCRIPTION, epilog=module.EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run, prog=f"fedplace {name}")
    return parser


async def execute(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    """``fedplace ARGV`` in process: the exit code, every message on ``out`` and ``err``."""
    return await command.execute(build_parser(), argv, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
