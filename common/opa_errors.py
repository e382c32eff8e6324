"""OPA's compiler errors as text (``ast.Errors.Error()``), read back into entries.

OPA's Go API (and ``opa_bindings``, OPA as a library) reports a refused module
set as one text, ``1 error occurred: file:row: rego_parse_error: message`` or
``N errors occurred:`` and one ``file:row: code: message`` line per error, each
possibly followed by tab-indented detail lines. :func:`split_errors` reads it;
the devstack engine and ``fedplace what-if`` both use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["ErrorEntry", "split_errors"]

_LIST_PREFIX = re.compile(r"(?:bundle activation failed: )?(?:1 error occurred: |\d+ errors occurred:\n)")
_ENTRY = re.compile(r"(?:(?P<where>.*?):(?P<row>\d+): )?(?P<code>rego_[a-z_]+_error): (?P<message>.*)")


@dataclass(frozen=True)
class ErrorEntry:
    """One error of OPA's text: ``where:row: code: message`` plus its tab-indented detail lines."""

    where: str | None
    row: int | None
    code: str
    message: str
    details: tuple[str, ...] = ()


def split_errors(text: str) -> list[ErrorEntry] | None:
    """The entries of an ``ast.Errors`` text; ``None`` when ``text`` is not an error list."""
    head = _LIST_PREFIX.match(text)
    if head is None:
        return None
    entries: list[ErrorEntry] = []
    for line in text[head.end():].split("\n"):
        m = _ENTRY.fullmatch(line)
        if m is not None:
            row = m.group("row")
            entries.append(ErrorEntry(m.group("where"), int(row) if row else None, m.group("code"), m.group("message")))
        elif entries:  # a detail line ("\t" + text), or a message that went on over a newline
            last = entries[-1]
            if line.startswith("\t"):
                entries[-1] = replace(last, details=last.details + (line[1:],))
            else:
                entries[-1] = replace(last, message=last.message + "\n" + line)
    return entries
