"""The LimitRange pack evaluated in process and by a policy server, and its messages read back.

* :class:`Evaluator` — the pack and the lib it needs, plus :data:`TEST_MODULE`,
  held by one evaluator: :class:`InProcess` (OPA 1.20's own evaluator,
  ``opa_bindings``) or :class:`Server` (the ``opa`` fixture over HTTP: the
  devstack engine, or the real OPA of ``FEDPLACE_TEST_OPA_URL``). Every
  question is one query whose input carries the object and the LimitRanges
  (``with data.kubernetes.limitranges as …``), so no data is written:
  :meth:`Evaluator.decide` (the admission decision), :meth:`Evaluator.rules`
  (rules of ``io.k8s.federation.limitrange``), :meth:`Evaluator.parse_all`
  (the quantity parser on a list of values), :meth:`Evaluator.view` (the
  report behind ``fedplace-limits``).
* :func:`patched` — the object after the decision's ``patches["limitrange"]``.
* :func:`read` — a message as ``(who, resource, what, limitrange)``, the shape
  of :class:`tests.packs.limitrange.k8s_limitranger.Violation`.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch

from tests.fixtures.opa import OpaServer

ROOT = Path(__file__).resolve().parents[3]
PACK_MODULES = ["lib/generated/replicated_root.rego", "lib/podspec.rego", "limitrange/quantity.rego",
                "limitrange/ranger.rego", "limitrange/admission.rego", "limitrange/view.rego"]  # loadable in this order
EVALUATORS = ["in-process", "server"]
TEST_PREFIX = "fedplace-test-limitrange-harness"

# A test-only module: each question as one rule of its input.
TEST_MODULE = """package fedplace_test.limitrange

import data.io.k8s.federation.limitrange.quantity

# input: {"obj": <object>, "ranges": <data.kubernetes.limitranges>, "names": [<rule name>]}
decision := d if {
	d := data.io.k8s.federation.admission with input as input.obj with data.kubernetes.limitranges as input.ranges
}

rules := {name: value |
	some name in input.names
	value := data.io.k8s.federation.limitrange[name] with input as input.obj
		with data.kubernetes.limitranges as input.ranges
}

# input: [<value>]
parsed := [quantity.parse(v) | some v in input]

# input: {"input": <the view's input>, "kubernetes": <data.kubernetes>}
report := r if {
	r := data.io.k8s.federation.limitrange.view.report with input as input.input with data.kubernetes as input.kubernetes
}
"""


def modules() -> dict[str, str]:
    """The pack and the lib it needs (dependency order), plus :data:`TEST_MODULE`."""
    pack = {m: (ROOT / "policies" / m).read_text() for m in PACK_MODULES}
    return {**pack, "fedplace_test/limitrange.rego": TEST_MODULE}


def _question(obj: Any, limitranges: list[dict[str, Any]], names: list[str] | None = None) -> dict[str, Any]:
    ns = obj.get("metadata", {}).get("namespace", "") if isinstance(obj, dict) else ""
    doc = {"obj": obj, "ranges": {ns: {lr["metadata"]["name"]: lr for lr in limitranges}}}
    return {**doc, "names": names} if names is not None else doc


class Evaluator:
    """The pack held by an evaluator; ``answer`` evaluates one rule of :data:`TEST_MODULE`."""

    name: str

    async def answer(self, rule: str, input_doc: Any) -> Any:
        raise NotImplementedError

    async def decide(self, obj: Any, limitranges: list[dict[str, Any]]) -> dict[str, Any]:
        """The admission decision for ``obj`` with ``limitranges`` in its namespace."""
        return await self.answer("decision", _question(obj, limitranges)) or {}

    async def rules(self, obj: Any, limitranges: list[dict[str, Any]], *names: str) -> dict[str, Any]:
        """``{name: value}`` of rules of ``io.k8s.federation.limitrange`` (undefined ones left out)."""
        return await self.answer("rules", _question(obj, limitranges, list(names))) or {}

    async def parse_all(self, values: list[Any]) -> list[dict[str, Any]]:
        """``quantity.parse`` of every value, in one query."""
        return await self.answer("parsed", values)  # type: ignore[no-any-return]

    async def view(self, inp: dict[str, Any], kubernetes: dict[str, Any]) -> Any:
        """``data.io.k8s.federation.limitrange.view.report`` for ``inp`` with ``kubernetes`` as data.kubernetes."""
        return await self.answer("report", {"input": inp, "kubernetes": kubernetes})


class InProcess(Evaluator):
    """OPA 1.20's own evaluator, in process (one engine per test session)."""

    name = "in-process"

    @staticmethod
    @functools.cache
    def _engine() -> Any:
        from opa_bindings import OpaEngine

        engine = OpaEngine()
        for mid, src in modules().items():
            engine.add_policy(mid, src)
        return engine

    async def answer(self, rule: str, input_doc: Any) -> Any:
        rs = self._engine().eval_query(f"x := data.fedplace_test.limitrange.{rule}", input_doc)
        return rs[0]["x"] if rs else None


class Server(Evaluator):
    """A policy server (the ``opa`` fixture) over HTTP; :meth:`load` PUTs the modules first."""

    name = "server"

    def __init__(self, opa: OpaServer, session: aiohttp.ClientSession) -> None:
        self.opa = opa
        self.session = session

    async def load(self) -> None:
        for mid, src in modules().items():
            async with self.session.put(f"{self.opa.url}/v1/policies/{TEST_PREFIX}/{mid}", data=src.encode(),
                                        headers=self.opa.headers({"Content-Type": "text/plain"})) as resp:
                assert resp.status == 200, (mid, resp.status, await resp.text())

    async def unload(self) -> None:
        for mid in reversed(list(modules())):
            async with self.session.delete(f"{self.opa.url}/v1/policies/{TEST_PREFIX}/{mid}",
                                           headers=self.opa.headers()) as resp:
                await resp.read()

    async def answer(self, rule: str, input_doc: Any) -> Any:
        async with self.session.post(f"{self.opa.url}/v1/data/fedplace_test/limitrange/{rule}",
                                     data=json.dumps({"input": input_doc}),
                                     headers=self.opa.headers({"Content-Type": "application/json"})) as resp:
            assert resp.status == 200, (rule, resp.status, await resp.text())
            return (await resp.json()).get("result")


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


__all__ = ["EVALUATORS", "Evaluator", "InProcess", "PACK_MODULES", "ROOT", "Server", "TEST_MODULE", "modules",
           "patched", "read", "resources_of"]
