"""The default evaluator: regorus, its data kept in step incrementally by the mirror.

Contract: :class:`~devstack.engine.evaluator.Evaluator`. ``compile`` refuses
(``rego.CompileError``) only what regorus cannot load; a set that only adds
modules to the loaded one costs one parse per added module. Data writes reach
regorus through :class:`~devstack.engine.mirror.DataMirror` (merges, ``with``
overlays, a reload past its limits). Each evaluation runs on a clone of the
mirror's engine, so the input never leaks into the next query. Evaluation
errors become OPA's topdown error objects (``rego.eval_error``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from devstack.engine import rego
from devstack.engine.evaluator import EvalError, MirrorEvaluator, first_values, query_text
from devstack.engine.mirror import DataMirror
from devstack.engine.store import MISSING, Path

__all__ = ["RegorusEvaluator"]


class RegorusEvaluator(MirrorEvaluator):
    """regorus behind the engine's evaluator seam."""

    name = "regorus"

    def __init__(self, incremental: bool = True) -> None:
        self.mirror = DataMirror(rego.compile_modules({}), incremental=incremental)
        self.modules: Mapping[str, rego.Module] = {}

    def compile(self, modules: Mapping[str, rego.Module]) -> Any:
        return rego.compile_modules(dict(modules), (self.modules, self.mirror.template))

    def commit(self, modules: Mapping[str, rego.Module], compiled: Any) -> None:
        self.modules = modules
        self.mirror.set_template(compiled, tuple({m.package for m in modules.values()}))

    def evaluate(self, tree: dict[str, Any], paths: Sequence[Path], input_doc: Any) -> list[Any]:
        engine = self.mirror.ready(tree).clone()
        if input_doc is not MISSING:
            engine.set_input_json(json.dumps(input_doc))
        try:
            doc = json.loads(engine.eval_query_as_json(query_text(paths, self.mirror.clauses())))
        except RuntimeError as exc:
            raise EvalError(rego.eval_error(str(exc), self.modules)) from exc
        bindings = ((doc.get("result") or [{}])[0]).get("bindings") or {}
        return first_values(bindings, len(paths), MISSING)
