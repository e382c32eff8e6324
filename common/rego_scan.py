"""What opa-kube-sync must know about a Rego module before OPA sees it — pure functions.

OPA offers no "parse only" call: every ``PUT /v1/policies`` loads the module
into the live policy set, so asking OPA which package a module declares would
already hand it a ``package system.authz`` module. The sync therefore reads
the module itself with a lexer that follows OPA's own scanner and parser
(``ast/internal/scanner``, ``ast/parser.go``, OPA 1.x) for the part it needs:

* :func:`package_clause` — the package path, exactly as OPA's parser builds
  it: a leading byte-order mark, white space (space, tab, CR, LF — anything
  else is an illegal token for OPA) and ``#`` comments may come before
  ``package`` and between ``package`` and the path; the path is a variable
  followed, with no white space in between, by ``.name`` or ``["string"]`` /
  ``[`raw`]`` (white space allowed inside the brackets), strings decoded as
  OPA does (JSON escapes). ``package data.x`` is **not** ``data.x`` but
  ``data.data.x`` (OPA prefixes every package with ``data``). Anything the
  lexer cannot read with certainty raises :class:`RegoScanError` — the caller
  refuses the module rather than guess. ``tests/sync/test_rego_scan.py``
  checks it against OPA's own parser (``opa_bindings``) on every variant
  known to matter (and random ones).
* :func:`outline` — the package plus the module's top-level rules (one
  :class:`RuleHead` per rule, ``else`` branches included in their rule):
  what the size limits count and what the cross-ConfigMap conflict check
  indexes. Rule heads are read from the tokens of each top-level statement
  (a statement starts at a line start outside any bracket); an estimate for a
  limit, never used to decide what is reserved.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["Outline", "PackageClause", "RegoScanError", "RuleHead", "outline", "package_clause", "rules_of"]

BOM = "\ufeff"
_WS = " \t\r\n"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_RAW = re.compile(r"`[^`]*`")


class RegoScanError(ValueError):
    """The module cannot be read with certainty; ``row``/``col`` are 1-based."""

    def __init__(self, message: str, row: int, col: int) -> None:
        super().__init__(f"{row}:{col}: {message}")
        self.message = message
        self.row = row
        self.col = col


@dataclass(frozen=True)
class PackageClause:
    """``path``: the package below ``data`` as OPA builds it (``package data.x`` → ``("data", "x")``);
    ``text``: the reference as written; ``row``/``col``: where ``package`` starts."""

    path: tuple[str, ...]
    text: str
    row: int
    col: int

    @property
    def reserved(self) -> bool:
        """``data.system…``: OPA's own configuration (``system.authz``, ``system.log``)."""
        return bool(self.path) and self.path[0] == "system"

    def dotted(self) -> str:
        """``data.a.b`` or ``data.a["b.c"]``, OPA's way of printing the path."""
        out = "data"
        for part in self.path:
            out += f".{part}" if _IDENT.fullmatch(part) else f"[{json.dumps(part)}]"
        return out


def _position(raw: str, pos: int) -> tuple[int, int]:
    row = raw.count("\n", 0, pos) + 1
    return row, pos - (raw.rfind("\n", 0, pos) + 1) + 1


def _skip_blank(raw: str, pos: int) -> int:
    """Skip OPA's white space and ``#`` comments."""
    n = len(raw)
    while pos < n:
        ch = raw[pos]
        if ch in _WS:
            pos += 1
        elif ch == "#":
            end = raw.find("\n", pos)
            pos = n if end < 0 else end
        else:
            break
    return pos


def package_clause(raw: str) -> PackageClause:
    """The package the module declares, as OPA's parser reads it; :class:`RegoScanError` when unsure."""

    def fail(message: str, at: int) -> RegoScanError:
        return RegoScanError(message, *_position(raw, at))

    pos = 1 if raw.startswith(BOM) else 0
    pos = _skip_blank(raw, pos)
    start = pos
    word = _IDENT.match(raw, pos)
    if word is None or word.group() != "package":
        raise fail("package expected", pos)
    pos = word.end()
    if pos < len(raw) and raw[pos] not in _WS and raw[pos] != "#":
        raise fail("package expected", start)
    pos = _skip_blank(raw, pos)
    head = _IDENT.match(raw, pos)
    if head is None:
        raise fail("expected a package name", pos)
    ref_start = pos
    parts = [head.group()]
    pos = head.end()
    while pos < len(raw) and raw[pos] in ".[":
        if raw[pos] == ".":
            name = _IDENT.match(raw, pos + 1)
            if name is None:
                raise fail("expected a name after '.'", pos + 1)
            parts.append(name.group())
            pos = name.end()
            continue
        inner = _skip_blank(raw, pos + 1)
        lit = _STRING.match(raw, inner) or _RAW.match(raw, inner)
        if lit is None:
            raise fail("expected a string in '[…]'", inner)
        text = lit.group()
        if text[0] == "`":
            parts.append(text[1:-1])
        else:
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise fail(f"cannot decode the string {text[:40]!r}", inner) from exc
            parts.append(value)
        close = _skip_blank(raw, lit.end())
        if close >= len(raw) or raw[close] != "]":
            raise fail("expected ']'", close)
        pos = close + 1
    if any("\x00" in p for p in parts):
        raise fail("NUL character in the package path", ref_start)
    row, col = _position(raw, start)
    return PackageClause(tuple(parts), raw[ref_start:pos], row, col)


