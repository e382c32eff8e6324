"""Run the Rego unit tests under policies/ through the engine's REST API.

Every ``*.rego`` file is loaded as a module (``PUT /v1/policies``); each Rego
test (see :func:`tests.policies.suite.discover`) is then queried and must be
``true`` — what ``opa test policies/`` checks, over the same API a real OPA
serves. tests/policies/test_rego_opa.py runs the same tests with OPA's own
evaluator.
"""

from __future__ import annotations

from urllib.parse import quote

import aiohttp
import pytest

from tests.policies.suite import RegoTest, discover, modules

TESTS = discover().tests


async def load_all(session: aiohttp.ClientSession, opa) -> None:
    for module_id, source in modules().items():
        async with session.put(f"{opa.url}/v1/policies/fedplace-test/{module_id}", data=source,
                               headers=opa.headers({"Content-Type": "text/plain"})) as resp:
            assert resp.status == 200, f"{module_id}: {await resp.text()}"


@pytest.mark.parametrize("test", TESTS, ids=[t.id for t in TESTS])
async def test_rego(opa, test: RegoTest):
    if test.skipped:
        pytest.skip(f"{test.id}: todo")
    async with aiohttp.ClientSession() as session:
        await load_all(session, opa)
        url = f"{opa.url}/v1/data/" + "/".join(quote(seg, safe="") for seg in test.path)
        async with session.get(url, headers=opa.headers()) as resp:
            body = await resp.json()
            assert resp.status == 200, body
    assert body.get("result") is True, f"{test.file}: {test.name} is {body.get('result', 'undefined')}"
