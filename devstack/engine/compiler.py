"""OPA's own compiler (OPA 1.20, ``opa_bindings``) as the engine's compiler of record.

Contracts:

* :func:`check_module` parses one module as OPA's ``PUT /v1/policies`` does;
  :func:`check_modules` compiles a complete module set as OPA does after a
  ``PUT`` or ``DELETE``, with the stored data OPA's path-conflict check needs
  (``conflicting rule for data path … found``, in OPA's stage order). Both
  return ``None`` or raise :class:`Refused` — never anything else for a module
  OPA rejects.
* :class:`Refused` holds OPA's REST answer: ``errors`` (one object per
  ``ast.Error``: ``code``, ``message``, ``location{file,row,col}`` when OPA has
  one, and ``details{line,idx}`` for parse errors), or only ``message`` when
  OPA's error is not an error list (an empty module: OPA then answers
  ``{"code":"invalid_parameter","message":<the error's text>}``).
* The bindings report errors as text (``ast.Errors.Error()``), which names
  ``file:row`` but no column. The column is OPA's own: the set is compiled once
  more with the erroring module under the empty name, for which OPA prints
  ``row:col``. An error that second run does not report again gets column 1.
  The have/want lines of a type error are not part of OPA's REST ``message``
  (they are its ``details``, typed JSON the text does not carry) and are left out.
* Each distinct module set (with its data) is compiled once (cached by
  content); a fresh ``OpaEngine`` per set, closed after use.
* :func:`parse_module` gives a module OPA's parser accepted as a :class:`Module`:
  OPA's AST of it (the builtin ``rego.parse_module``: the parsed module, without
  locations), its package path and where its rules live.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from opa_bindings.engine import OpaEngine, OpaError

from devstack.engine.store import Path
from fedplace.common.opa_errors import ErrorEntry, split_errors  # shared with fedplace what-if

__all__ = ["ErrorEntry", "Module", "Refused", "check_module", "check_modules", "parse_details", "parse_module",
           "rest_errors", "split_errors"]

_REJECTIONS = ("parse_error", "prepare_error")  # the bindings' codes for "OPA refused the modules"

ModuleSet = tuple[tuple[str, str], ...]  # sorted (id, raw) pairs


@dataclass
class Refused(Exception):
    """OPA refused the modules: ``errors`` (REST error objects) or, when empty, ``message``."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""


def parse_details(source: str, row: int, shown: str, caret: str) -> dict[str, Any] | None:
    """OPA's ``ParserErrorDetail`` (``line``, byte ``idx``) from the two detail lines of its text.

    OPA prints the offending line without its leading tabs and a caret indented
    by ``idx`` minus those tabs; the line is the nearest one at or above ``row``
    that reads the same (OPA steps back over white space, even across lines).
    """
    if not caret.endswith("^"):
        return None
    lines = [ln.rstrip("\r") for ln in source.split("\n")]
    for i in range(min(row, len(lines)) - 1, -1, -1):
        if lines[i].lstrip("\t") == shown:
            tabs = len(lines[i]) - len(lines[i].lstrip("\t"))
            return {"line": lines[i], "idx": len(caret) - 1 + tabs}
    return None


def _key(modules: Mapping[str, str]) -> ModuleSet:
    return tuple(sorted(modules.items()))


@lru_cache(maxsize=64)
def _outcome(modules: ModuleSet, compile_set: bool, data_json: str = "{}") -> str | None:
    """OPA's error text for ``modules`` (parsed, and compiled together over ``data_json`` if ``compile_set``).

    ``None``: OPA accepts them.
    """
    with OpaEngine() as engine:
        try:
            if data_json != "{}":
                engine.add_data(json.loads(data_json))
            for module_id, raw in modules:
                engine.add_policy(module_id, raw)
            if compile_set:
                engine.eval_query("true")  # compiles every module (the bindings compile lazily)
        except OpaError as exc:
            if exc.code not in _REJECTIONS:
                raise
            return exc.message
    return None