# -- rules ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleHead:
    """One top-level rule. ``path``: package + rule reference up to its first non-constant part;
    ``kind``: ``complete`` (one value; ``p := v``, ``p if …``, ``a.b["c"] := v``), ``default``,
    ``function``, ``partial_set`` (``contains``) or ``partial_object`` (``p[x] := v``);
    ``value``: the value's tokens as written (complete rules), for comparison only."""

    path: tuple[str, ...]
    kind: str
    row: int
    value: str | None = None


@dataclass(frozen=True)
class Outline:
    package: PackageClause
    rules: tuple[RuleHead, ...] = field(default_factory=tuple)


_TOKEN = re.compile(r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r]+)
  | (?P<comment>\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>[0-9][0-9A-Za-z_.]*)
  | (?P<op>:=|==|!=|<=|>=|[{}\[\]().,;:=|&<>+\-*/%!])
  | (?P<other>.)
""", re.X | re.S)
_OPEN, _CLOSE = "([{", ")]}"
# Keywords that never start a rule (a statement starting with one continues another).
_NOT_A_RULE = frozenset({"package", "import", "if", "else", "some", "not", "with", "as", "in", "every", "contains"})


_CONTINUING_WORDS = frozenset({"if", "else", "contains", "in", "with", "as", "not", "some", "every", "default"})


def _continues(tokens: list[tuple[str, str, int]] | None) -> bool:
    """A statement ending in an operator or a keyword expecting more goes on over the newline."""
    if not tokens:
        return False
    kind, text, _ = tokens[-1]
    if kind == "op":
        return text not in _CLOSE
    return (kind == "ident" and text in _CONTINUING_WORDS
            and not (len(tokens) > 1 and tokens[-2][1] == "."))


def _statements(raw: str, start: int) -> list[list[tuple[str, str, int]]]:
    """Top-level statements as token lists ``(kind, text, row)``; a statement starts at the first
    token of a line outside any bracket, unless the line before ended in an operator or a keyword
    expecting more (``else`` continues the statement before it too)."""
    statements: list[list[tuple[str, str, int]]] = []
    depth, row, line_start = 0, raw.count("\n", 0, start) + 1, True
    current: list[tuple[str, str, int]] | None = None
    for m in _TOKEN.finditer(raw, start):
        kind = m.lastgroup or "other"
        text = m.group()
        if kind == "nl":
            row += 1
            if depth == 0 and not _continues(current):
                line_start = True
            continue
        if kind in ("ws", "comment"):
            continue
        if depth == 0 and line_start and not (kind == "ident" and text == "else") and text not in _CLOSE:
            current = []
            statements.append(current)
        line_start = False
        if kind == "op":
            if text in _OPEN:
                depth += 1
            elif text in _CLOSE:
                depth = max(0, depth - 1)
        if current is not None:
            current.append((kind, text, row))
    return statements


def _rule(package: tuple[str, ...], tokens: list[tuple[str, str, int]]) -> RuleHead | None:
    """The head of one statement, or None when it is not a rule (``import``, a continuation)."""
    kind, text, row = tokens[0]
    if kind != "ident" or text in _NOT_A_RULE:
        return None
    i, default = 0, False
    if text == "default":
        default, i = True, 1
        if i >= len(tokens) or tokens[i][0] != "ident":
            return None
    path, ground = [tokens[i][1]], True
    i += 1
    while i < len(tokens):
        k, t, _ = tokens[i]
        if t == "." and i + 1 < len(tokens) and tokens[i + 1][0] == "ident":
            if ground:  # after a variable the reference goes on (q.r[x].t), outside the path
                path.append(tokens[i + 1][1])
            i += 2
        elif t == "[":
            j, depth = i + 1, 1
            while j < len(tokens) and depth:
                depth += tokens[j][1] in _OPEN
                depth -= tokens[j][1] in _CLOSE
                j += 1
            inner = tokens[i + 1:j - 1]
            if ground and len(inner) == 1 and inner[0][0] in ("str", "raw"):
                s = inner[0][1]
                try:
                    path.append(s[1:-1] if s[0] == "`" else json.loads(s))
                except ValueError:
                    ground = False
            else:
                ground = False
            i = j
        else:
            break
    nxt = tokens[i][1] if i < len(tokens) else ""
    full = package + tuple(path)
    if nxt == "(" and default:  # default f(_) := v: a default function value
        j, depth = i + 1, 1
        while j < len(tokens) and depth:
            depth += tokens[j][1] in _OPEN
            depth -= tokens[j][1] in _CLOSE
            j += 1
        i, nxt = j, tokens[j][1] if j < len(tokens) else ""
    elif nxt == "(":
        return RuleHead(full, "function", row)
    if nxt == "contains":
        return RuleHead(full, "partial_set", row)
    if nxt not in (":=", "=", "if", "{", ""):
        return None  # not a rule head: a continuation line of something else
    value = None
    if nxt in (":=", "="):
        value_tokens = []
        for _, t, _ in tokens[i + 1:]:
            if t == "if":
                break
            value_tokens.append(t)
        value = " ".join(value_tokens)
    else:
        value = "true"
    if default:
        return RuleHead(full, "default", row, value)
    return RuleHead(full, "complete" if ground else "partial_object", row, value)


def rules_of(raw: str, package: tuple[str, ...] = ()) -> tuple[RuleHead, ...]:
    """The top-level rules of a module (paths under ``package``), whatever its package clause."""
    rules = []
    for statement in _statements(raw, 0):
        head = _rule(package, statement)
        if head is not None:
            rules.append(head)
    return tuple(rules)


def outline(raw: str) -> Outline:
    """The package (:func:`package_clause`, may raise) and the top-level rules of a module."""
    clause = package_clause(raw)
    return Outline(clause, rules_of(raw, clause.path))
