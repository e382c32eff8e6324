"""OPA's own evaluator (OPA 1.20, in process through ``opa_bindings``) behind the engine's seam.

Contract: :class:`~devstack.engine.evaluator.Evaluator`, answering exactly as
OPA's evaluator does (its values, its ``eval_*_error`` codes and messages).
OPA's compiler has already accepted every committed set, so ``compile``
refuses nothing.

Data. The bindings' ``add_data`` only deep-merges (it refuses to change a
value), and every call invalidates the engine's prepared queries: the next
evaluation of each query text rebuilds OPA's store from all the data (~15–20
µs per replicated object) before it evaluates. A new engine costs that plus
encoding and decoding all the data (~20–30 µs per object more). So:

* a document at a path new to the engine is merged (``add_data``): the next
  query pays one store rebuild, however many merges came before it;
* a replaced or deleted document marks the engine stale: the next query (or
  the server, once idle) builds a new engine — the modules, then all data in
  one ``add_data``;
* no ``with`` overlay as the regorus evaluator has: OPA's ``with`` on a data
  path *merges* an object value into what a reader of a parent path sees
  (``data.kv with data.kv.c as {"z": 9}`` still shows ``c``'s other keys), so
  a replaced object would keep keys it lost; and every ``with`` on data slows
  OPA's evaluation (128 of them made the remediation query 2.4x slower).

Cost therefore scales with the queries that follow writes, not with the
writes: a burst of 1,000 replacements then one query pays one new engine
(~0.2 s at 5,000 replicated objects on the development machine, 0.45 s at
10,000), additions one store rebuild (0.22 s at 10,000). A real OPA writes
into a transactional store and pays none of this; docs/devstack.md has the
figures.

Errors. The bindings evaluate with strict builtin errors, so a failing builtin
is an ``eval_builtin_error`` (500), where OPA's server answers undefined for
that expression — the regorus evaluator answers the same way (see
docs/devstack.md, "Known differences"). The bindings report an error as text
(``file:row: code: message``), without its column: the location's ``col`` is 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from opa_bindings.engine import OpaEngine, OpaError

from devstack.engine.evaluator import EvalError, MirrorEvaluator, first_values, query_text
from devstack.engine.mirror import DataMirror
from devstack.engine.rego import Module
from devstack.engine.store import MISSING, Path

__all__ = ["OpaEvaluator", "OpaModules", "topdown_error"]

_PREFIX = re.compile(r"(?:1 error occurred: |\d+ errors occurred:\n)")
_ENTRY = re.compile(r"(?:(?P<file>.*?):(?P<row>\d+): )?(?P<code>[a-z_]+_error): (?P<message>.*)")


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


class _Instance:
    """One OPA engine with the modules loaded, in the shape the data mirror drives."""

    def __init__(self, modules: tuple[tuple[str, str], ...]) -> None:
        self.engine = OpaEngine()
        for module_id, raw in modules:
            self.engine.add_policy(module_id, raw)

    def add_data(self, value: Any) -> None:
        try:
            self.engine.add_data(value)
        except OpaError as exc:  # a merge OPA refuses: the mirror reloads instead
            raise RuntimeError(str(exc)) from exc

    def eval_query(self, text: str, input_doc: Any = MISSING) -> list[dict[str, Any]]:
        return self.engine.eval_query(text, input=None if input_doc is MISSING else input_doc)

    def close(self) -> None:
        """Free the Go engine now: it is in a reference cycle (its callback trampoline), so
        Python's garbage collector, blind to the Go heap, would free it late — the engine
        of every reload piled up (5 GB after 300 reloads at 10,000 objects)."""
        self.engine.close()


@dataclass(frozen=True)
class OpaModules:
    """The mirror's template: the module set; each ``clone()`` is a fresh engine holding it."""

    modules: tuple[tuple[str, str], ...] = ()

    def clone(self) -> _Instance:
        return _Instance(self.modules)


class OpaEvaluator(MirrorEvaluator):
    """OPA 1.20's evaluator behind the engine's evaluator seam (see the module docstring)."""

    name = "opa"

    def __init__(self, incremental: bool = True) -> None:
        self.mirror = DataMirror(OpaModules(), incremental=incremental, overlay=False, prepare=False)

    def compile(self, modules: Mapping[str, Module]) -> OpaModules:
        return OpaModules(tuple((m.id, m.raw) for m in modules.values()))

    def commit(self, modules: Mapping[str, Module], compiled: OpaModules) -> None:
        self.mirror.set_template(compiled, tuple({m.package for m in modules.values()}))

    def evaluate(self, tree: dict[str, Any], paths: Sequence[Path], input_doc: Any) -> list[Any]:
        engine: _Instance = self.mirror.ready(tree)
        try:
            rows = engine.eval_query(query_text(paths), input_doc)
        except OpaError as exc:
            raise EvalError(topdown_error(exc.code, exc.message)) from exc
        return first_values(rows[0] if rows else {}, len(paths), MISSING)
