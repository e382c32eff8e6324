"""The data mirror (devstack only): the evaluator's view of the data always equals the tree.

Random sequences of PUT / DELETE / PATCH go through :class:`EngineState`; after
every step the document as the evaluator sees it (``data.kv`` evaluated with
the overlay) must equal the authoritative tree. Tight limits force rebuilds too.
Both evaluators keep a mirror: regorus (the default) and OPA's own.
"""

from __future__ import annotations

import random

import pytest

from devstack.engine.mirror import Limits
from devstack.engine.state import EngineState
from devstack.engine.store import MISSING, StoreError, lookup

KEYS = ["a", "b", "c", "d/e"]


def _value(rng: random.Random, depth: int = 0):
    kind = rng.random()
    if depth < 2 and kind < 0.5:
        return {k: _value(rng, depth + 1) for k in rng.sample(KEYS, rng.randint(0, 3))}
    if kind < 0.6:
        return [rng.randint(0, 3) for _ in range(rng.randint(0, 2))]
    return rng.choice([1, 2, "x", None, True])


def _path(rng: random.Random, tree) -> tuple[str, ...]:
    """Half the time an existing object path (random walk), else any path."""
    if rng.random() < 0.5:
        path, node = ("kv",), lookup(tree, ("kv",))
        while isinstance(node, dict) and node and (len(path) < 2 or rng.random() < 0.6):
            key = rng.choice(sorted(node))
            path, node = path + (key,), node[key]
        if len(path) > 1:
            return path
    return ("kv",) + tuple(rng.choice(KEYS) for _ in range(rng.randint(1, 3)))


def _engine_view(state: EngineState):
    """What the evaluator itself sees at data.kv (one reference, evaluated with the overlay)."""
    return state._eval_refs([("kv",)], MISSING)[0]


@pytest.mark.parametrize("evaluator, seeds", [("regorus", range(15)), ("opa", range(4))], ids=["regorus", "opa"])
@pytest.mark.parametrize("limits", [None, Limits(max_sets=3, max_removed=2, max_hidden=5, max_value_nodes=6)],
                         ids=["default-limits", "tight-limits"])
def test_interpreter_view_equals_tree(evaluator, seeds, limits):
    for seed in seeds:
        check_random_writes(EngineState(evaluator=evaluator), seed, limits)


def check_random_writes(state: EngineState, seed: int, limits: Limits | None) -> None:
    rng = random.Random(seed)
    if limits is not None:
        state.mirror.limits = limits
    state.put_data(("kv",), {})
    state.put_policy("probe", "package probe\n\nn := count(data.kv)\n")
    for step in range(150):
        op = rng.random()
        path = _path(rng, state.tree)
        try:
            if op < 0.55:
                state.put_data(path, _value(rng))
            elif op < 0.8:
                state.delete_data(path)
            else:  # one to three ops under one parent, as a batched write of a collection
                ops = []
                for _ in range(rng.randint(1, 3)):
                    key = path[-1] if not ops else rng.choice(KEYS)
                    rel = rng.choice(["", "/" + rng.choice(KEYS)])
                    ops.append({"op": rng.choice(["add", "replace", "remove"]), "path": "/" + key.replace("/", "~1")
                                + rel, "value": _value(rng)})
                state.patch_data(path[:-1], ops)
        except StoreError:
            pass
        expected = lookup(state.tree, ("kv",))
        assert _engine_view(state) == expected, (seed, step, state.mirror.sets, state.mirror.removed)
    stats = state.mirror.stats
    assert stats.merges + stats.overlays > 0, vars(stats)


def test_single_object_writes_do_not_reload_everything():
    state = EngineState()
    state.put_policy("probe", "package probe\n\nn := count(data.objs)\n")
    state.put_data(("objs",), {f"o{i}": {"i": i} for i in range(2000)})
    assert state.read(("probe", "n")) == 2000
    rebuilds = state.mirror.stats.rebuilds
    for i in range(300):
        state.put_data(("objs", f"o{i % 50}"), {"i": -i})       # replace
        state.put_data(("objs", f"new{i}"), {"i": i})           # add
        if i % 3 == 0:
            state.delete_data(("objs", f"new{i}"))              # delete
        assert state.read(("probe", "n")) == 2000 + i + 1 - (i // 3 + 1)
    assert state.mirror.stats.removals > 0
    # a handful of compactions, never one per write
    assert state.mirror.stats.rebuilds - rebuilds <= 6, vars(state.mirror.stats)
