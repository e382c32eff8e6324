"""The engine's state and its operations, independent of HTTP.

:class:`EngineState` owns the authoritative data tree (persistent, see
``store.py``), the loaded modules with their policies-only regorus engine, and
the :class:`~devstack.engine.mirror.DataMirror` that keeps regorus' data in
step. Every method is synchronous and either commits completely or raises
without changing anything — the server runs them on the event loop, so each
request is atomic and a read right after a write sees it.

Errors raised: :class:`~devstack.engine.store.StoreError` (status, code,
message), :class:`PolicyError` (OPA's compile-error response),
:class:`EvalError` (OPA's evaluation-error response).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from devstack.engine import rego
from devstack.engine.mirror import HIDDEN, DataMirror
from devstack.engine.store import (
    MISSING, Path, StoreError, apply_patch, delete, fmt_path, lookup, non_empty, parse_patch, put, read_path,
)

__all__ = ["COMPILE_MESSAGE", "EngineState", "EvalError", "PolicyError"]

COMPILE_MESSAGE = "error(s) occurred while compiling module(s)"
EVAL_MESSAGE = "error(s) occurred while evaluating query"


@dataclass
class PolicyError(Exception):
    """A policy operation refused: ``{"code", "message", "errors"}`` with ``status``."""

    status: int
    code: str
    message: str
    errors: list[dict[str, Any]] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.errors:
            body["errors"] = self.errors
        return body


@dataclass
class EvalError(Exception):
    """Evaluation failed: 500 ``internal_error`` with OPA's topdown error in ``errors``."""

    error: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"code": "internal_error", "message": EVAL_MESSAGE, "errors": [self.error]}


def _is_prefix(prefix: Path, path: Path) -> bool:
    return len(prefix) <= len(path) and path[: len(prefix)] == prefix


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _query_terms(path: Path) -> list[str | int]:
    """OPA's URL-path → ref: integer-looking segments become numbers."""
    out: list[str | int] = []
    for seg in path:
        try:
            out.append(int(seg))
        except ValueError:
            out.append(seg)
    return out


def _conflict_errors(rules: list[rego.RuleRef], tree: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"code": "rego_compile_error",
             "message": f"conflicting rule for data path {'/'.join(r.path)} found",
             "location": {"file": r.file, "row": r.row, "col": r.col}}
            for r in rules if non_empty(tree, r.path)]


