"""Run the Rego unit tests under policies/ through the engine's REST API.

Every ``*.rego`` file is loaded as a module (``PUT /v1/policies``); each
``test_*`` rule of a ``*_test.rego`` file is then queried and must be ``true``
— what ``opa test policies/`` checks, over the same API a real OPA serves.
"""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

POLICIES = Path(__file__).resolve().parents[2] / "policies"
TEST_RULE = re.compile(r"^(test_\w+)\s+if\b", re.M)
PACKAGE = re.compile(r"^package\s+([\w.]+)", re.M)


def rego_tests() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted(POLICIES.rglob("*_test.rego")):
        src = path.read_text()
        package = PACKAGE.search(src).group(1)
        for name in TEST_RULE.findall(src):
            out.append((str(path.relative_to(POLICIES)), package, name))
    return out


def headers(opa) -> dict[str, str]:
    return {"Authorization": f"Bearer {opa.token}"} if opa.token else {}


async def load_all(session: aiohttp.ClientSession, opa) -> None:
    for path in sorted(POLICIES.rglob("*.rego")):
        policy_id = "fedplace-test/" + str(path.relative_to(POLICIES))
        async with session.put(f"{opa.url}/v1/policies/{policy_id}", data=path.read_text(),
                               headers={**headers(opa), "Content-Type": "text/plain"}) as resp:
            assert resp.status == 200, f"{path}: {await resp.text()}"


def test_every_policy_file_has_tests():
    sources = {p.stem for p in POLICIES.rglob("*.rego") if not p.stem.endswith("_test")}
    tested = {p.stem[: -len("_test")] for p in POLICIES.rglob("*_test.rego")}
    assert rego_tests(), "no Rego tests found"
    assert "placement" in tested and "remediation" in tested, (sources, tested)


@pytest.mark.parametrize("file, package, rule", rego_tests(), ids=[f"{f}::{r}" for f, _, r in rego_tests()])
async def test_rego(opa, file, package, rule):
    async with aiohttp.ClientSession() as session:
        await load_all(session, opa)
        url = f"{opa.url}/v1/data/{package.replace('.', '/')}/{rule}"
        async with session.get(url, headers=headers(opa)) as resp:
            body = await resp.json()
            assert resp.status == 200, body
    assert body.get("result") is True, f"{file}: {rule} is {body.get('result', 'undefined')}"
