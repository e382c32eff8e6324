"""OPA's own evaluator (OPA 1.20 in process, ``opa_bindings``) holding the engine's modules and data.

Contract (every method synchronous; the engine calls them on its event loop,
one at a time):

* ``load(modules)`` — evaluate with this module set (id → raw; OPA's compiler
  has accepted it) from now on.
* ``added(path, value)`` — the tree gained a document at a path that held none,
  with no array on the way: merged into the loaded engine. ``changed()`` — any
  other change of the data (a replacement, a deletion, the root).
* ``evaluate(tree, path, input_doc)`` — the document at ``data.<path>`` under
  ``tree`` and the loaded modules (``MISSING`` when undefined), one evaluation
  of that reference: OPA itself assembles package documents, rules split over
  modules and base data beside rules. Raises :class:`EvalError` carrying OPA's
  topdown error.
* ``needs_warm`` / ``warm(tree)`` — work is pending for the next evaluation;
  do it now (the server calls it when idle). ``counters()`` — figures for
  ``GET /_devstack/state``. ``close()`` — free the engine now.

Costs (docs/devstack.md has the figures). The bindings can only deep-merge data
(``add_data`` refuses to change a value), so a change other than an addition
drops the engine: the next evaluation builds a new one (the modules, then all
data in one ``add_data``). Either way every prepared query is invalidated, and
preparing a query text compiles every module again. So the reference is not
spelled into the query: one text per path length, ``data[p[0]]…[p[n-1]]``, with
``p`` given by a builtin registered on the engine (``fedplace_engine.path()``,
set before each evaluation) and the caller's input passed as OPA's input,
untouched. A write costs the next query one compile per path length in use,
however many different paths are read; ``warm`` prepares those texts ahead
(with a path that leads nowhere, so nothing is evaluated).

Errors. The bindings evaluate with strict builtin errors: a failing builtin is
an ``eval_builtin_error`` (500) where OPA's server answers undefined for that
expression. They report an error as text (``file:row: code: message``),
without its column: the location's ``col`` is 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from opa_bindings.engine import OpaEngine, OpaError

from devstack.engine.store import MISSING, Path

__all__ = ["EVAL_MESSAGE", "EvalError", "Evaluator", "topdown_error"]

EVAL_MESSAGE = "error(s) occurred while evaluating query"
PATH_BUILTIN = "fedplace_engine.path"  # not callable from policies: OPA's compiler of record does not know it

_PREFIX = re.compile(r"(?:1 error occurred: |\d+ errors occurred:\n)")
_ENTRY = re.compile(r"(?:(?P<file>.*?):(?P<row>\d+): )?(?P<code>[a-z_]+_error): (?P<message>.*)")


@dataclass
class EvalError(Exception):
    """Evaluation failed: 500 ``internal_error`` with OPA's topdown error in ``errors``."""

    error: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"code": "internal_error", "message": EVAL_MESSAGE, "errors": [self.error]}


def topdown_error(code: str, text: str) -> dict[str, Any]:
    """OPA's REST error object for one of the bindings' evaluation failures.

    ``text`` is ``[file:row: ]<code>: <message>``, or a list of such lines
    after ``N errors occurred:`` (the first is taken, as OPA's evaluator stops
    at its first error); a text of another shape keeps ``code`` as given.
    """
    body = text.strip()
    head = _PREFIX.match(body)
    if head is not None:
        body = body[head.end():]
    m = _ENTRY.fullmatch(body.split("\n", 1)[0])
    if m is None:
        return {"code": code, "message": text}
    err: dict[str, Any] = {"code": m.group("code"), "message": m.group("message")}
    if m.group("row"):
        err["location"] = {"file": m.group("file") or "", "row": int(m.group("row")), "col": 1}
    return err


def query_terms(path: Path) -> list[str | int]:
    """OPA's URL-path → ref: integer-looking segments become numbers."""
    out: list[str | int] = []
    for seg in path:
        try:
            out.append(int(seg))
        except ValueError:
            out.append(seg)
    return out


def query_text(length: int) -> str:
    """The query reading ``data`` at the path of ``length`` keys :data:`PATH_BUILTIN` gives."""
    return f"p := {PATH_BUILTIN}(); x := data" + "".join(f"[p[{i}]]" for i in range(length))


@dataclass
class Counters:
    builds: int = 0   # engines built (modules + all data)
    merges: int = 0   # documents merged into a loaded engine
    drops: int = 0    # loaded engines dropped (a change other than an addition, new modules)


class Evaluator:
    """OPA's evaluator over the engine's modules and data (see the module docstring)."""

    def __init__(self) -> None:
        self.modules: tuple[tuple[str, str], ...] = ()
        self.engine: OpaEngine | None = None
        self.lengths: set[int] = set()  # path lengths read so far: the query texts worth preparing
        self.prepared = False  # every text of ``lengths`` is prepared on ``engine``
        self.stats = Counters()
        self._path: list[str | int] = []

    # -- changes -------------------------------------------------------------------------------

    def load(self, modules: Mapping[str, str]) -> None:
        self.modules = tuple(modules.items())
        self.changed()

    def changed(self) -> None:
        if self.engine is not None:
            self.stats.drops += 1
            self.close()

    def added(self, path: Path, value: Any) -> None:
        if self.engine is None:
            return  # the next evaluation builds an engine from the tree
        for key in reversed(path):
            value = {key: value}
        try:
            self.engine.add_data(value)
        except OpaError:  # a merge OPA refuses: build anew instead
            self.changed()
            return
        self.prepared = False
        self.stats.merges += 1

    def close(self) -> None:
        """Free the Go engine now: Python's collector, blind to the Go heap, would free it late
        (it is in a reference cycle through its callback trampoline)."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    # -- evaluation ----------------------------------------------------------------------------------

    def _ready(self, tree: dict[str, Any]) -> OpaEngine:
        if self.engine is None:
            engine = OpaEngine()
            engine.register_function(PATH_BUILTIN, lambda: self._path, arity=0)
            for module_id, raw in self.modules:
                engine.add_policy(module_id, raw)
            if tree:
                engine.add_data(tree)
            self.engine = engine
            self.prepared = False
            self.stats.builds += 1
        return self.engine

    @property
    def loaded(self) -> bool:
        """An engine holds the current modules and data."""
        return self.engine is not None

    @property
    def needs_warm(self) -> bool:
        return bool(self.modules) and (self.engine is None or not self.prepared)

    def warm(self, tree: dict[str, Any]) -> None:
        engine = self._ready(tree)
        self._path = [0]  # data[0] is undefined at once: the text is prepared, nothing evaluated
        for length in sorted(self.lengths):
            try:
                engine.eval_query(query_text(length))
            except OpaError:
                pass
        self.prepared = True

    def evaluate(self, tree: dict[str, Any], path: Path, input_doc: Any) -> Any:
        engine = self._ready(tree)
        self.lengths.add(len(path))
        self._path = query_terms(path)
        try:
            rows = engine.eval_query(query_text(len(path)), input=None if input_doc is MISSING else input_doc)
        except OpaError as exc:
            raise EvalError(topdown_error(exc.code, exc.message)) from exc
        return rows[0]["x"] if rows else MISSING

    def counters(self) -> dict[str, Any]:
        return {"loaded": self.loaded, "prepared": self.prepared, **vars(self.stats)}