class EngineState:
    """Data, policies and evaluation, with OPA's REST semantics."""

    def __init__(self, incremental: bool = True) -> None:
        self.tree: dict[str, Any] = {}
        self.modules: dict[str, rego.Module] = {}
        self.mirror = DataMirror(rego.compile_modules({}), incremental=incremental)

    def reset(self) -> None:
        """Forget everything, as an OPA restart does."""
        self.__init__(self.mirror.incremental)  # type: ignore[misc]

    # -- policies -----------------------------------------------------------------------------

    @property
    def packages(self) -> tuple[Path, ...]:
        return tuple({m.package for m in self.modules.values()})

    def _rules(self) -> list[rego.RuleRef]:
        return [r for m in self.modules.values() for r in m.rules]

    def _commit_modules(self, modules: dict[str, rego.Module], template: Any) -> None:
        self.modules = modules
        self.mirror.set_template(template, tuple({m.package for m in modules.values()}))

    def put_policy(self, module_id: str, raw: str) -> None:
        """Add or replace a module; on any error nothing changes."""
        current = self.modules.get(module_id)
        if current is not None and current.raw == raw:
            return  # OPA: identical bytes are a no-op
        try:
            module = rego.parse_module(module_id, raw)
        except rego.EmptyModuleError as exc:
            raise PolicyError(400, "invalid_parameter", "empty module") from exc
        except rego.CompileError as exc:
            raise PolicyError(400, "invalid_parameter", COMPILE_MESSAGE, exc.errors) from exc
        candidate = dict(self.modules)
        candidate[module_id] = module
        errors = _conflict_errors(list(module.rules), self.tree)
        if errors:
            raise PolicyError(400, "invalid_parameter", COMPILE_MESSAGE, errors)
        try:
            template = rego.compile_modules(candidate)
        except rego.CompileError as exc:
            raise PolicyError(400, "invalid_parameter", COMPILE_MESSAGE, exc.errors) from exc
        self._commit_modules(candidate, template)

    def delete_policy(self, module_id: str) -> None:
        """Remove a module: 404 when absent, 400 ``invalid_operation`` when others need it."""
        if module_id not in self.modules:
            raise StoreError(404, "resource_not_found", f'storage_not_found_error: policy id "{module_id}"')
        candidate = {k: v for k, v in self.modules.items() if k != module_id}
        try:
            template = rego.compile_modules(candidate)
        except rego.CompileError as exc:
            raise PolicyError(400, "invalid_operation", COMPILE_MESSAGE, exc.errors) from exc
        self._commit_modules(candidate, template)

    def get_policy(self, module_id: str) -> dict[str, Any]:
        mod = self.modules.get(module_id)
        if mod is None:
            raise StoreError(404, "resource_not_found", f'storage_not_found_error: policy id "{module_id}"')
        return {"id": mod.id, "raw": mod.raw, "ast": mod.ast()}

    def list_policies(self) -> list[dict[str, Any]]:
        return [self.get_policy(mid) for mid in self.modules]

    # -- data writes -----------------------------------------------------------------------------

    def _check_path(self, path: Path) -> None:
        if path and path[0] == HIDDEN:
            raise StoreError(400, "invalid_parameter", f"bad path: {fmt_path(path)} is reserved")

    def _commit_tree(self, new_tree: dict[str, Any], path: Path) -> None:
        """Refuse data that would collide with rules (OPA's CheckPathConflicts), then commit."""
        rules = [r for r in self._rules() if _overlaps(r.path, path)]
        errors = _conflict_errors(rules, new_tree)
        if errors:
            lines = [f"{e['location']['file']}:{e['location']['row']}: {e['code']}: {e['message']}" for e in errors]
            text = (f"1 error occurred: {lines[0]}" if len(lines) == 1
                    else f"{len(lines)} errors occurred:\n" + "\n".join(lines))  # ast.Errors.Error()
            raise StoreError(400, "invalid_parameter", text)
        self.tree = new_tree

    def put_data(self, path: Path, value: Any, if_none_match: bool = False) -> bool:
        """``PUT``; returns False (nothing written) for ``If-None-Match: *`` on an existing doc."""
        self._check_path(path)
        if if_none_match and lookup(self.tree, path) is not MISSING:
            return False
        self._commit_tree(put(self.tree, path, value), path)
        if path:
            self.mirror.wrote(self.tree, path)
        else:
            self.mirror.mark_stale()
        return True

    def patch_data(self, path: Path, ops: Any) -> None:
        self._check_path(path)
        for _, rel, _ in parse_patch(ops):
            self._check_path(path + rel)
        existed = lookup(self.tree, path) is not MISSING
        new_tree = apply_patch(self.tree, path, ops)
        self._commit_tree(new_tree, path)
        if not path:
            self.mirror.mark_stale()
        elif lookup(self.tree, path) is not MISSING:
            self.mirror.wrote(self.tree, path)
        elif existed:
            self.mirror.deleted(self.tree, path)

    def delete_data(self, path: Path) -> None:
        self._check_path(path)
        self.tree = delete(self.tree, path)
        self.mirror.deleted(self.tree, path)

    # -- reads -------------------------------------------------------------------------------------

    def _needs_eval(self, path: Path) -> bool:
        return any(_overlaps(pkg, path) for pkg in self.packages)

    def read(self, path: Path, input_doc: Any = MISSING) -> Any:
        """The document at ``path`` (base + virtual), or MISSING when undefined."""
        if not self._needs_eval(path):
            return read_path(self.tree, path)
        if not path:
            return self._read_root(input_doc)
        return self._evaluate(path, input_doc)

    def _read_root(self, input_doc: Any) -> Any:
        result: dict[str, Any] = {}
        keys = list(self.tree) + [pkg[0] for pkg in self.packages if pkg and pkg[0] not in self.tree]
        for key in dict.fromkeys(keys):
            if self._needs_eval((key,)):
                value = self._evaluate((key,), input_doc)
            else:
                value = self.tree[key]
            if value is not MISSING:
                result[key] = value
        return result

    def _evaluate(self, path: Path, input_doc: Any) -> Any:
        engine = self.mirror.ready(self.tree).clone()
        if input_doc is not MISSING:
            engine.set_input_json(json.dumps(input_doc))
        query = rego.ref_text(_query_terms(path)) + self.mirror.clauses()
        try:
            doc = json.loads(engine.eval_query_as_json(query))
        except RuntimeError as exc:
            raise EvalError(rego.eval_error(str(exc))) from exc
        results = doc.get("result") or []
        if not results or not results[0].get("expressions"):
            return MISSING
        return results[0]["expressions"][0].get("value", MISSING)
