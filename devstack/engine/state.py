"""The engine's state and its operations, independent of HTTP.

:class:`EngineState` owns the authoritative data tree (persistent, see
``store.py``), the loaded modules, and OPA's evaluator
(:mod:`~devstack.engine.evaluator`) kept in step with both. OPA's own compiler
(:mod:`~devstack.engine.compiler`) decides what loads, and which data writes
collide with rules. Every method is synchronous and either commits completely
or raises without changing anything — the server runs them on the event loop,
so each request is atomic and a read right after a write sees it.

Reads. A path no package overlaps is read from the tree (OPA's storage
semantics, no evaluation); any other path, ``data`` itself included, is one
evaluation of that reference by OPA.

Errors raised: :class:`~devstack.engine.store.StoreError` (status, code,
message), :class:`PolicyError` (OPA's compile-error response),
:class:`EvalError` (OPA's evaluation-error response).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from devstack.engine import compiler
from devstack.engine.evaluator import EVAL_MESSAGE, EvalError, Evaluator
from devstack.engine.store import (
    MISSING,
    Path,
    StoreError,
    apply_patch,
    delete,
    lookup,
    parse_patch,
    put,
    read_path,
)
from fedplace.common.jsonsafe import dumps

__all__ = ["COMPILE_MESSAGE", "EVAL_MESSAGE", "EngineState", "EvalError", "PolicyError", "conflict_view"]

COMPILE_MESSAGE = "error(s) occurred while compiling module(s)"


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


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


@contextmanager
def _refusals(code: str) -> Iterator[None]:
    """Turn OPA's refusals into 400 :class:`PolicyError` with ``code``."""
    try:
        yield
    except compiler.Refused as exc:
        if not exc.errors:  # not an error list (an empty module): OPA answers its text
            raise PolicyError(400, "invalid_parameter", exc.message) from exc
        raise PolicyError(400, code, COMPILE_MESSAGE, exc.errors) from exc


def _collapsed(node: Any) -> Any:
    """``node`` with every non-object replaced by 0: all OPA's path-conflict check tells apart."""
    return {k: _collapsed(v) for k, v in node.items()} if isinstance(node, dict) else 0


def _through_array(tree: dict[str, Any], path: Path) -> bool:
    """Whether a proper prefix of ``path`` is an array in ``tree`` (indexes shift under patches)."""
    return any(isinstance(lookup(tree, path[:i]), list) for i in range(1, len(path)))