def _columns(entries: list[ErrorEntry], modules: Mapping[str, str], compile_set: bool,
             data_json: str) -> dict[int, int]:
    """Entry index → OPA's column, from a run with each erroring module under the empty name."""
    cols: dict[int, int] = {}
    for file in dict.fromkeys(e.where for e in entries if e.where in modules):
        blanked = {("" if mid == file else mid): raw for mid, raw in modules.items()}
        again = [e for e in split_errors(_outcome(_key(blanked), compile_set, data_json) or "") or []
                 if e.where is not None and e.where not in modules and e.where.isdigit()]
        for i, entry in enumerate(entries):
            if entry.where != file:
                continue
            match = next((e for e in again if e.code == entry.code and int(e.where or 0) == entry.row), None)
            if match is not None:
                again.remove(match)
                cols[i] = match.row or 0
    return cols


def rest_errors(entries: list[ErrorEntry], cols: Mapping[int, int], modules: Mapping[str, str]) -> list[dict[str, Any]]:
    """OPA's REST error objects for ``entries``; a column missing from ``cols`` is 1."""
    out = []
    for i, entry in enumerate(entries):
        err: dict[str, Any] = {"code": entry.code, "message": entry.message}
        if entry.row is not None:
            err["location"] = {"file": entry.where or "", "row": entry.row, "col": cols.get(i, 1)}
        if entry.code == "rego_parse_error" and len(entry.details) == 2 and entry.where in modules:
            details = parse_details(modules[entry.where or ""], entry.row or 0, *entry.details)
            if details is not None:
                err["details"] = details
        out.append(err)
    return out


def _check(modules: Mapping[str, str], compile_set: bool, data: Mapping[str, Any] | None = None) -> None:
    data_json = json.dumps(data or {}, sort_keys=True)
    text = _outcome(_key(modules), compile_set, data_json)
    if text is None:
        return
    entries = split_errors(text)
    if entries is None:
        raise Refused(message=text)
    raise Refused(errors=rest_errors(entries, _columns(entries, modules, compile_set, data_json), modules))


def check_module(module_id: str, raw: str) -> None:
    """Parse one module with OPA's parser (Rego v1); raises :class:`Refused`."""
    _check({module_id: raw}, compile_set=False)


def check_modules(modules: Mapping[str, str], data: Mapping[str, Any] | None = None) -> None:
    """Compile a complete module set (id → raw) over ``data`` with OPA's compiler; raises :class:`Refused`.

    ``data`` only needs what OPA's path-conflict check reads (see
    ``state.conflict_view``): rules may not define a path that holds data or
    lies below a non-object.
    """
    _check(modules, compile_set=True, data=data)


# -- modules as OPA parses them ---------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    """A module OPA's parser accepted: ``ast`` is OPA's (``rego.parse_module``), ``package``
    its path, ``heads`` the ground start of each rule's head reference under it (``p.q`` for
    ``p.q[x] := …``): every data path a rule may define lies at or under one of them."""

    id: str
    raw: str
    ast: dict[str, Any]
    package: Path
    heads: tuple[Path, ...]


def _ground(terms: list[dict[str, Any]]) -> Path:
    """The leading ground part of a head reference: its name, then its string terms."""
    out = [str(terms[0]["value"])]
    for term in terms[1:]:
        if term.get("type") != "string":
            break
        out.append(term["value"])
    return tuple(out)


@lru_cache(maxsize=1)
def _parser() -> OpaEngine:
    return OpaEngine()  # no modules, no data: it only runs rego.parse_module


def parse_module(module_id: str, raw: str) -> Module:
    """``raw`` as OPA parses it (Rego v1); only for a module :func:`check_module` accepted."""
    rows = _parser().eval_query("m := rego.parse_module(input.id, input.raw)", input={"id": module_id, "raw": raw})
    ast = rows[0]["m"]
    package = tuple(str(t["value"]) for t in ast["package"]["path"][1:])
    heads = tuple(dict.fromkeys(package + _ground(r["head"]["ref"]) for r in ast.get("rules") or []))
    return Module(module_id, raw, ast, package, heads)
