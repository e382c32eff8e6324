"""The LimitRange pack under both evaluators, in process, and its messages read back.

* :data:`EVALUATORS` — ``"opa"`` (OPA 1.20's own evaluator, ``opa_bindings``)
  and ``"engine"`` (the devstack engine's state, ``EngineState``: OPA's
  compiler, then regorus, as its server runs a query) — each holding the pack
  and the lib it needs, nothing else.
* :func:`decide` — the admission decision for an object, with given
  LimitRanges replicated in its namespace.
* :func:`patched` — the object after the decision's ``patches["limitrange"]``.
* :func:`read` — a message as ``(who, resource, what, limitrange)``, the shape
  of :class:`tests.packs.limitrange.k8s_limitranger.Violation`.
* :func:`view` — the report behind ``fedplace-limits``; :func:`parse_all` —
  the quantity parser on a list of values.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable

import jsonpatch

ROOT = Path(__file__).resolve().parents[3]
PACK_MODULES = ["lib/podspec.rego", "lib/generated/replicated_root.rego", "limitrange/admission.rego",
                "limitrange/quantity.rego", "limitrange/ranger.rego", "limitrange/view.rego"]  # loadable in this order
DECISION = ("io", "k8s", "federation", "admission")


# A test-only module: the parser applied to every value of the input.
PARSE_MODULE = """package fedplace_test.quantity

import data.io.k8s.federation.limitrange.quantity

parsed := [quantity.parse(v) | some v in input]
"""


def modules() -> dict[str, str]:
    """The pack and the lib it needs (dependency order), plus :data:`PARSE_MODULE`."""
    pack = {m: (ROOT / "policies" / m).read_text() for m in PACK_MODULES}
    return {**pack, "fedplace_test/quantity.rego": PARSE_MODULE}


@functools.cache
def _opa() -> Any:
    from opa_bindings import OpaEngine

    engine = OpaEngine()
    for mid, src in modules().items():
        engine.add_policy(mid, src)
    return engine


@functools.cache
def _engine() -> Any:
    from devstack.engine.state import EngineState

    state = EngineState()
    for mid, src in modules().items():  # already in dependency order
        state.put_policy(mid, src)
    return state


def _ranges(namespace: str, limitranges: list[dict[str, Any]]) -> dict[str, Any]:
    return {namespace: {lr["metadata"]["name"]: lr for lr in limitranges}}


def decide_opa(obj: dict[str, Any], limitranges: list[dict[str, Any]], path: str = "data.io.k8s.federation.admission",
               input_doc: Any = None) -> Any:
    ns = obj.get("metadata", {}).get("namespace", "") if obj else ""
    doc = {"obj": obj if input_doc is None else input_doc, "ranges": _ranges(ns, limitranges)}
    rs = _opa().eval_query(f"x := {path} with input as input.obj with data.kubernetes.limitranges as input.ranges", doc)
    return rs[0]["x"] if rs else None


def decide_engine(obj: dict[str, Any], limitranges: list[dict[str, Any]], path: tuple[str, ...] = DECISION,
                  input_doc: Any = None) -> Any:
    from devstack.engine.store import MISSING

    state = _engine()
    ns = obj.get("metadata", {}).get("namespace", "") if obj else ""
    state.put_data(("kubernetes", "limitranges"), _ranges(ns, limitranges))
    out = state.read(path, obj if input_doc is None else input_doc)
    return None if out is MISSING else out


EVALUATORS: dict[str, Callable[[dict[str, Any], list[dict[str, Any]]], Any]] = {
    "opa": decide_opa,
    "engine": decide_engine,
}


def decide(evaluator: str, obj: dict[str, Any], limitranges: list[dict[str, Any]]) -> dict[str, Any]:
    return EVALUATORS[evaluator](obj, limitranges) or {}


def patched(obj: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    ops = (decision.get("patches") or {}).get("limitrange") or []
    return jsonpatch.apply_patch(obj, ops)


_MESSAGE = re.compile(r'^(?P<who>pod|container "[^"]*"|init container "[^"]*"): (?P<what>.*?)'
                      r'(?: \(LimitRange "(?P<lr>[^"]*)" in "[^"]*"\))?$')
_KINDS = [
    (re.compile(r'^no (?P<r>\S+) request, but min is'), "min-no-request"),
    (re.compile(r'^(?P<r>\S+) request .* is below min'), "min-request"),
    (re.compile(r'^(?P<r>\S+) limit .* is below min'), "min-limit"),
    (re.compile(r'^no (?P<r>\S+) limit, but max is'), "max-no-limit"),
    (re.compile(r'^(?P<r>\S+) limit .* exceeds max'), "max-limit"),
    (re.compile(r'^(?P<r>\S+) request .* exceeds max'), "max-request"),
    (re.compile(r'^(?P<r>\S+) maxLimitRequestRatio \S+ needs a non-zero request'), "ratio-no-request"),
    (re.compile(r'^(?P<r>\S+) maxLimitRequestRatio \S+ needs a non-zero limit'), "ratio-no-limit"),
    (re.compile(r'^(?P<r>\S+) limit .* times the request'), "ratio"),
    (re.compile(r'^(?P<r>\S+) request .* is above its limit'), "request-above-limit"),
    (re.compile(r'^(?P<r>\S+) (request|limit) ".*" (is not a valid quantity|must not be negative)'), "invalid"),
]


def read(message: str) -> tuple[str, str, str, str]:
    """``(who, resource, what, limitrange)`` of one of the pack's messages."""
    m = _MESSAGE.match(message)
    assert m, f"not a pack message: {message!r}"
    for pattern, what in _KINDS:
        k = pattern.match(m["what"])
        if k:
            return m["who"], k["r"], what, m["lr"] or ""
    raise AssertionError(f"unknown message: {message!r}")


def resources_of(pod: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{who: {"requests": {r: text}, "limits": {r: text}}} of a Pod's containers (empty maps left out)."""
    out = {}
    for key, prefix in (("containers", "container"), ("initContainers", "init container")):
        for c in pod["spec"].get(key) or []:
            res = c.get("resources") or {}
            out[f'{prefix} "{c.get("name", "")}"'] = {k: dict(res.get(k) or {}) for k in ("requests", "limits")}
    return out


def view(evaluator: str, inp: dict[str, Any], data: dict[str, Any]) -> Any:
    """``data.io.k8s.federation.limitrange.view.report`` for ``inp`` with ``data`` as data.kubernetes."""
    if evaluator == "opa":
        rs = _opa().eval_query("x := data.io.k8s.federation.limitrange.view.report with input as input.i "
                               "with data.kubernetes as input.d", {"i": inp, "d": data})
        return rs[0]["x"] if rs else None
    from devstack.engine.store import MISSING

    state = _engine()
    state.put_data(("kubernetes",), data)
    out = state.read(("io", "k8s", "federation", "limitrange", "view", "report"), inp)
    return None if out is MISSING else out


def parse_all(evaluator: str, values: list[Any]) -> list[dict[str, Any]]:
    """``quantity.parse`` of every value, in one query."""
    if evaluator == "opa":
        return _opa().eval_query("x := data.fedplace_test.quantity.parsed", values)[0]["x"]
    return _engine().read(("fedplace_test", "quantity", "parsed"), values)
