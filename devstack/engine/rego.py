"""The Rego side of the engine: regorus parsing, its compile checks and error mapping.

OPA's own compiler (:mod:`devstack.engine.compiler`) is the compiler of record;
what is here runs after it and refuses only what regorus cannot load or run.

Contracts:

* :func:`parse_module` parses one module alone (Rego v1, regorus' default) and
  returns a :class:`Module` with its package path and rules (ground path,
  kind, location), or raises :class:`CompileError` with OPA-shaped errors
  (``rego_parse_error``).
* :func:`compile_modules` builds a *policies-only* regorus engine (the
  "template") from a complete module set OPA's compiler has accepted, or
  raises :class:`CompileError` when regorus cannot load a module. It does not
  look for compile errors of its own (OPA's compiler decides; what regorus
  would only notice when evaluating shows at query time). Given the previous
  set and its template, a set that only adds modules costs one parse per
  added module (a clone of the template), not one per loaded module.
* :func:`eval_error` maps a regorus evaluation failure onto OPA's
  ``topdown.Error`` shape (``eval_conflict_error`` with OPA's messages,
  ``eval_type_error``, ``eval_builtin_error``).

Nothing here touches data or HTTP.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import regorus

__all__ = [
    "CompileError", "Module", "RuleRef", "compile_modules", "eval_error", "new_engine", "parse_module",
    "parse_regorus_error", "ref_text",
]

_LOCATION = re.compile(r"-->\s*(?P<file>.+?):(?P<row>\d+):(?P<col>\d+)")


@dataclass
class CompileError(Exception):
    """Modules failed to compile; ``errors`` are OPA error objects."""

    errors: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RuleRef:
    """Where a rule lives: its ground data path, its source location and its kind.

    ``kind``: ``complete`` (ground head), ``object`` (a head with a variable
    key, ``o[k] := v``), ``set`` (``contains``), ``function`` or ``default``.
    """

    path: tuple[str, ...]
    file: str
    row: int
    col: int
    kind: str = "complete"


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


_HEAD_KINDS = {"Set": "set", "Func": "function"}


def _rules(module_id: str, package: tuple[str, ...], ast: dict[str, Any]) -> tuple[RuleRef, ...]:
    out = []
    for rule in ast.get("rules", []):
        node, body = next(iter(rule.items()))
        if node == "Default":
            head_kind, refr = "Default", body.get("refr")
        else:
            head = body.get("head") or {}
            if not head:
                continue
            head_kind, head_body = next(iter(head.items()))
            refr = head_body.get("refr")
        prefix, ground = _ref_path(refr)
        kind = "default" if head_kind == "Default" else _HEAD_KINDS.get(head_kind, "complete" if ground else "object")
        row, col = _span(body)
        if prefix:
            out.append(RuleRef(package + tuple(prefix), module_id, row, col, kind))
    return tuple(out)


def parse_module(module_id: str, raw: str) -> Module:
    """Parse one module on its own; raises :class:`CompileError` (``rego_parse_error``)."""
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


def compile_modules(modules: dict[str, Module],
                    previous: tuple[Mapping[str, Module], regorus.Engine] | None = None) -> regorus.Engine:
    """A policies-only engine for ``modules``; raises :class:`CompileError` (regorus' parser).

    ``previous`` is the loaded set and its template: when ``modules`` keeps every
    one of those modules unchanged, the template is cloned and only the new
    modules are parsed.
    """
    engine: regorus.Engine | None = None
    todo = list(modules.values())
    if previous is not None:
        loaded, template = previous
        if all(modules.get(mid) is mod for mid, mod in loaded.items()):
            engine = template.clone()
            todo = [mod for mid, mod in modules.items() if mid not in loaded]
    if engine is None:
        engine = new_engine()
    errors: list[dict[str, Any]] = []
    for mod in todo:
        try:
            engine.add_policy(mod.id, mod.raw)
        except RuntimeError as exc:
            errors.append(parse_regorus_error(str(exc), mod.id, "rego_parse_error"))
    if errors:
        raise CompileError(errors)
    return engine


CONFLICT_MESSAGES = {  # OPA's topdown messages, by the kind of the conflicting rule
    "complete": "complete rules must not produce multiple outputs",
    "object": "object keys must be unique",
    "function": "functions must not produce multiple outputs for same inputs",
}
_RULE_CONFLICTS = ("rule conflicts with rule", "rules must not produce multiple outputs")
_BUILTIN_FAILURES = ("divide by zero", "invalid", "overflow", "out of range", "could not parse", "could not deserialize")


_OTHER_RULE = re.compile(r"rule at (?P<file>.+?):(?P<row>\d+):(?P<col>\d+)")


def _conflict_kind(err: dict[str, Any], modules: Mapping[str, Module]) -> str:
    """``object`` when a rule in the conflict (at the error, or the one it names) has a variable key."""
    places = [(err["location"]["file"], err["location"]["row"])] if "location" in err else []
    places += [(m.group("file"), int(m.group("row"))) for m in _OTHER_RULE.finditer(err["message"])]
    for file, row in places:
        mod = modules.get(file)
        if mod is not None and any(r.kind == "object" and r.row == row for r in mod.rules):
            return "object"
    return "complete"


def eval_error(text: str, modules: Mapping[str, Module]) -> dict[str, Any]:
    """OPA's topdown error object for a regorus evaluation failure of ``modules``.

    Conflicts get ``eval_conflict_error`` and OPA's message for the kind of
    rule; other messages and every location stay regorus'.
    """
    err = parse_regorus_error(text, "", "eval_internal_error")
    low = err["message"].lower()
    if CONFLICT_MESSAGES["function"] in low:
        err.update(code="eval_conflict_error", message=CONFLICT_MESSAGES["function"])
    elif any(marker in low for marker in _RULE_CONFLICTS):
        err.update(code="eval_conflict_error", message=CONFLICT_MESSAGES[_conflict_kind(err, modules)])
    elif "requires" in low or "expects" in low or "type" in low:
        err["code"] = "eval_type_error"
    elif any(w in low for w in _BUILTIN_FAILURES):
        err["code"] = "eval_builtin_error"
    return err
