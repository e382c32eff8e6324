"""The Rego side of the engine: parsing, compile checks and error mapping on regorus.

Contracts:

* :func:`parse_module` parses one module alone (Rego v1, regorus' default) and
  returns a :class:`Module` with its package path and rule paths, or raises
  :class:`CompileError` with OPA-shaped errors (``rego_parse_error``).
* :func:`compile_modules` builds a *policies-only* regorus engine (the
  "template") from a complete module set, or raises :class:`CompileError`.
  regorus parses on ``add_policy`` but reports unsafe variables, unknown
  functions and conflicting constant rules only when a package is evaluated,
  so every package is evaluated once with no data and no input and errors of
  those classes are reported as compile errors (OPA's codes:
  ``rego_unsafe_var_error``, ``rego_type_error``, ``rego_compile_error``).
* :func:`eval_error` maps a regorus evaluation failure onto OPA's
  ``topdown.Error`` shape (``eval_conflict_error`` …).

Nothing here touches data or HTTP.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import regorus

__all__ = [
    "CompileError", "EmptyModuleError", "Module", "RuleRef", "compile_modules", "eval_error", "new_engine", "parse_module",
    "parse_regorus_error", "ref_text",
]

_LOCATION = re.compile(r"-->\s*(?P<file>.+?):(?P<row>\d+):(?P<col>\d+)")
_EMPTY_LINE = re.compile(r"^\s*(#.*)?$")
_COMPILE_MARKERS: tuple[tuple[str, str], ...] = (
    ("is unsafe", "rego_unsafe_var_error"),
    ("could not find function", "rego_type_error"),
    ("unknown function", "rego_type_error"),
    ("rule conflicts with rule", "rego_compile_error"),
    ("redeclared", "rego_compile_error"),
    ("recursion", "rego_recursion_error"),
    ("multiple default", "rego_type_error"),
)


@dataclass
class CompileError(Exception):
    """Modules failed to compile; ``errors`` are OPA error objects."""

    errors: list[dict[str, Any]] = field(default_factory=list)


class EmptyModuleError(Exception):
    """The module holds no statement at all (OPA answers 400 ``empty module``)."""


@dataclass(frozen=True)
class RuleRef:
    """Where a rule lives: its ground data path and its source location."""

    path: tuple[str, ...]
    file: str
    row: int
    col: int


@dataclass(frozen=True)
class Module:
    """One loaded policy module."""

    id: str
    raw: str
    package: tuple[str, ...]
    rules: tuple[RuleRef, ...]

    def ast(self) -> dict[str, Any]:
        """A minimal OPA-like AST: the package path and the rules' ground paths."""
        def terms(path: Iterable[str]) -> list[dict[str, str]]:
            return [{"type": "var", "value": "data"}] + [{"type": "string", "value": p} for p in path]
        return {
            "package": {"path": terms(self.package)},
            "rules": [{"head": {"ref": terms(r.path)},
                       "location": {"file": r.file, "row": r.row, "col": r.col}} for r in self.rules],
        }


def new_engine() -> regorus.Engine:
    """A regorus engine that accepts long queries (the data mirror's ``with`` clauses)."""
    engine = regorus.Engine()
    engine.set_policy_length_config(max_col=1 << 30, max_file_bytes=1 << 30, max_lines=1 << 24)
    return engine


def _clean(text: str) -> str:
    return text.split("Stack backtrace:")[0].strip()


def parse_regorus_error(text: str, default_file: str, code: str) -> dict[str, Any]:
    """One OPA error object from a regorus message (``--> file:row:col … error: msg``)."""
    text = _clean(text)
    err: dict[str, Any] = {"code": code, "message": text}
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("error:")]
    if lines:
        err["message"] = lines[-1][len("error:"):].strip()
    m = _LOCATION.search(text)
    if m:
        err["location"] = {"file": m.group("file"), "row": int(m.group("row")), "col": int(m.group("col"))}
    elif default_file:
        err["location"] = {"file": default_file, "row": 1, "col": 1}
    return err


def _compile_code(message: str) -> str | None:
    low = message.lower()
    for marker, code in _COMPILE_MARKERS:
        if marker in low:
            return code
    return None


# -- module parsing ---------------------------------------------------------------------------


