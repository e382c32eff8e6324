"""common/rego_scan.py against OPA's own parser (opa_bindings = OPA 1.20 in-process).

The package guard is only as good as the lexer's agreement with OPA: every
module OPA accepts must get exactly OPA's package path (else a
``package system.authz`` could slip through, or a valid module be refused).
Where OPA refuses a module, the lexer may refuse it too or not — OPA will.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fedplace.common.rego_scan import RegoScanError, outline, package_clause

opa_bindings = pytest.importorskip("opa_bindings.engine", reason="OPA's parser (opa_bindings) is a test dependency")
ROOT = Path(__file__).resolve().parents[2]
PROBE = "zz_probe_rule"


def opa_package(clause: str) -> tuple[str, ...] | None:
    """The package path OPA gives ``clause`` (None: OPA refuses the module)."""
    with opa_bindings.OpaEngine() as engine:
        try:
            engine.add_policy("m.rego", clause + f"\n\n{PROBE} := 1\n")
            engine.eval_query("true")
        except opa_bindings.OpaError:
            return None
        for candidate in _candidates(clause):
            ref = "data" + "".join(f"[{_quote(p)}]" for p in candidate)
            if engine.eval_query(f"x = {ref}.{PROBE}") == [{"x": 1}]:
                return candidate
    raise AssertionError(f"OPA accepted {clause!r} but no candidate path matched")


def _quote(part: str) -> str:
    import json
    return json.dumps(part)


def _candidates(clause: str) -> list[tuple[str, ...]]:
    out = []
    try:
        out.append(package_clause(clause).path)
    except RegoScanError:
        pass
    return out + _GENERATED_PATHS.get(clause, [])


_GENERATED_PATHS: dict[str, list[tuple[str, ...]]] = {}

KNOWN = [
    ("package system.authz", ("system", "authz")),
    ("package\nsystem.authz", ("system", "authz")),
    ("package\r\nsystem.authz", ("system", "authz")),
    ("\ufeffpackage system.authz", ("system", "authz")),
    ("package # c\n  system.authz", ("system", "authz")),
    ('package system["authz"]', ("system", "authz")),
    ("package system[`authz`]", ("system", "authz")),
    ('package a[ "b" ]', ("a", "b")),
    ('package a[\n"b"]', ("a", "b")),
    ('package data.system.x', ("data", "system", "x")),
    ('package data["system"]', ("data", "system")),
    ('package a["\\u0073ystem"]', ("a", "system")),
    ('package data["a.b"]', ("data", "a.b")),
    ("package\n\n\n# c\n\n  system", ("system",)),
    ("package system\r", ("system",)),
    ("#x\npackage system", ("system",)),
    ("package a.if", ("a", "if")),
]

# OPA refuses these for what follows a complete reference; the lexer reads the reference ("a") and
# leaves the rest to OPA, which refuses the module: nothing loads either way.
REFUSED_AFTER_THE_REF = ["package a . b", "package a\n.b", 'package a ["b"]']
REFUSED_BY_OPA = ["package a.\nb", "package\u00a0system",
                  "package\fsystem", "\ufeff\ufeffpackage a", "\n\ufeffpackage a", 'package a["\\x73ystem"]',
                  "packagesystem", 'package "system"', "package a[1]", "package ä.b"]


@pytest.mark.parametrize("clause,path", KNOWN)
def test_known_spellings_read_as_opa_reads_them(clause: str, path: tuple[str, ...]):
    assert opa_package(clause) == path
    assert package_clause(clause).path == path


@pytest.mark.parametrize("clause", REFUSED_AFTER_THE_REF)
def test_refused_after_the_reference(clause: str):
    assert opa_package(clause) is None
    assert package_clause(clause).path == ("a",)


@pytest.mark.parametrize("clause", REFUSED_BY_OPA)
def test_what_opa_refuses_in_the_clause_the_lexer_refuses_too(clause: str):
    assert opa_package(clause) is None
    with pytest.raises(RegoScanError):
        package_clause(clause)


def _blank(rng: random.Random, newline_ok: bool = True) -> str:
    parts = [rng.choice([" ", "\t", "\r\n", "\n", "  "] if newline_ok else [" ", "\t"])]
    if rng.random() < 0.3:
        parts.append(rng.choice(["# comment\n", "#system.authz\n", "# ] [ . \n"]))
    if rng.random() < 0.05:
        parts.append(rng.choice(["\u00a0", "\f", "\v", "\u2028"]))  # illegal for OPA
    return "".join(parts)


def _segment(rng: random.Random) -> tuple[str, str]:
    name = rng.choice(["system", "authz", "data", "x", "if", "a_b", "Sys1", "log", "input"])
    r = rng.random()
    if r < 0.5:
        return "." + name, name
    if r < 0.7:
        pad = _blank(rng) if rng.random() < 0.3 else ""
        return f'[{pad}"{name}"{pad}]', name
    if r < 0.8:
        return f"[`{name}`]", name
    if r < 0.9:
        escaped = name.replace("s", "\\u0073", 1)
        return f'["{escaped}"]', name
    return rng.choice([" .x", "\n.x", ". x", "[1]", "[x]", '["a"', "..x"]), ""


def random_clause(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    head = rng.choice(["system", "data", "a", "io", "_x", "System"])
    text = ("\ufeff" if rng.random() < 0.1 else "") + (_blank(rng) if rng.random() < 0.4 else "") + "package"
    text += _blank(rng) if rng.random() > 0.03 else ""
    text += head
    path = [head]
    for _ in range(rng.randrange(4)):
        seg, name = _segment(rng)
        text += seg
        path.append(name)
    if rng.random() < 0.3:
        text += _blank(rng) + "# trailing"
    return text, tuple(path)


def test_random_package_clauses_agree_with_opa():
    rng = random.Random(17)
    accepted = refused = 0
    for _ in range(400):
        clause, guess = random_clause(rng)
        _GENERATED_PATHS[clause] = [guess]
        expected = opa_package(clause)
        try:
            got: tuple[str, ...] | None = package_clause(clause).path
        except RegoScanError:
            got = None
        if expected is not None:
            accepted += 1
            assert got == expected, (clause, got, expected)
        else:
            refused += 1  # OPA refuses the module whatever the lexer reads: nothing loads
    assert accepted > 100 and refused > 20, (accepted, refused)


def opa_rules(raw: str) -> list[tuple[tuple[str, ...], str]]:
    """Each rule of ``raw`` as OPA's parser reads it (``rego.parse_module``): the package
    path plus the ground start of the head reference, and the rule's kind in the lexer's
    terms."""
    with opa_bindings.OpaEngine() as engine:
        ast = engine.eval_query("m := rego.parse_module(input.id, input.raw)",
                                input={"id": "m.rego", "raw": raw})[0]["m"]
    package = tuple(str(t["value"]) for t in ast["package"]["path"][1:])
    out = []
    for rule in ast.get("rules") or []:
        head = rule["head"]
        ref = head["ref"]
        ground = [str(ref[0]["value"])]
        for term in ref[1:]:
            if term["type"] != "string":
                break
            ground.append(term["value"])
        if rule.get("default"):
            kind = "default"
        elif "args" in head:
            kind = "function"
        elif "key" in head and "value" not in head:
            kind = "partial_set"
        elif len(ground) < len(ref):
            kind = "partial_object"
        else:
            kind = "complete"
        out.append((package + tuple(ground), kind))
    return sorted(out)


EVERY_KIND = """package fedtest.kinds

