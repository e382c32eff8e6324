"""Evaluate the same documents with the devstack engine (over HTTP) and with OPA (in process), and compare.

Contracts:

* :class:`Outcome` — one evaluation: a value, undefined (``value is UNDEFINED``),
  or an error (``error`` holds the evaluator's message). Two outcomes agree
  (:meth:`Outcome.agrees`) when both errored, both are undefined, or both hold
  :func:`same_json` values.
* :func:`same_json` — equality of parsed JSON that, unlike ``==``, tells
  booleans from numbers; numbers compare by value (``1 == 1.0``), arrays by
  position (sets arrive as sorted arrays from both evaluators).
* :meth:`Outcome.as_engine_sends` — the outcome with every number out of the
  float range (``inf``/``-inf`` once Python has parsed it) replaced by ``null``,
  as the devstack engine sends it (a known difference from OPA, pinned by
  ``test_known_difference_evaluated_numbers_are_64_bit_floats`` in
  tests/engine/test_opa_differences.py); compare the engine to OPA through it,
  never a real OPA server (which sends such numbers as written).
* :class:`EngineSide` — the engine behind the ``opa`` fixture: modules go in
  with ``PUT /v1/policies/<id>``, ``data.kubernetes`` with ``PUT /v1/data/…``
  (whole, or object by object as opa-kube-sync writes it; any other document
  with :meth:`EngineSide.put_data`), queries with
  ``POST /v1/data/<path>`` (no ``input`` key when the input is None), many at once.
* :class:`OpaSide` — ``OpaEngine`` with the same modules and data; queries are
  ``data[...]`` references, so a path segment may hold any text.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from opa_bindings import OpaEngine, OpaError

from fedplace.common import jsonsafe
from tests.fixtures.opa import OpaServer
from tests.policies.suite import data_ref, opa_engine, put_in_dependency_order

__all__ = ["UNDEFINED", "EngineSide", "OpaSide", "Outcome", "same_json"]

UNDEFINED: Any = type("Undefined", (), {"__repr__": lambda self: "<undefined>"})()
ROOT = "kubernetes"


def same_json(a: Any, b: Any) -> bool:
    """Parsed-JSON equality; ``True`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class Outcome:
    """What one evaluator answered: ``value`` (or UNDEFINED), or ``error``."""

    value: Any = UNDEFINED
    error: str | None = None

    def agrees(self, other: Outcome) -> bool:
        if self.error is not None or other.error is not None:
            return self.error is not None and other.error is not None
        if self.value is UNDEFINED or other.value is UNDEFINED:
            return self.value is other.value
        return same_json(self.value, other.value)

    def as_engine_sends(self) -> Outcome:
        """This outcome as the engine writes it (``common.jsonsafe.dumps``: a NaN or infinite number
        is ``null``; see the module docstring)."""
        return self if self.value is UNDEFINED else Outcome(jsonsafe.finite(self.value), self.error)

    def __str__(self) -> str:
        if self.error is not None:
            return f"error: {self.error}"
        return "undefined" if self.value is UNDEFINED else json.dumps(self.value, ensure_ascii=False, sort_keys=True)


def _url_path(path: tuple[str, ...]) -> str:
    return "/".join(quote(seg, safe="") for seg in path)


class EngineSide:
    """The engine of the ``opa`` fixture, through one HTTP session (see the module docstring)."""

    def __init__(self, opa: OpaServer, session: aiohttp.ClientSession, concurrency: int = 16) -> None:
        self.opa = opa
        self.session = session
        self.limit = asyncio.Semaphore(concurrency)

    async def _send(self, method: str, path: str, body: str | None, content_type: str) -> tuple[int, str]:
        async with self.limit, self.session.request(method, self.opa.url + path, data=body,
                                                    headers=self.opa.headers({"Content-Type": content_type})) as resp:
            return resp.status, await resp.text()

    async def load_modules(self, mods: dict[str, str]) -> None:
        async def put(module_id: str, source: str) -> tuple[int, str]:
            return await self._send("PUT", "/v1/policies/" + module_id, source, "text/plain")

        await put_in_dependency_order(put, mods)

    async def put_data(self, path: tuple[str, ...], value: Any) -> None:
        """``PUT /v1/data/<path>`` with ``value``; asserts the server took it."""
        status, text = await self._send("PUT", "/v1/data/" + _url_path(path), json.dumps(value), "application/json")
        assert status in (200, 204), f"PUT /v1/data/{'/'.join(path)}: {status} {text}"

    async def load_data(self, kubernetes: dict[str, Any] | None, per_object: bool = False) -> None:
        """Replace ``data`` with ``{"kubernetes": kubernetes}`` (``{}`` when None)."""
        status, text = await self._send("PUT", "/v1/data", "{}", "application/json")
        assert status in (200, 204), text
        if kubernetes is None:
            return
        if not per_object:
            await self.put_data((ROOT,), kubernetes)
            return
        await self.put_data((ROOT,), {})
        for plural, items in kubernetes.items():
            await self.put_data((ROOT, plural), {})
            await asyncio.gather(*(self.put_data((ROOT, plural, key), item) for key, item in items.items()))

    async def evaluate(self, path: tuple[str, ...], input_doc: Any) -> Outcome:
        body = json.dumps({} if input_doc is None else {"input": input_doc})
        status, text = await self._send("POST", "/v1/data/" + _url_path(path), body, "application/json")
        if status != 200:
            return Outcome(error=f"HTTP {status}: {text}")
        answer = json.loads(text)
        return Outcome(answer["result"]) if "result" in answer else Outcome()

    async def evaluate_all(self, path: tuple[str, ...], inputs: list[Any]) -> list[Outcome]:
        return list(await asyncio.gather(*(self.evaluate(path, i) for i in inputs)))


class OpaSide:
    """OPA's evaluator holding ``mods`` and ``{"kubernetes": kubernetes}`` (no data when None); a context manager."""

    def __init__(self, mods: dict[str, str], kubernetes: dict[str, Any] | None) -> None:
        self.engine: OpaEngine = opa_engine(mods, None if kubernetes is None else {ROOT: kubernetes})

    def evaluate(self, path: tuple[str, ...], input_doc: Any) -> Outcome:
        try:
            result = self.engine.eval_query(f"value := {data_ref(path)}", input_doc)
        except OpaError as exc:
            return Outcome(error=f"{exc.code}: {exc.message}")
        return Outcome(result[0]["value"]) if result else Outcome()

    def evaluate_all(self, path: tuple[str, ...], inputs: list[Any]) -> list[Outcome]:
        return [self.evaluate(path, i) for i in inputs]

    def __enter__(self) -> OpaSide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.engine.close()
