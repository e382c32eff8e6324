"""Run the Rego unit tests under policies/ through the engine's REST API.

Every ``*.rego`` file is loaded as a module (``PUT /v1/policies``); each Rego
test (see :func:`tests.policies.suite.discover`) is then queried and must be
``true`` — what ``opa test policies/`` checks, over the same API a real OPA
serves. tests/policies/test_rego_opa.py runs the same tests with OPA's own
evaluator.
"""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import aiohttp
import pytest

from tests.policies.suite import RegoTest, discover, modules, put_in_dependency_order

TESTS = discover().tests


async def load_all(session: aiohttp.ClientSession, opa) -> None:
    async def put(module_id: str, source: str) -> tuple[int, str]:
        async with session.put(f"{opa.url}/v1/policies/fedplace-test/{module_id}", data=source,
                               headers=opa.headers({"Content-Type": "text/plain"})) as resp:
            return resp.status, await resp.text()

    await put_in_dependency_order(put, modules())


@pytest.fixture(scope="module")
def loaded(opa_server):
    """The server with every module loaded once for this file's tests (each PUT makes
    OPA, and the engine, compile the whole module set: loading per test is quadratic)."""
    async def reset_and_load() -> None:
        await opa_server.reset_state()
        async with aiohttp.ClientSession() as session:
            await load_all(session, opa_server)

    asyncio.run(reset_and_load())
    yield opa_server
    asyncio.run(opa_server.reset_state())


@pytest.mark.parametrize("test", TESTS, ids=[t.id for t in TESTS])
async def test_rego(loaded, test: RegoTest):
    if test.skipped:
        pytest.skip(f"{test.id}: todo")
    opa = loaded
    async with aiohttp.ClientSession() as session:
        url = f"{opa.url}/v1/data/" + "/".join(quote(seg, safe="") for seg in test.path)
        async with session.get(url, headers=opa.headers()) as resp:
            body = await resp.json()
            assert resp.status == 200, body
    assert body.get("result") is True, f"{test.file}: {test.name} is {body.get('result', 'undefined')}"
