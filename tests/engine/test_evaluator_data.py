"""OPA's evaluator always sees the data as written (in process, through ``EngineState``'s public methods).

Random sequences of PUT / DELETE / PATCH go through :class:`EngineState`; after
every step a rule returning ``data.kv``, evaluated by OPA, must equal the
document as stored. Additions are merged into the loaded engine, other changes
rebuild it: a wrong guess of which is which shows as a difference.
"""

from __future__ import annotations

import json
import random

from devstack.engine.state import EngineState
from devstack.engine.store import MISSING, StoreError, lookup

KEYS = ["a", "b", "c", "d/e"]
PROBE = "package probe\n\nkv := data.kv\n"


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


def test_evaluator_view_equals_tree():
    merges = 0
    for seed in range(4):
        state = EngineState()
        check_random_writes(state, seed)
        merges += state.evaluator.stats.merges
    assert merges > 0


def check_random_writes(state: EngineState, seed: int) -> None:
    rng = random.Random(seed)
    state.put_data(("kv",), {})
    state.put_policy("probe", PROBE)
    for step in range(150):
        op = rng.random()
        path = _path(rng, state.tree)
        try:
            if op < 0.55:
                same = lookup(state.tree, path)  # sometimes written again as it is
                state.put_data(path, same if same is not MISSING and rng.random() < 0.2 else _value(rng))
            elif op < 0.8:
                state.delete_data(path)
            else:  # one to three ops under one parent, as a batched write of a collection
                ops = []
                for _ in range(rng.randint(1, 3)):
                    key = path[-1] if not ops else rng.choice(KEYS)
                    under = lookup(state.tree, path[:-1] + (key,))
                    rel = rng.choice(["/-", "/0"] if isinstance(under, list) else ["", "/" + rng.choice(KEYS)])
                    ops.append({"op": rng.choice(["add", "replace", "remove"]), "path": "/" + key.replace("/", "~1")
                                + rel, "value": _value(rng)})
                state.patch_data(path[:-1], ops)
        except StoreError:
            pass
        assert _text(state.read(("probe", "kv"))) == _text(lookup(state.tree, ("kv",))), (seed, step)


def _text(doc) -> str:
    return "undefined" if doc is MISSING else json.dumps(doc, sort_keys=True)