def _ref_path(node: Any) -> tuple[list[str], bool]:
    """(ground prefix, fully ground) of a regorus AST ref (Var / RefDot / RefBrack)."""
    if not isinstance(node, dict) or len(node) != 1:
        return [], False
    kind, body = next(iter(node.items()))
    if kind == "Var":
        return [body["value"]], True
    if kind == "RefDot":
        prefix, ground = _ref_path(body["refr"])
        if not ground:
            return prefix, False
        return prefix + [body["field"][1]], True
    if kind == "RefBrack":
        prefix, ground = _ref_path(body["refr"])
        if not ground:
            return prefix, False
        index = body.get("index") or {}
        if "String" in index:
            return prefix + [index["String"]["value"]], True
        return prefix, False
    return [], False


def _span(node: Any) -> tuple[int, int]:
    if isinstance(node, dict):
        span = node.get("span")
        if isinstance(span, dict):
            return int(span.get("line", 1)), int(span.get("col", 1))
    return 1, 1


def _rules(module_id: str, package: tuple[str, ...], ast: dict[str, Any]) -> tuple[RuleRef, ...]:
    out = []
    for rule in ast.get("rules", []):
        kind, body = next(iter(rule.items()))
        if kind == "Default":
            refr = body.get("refr")
        else:
            head = body.get("head") or {}
            if not head:
                continue
            refr = next(iter(head.values())).get("refr")
        prefix, _ = _ref_path(refr)
        row, col = _span(body)
        if prefix:
            out.append(RuleRef(package + tuple(prefix), module_id, row, col))
    return tuple(out)


def parse_module(module_id: str, raw: str) -> Module:
    """Parse one module on its own; raises :class:`CompileError` (``rego_parse_error``)."""
    if all(_EMPTY_LINE.match(line) for line in raw.splitlines()):
        raise EmptyModuleError(module_id)
    engine = new_engine()
    try:
        engine.add_policy(module_id, raw)
        doc = json.loads(engine.get_ast_as_json())
    except RuntimeError as exc:
        raise CompileError([parse_regorus_error(str(exc), module_id, "rego_parse_error")]) from exc
    ast = doc[0]["ast"]
    prefix, _ = _ref_path(ast["package"]["refr"])
    package = tuple(prefix)
    return Module(module_id, raw, package, _rules(module_id, package, ast))


# -- compiling a module set -----------------------------------------------------------------------


def ref_text(path: Iterable[str | int]) -> str:
    """``data["a"]["b"][0]``: a Rego ref for a data path (ints index arrays)."""
    return "data" + "".join(f"[{p}]" if isinstance(p, int) else f"[{json.dumps(p, ensure_ascii=False)}]"
                            for p in path)


def compile_modules(modules: dict[str, Module]) -> regorus.Engine:
    """A policies-only engine for ``modules``; raises :class:`CompileError`."""
    engine = new_engine()
    errors: list[dict[str, Any]] = []
    for mod in modules.values():
        try:
            engine.add_policy(mod.id, mod.raw)
        except RuntimeError as exc:
            errors.append(parse_regorus_error(str(exc), mod.id, "rego_parse_error"))
    if errors:
        raise CompileError(errors)
    seen: set[tuple[str, ...]] = set()
    for mod in modules.values():
        if mod.package in seen:
            continue
        seen.add(mod.package)
        probe = engine.clone()
        try:
            probe.eval_query_as_json(ref_text(mod.package))
        except RuntimeError as exc:
            text = _clean(str(exc))
            first_error = next((ln for ln in text.splitlines() if ln.strip().startswith("error:")), text)
            code = _compile_code(first_error)
            if code is not None:
                errors.append(parse_regorus_error(text, mod.id, code))
    if errors:
        raise CompileError(errors)
    return engine


def eval_error(text: str) -> dict[str, Any]:
    """OPA's topdown error object for a regorus evaluation failure."""
    err = parse_regorus_error(text, "", "eval_internal_error")
    low = err["message"].lower()
    if "conflict" in low:
        err["code"] = "eval_conflict_error"
        err["message"] = f"complete rules must not produce multiple outputs ({err['message']})"
    elif "requires" in low or "expects" in low or "type" in low:
        err["code"] = "eval_type_error"
    elif any(w in low for w in ("divide by zero", "invalid", "overflow", "out of range")):
        err["code"] = "eval_builtin_error"
    return err
