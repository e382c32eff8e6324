"""Where ``fedplace what-if`` evaluates: a copy of OPA's state that nothing else sees.

Two evaluators offer the same operations (load a module set and data, change
modules as opa-kube-sync would, replace data, decide for many inputs, parse
modules for :mod:`fedplace.insight.inputs`):

* :class:`BindingsEvaluator` — OPA's own compiler and evaluator in process
  (``opa_bindings``, OPA 1.20 as a library). Nothing to run, and isolated by
  construction: an in-process engine cannot reach a server or an object. The
  wheel declares Python >= 3.14 and is installed with ``--ignore-requires-python
  --no-deps`` from its one pin, ``opa-bindings.txt`` beside this module (as the
  Makefile and the image do), so it is not a dependency in pyproject.toml;
  :func:`install_command` is the command, for messages.
* :class:`ScratchOpaEvaluator` — an OPA server the caller owns (``opa run
  --server`` in a CI job, ideally the version production runs), given by
  ``--scratch-opa-url``. Its modules and the replicated root are replaced; it
  is refused when it looks like a live one (the sync's sentinel document is
  there) or is the live OPA itself.

Both apply a module change the way opa-kube-sync's PUTs do: one module at a
time, a module OPA refuses (with OPA's compiler errors) leaves the version OPA
already had in place, and refused modules are tried again after every round
that loaded something (a module may need one loaded later).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass
from importlib import resources
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

from fedplace.common.indexes import indexes_of
from fedplace.common.opa_client import (
    OpaClient,
    OpaCompileError,
    OpaError,
    OpaRequestError,
    OpaSettings,
    OpaUndefined,
    normalise_base_url,
)
from fedplace.common.opa_errors import split_errors
from fedplace.insight.inputs import UNDEFINED, subset

__all__ = ["BindingsEvaluator", "Decision", "Evaluator", "EvaluatorUnavailable", "LiveOpa", "ScratchOpaEvaluator",
           "bindings_available", "data_query", "install_command", "system_module"]

SENTINEL = "fedplace_sync"  # the document opa-kube-sync keeps in the OPA it feeds (sync/sentinel.py)


class EvaluatorUnavailable(Exception):
    """The chosen evaluator cannot be used (not installed, refused, unreachable)."""


@dataclass(frozen=True)
class Decision:
    """One admission decision: the document, None when undefined, or an evaluation error."""

    value: Any = None
    error: str | None = None

    @property
    def errors(self) -> list[str]:
        if self.error is not None:
            return [f"no policy decision: {self.error}"]
        if not isinstance(self.value, dict):
            return ["no policy decision (the decision is undefined)"]
        errs = self.value.get("errors") or []
        return sorted(str(e) for e in errs) if isinstance(errs, (list, set, tuple)) else [str(errs)]

    @property
    def denied(self) -> bool:
        return bool(self.errors)

    @property
    def annotations(self) -> dict[str, Any]:
        value = self.value.get("annotations") if isinstance(self.value, dict) else None
        return value if isinstance(value, dict) else {}


def data_query(path: Sequence[str]) -> str:
    """``x := data["a"]["b"]…``: a query for any segment text."""
    return "x := data" + "".join(f"[{json.dumps(seg)}]" for seg in path)


def system_module(package: Sequence[str]) -> bool:
    """Whether a module configures OPA itself (``package system…``): never copied."""
    return bool(package) and package[0] == "system"


def install_command() -> str:
    """The command installing opa_bindings at the version fedplace pins (opa-bindings.txt)."""
    pin = (resources.files(__package__) / "opa-bindings.txt").read_text().strip()
    return f"pip install --ignore-requires-python --no-deps '{pin}'"


def bindings_available() -> bool:
    try:
        import opa_bindings  # noqa: F401
    except ImportError:
        return False
    return True


Errors = dict[str, list[dict[str, Any]]]

# In-process decisions of many inputs go to this many engines at once (one per core, at most 4),
# from this many inputs on (below, building a second engine costs more than it saves).
WORKERS = max(1, min(os.cpu_count() or 1, 4))
PARALLEL_FROM = 400


def replicated(root: str, data: Any) -> dict[str, Any]:
    """The data documents opa-kube-sync keeps for ``data`` at ``data.<root>``: the mirror, and
    beside it (``data.<root>_index``) the indexes it derives from it (common/indexes.py)."""
    return {root: data, index_root(root): indexes_of(data) if isinstance(data, dict) else {}}


def index_root(root: str) -> str:
    return f"{root}_index"


class Evaluator:
    """The operations :mod:`fedplace.insight.whatif` needs; see the module docstring."""

    name = "evaluator"

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}

    async def load(self, modules: Mapping[str, str], root: str, data: Any) -> Errors:
        """Start from ``modules`` and ``data`` at ``data.<root>``; returns the modules that did not load."""
        raise NotImplementedError

    async def change(self, puts: Mapping[str, str], deletes: Iterable[str]) -> Errors:
        """Put and delete modules as the sync would; returns each refused change's errors."""
        raise NotImplementedError

    async def set_data(self, root: str, data: Any) -> None:
        raise NotImplementedError

    async def decide(self, path: Sequence[str], inputs: Sequence[Any],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> list[Decision]:
        """The decision at ``path`` for each input; ``data_paths``: the only data it reads (a hint)."""
        raise NotImplementedError

    async def values(self, rules: Sequence[Sequence[str]],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> dict[tuple[str, ...], Any]:
        """The value of each rule (that reads no input), :data:`UNDEFINED` when undefined; a rule
        that cannot be evaluated is left out."""
        raise NotImplementedError

    async def parse(self) -> dict[str, dict[str, Any]] | None:
        """OPA's AST of every loaded module, or None when this evaluator cannot parse."""
        raise NotImplementedError

    async def close(self) -> None:
        pass


async def _rounds(todo: dict[str, str | None], attempt: Any) -> Errors:
    """Apply every change (module id → source, None to delete) with ``attempt(id, source)``,
    which returns errors or None; refused ones are retried while a round makes progress."""
    errors: Errors = {}
    while todo:
        refused: dict[str, str | None] = {}
        for module_id, source in todo.items():
            found = await attempt(module_id, source)
            if found is None:
                errors.pop(module_id, None)
            else:
                errors[module_id] = found
                refused[module_id] = source
        if len(refused) == len(todo):
            break
        todo = refused
    return errors


class BindingsEvaluator(Evaluator):
    """OPA in process (``opa_bindings``); see the module docstring."""

    name = "OPA 1.20 in process (opa_bindings)"

    def __init__(self) -> None:
        super().__init__()
        if not bindings_available():
            raise EvaluatorUnavailable(
                f"opa_bindings is not installed ({install_command()}), and no --scratch-opa-url was given")
        from opa_bindings import OpaEngine
        self._engine_type = OpaEngine
        self._parser = OpaEngine()
        self._asts: dict[str, dict[str, Any]] = {}
        # One engine per (data the decisions read, worker): decisions of many inputs are shared
        # out over WORKERS engines evaluating at once (the bindings release the GIL in OPA).
        self._engines: dict[tuple[frozenset[tuple[Any, ...]] | None, int], Any] = {}
        self._doc: dict[str, Any] = {}

    def _refusal(self, modules: Mapping[str, str]) -> list[dict[str, Any]] | None:
        """OPA's compiler errors for the module set (as its REST API shapes them), or None."""
        from opa_bindings import OpaError as BindingsError
        with self._engine_type() as engine:
            try:
                for module_id, source in modules.items():
                    engine.add_policy(module_id, source)
                engine.eval_query("true")  # compiles every module (the bindings compile lazily)
            except BindingsError as exc:
                entries = split_errors(exc.message)
                if entries is None:
                    return [{"code": "invalid_parameter", "message": exc.message}]
                return [{"code": e.code, "message": e.message,
                         **({"location": {"file": e.where or "", "row": e.row}} if e.row is not None else {})}
                        for e in entries]
        return None

    async def _attempt(self, module_id: str, source: str | None) -> list[dict[str, Any]] | None:
        candidate = dict(self.modules)
        if source is None:
            candidate.pop(module_id, None)
        else:
            candidate[module_id] = source
        found = await asyncio.to_thread(self._refusal, candidate)
        if found is None:
            self.modules = candidate
        return found

    async def load(self, modules: Mapping[str, str], root: str, data: Any) -> Errors:
        """The live modules are taken as they are: the live OPA compiled them (a module this OPA
        would refuse shows as an evaluation error of every decision)."""
        self.modules = dict(modules)
        self._doc = replicated(root, data)
        self._forget()
        return {}

    async def change(self, puts: Mapping[str, str], deletes: Iterable[str]) -> Errors:
        todo: dict[str, str | None] = {**{m: None for m in deletes if m in self.modules}, **dict(puts)}
        errors = await _rounds(todo, self._attempt)
        self._forget()
        return errors

    async def set_data(self, root: str, data: Any) -> None:
        self._doc = replicated(root, data)
        self._forget()

    def _forget(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines = {}

    def _ready(self, data_paths: frozenset[tuple[Any, ...]] | None = None, worker: int = 0) -> Any:
        """Worker ``worker``'s engine with the modules and the data under ``data_paths`` (all of
        it for None): the less data, the sooner it is built and compiled."""
        key = (data_paths, worker)
        if key not in self._engines:
            engine = self._engine_type()
            engine.add_data(subset(self._doc, data_paths))
            for module_id, source in self.modules.items():
                engine.add_policy(module_id, source)
            self._engines[key] = engine
        return self._engines[key]

    def _values(self, rules: Sequence[Sequence[str]], data_paths: frozenset[tuple[Any, ...]] | None
                ) -> dict[tuple[str, ...], Any]:
        from opa_bindings import OpaError as BindingsError
        if not rules:
            return {}
        engine = self._ready(data_paths)
        # One query for all (each distinct query costs the engine a compile): x<i> holds
        # [value], or [] when the rule is undefined.
        query = "; ".join(f"x{i} := [v | v := {data_query(rule)[len('x := '):]}]" for i, rule in enumerate(rules))
        try:
            result = engine.eval_query(query)
        except BindingsError:
            return {}
        if not result:
            return {}
        return {tuple(rule): (result[0][f"x{i}"][0] if result[0][f"x{i}"] else UNDEFINED)
                for i, rule in enumerate(rules)}

    async def values(self, rules: Sequence[Sequence[str]],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> dict[tuple[str, ...], Any]:
        return await asyncio.to_thread(self._values, rules, data_paths)

    def _decide_all(self, query: str, inputs: Sequence[Any],
                    data_paths: frozenset[tuple[Any, ...]] | None, worker: int = 0) -> list[Decision]:
        from opa_bindings import OpaError as BindingsError
        engine = self._ready(data_paths, worker)
        out = []
        for item in inputs:
            try:
                result = engine.eval_query(query, input=item)
            except BindingsError as exc:
                out.append(Decision(error=exc.message))
                continue
            out.append(Decision(value=result[0]["x"]) if result else Decision())
        return out

    async def decide(self, path: Sequence[str], inputs: Sequence[Any],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> list[Decision]:
        """Each input's decision, in order; from ``PARALLEL_FROM`` inputs on, shared out over
        ``WORKERS`` engines evaluating at once (each engine costs a build and a compile)."""
        query = data_query(path)
        workers = WORKERS if len(inputs) >= PARALLEL_FROM else 1
        size = -(-len(inputs) // workers)
        parts = await asyncio.gather(*(asyncio.to_thread(self._decide_all, query, inputs[w * size:(w + 1) * size],
                                                         data_paths, w) for w in range(workers)))
        return [decision for part in parts for decision in part]

    def parse_all(self, modules: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """OPA's AST of every module: the ones not parsed before in one query."""
        keys = {mid: hashlib.sha256(f"{mid}\0{src}".encode()).hexdigest() for mid, src in modules.items()}
        todo = [{"id": mid, "src": src} for mid, src in modules.items() if keys[mid] not in self._asts]
        if todo:
            result = self._parser.eval_query("m := [rego.parse_module(x.id, x.src) | some x in input]", input=todo)
            for item, ast in zip(todo, result[0]["m"], strict=True):
                self._asts[keys[item["id"]]] = ast
        return {mid: self._asts[keys[mid]] for mid in modules}

    async def parse(self) -> dict[str, dict[str, Any]] | None:
        return await asyncio.to_thread(self.parse_all, self.modules)

    async def close(self) -> None:
        self._forget()
        self._parser.close()


class ScratchOpaEvaluator(Evaluator):
    """An OPA server the caller owns; see the module docstring."""

    def __init__(self, settings: OpaSettings, live_url: str | None = None, concurrency: int = 8) -> None:
        super().__init__()
        self.settings = settings
        self.name = f"scratch OPA at {normalise_base_url(settings.url)}"
        if live_url is not None and normalise_base_url(live_url) == normalise_base_url(settings.url):
            raise EvaluatorUnavailable("--scratch-opa-url is the live OPA: what-if never writes there")
        self.opa = OpaClient(settings)
        self.concurrency = concurrency
        self._root = "kubernetes"
        self._doc: dict[str, Any] = {}
        self._pushed: set[tuple[Any, ...]] = set()  # data paths written; () for all of it
        self._bindings: BindingsEvaluator | None = None

    async def _attempt(self, module_id: str, source: str | None) -> list[dict[str, Any]] | None:
        try:
            if source is None:
                await self.opa.delete_policy(module_id)
                self.modules.pop(module_id, None)
            else:
                await self.opa.put_policy(module_id, source, timeout=max(self.settings.timeout, 60.0))
                self.modules[module_id] = source
        except OpaCompileError as exc:
            return exc.errors or [{"code": exc.code or "invalid_parameter", "message": exc.message}]
        except OpaRequestError as exc:
            return [{"code": exc.code or "invalid_parameter", "message": exc.message}]
        return None

    async def load(self, modules: Mapping[str, str], root: str, data: Any) -> Errors:
        try:
            if await self.opa.get_data([SENTINEL]) is not None:
                raise EvaluatorUnavailable(f"{self.name} holds opa-kube-sync's sentinel ({SENTINEL}): it is a live "
                                           "OPA, not a scratch one")
            await self._clear()
            await self._delete_data(root)
        except OpaError as exc:
            raise EvaluatorUnavailable(f"{self.name}: {exc}") from exc
        self._root, self._doc, self._pushed = root, replicated(root, data), set()
        return await _rounds(dict(modules), self._attempt)

    async def _push(self, data_paths: frozenset[tuple[Any, ...]] | None) -> None:
        """Write the data the next evaluation reads (all of it for None), once: only what the
        decision reads crosses the network."""
        if () in self._pushed:
            return
        if data_paths is None:
            for top, doc in self._doc.items():
                await self.opa.put_data([top], doc)
            self._pushed = {()}
            return
        for path in sorted(data_paths, key=len):
            if any(path[:len(done)] == done for done in self._pushed):
                continue
            part = subset(self._doc, frozenset({path}))
            for seg in path:
                if not isinstance(part, dict) or str(seg) not in part:
                    break
                part = part[str(seg)]
            else:
                await self.opa.put_data([str(seg) for seg in path], part)
                self._pushed.add(path)

    async def _clear(self) -> None:
        """Delete every module but OPA's own configuration (``system``), dependants first."""
        for _ in range(20):
            ids = [p["id"] for p in await self.opa.list_policies() if not _is_system(p)]
            if not ids:
                break
            for module_id in ids:
                try:
                    await self.opa.delete_policy(module_id)
                except OpaRequestError:
                    pass  # another module needs it: next round
        self.modules = {}

    async def change(self, puts: Mapping[str, str], deletes: Iterable[str]) -> Errors:
        todo: dict[str, str | None] = {**{m: None for m in deletes if m in self.modules}, **dict(puts)}
        return await _rounds(todo, self._attempt)

    async def set_data(self, root: str, data: Any) -> None:
        await self._delete_data(self._root)
        self._root, self._doc, self._pushed = root, replicated(root, data), set()

    async def _delete_data(self, root: str) -> None:
        """Delete the copied data: the mirror and its indexes."""
        await self.opa.delete_data([root])
        await self.opa.delete_data([index_root(root)])

    async def decide(self, path: Sequence[str], inputs: Sequence[Any],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> list[Decision]:
        await self._push(data_paths)
        return await _decide_over_http(self.opa, path, inputs, self.concurrency)

    async def values(self, rules: Sequence[Sequence[str]],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> dict[tuple[str, ...], Any]:
        await self._push(data_paths)
        return await _values_over_http(self.opa, rules)

    async def parse(self) -> dict[str, dict[str, Any]] | None:
        policies = [p for p in await self.opa.list_policies() if p["id"] in self.modules]
        asts, self._bindings = _asts(policies, self._bindings)
        return asts

    async def close(self) -> None:
        """Delete the copied data; the modules stay until the next run replaces them (deleting
        each makes OPA recompile the others)."""
        try:
            await self._delete_data(self._root)
        except OpaError:
            pass
        finally:
            await self.opa.close()
            if self._bindings is not None:
                await self._bindings.close()


class LiveOpa(Evaluator):
    """The live OPA, only asked (decisions, its modules' AST): for ``fedplace report``."""

    def __init__(self, opa: OpaClient, concurrency: int = 8) -> None:
        super().__init__()
        self.name = f"OPA at {opa.base_url}"
        self.opa = opa
        self.concurrency = concurrency
        self._bindings: BindingsEvaluator | None = None

    async def decide(self, path: Sequence[str], inputs: Sequence[Any],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> list[Decision]:
        return await _decide_over_http(self.opa, path, inputs, self.concurrency)

    async def values(self, rules: Sequence[Sequence[str]],
                     data_paths: frozenset[tuple[Any, ...]] | None = None) -> dict[tuple[str, ...], Any]:
        return await _values_over_http(self.opa, rules)

    async def parse(self) -> dict[str, dict[str, Any]] | None:
        policies = [p for p in await self.opa.list_policies() if not _is_system(p)]
        asts, self._bindings = _asts(policies, self._bindings)
        return asts

    async def close(self) -> None:
        if self._bindings is not None:
            await self._bindings.close()


async def _values_over_http(opa: OpaClient, rules: Sequence[Sequence[str]]) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for rule in rules:
        try:
            out[tuple(rule)] = await opa.query("/".join(quote(seg, safe="") for seg in rule), undefined_ok=False)
        except OpaUndefined:
            out[tuple(rule)] = UNDEFINED
        except OpaError:
            continue
    return out


async def _decide_over_http(opa: OpaClient, path: Sequence[str], inputs: Sequence[Any],
                            concurrency: int) -> list[Decision]:
    gate = asyncio.Semaphore(concurrency)
    query = "/".join(path)

    async def one(item: Any) -> Decision:
        async with gate:
            try:
                return Decision(value=await opa.query(query, item))
            except OpaError as exc:
                return Decision(error=str(exc))

    return list(await asyncio.gather(*(one(i) for i in inputs)))


def _asts(policies: Sequence[Mapping[str, Any]], bindings: BindingsEvaluator | None
          ) -> tuple[dict[str, dict[str, Any]] | None, BindingsEvaluator | None]:
    """The AST of each policy as OPA answered it (a real OPA gives rule bodies), else parsed with
    opa_bindings, else None (no parser at hand: every workload is then evaluated on its own)."""
    asts = {p["id"]: p.get("ast") for p in policies}
    if all(isinstance(a, dict) and all("body" in r for r in a.get("rules") or []) for a in asts.values()):
        return asts, bindings
    if not bindings_available():
        return None, bindings
    bindings = bindings or BindingsEvaluator()
    return bindings.parse_all({p["id"]: p.get("raw") or "" for p in policies}), bindings


def _is_system(policy: Mapping[str, Any]) -> bool:
    path = ((policy.get("ast") or {}).get("package") or {}).get("path") or []
    return system_module([str(t.get("value")) for t in path[1:]])
