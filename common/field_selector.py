"""Kubernetes field selectors on ``metadata.name`` and ``metadata.namespace``, decided locally.

Why the informer needs this: kube-apiserver 1.22 to 1.24.2 (fixed in 1.22.12,
1.23.9, 1.24.3; kubernetes/kubernetes#110625) drops matching objects from a
*paged* list that carries a label or field selector: a page's ``continue``
token skips what the server filtered out of that page. Watches are not
affected. So the informer pages without the selector and keeps what
:meth:`FieldSelector.matches` accepts, and watches with the selector.

Contract:

* :meth:`FieldSelector.parse` accepts the Kubernetes grammar for these two
  fields: comma-separated terms ``field=value``, ``field==value`` or
  ``field!=value``, values with ``\\``-escaped ``,``, ``=``, ``!`` and ``\\``;
  anything else raises :class:`ValueError` naming the term.
* ``str()`` of a parsed selector is the ``fieldSelector`` query value the API
  server accepts for the same terms.
* :meth:`FieldSelector.matches` is what the API server would answer for one object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["FIELDS", "FieldSelector", "Term"]

FIELDS = ("metadata.name", "metadata.namespace")
_SPECIAL = re.compile(r"([\\,=!])")


@dataclass(frozen=True)
class Term:
    """``field`` equals (or, with ``negated``, differs from) ``value``."""

    field: str
    value: str
    negated: bool = False

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        actual = str(meta.get(self.field.removeprefix("metadata."), "") or "")
        return (actual == self.value) is not self.negated

    def __str__(self) -> str:
        value = _SPECIAL.sub(r"\\\1", self.value)
        return f"{self.field}{'!=' if self.negated else '='}{value}"


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at each unescaped ``sep`` (escapes kept)."""
    parts, current, escaped = [], "", False
    for ch in text:
        if escaped:
            current, escaped = current + "\\" + ch, False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append(current)
            current = ""
        else:
            current += ch
    if escaped:
        raise ValueError(f"field selector {text!r} ends with an escape")
    return parts + [current]


def _term(text: str) -> Term:
    for op, negated in (("!=", True), ("==", False), ("=", False)):
        at = _unescaped(text, op)
        if at >= 0:
            field, value = text[:at].strip(), text[at + len(op):]
            if field not in FIELDS:
                raise ValueError(f"field selector term {text!r}: only {' and '.join(FIELDS)} are supported")
            if _unescaped(value, "=") >= 0 or _unescaped(value, "!") >= 0:
                raise ValueError(f"field selector term {text!r}: unescaped operator in the value")
            return Term(field, re.sub(r"\\(.)", r"\1", value), negated)
    raise ValueError(f"field selector term {text!r} has no operator (=, == or !=)")


def _unescaped(text: str, op: str) -> int:
    """Index of the first unescaped ``op`` in ``text``, or -1."""
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of :class:`Term` (empty: every object matches)."""

    terms: tuple[Term, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> "FieldSelector":
        if not text or not text.strip():
            return cls()
        return cls(tuple(_term(part) for part in _split(text, ",") if part.strip()))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(t.matches(obj) for t in self.terms)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)
