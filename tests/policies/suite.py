"""The Rego modules under policies/ and the unit tests they define, read with OPA's own parser.

Contracts:

* :func:`modules` — every ``policies/**/*.rego`` as ``{id: source}``, the id being
  the path relative to policies/ (POSIX separators), sorted by id; with
  ``tests=False`` the ``*_test.rego`` files are left out (what ships).
* :func:`discover` — what ``opa test policies/`` runs: in every module, each rule
  whose ground head ref ends in a name starting with ``test_`` (or
  ``todo_test_``, reported as skipped), once per rule path however many
  definitions it has; whatever the head form (``test_x if …``,
  ``test_x := true if …``, ``test_x contains …``). Modules are parsed by OPA
  (``rego.parse_module``), so discovery never disagrees with the compiler; a
  module OPA cannot parse is listed in :attr:`Discovery.parse_errors` instead.
* :func:`opa_engine` — an ``OpaEngine`` holding the given modules under their
  ids; :func:`compile_error` — OPA's message when that module set does not
  parse or compile, else None.
* :func:`data_ref` — a Rego reference to ``data.<path…>`` that is valid for any
  segment text.
* :func:`put_in_dependency_order` — loads modules one PUT at a time the way
  opa-kube-sync does: a module refused (e.g. it calls a library not loaded
  yet) is tried again after every round that loaded something, so the order
  of the ids does not matter; what still fails is reported with the server's
  answer.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from opa_bindings import OpaEngine, OpaError

__all__ = ["POLICIES", "Discovery", "RegoTest", "compile_error", "data_ref", "discover", "modules", "opa_engine",
           "put_in_dependency_order"]

POLICIES = Path(__file__).resolve().parents[2] / "policies"
TEST_PREFIX = "test_"
SKIP_PREFIX = "todo_test_"


def modules(*, tests: bool = True) -> dict[str, str]:
    """Every Rego module under policies/, ``{relative path: source}``, sorted by path."""
    found = {path.relative_to(POLICIES).as_posix(): path.read_text() for path in POLICIES.rglob("*.rego")}
    return {mid: src for mid, src in sorted(found.items()) if tests or not mid.endswith("_test.rego")}


async def put_in_dependency_order(put: Callable[[str, str], Awaitable[tuple[int, str]]],
                                  mods: dict[str, str]) -> None:
    """PUT every module through ``put(id, source) -> (status, text)``, retrying refused ones
    while a round makes progress; raises AssertionError naming what never loaded."""
    pending = dict(mods)
    while pending:
        refused: dict[str, str] = {}
        for module_id, source in pending.items():
            status, text = await put(module_id, source)
            if status != 200:
                refused[module_id] = f"{status} {text}"
        if len(refused) == len(pending):
            raise AssertionError("the engine refused: " + "; ".join(f"{m}: {t}" for m, t in refused.items()))
        pending = {m: pending[m] for m in refused}


def data_ref(path: tuple[str, ...]) -> str:
    """``data["a"]["b"]…`` for ``("a", "b", …)``: a query for any segment text."""
    return "data" + "".join(f"[{json.dumps(seg)}]" for seg in path)


@dataclass(frozen=True)
class RegoTest:
    """One Rego test: the module (``file``) defining it and its rule path under ``data``."""

    file: str
    package: tuple[str, ...]
    rule: tuple[str, ...]

    @property
    def name(self) -> str:
        return ".".join(self.rule)

    @property
    def skipped(self) -> bool:
        return self.rule[-1].startswith(SKIP_PREFIX)

    @property
    def path(self) -> tuple[str, ...]:
        return self.package + self.rule

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


@dataclass
class Discovery:
    """The outcome of :func:`discover`: tests in file order, per-file parse errors, and every test file."""

    tests: list[RegoTest] = field(default_factory=list)
    parse_errors: dict[str, str] = field(default_factory=dict)
    test_files: list[str] = field(default_factory=list)

    def tests_in(self, file: str) -> list[RegoTest]:
        return [t for t in self.tests if t.file == file]


@functools.cache
def _parser() -> OpaEngine:
    return OpaEngine()


def parse(module_id: str, source: str) -> dict[str, Any]:
    """OPA's AST of one module (JSON); raises OpaError with OPA's message when it does not parse."""
    result = _parser().eval_query("m := rego.parse_module(input.id, input.src)", {"id": module_id, "src": source})
    return result[0]["m"]


def _strings(terms: list[dict[str, Any]]) -> tuple[str, ...] | None:
    """The text of a ref's terms when all are vars or strings (a ground rule path), else None."""
    if not all(t.get("type") in ("var", "string") for t in terms):
        return None
    return tuple(str(t["value"]) for t in terms)


def _tests_of(module_id: str, ast: dict[str, Any]) -> list[RegoTest]:
    """The test rules of one module's AST, in source order (repeated definitions included)."""
    package = _strings(ast["package"]["path"][1:]) or ()
    out = []
    for rule in ast.get("rules", []):
        head = rule["head"]
        ref = _strings(head.get("ref") or [{"type": "var", "value": head.get("name", "")}])
        if ref is not None and ref[-1].startswith((TEST_PREFIX, SKIP_PREFIX)):
            out.append(RegoTest(module_id, package, ref))
    return out


@functools.cache
def discover() -> Discovery:
    """The Rego tests of every module under policies/ (see the module docstring)."""
    found = Discovery()
    for module_id, source in modules().items():
        if module_id.endswith("_test.rego"):
            found.test_files.append(module_id)
        try:
            ast = parse(module_id, source)
        except OpaError as exc:
            found.parse_errors[module_id] = exc.message
            continue
        seen = {t.path for t in found.tests}
        for test in _tests_of(module_id, ast):
            if test.path not in seen:  # one run per rule path, as `opa test` does
                seen.add(test.path)
                found.tests.append(test)
    return found


def opa_engine(mods: dict[str, str], data: Any = None) -> OpaEngine:
    """A fresh OpaEngine holding ``mods`` (id → source) and, when given, ``data`` at the root.

    Raises OpaError when a module does not parse (``add_policy`` parses; the
    compiler runs at the first evaluation, see :func:`compile_error`).
    """
    engine = OpaEngine()
    for module_id, source in mods.items():
        engine.add_policy(module_id, source)
    if data is not None:
        engine.add_data(data)
    return engine


def compile_error(mods: dict[str, str]) -> str | None:
    """OPA's parser or compiler message for the module set ``mods``, or None when OPA accepts it."""
    try:
        opa_engine(mods).eval_query("true")
    except OpaError as exc:
        return f"{exc.code}: {exc.message}"
    return None