def _nested(path: Path, value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _merged(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **{k: _merged(a[k], v) if k in a else v for k, v in b.items()}}
    return b


def conflict_view(tree: dict[str, Any], packages: Iterable[Path]) -> dict[str, Any]:
    """The part of ``tree`` OPA's path-conflict check reads for rules under ``packages``.

    Per package: its subtree with non-objects collapsed to 0, or the first
    non-object on the way to it (as 0). ``storage.NonEmpty`` answers the same
    on this view as on ``tree`` for every path under those packages.
    """
    view: dict[str, Any] = {}
    for pkg in packages:
        for i in range(1, len(pkg) + 1):
            node = lookup(tree, pkg[:i])
            if node is MISSING:
                break
            if not isinstance(node, dict):
                view = _merged(view, _nested(pkg[:i], 0))
                break
        else:
            view = _merged(view, _nested(pkg, _collapsed(node)))
    return view


def _outermost(paths: Iterable[Path]) -> list[Path]:
    distinct = list(dict.fromkeys(paths))
    return [p for p in distinct if not any(o != p and o == p[:len(o)] for o in distinct)]


class EngineState:
    """Data, policies and evaluation, with OPA's REST semantics."""

    def __init__(self) -> None:
        self.tree: dict[str, Any] = {}
        self.modules: dict[str, compiler.Module] = {}
        self.packages: tuple[Path, ...] = ()
        self.heads: tuple[Path, ...] = ()  # where rules live (compiler.Module.heads of every module)
        self.evaluator = Evaluator()

    def reset(self) -> None:
        """Forget everything, as an OPA restart does."""
        self.evaluator.close()  # frees what OPA's engine holds outside Python's heap
        self.__init__()  # type: ignore[misc]

    # -- policies -----------------------------------------------------------------------------

    def put_policy(self, module_id: str, raw: str) -> None:
        """Add or replace a module; on any error nothing changes.

        As OPA's ``PUT``: the module is parsed, then the whole candidate set
        compiled over the stored data (which also refuses rules defining paths
        that hold data), all by OPA's compiler.
        """
        current = self.modules.get(module_id)
        if current is not None and current.raw == raw:
            return  # OPA: identical bytes are a no-op
        with _refusals("invalid_parameter"):
            compiler.check_module(module_id, raw)
        self._compile_and_commit({**self.modules, module_id: compiler.parse_module(module_id, raw)},
                                 "invalid_parameter")

    def delete_policy(self, module_id: str) -> None:
        """Remove a module: 404 when absent, 400 ``invalid_operation`` when others need it."""
        if module_id not in self.modules:
            raise StoreError(404, "resource_not_found", f'storage_not_found_error: policy id "{module_id}"')
        self._compile_and_commit({k: v for k, v in self.modules.items() if k != module_id}, "invalid_operation")

    def _compile_and_commit(self, candidate: dict[str, compiler.Module], code: str) -> None:
        packages = tuple(dict.fromkeys(m.package for m in candidate.values()))
        with _refusals(code):
            compiler.check_modules({m.id: m.raw for m in candidate.values()}, conflict_view(self.tree, packages))
        self.modules, self.packages = candidate, packages
        self.heads = tuple(dict.fromkeys(head for m in candidate.values() for head in m.heads))
        self.evaluator.load({m.id: m.raw for m in candidate.values()})

    def get_policy(self, module_id: str) -> dict[str, Any]:
        mod = self.modules.get(module_id)
        if mod is None:
            raise StoreError(404, "resource_not_found", f'storage_not_found_error: policy id "{module_id}"')
        return {"id": mod.id, "raw": mod.raw, "ast": mod.ast}

    def list_policies(self) -> list[dict[str, Any]]:
        return [self.get_policy(mid) for mid in self.modules]

    # -- data writes -----------------------------------------------------------------------------

    def _commit_tree(self, new_tree: dict[str, Any], path: Path, targets: Iterable[Path], check: bool = True) -> None:
        """Refuse data that would collide with rules (OPA's CheckPathConflicts, asked only when
        ``check`` and a rule could define a path under or above ``path``), commit, and tell the
        evaluator what changed at ``targets``."""
        if check and any(_overlaps(head, path) for head in self.heads):
            try:
                compiler.check_modules({m.id: m.raw for m in self.modules.values()},
                                       conflict_view(new_tree, self.packages))
            except compiler.Refused as exc:
                lines = [f"{e['location']['file']}:{e['location']['row']}: {e['code']}: {e['message']}"
                         if "location" in e else f"{e['code']}: {e['message']}" for e in exc.errors]
                text = (exc.message if not lines else f"1 error occurred: {lines[0]}" if len(lines) == 1
                        else f"{len(lines)} errors occurred:\n" + "\n".join(lines))  # ast.Errors.Error()
                raise StoreError(400, "invalid_parameter", text) from exc
        before, self.tree = self.tree, new_tree
        self._tell_evaluator(before, targets)

    def _tell_evaluator(self, before: dict[str, Any], targets: Iterable[Path]) -> None:
        """Documents new at a path (no array on the way) are merged; any other change drops
        the evaluator's engine; a document written as it was changes nothing."""
        if not self.evaluator.loaded:
            return  # the next evaluation builds an engine from the tree anyway
        additions = []
        for target in _outermost(targets):
            old, new = lookup(before, target), lookup(self.tree, target)
            if _through_array(before, target) or _through_array(self.tree, target):
                return self.evaluator.changed()
            if old is MISSING:
                if new is not MISSING:
                    additions.append((target, new))
            elif new is MISSING or dumps(old) != dumps(new):
                return self.evaluator.changed()
        for target, value in additions:
            self.evaluator.added(target, value)

    def put_data(self, path: Path, value: Any, if_none_match: bool = False) -> bool:
        """``PUT``; returns False (nothing written) for ``If-None-Match: *`` on an existing doc."""
        if if_none_match and lookup(self.tree, path) is not MISSING:
            return False
        self._commit_tree(put(self.tree, path, value), path, [path])
        return True

    def patch_data(self, path: Path, ops: Any) -> None:
        """``PATCH``: all ops or none."""
        targets = [path + rel for _, rel, _ in parse_patch(ops)]
        self._commit_tree(apply_patch(self.tree, path, ops), path, targets)

    def delete_data(self, path: Path) -> None:
        self._commit_tree(delete(self.tree, path), path, [path], check=False)  # removing data frees paths only

    # -- reads -------------------------------------------------------------------------------------

    @property
    def needs_warm(self) -> bool:
        return self.evaluator.needs_warm

    def warm(self) -> None:
        """Do now what the next evaluation would (build OPA's engine, prepare its queries)."""
        self.evaluator.warm(self.tree)

    def read(self, path: Path, input_doc: Any = MISSING) -> Any:
        """The document at ``path`` (base + virtual), or MISSING when undefined."""
        if not any(_overlaps(pkg, path) for pkg in self.packages):
            return read_path(self.tree, path)
        return self.evaluator.evaluate(self.tree, path, input_doc)
