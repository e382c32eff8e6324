"""The seam between :class:`~devstack.engine.state.EngineState` and what evaluates Rego.

``EngineState`` owns OPA's REST semantics — the data tree, the loaded modules,
undefined documents, package documents assembled rule by rule, base documents
beside rules, OPA's error bodies. An *evaluator* only answers: "the value of
each of these ``data`` references, under this input", and is kept in step with
the tree through write notifications. Two implementations:

* ``regorus`` (:mod:`devstack.engine.eval_regorus`, the default): the regorus
  interpreter with the incremental data mirror;
* ``opa`` (:mod:`devstack.engine.eval_opa`): OPA 1.20's own evaluator, in
  process through ``opa_bindings``.

Contract of an :class:`Evaluator` (every method synchronous; the engine calls
them on its event loop, one at a time):

* ``compile(modules)`` — check that the evaluator can load a module set OPA's
  compiler has accepted; returns an opaque value for ``commit`` or raises
  :class:`~devstack.engine.rego.CompileError`. Changes nothing.
* ``commit(modules, compiled)`` — that set is loaded from now on.
* ``wrote(tree, path)``, ``deleted(tree, path)``, ``mark_stale()`` — the tree
  changed at ``path`` (or anywhere); the next evaluation must see it.
* ``stale`` — a reload is pending; ``warm(tree)`` does it now (the server
  calls it when idle, so the next query does not pay for it).
* ``evaluate(tree, paths, input_doc)`` — the document at each path (``MISSING``
  when undefined) in one evaluation; raises :class:`EvalError` carrying OPA's
  topdown error object.
* ``counters()`` — figures for ``GET /_devstack/state``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from devstack.engine.rego import Module, ref_text
from devstack.engine.store import Path

__all__ = ["EVALUATORS", "EVAL_MESSAGE", "EvalError", "Evaluator", "MirrorEvaluator", "first_values", "make_evaluator",
           "query_text", "query_terms"]

EVAL_MESSAGE = "error(s) occurred while evaluating query"
EVALUATORS = ("regorus", "opa")


@dataclass
class EvalError(Exception):
    """Evaluation failed: 500 ``internal_error`` with OPA's topdown error in ``errors``."""

    error: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"code": "internal_error", "message": EVAL_MESSAGE, "errors": [self.error]}


class Evaluator(Protocol):
    """What evaluates queries for the engine (see the module docstring)."""

    name: str

    def compile(self, modules: Mapping[str, Module]) -> Any: ...

    def commit(self, modules: Mapping[str, Module], compiled: Any) -> None: ...

    def wrote(self, tree: dict[str, Any], path: Path) -> None: ...

    def deleted(self, tree: dict[str, Any], path: Path) -> None: ...

    def mark_stale(self) -> None: ...

    @property
    def stale(self) -> bool: ...

    def warm(self, tree: dict[str, Any]) -> None: ...

    def evaluate(self, tree: dict[str, Any], paths: Sequence[Path], input_doc: Any) -> list[Any]: ...

    def counters(self) -> dict[str, Any]: ...


class MirrorEvaluator:
    """What both evaluators share: data kept in step by a
    :class:`~devstack.engine.mirror.DataMirror` (``self.mirror``, set by the subclass)."""

    mirror: Any  # DataMirror

    def wrote(self, tree: dict[str, Any], path: Path) -> None:
        self.mirror.wrote(tree, path)

    def deleted(self, tree: dict[str, Any], path: Path) -> None:
        self.mirror.deleted(tree, path)

    def mark_stale(self) -> None:
        self.mirror.mark_stale()

    @property
    def stale(self) -> bool:
        return bool(self.mirror.stale)

    def warm(self, tree: dict[str, Any]) -> None:
        self.mirror.ready(tree)

    def counters(self) -> dict[str, Any]:
        m = self.mirror
        return {"stale": m.stale, "overlay_sets": len(m.sets),
                "overlay_removed": sum(len(k) for k in m.removed.values()),
                "hidden_values": m.hidden, **vars(m.stats)}


def query_terms(path: Path) -> list[str | int]:
    """OPA's URL-path → ref: integer-looking segments become numbers."""
    out: list[str | int] = []
    for seg in path:
        try:
            out.append(int(seg))
        except ValueError:
            out.append(seg)
    return out


def query_text(paths: Sequence[Path], clauses: str = "") -> str:
    """One query binding ``r<i>`` to ``[value]`` of each path (``[]`` when undefined).

    ``clauses`` (``with`` modifiers) apply to every reference. The text depends
    only on the paths and clauses, never on the input, so an evaluator may cache
    it prepared (and this function caches it: one text per distinct query).
    """
    return _query_text(tuple(paths), clauses)


@functools.lru_cache(maxsize=1024)
def _query_text(paths: tuple[Path, ...], clauses: str) -> str:
    return "; ".join(f"r{i} := [v | v := {ref_text(query_terms(p))}]{clauses}" for i, p in enumerate(paths))


def first_values(bindings: Mapping[str, Any], count: int, missing: Any) -> list[Any]:
    """The value of each ``r<i>`` of :func:`query_text`'s bindings, ``missing`` when undefined."""
    return [(bindings.get(f"r{i}") or [missing])[0] for i in range(count)]


def make_evaluator(name: str, incremental: bool = True, reuse: bool = True) -> Evaluator:
    """The evaluator called ``name`` (one of :data:`EVALUATORS`); ``incremental`` is the
    mirror's mode (``False``: the ``--data-sync reload`` baseline), ``reuse`` regorus' (``False``:
    the ``--per-query-clone`` baseline; see :mod:`devstack.engine.eval_regorus`)."""
    if name == "regorus":
        from devstack.engine.eval_regorus import RegorusEvaluator
        return RegorusEvaluator(incremental, reuse)
    if name == "opa":
        from devstack.engine.eval_opa import OpaEvaluator
        return OpaEvaluator(incremental)
    raise ValueError(f"unknown evaluator {name!r}; one of {', '.join(EVALUATORS)}")
