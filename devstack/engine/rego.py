"""The Rego side of the engine: modules, compile checks and evaluation on regorus.

:class:`RegoState` owns the loaded modules and a regorus engine that carries
them plus the data. Modules are compiled on a candidate engine first and only
committed when every module still compiles, so a broken module never affects
the loaded ones. regorus parses on ``add_policy`` but reports some compile
errors (unsafe variables, undefined functions, conflicting rules) only when a
package is evaluated, so every candidate package is also evaluated once with
no data and no input; errors of those classes count as compile errors.

Data is pushed into regorus lazily: writes only mark the data dirty, and the
next query that needs policies rebuilds the engine (policies-only template
clone + one bulk ``add_data_json``). Reads of pure data documents never touch
regorus (see ``server.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import regorus

__all__ = ["CompileError", "EvalError", "RegoState", "module_package", "parse_regorus_error"]

_LOCATION = re.compile(r"-->\s*(?P<file>.+?):(?P<row>\d+):(?P<col>\d+)")
_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_][\w.]*)", re.M)
_COMPILE_CLASSES = ("unsafe", "undefined function", "undefined variable", "conflict", "redeclared",
                    "recursion", "multiple default", "unknown function", "could not find function")


@dataclass
class CompileError(Exception):
    """Modules failed to compile; ``errors`` in OPA's shape."""

    errors: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EvalError(Exception):
    message: str
    code: str = "internal_error"


def _clean(text: str) -> str:
    return text.split("Stack backtrace:")[0].strip()


def parse_regorus_error(text: str, default_file: str, code: str) -> dict[str, Any]:
    """One OPA error object from a regorus message (``--> file:row:col … error: msg``)."""
    text = _clean(text)
    err: dict[str, Any] = {"code": code, "message": text}
    m = _LOCATION.search(text)
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("error:")]
    if lines:
        err["message"] = lines[-1].strip()[len("error:"):].strip()
    if m:
        err["location"] = {"file": m.group("file"), "row": int(m.group("row")), "col": int(m.group("col"))}
    else:
        err["location"] = {"file": default_file, "row": 0, "col": 0}
    if code == "rego_compile_error":
        if "unsafe" in err["message"]:
            err["code"] = "rego_unsafe_var_error"
        elif "could not find function" in err["message"]:
            err["code"] = "rego_type_error"
    return err


def module_package(raw: str) -> list[str] | None:
    """The package path of a module (``package a.b`` → ``["a", "b"]``)."""
    m = _PACKAGE.search(_strip_comments(raw))
    return m.group(1).split(".") if m else None


def _strip_comments(raw: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in raw.splitlines())


def _ref(path: list[str]) -> str:
    return "data" + "".join(f"[{json.dumps(p)}]" for p in path)


def _value_of(doc_json: str) -> tuple[bool, Any]:
    doc = json.loads(doc_json)
    results = doc.get("result") or []
    if not results:
        return False, None
    exprs = results[0].get("expressions") or []
    if not exprs:
        return False, None
    return True, exprs[0].get("value")


class RegoState:
    """Loaded modules (id → raw) and the engine evaluating them over the data."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.packages: dict[str, list[str]] = {}
        self._template = regorus.Engine()
        self._engine: regorus.Engine | None = None

    # -- modules -------------------------------------------------------------

    def _build(self, modules: dict[str, str]) -> regorus.Engine:
        engine = regorus.Engine()
        errors = []
        for mid, raw in modules.items():
            try:
                engine.add_policy(mid, raw)
            except RuntimeError as exc:
                errors.append(parse_regorus_error(str(exc), mid, "rego_parse_error"))
        if errors:
            raise CompileError(errors)
        return engine

    def _lint(self, engine: regorus.Engine, modules: dict[str, str], only: set[str] | None = None) -> None:
        errors = []
        seen: set[str] = set()
        for mid, raw in modules.items():
            pkg = module_package(raw)
            if pkg is None:
                continue
            name = ".".join(pkg)
            if name in seen or (only is not None and name not in only):
                continue
            seen.add(name)
            probe = engine.clone()
            try:
                probe.eval_query_as_json(_ref(pkg))
            except RuntimeError as exc:
                text = _clean(str(exc))
                if any(c in text.lower() for c in _COMPILE_CLASSES):
                    errors.append(parse_regorus_error(text, mid, "rego_compile_error"))
        if errors:
            raise CompileError(errors)

    def put_module(self, module_id: str, raw: str) -> None:
        """Add or replace a module; raises :class:`CompileError` and changes nothing on failure."""
        candidate = dict(self.modules)
        candidate[module_id] = raw
        engine = self._build(candidate)
        self._lint(engine, candidate)
        self._commit(candidate, engine)

    def delete_module(self, module_id: str) -> None:
        """Remove a module; raises KeyError when absent, CompileError when others depend on it."""
        if module_id not in self.modules:
            raise KeyError(module_id)
        candidate = {k: v for k, v in self.modules.items() if k != module_id}
        engine = self._build(candidate)
        self._lint(engine, candidate)
        self._commit(candidate, engine)

    def _commit(self, modules: dict[str, str], template: regorus.Engine) -> None:
        self.modules = modules
        self.packages = {mid: module_package(raw) or [] for mid, raw in modules.items()}
        self._template = template
        self._engine = None  # rebuilt with the data on the next query

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def inside_policy(self, path: list[str]) -> bool:
        """Whether ``path`` is a package's path or lies under one."""
        return any(pkg and path[: len(pkg)] == pkg for pkg in self.packages.values())

    def overlaps_policy(self, path: list[str]) -> bool:
        """Whether the document at ``path`` is (or contains, or lies in) a policy-defined one."""
        for pkg in self.packages.values():
            n = min(len(pkg), len(path))
            if pkg[:n] == path[:n]:
                return True
        return False

    # -- evaluation ------------------------------------------------------------

    def data_changed(self) -> None:
        self._engine = None

    def evaluate(self, path: list[str], data: dict[str, Any], input_doc: Any, has_input: bool) -> tuple[bool, Any]:
        """(defined, value) of ``data.<path>`` with ``input``; raises :class:`EvalError`."""
        if self._engine is None:
            engine = self._template.clone()
            engine.add_data_json(json.dumps(data))
            self._engine = engine
        engine = self._engine.clone()
        if has_input:
            engine.set_input_json(json.dumps(input_doc))
        try:
            return _value_of(engine.eval_query_as_json(_ref(path)))
        except RuntimeError as exc:
            text = _clean(str(exc))
            code = "internal_error"
            if "conflict" in text.lower():
                text = "eval_conflict_error: " + text
            raise EvalError(text, code) from exc
