"""Static checks of the placement-rules contract on a Rego module — pure functions.

A placement rule set is a package ``fedplace.rules.<name>`` whose ``require``,
``forbid`` and ``errors`` are partial set rules (docs/policies.md, "The
placement-rules contract"). The placement library reads
``data.fedplace.rules[<name>].require`` (and ``forbid``, ``errors``), so a rule
set in another shape is not what its author meant: a ``require := {...}``
complete rule, a package ``fedplace.rules`` or ``fedplace.rules.a.b``.
:func:`contract_problems` names each such rule with its row, from the module's
outline (:mod:`fedplace.common.rego_scan`), before anything is loaded into OPA.
What only evaluation shows (a requirement object of the wrong shape) the
library reports itself (``contract_errors``), and the object it applies to is
denied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from fedplace.common.rego_scan import Outline, RegoScanError, outline

__all__ = ["CONTRACT_RULES", "RULES_ROOT", "ContractProblem", "contract_problems", "source_problems"]

RULES_ROOT = ("fedplace", "rules")
CONTRACT_RULES = ("require", "forbid", "errors")


@dataclass(frozen=True)
class ContractProblem:
    """One violation: ``row`` (1-based) of the rule or package clause, and what is wrong."""

    row: int
    message: str


def contract_problems(outline: Outline) -> list[ContractProblem]:
    """The contract violations of one module (none for a module outside ``fedplace.rules``)."""
    package = outline.package
    path = package.path
    if path[:len(RULES_ROOT)] != RULES_ROOT:
        return []
    if len(path) == len(RULES_ROOT):
        return [ContractProblem(package.row, "package fedplace.rules holds no rule set: a rule set is a package "
                                             "fedplace.rules.<name>")]
    if len(path) > len(RULES_ROOT) + 1:
        return [ContractProblem(package.row, f"package {'.'.join(path)} is not read: a rule set is a package "
                                             f"fedplace.rules.<name> (here: fedplace.rules.{path[2]})")]
    problems = []
    for head in outline.rules:
        rest = head.path[len(path):]
        if not rest or rest[0] not in CONTRACT_RULES:
            continue
        name = rest[0]
        if len(rest) > 1 or head.kind != "partial_set":
            problems.append(ContractProblem(head.row, f"{name} must be a partial set rule "
                                                      f"(`{name} contains ... if {{ ... }}`), not a "
                                                      f"{head.kind.replace('_', ' ')} rule"))
    return problems


def source_problems(sources: Iterable[tuple[str, str]]) -> list[str]:
    """``file:row: message`` for every contract violation of ``(file, Rego source)`` pairs,
    in order; a module the outline cannot read is left to OPA's own error."""
    out = []
    for name, raw in sources:
        try:
            shape = outline(raw)
        except RegoScanError:
            continue
        out += [f"{name}:{p.row}: {p.message}" for p in contract_problems(shape)]
    return out
