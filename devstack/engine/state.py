"""The engine's state and its operations, independent of HTTP.

:class:`EngineState` owns the authoritative data tree (persistent, see
``store.py``), the loaded modules, and an *evaluator* (:mod:`~devstack.engine.evaluator`:
regorus with its incremental data mirror by default, or OPA's own evaluator)
kept in step with the tree. Policy changes go through OPA's own compiler first
(:mod:`~devstack.engine.compiler`, the compiler of record), then the
evaluator's load check. The REST semantics (undefined, package documents
assembled rule by rule, base documents beside rules, error bodies) live here,
identical whichever evaluator answers.
Every method is synchronous and either commits completely or raises
without changing anything — the server runs them on the event loop, so each
request is atomic and a read right after a write sees it.

Errors raised: :class:`~devstack.engine.store.StoreError` (status, code,
message), :class:`PolicyError` (OPA's compile-error response),
:class:`EvalError` (OPA's evaluation-error response).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from devstack.engine import compiler, rego
from devstack.engine.evaluator import EVAL_MESSAGE, EvalError, Evaluator, make_evaluator
from devstack.engine.mirror import HIDDEN, DataMirror
from devstack.engine.store import (
    MISSING, Path, StoreError, apply_patch, delete, fmt_path, lookup, non_empty, parse_patch, put, read_path,
    set_path,
)

__all__ = ["COMPILE_MESSAGE", "EVAL_MESSAGE", "EngineState", "EvalError", "PolicyError", "conflict_view"]

COMPILE_MESSAGE = "error(s) occurred while compiling module(s)"
MAX_PLANS = 1024  # read plans cached per module set (EngineState._plan)


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


def _is_prefix(prefix: Path, path: Path) -> bool:
    return len(prefix) <= len(path) and path[: len(prefix)] == prefix


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


@contextmanager
def _refusals(code: str) -> Iterator[None]:
    """Turn OPA's and regorus' refusals into 400 :class:`PolicyError` with ``code``."""
    try:
        yield
    except compiler.Refused as exc:
        if not exc.errors:  # not an error list (an empty module): OPA answers its text
            raise PolicyError(400, "invalid_parameter", exc.message) from exc
        raise PolicyError(400, code, COMPILE_MESSAGE, exc.errors) from exc
    except rego.CompileError as exc:
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


def _conflict_errors(rules: list[rego.RuleRef], tree: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"code": "rego_compile_error",
             "message": f"conflicting rule for data path {'/'.join(r.path)} found",
             "location": {"file": r.file, "row": r.row, "col": r.col}}
            for r in rules if non_empty(tree, r.path)]


class EngineState:
    """Data, policies and evaluation, with OPA's REST semantics."""

    def __init__(self, incremental: bool = True, evaluator: str = "regorus", reuse: bool = True) -> None:
        """``evaluator``: ``regorus`` or ``opa`` (:data:`~devstack.engine.evaluator.EVALUATORS`);
        ``incremental=False`` reloads all data after any write, ``reuse=False`` clones regorus'
        engine for every query with input (benchmark baselines)."""
        self.tree: dict[str, Any] = {}
        self.modules: dict[str, rego.Module] = {}
        self._plans: dict[Path, tuple[bool, list[Path] | None, list[Path]]] = {}  # per read path; see _plan
        self.incremental = incremental
        self.evaluator: Evaluator = make_evaluator(evaluator, incremental, reuse)

    @property
    def mirror(self) -> DataMirror:
        """The evaluator's data mirror (both evaluators keep one)."""
        return self.evaluator.mirror  # type: ignore[attr-defined, no-any-return]

    def reset(self) -> None:
        """Forget everything, as an OPA restart does."""
        self.evaluator.mark_stale()  # frees what the evaluator holds outside Python's heap
        self.__init__(self.incremental, self.evaluator.name)  # type: ignore[misc]

    # -- policies -----------------------------------------------------------------------------

    @property
    def packages(self) -> tuple[Path, ...]:
        return tuple({m.package for m in self.modules.values()})

    def _rules(self) -> list[rego.RuleRef]:
        return [r for m in self.modules.values() for r in m.rules]

    def _commit_modules(self, modules: dict[str, rego.Module], compiled: Any) -> None:
        self.modules = modules
        self._plans = {}
        self.evaluator.commit(modules, compiled)

    def put_policy(self, module_id: str, raw: str) -> None:
        """Add or replace a module; on any error nothing changes.

        Order as OPA's ``PUT``: parse (OPA's parser, then regorus'), then the
        whole candidate set through OPA's compiler (which also refuses rules
        defining paths that hold data) and regorus' compile step. OPA's
        refusals come first, in OPA's words.
        """
        current = self.modules.get(module_id)
        if current is not None and current.raw == raw:
            return  # OPA: identical bytes are a no-op
        with _refusals("invalid_parameter"):
            compiler.check_module(module_id, raw)
            module = rego.parse_module(module_id, raw)
        self._compile_and_commit({**self.modules, module_id: module}, "invalid_parameter")

    def delete_policy(self, module_id: str) -> None:
        """Remove a module: 404 when absent, 400 ``invalid_operation`` when others need it."""
        if module_id not in self.modules:
            raise StoreError(404, "resource_not_found", f'storage_not_found_error: policy id "{module_id}"')
        self._compile_and_commit({k: v for k, v in self.modules.items() if k != module_id}, "invalid_operation")

    def _compile_and_commit(self, candidate: dict[str, rego.Module], code: str) -> None:
        """Compile ``candidate`` (OPA's compiler, then the evaluator's load check); commit it,
        or raise ``code``."""
        sources = {m.id: m.raw for m in candidate.values()}
        view = conflict_view(self.tree, {m.package for m in candidate.values()})
        with _refusals(code):
            compiler.check_modules(sources, view)
            compiled = self.evaluator.compile(candidate)
        self._commit_modules(candidate, compiled)

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
            self.evaluator.wrote(self.tree, path)
        else:
            self.evaluator.mark_stale()
        return True

    def patch_data(self, path: Path, ops: Any) -> None:
        """``PATCH``: all ops or none. The evaluator hears of each op's document (a patch
        of many objects of a collection stays incremental), or of the whole document
        at ``path`` when an op goes through an array."""
        self._check_path(path)
        parsed = parse_patch(ops)
        for _, rel, _ in parsed:
            self._check_path(path + rel)
        before = self.tree
        new_tree = apply_patch(self.tree, path, ops)
        self._commit_tree(new_tree, path)
        if not path:
            self.evaluator.mark_stale()
            return
        targets = list(dict.fromkeys(path + rel for _, rel, _ in parsed))
        if not targets or any(_through_array(before, t) or _through_array(self.tree, t) for t in targets):
            targets = [path]
        for target in targets:
            if lookup(self.tree, target) is not MISSING:
                self.evaluator.wrote(self.tree, target)
            elif lookup(before, target) is not MISSING:
                self.evaluator.deleted(self.tree, target)

    def delete_data(self, path: Path) -> None:
        self._check_path(path)
        self.tree = delete(self.tree, path)
        self.evaluator.deleted(self.tree, path)

    # -- reads -------------------------------------------------------------------------------------

    def _needs_eval(self, path: Path) -> bool:
        return any(_overlaps(pkg, path) for pkg in self.packages)

    def _plan(self, path: Path) -> tuple[bool, list[Path] | None, list[Path]]:
        """How to read ``path`` under the loaded modules: (evaluate at all?, the rule documents
        under it or None when one reference evaluates it, the package and rule-head nodes
        under it that are objects even when empty). Cached until the modules change (at most
        :data:`MAX_PLANS` paths: read paths come from clients)."""
        plan = self._plans.get(path)
        if plan is None:
            needs = self._needs_eval(path)
            rules = self._rule_documents_under(path) if needs and path else None
            nodes: list[Path] = []
            if rules is not None:
                heads = set(self.packages) | {r[:-1] for r in self._rule_paths()}
                nodes = sorted(node for node in heads if _is_prefix(path, node))
            plan = (needs, rules, nodes)
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            self._plans[path] = plan
        return plan

    def read(self, path: Path, input_doc: Any = MISSING) -> Any:
        """The document at ``path`` (base + virtual), or MISSING when undefined."""
        if not self._plan(path)[0]:
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

    def _rule_paths(self) -> set[Path]:
        return {r.path for r in self._rules() if r.kind != "function"}

    def _rule_documents_under(self, path: Path) -> list[Path] | None:
        """The outermost rule paths strictly under ``path``, or None when ``path`` is at or
        inside a rule (one reference evaluates it)."""
        rules = self._rule_paths()
        if any(_is_prefix(r, path) for r in rules):
            return None
        under = [r for r in rules if _is_prefix(path, r)]
        return sorted(r for r in under if not any(o != r and _is_prefix(o, r) for o in under))

    def _evaluate(self, path: Path, input_doc: Any) -> Any:
        """The document at ``path`` under policy.

        A path at or inside a rule is one reference. Above rules (a package, or
        a prefix of packages) every rule is evaluated by its own static
        reference and the document assembled here, as OPA's evaluator does:
        regorus, asked for a whole package split over several modules, drops
        the rules of modules whose imports it resolved wrongly
        (tests/engine/test_conformance.py pins the case).
        """
        _, rules, nodes = self._plan(path)
        if rules is None:
            return self._eval_refs([path], input_doc)[0]
        values = self._eval_refs(rules, input_doc)
        base = read_path(self.tree, path)
        doc: Any = base if isinstance(base, dict) else {}
        # Packages and the inner nodes of rule heads (p.q in `p.q.r := …`) are objects, even empty.
        for node in nodes:
            if lookup(doc, node[len(path):]) is MISSING:
                doc = set_path(doc, node[len(path):], {})
        for rule, value in zip(rules, values):
            if value is not MISSING:
                doc = set_path(doc, rule[len(path):], value)
        return doc

    def _eval_refs(self, paths: list[Path], input_doc: Any) -> list[Any]:
        """Each ``data`` document of ``paths`` (MISSING when undefined), in one evaluation."""
        if not paths:
            return []
        return self.evaluator.evaluate(self.tree, paths, input_doc)
