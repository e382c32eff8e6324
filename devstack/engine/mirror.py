"""Keep regorus' copy of the data equal to the authoritative tree, incrementally.

Why: regorus can only *add* data (``add_data`` merges and refuses to change an
existing value); replacing anything means ``clear_data`` and loading all data
again — about 30 µs per replicated object, i.e. hundreds of milliseconds at
10,000 objects. A sync sidecar writes one object at a time, interleaved with
queries, so a reload per write is out of the question.

How: the engine holds a *base* (the tree as it was at the last full load, plus
pure additions merged in since) and a small *overlay* applied to every query
with Rego ``with`` modifiers:

* **additions** — a document whose path is new to the base (and not shadowed
  by the overlay) is merged with ``add_data``: cost ∝ the document;
* **replacements** — the new value is stored under a hidden top-level key
  (``data["\\x00fedplace"][vN]``, added with ``add_data``) and the query gets
  ``with data.<path> as data["\\x00fedplace"]["vN"]``; later entries win;
* **deletions** — ``with data.<parent> as object.remove(data.<parent>, [keys])``
  (evaluated against the base, so applied before the replacements).

When the overlay grows past its limits, or a change is awkward (arrays on the
path, top-level keys, very large values), the mirror is marked stale and the
next query reloads everything once (``rebuild``). Invariant, checked by the
randomised tests: evaluating ``data`` with the overlay equals the tree.

The mirror works on any engine with regorus' three calls — ``clone()`` of the
template (policies only), ``add_data(dict)`` (a merge; ``RuntimeError`` when
it refuses) and ``eval_query(text)``: OPA's evaluator uses it too
(:mod:`devstack.engine.eval_opa`), with ``overlay=False`` (a replacement or a
deletion marks the mirror stale: OPA's ``with`` on a data path *merges* an
object value into what a reader of a parent path sees, so the overlay would
resurrect removed keys) and ``prepare=False`` (OPA prepares per query text,
not per engine).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from devstack.engine.rego import ref_text
from devstack.engine.store import MISSING, Path, lookup, set_path

__all__ = ["HIDDEN", "DataMirror", "MirrorStats"]

HIDDEN = "\x00fedplace"
_HIDDEN_REF = ref_text([HIDDEN])


@dataclass
class MirrorStats:
    rebuilds: int = 0
    merges: int = 0
    overlays: int = 0
    removals: int = 0
    stale_marks: int = 0


@dataclass
class Limits:
    max_sets: int = 128          # replacement entries before a rebuild
    max_removed: int = 128       # deleted keys (all parents) before a rebuild
    max_hidden: int = 1024       # hidden values (incl. superseded ones) before a rebuild
    max_value_nodes: int = 5000  # a replacement bigger than this → rebuild instead


def _size(value: Any, budget: int) -> int:
    """Node count of ``value``, stopping once it exceeds ``budget``."""
    count = 0
    stack = [value]
    while stack and count <= budget:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def _is_prefix(prefix: Path, path: Path) -> bool:
    return len(prefix) <= len(path) and path[: len(prefix)] == prefix


@dataclass
class DataMirror:
    """An engine (policies + data) kept in step with the tree's writes."""

    template: Any  # policies only; ``clone()`` gives an engine to load data into
    limits: Limits = field(default_factory=Limits)
    stats: MirrorStats = field(default_factory=MirrorStats)
    incremental: bool = True  # False: every write reloads all data at the next query (bench baseline)
    overlay: bool = True      # False: replacements and deletions reload instead of riding as ``with``
    prepare: bool = True      # evaluate once after each change, so clones start prepared (regorus)

    def __post_init__(self) -> None:
        self.engine: Any = None
        self.base: dict[str, Any] = {}
        self.sets: dict[Path, str] = {}             # ordered: later entries win
        self.removed: dict[Path, set[str]] = {}     # parent → keys removed from the base's parent
        self.hidden = 0
        self._clauses: str | None = ""
        self.packages: tuple[Path, ...] = ()
        # regorus prepares its modules at an engine's first evaluation, and add_data
        # undoes that; queries run on clones, so the mirror engine is evaluated once
        # after each change to carry the preparation into every clone (≈5x faster
        # decisions with the shipped packs).
        self.prepared = False
        # Bumped whenever the engine's policies or data change (a reload, a merge, an
        # overlay): an evaluator's copy of the engine made at an older generation is stale.
        self.generation = 0

    # -- lifecycle -------------------------------------------------------------------------

    def set_template(self, template: Any, packages: tuple[Path, ...] = ()) -> None:
        """New policies: the data must be loaded again into an engine carrying them."""
        self.template = template
        self.packages = packages
        self.mark_stale()

    def mark_stale(self) -> None:
        if self.engine is not None:
            self.stats.stale_marks += 1
            close = getattr(self.engine, "close", None)
            if close is not None:  # OPA's engines hold memory outside Python's heap: free it now
                close()
        self.engine = None

    @property
    def stale(self) -> bool:
        return self.engine is None

    def ready(self, tree: dict[str, Any]) -> Any:
        """The engine, reloaded from ``tree`` first if stale."""
        if self.engine is None:
            engine = self.template.clone()
            if tree:
                engine.add_data(tree)
            self.engine = engine
            self.prepared = False
            self.base = tree
            self.sets = {}
            self.removed = {}
            self.hidden = 0
            self._clauses = ""
            self.stats.rebuilds += 1
        if not self.prepared:
            if self.prepare:
                self.engine.eval_query("true")
            self.prepared = True
            self.generation += 1
        return self.engine

    def clauses(self) -> str:
        """The ``with`` modifiers that turn the base into the current tree."""
        if self._clauses is None:
            parts = []
            for parent in sorted(self.removed, key=len):
                keys = json.dumps(sorted(self.removed[parent]), ensure_ascii=False)
                ref = ref_text(parent)
                parts.append(f" with {ref} as object.remove({ref}, {keys})")
            for path, key in self.sets.items():
                parts.append(f" with {ref_text(path)} as {_HIDDEN_REF}[{json.dumps(key)}]")
            self._clauses = "".join(parts)
        return self._clauses

    # -- writes ----------------------------------------------------------------------------

    def _arrays_on_path(self, tree: dict[str, Any], path: Path) -> bool:
        for i in range(1, len(path)):
            node = lookup(tree, path[:i])
            if isinstance(node, list):
                return True
        return False

    def _touches_policy(self, path: Path) -> bool:
        """``with`` on a path that is, contains or lies in a package would replace rules."""
        return any(_is_prefix(path, pkg) or _is_prefix(pkg, path) for pkg in self.packages)

    def _covering_set(self, path: Path) -> bool:
        return any(_is_prefix(p, path) for p in self.sets)

    def _branch_removed(self, path: Path) -> bool:
        """Whether a removal entry hides ``path`` or one of its ancestors."""
        return any(_is_prefix(parent, path) and len(path) > len(parent) and path[len(parent)] in keys
                   for parent, keys in self.removed.items())

    def _mergeable(self, path: Path) -> bool:
        if lookup(self.base, path) is not MISSING:
            return False
        for i in range(1, len(path)):
            node = lookup(self.base, path[:i])
            if node is MISSING:
                break
            if not isinstance(node, dict):
                return False
        if self._covering_set(path) or any(_is_prefix(path, p) for p in self.sets):
            return False
        if any(_is_prefix(path, parent) for parent in self.removed):
            return False
        return not self._branch_removed(path)

    def _drop_under(self, path: Path) -> None:
        for p in [p for p in self.sets if _is_prefix(path, p)]:
            del self.sets[p]
        for p in [p for p in self.removed if _is_prefix(path, p)]:
            del self.removed[p]

    def _over_limits(self) -> bool:
        lim = self.limits
        return (len(self.sets) > lim.max_sets or self.hidden > lim.max_hidden
                or sum(len(k) for k in self.removed.values()) > lim.max_removed)

    def wrote(self, tree: dict[str, Any], path: Path) -> None:
        """``tree`` now holds a (new) document at ``path``."""
        if self.engine is None:
            return
        if not self.incremental:
            return self.mark_stale()
        if len(path) < 1 or path[0] == HIDDEN or self._arrays_on_path(tree, path):
            return self.mark_stale()
        value = lookup(tree, path)
        if value is MISSING:
            return self.mark_stale()
        nodes = _size(value, self.limits.max_value_nodes)
        if self._mergeable(path) and not any(_is_prefix(path, pkg) for pkg in self.packages):
            nested: Any = value
            for key in reversed(path):
                nested = {key: nested}
            self.prepared = False
            try:
                self.engine.add_data(nested)
            except RuntimeError:
                return self.mark_stale()
            self.base = set_path(self.base, path, value)
            self.stats.merges += 1
            return
        if not self.overlay or nodes > self.limits.max_value_nodes or self._touches_policy(path):
            return self.mark_stale()
        self._drop_under(path)
        parent_removed = self.removed.get(path[:-1])
        if parent_removed is not None:
            parent_removed.discard(path[-1])
            if not parent_removed:
                del self.removed[path[:-1]]
        key = f"v{self.hidden}"
        self.prepared = False
        try:
            self.engine.add_data({HIDDEN: {key: value}})
        except RuntimeError:
            return self.mark_stale()
        self.hidden += 1
        self.sets[path] = key
        self._clauses = None
        self.stats.overlays += 1
        if self._over_limits():
            self.mark_stale()

    def deleted(self, tree: dict[str, Any], path: Path) -> None:
        """``tree`` no longer holds the document at ``path`` (it did before)."""
        if self.engine is None:
            return
        if not self.incremental or not self.overlay:
            return self.mark_stale()
        if len(path) < 2 or path[0] == HIDDEN or self._arrays_on_path(tree, path):
            return self.mark_stale()
        parent, key = path[:-1], path[-1]
        if self._touches_policy(parent):
            return self.mark_stale()
        if self._covering_set(parent) or self._branch_removed(parent):
            # the base's parent is not what the query sees: re-state the parent instead
            return self.wrote(tree, parent)
        base_parent = lookup(self.base, parent)
        if not isinstance(base_parent, dict) or not isinstance(lookup(tree, parent), dict):
            return self.mark_stale()
        self._drop_under(path)
        self.removed.setdefault(parent, set()).add(key)
        self._clauses = None
        self.stats.removals += 1
        if self._over_limits():
            self.mark_stale()