default allow := false
allow if input.ok
f(x) := y if {
  y := x
} else := 0
default g(_) := false
g(x) if x > 1
s contains 1
o[k] := 1 if k := "a"
a.b["c"] := 2
q.r[x].t := 1 if x := "k"
"""


def test_rules_are_counted_and_indexed_as_opas_parser_does():
    """Every shipped module, and one with every kind of rule: the same rules, at the same
    paths, of the same kinds."""
    sources = {str(path): path.read_text(encoding="utf-8") for path in sorted((ROOT / "policies").rglob("*.rego"))}
    assert len(sources) > 10
    sources["every kind"] = EVERY_KIND
    kinds: set[str] = set()
    for name, raw in sources.items():
        mine = sorted((r.path, r.kind) for r in outline(raw).rules)
        assert mine == opa_rules(raw), name
        kinds.update(kind for _, kind in mine)
    assert kinds == {"complete", "partial_object", "partial_set", "function", "default"}


def test_continuation_lines_else_and_multiline_values_are_one_rule():
    raw = ("package p\n\nf(x) := y if {\n  y := x\n} else := 0\n\nv := a |\n  b\n\nw := [\n 1,\n 2]\n"
           "default z := 1\nz if input.q\n\nimport rego.v1\n")
    heads = outline(raw).rules
    assert [(r.path, r.kind) for r in heads] == [
        (("p", "f"), "function"), (("p", "v"), "complete"), (("p", "w"), "complete"), (("p", "z"), "default"),
        (("p", "z"), "complete")]
