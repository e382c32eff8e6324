"""Fixtures for the tests of the devstack engine itself.

Whatever ``FEDPLACE_TEST_OPA_URL`` says, these start ``python -m devstack.engine``
(test_devstack.py and test_opa_differences.py test the engine, not whichever
OPA the session uses; test_conformance.py uses the session's ``opa``):

* ``engine_server`` (session) — one engine; ``engine`` (function) — the same
  with fresh state (``POST /_devstack/reset``, faults cleared).
* ``engine_process`` (function) — a dedicated engine the test may kill and
  restart on the same port.
* ``engine_auth`` (session) — an engine started with ``--token-file`` (its
  ``token`` is set).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.fixtures.opa import OpaServer, _start_engine


def _engine(log_dir: Path, name: str, token: str | None = None) -> Iterator[OpaServer]:
    proc = _start_engine(log_dir, token, name)
    try:
        yield OpaServer(proc.url, token, external=False, process=proc)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpaServer]:
    yield from _engine(tmp_path_factory.mktemp("engine-own"), "engine-own")


@pytest_asyncio.fixture
async def engine(engine_server: OpaServer) -> AsyncIterator[OpaServer]:
    await engine_server.reset_state()
    yield engine_server


@pytest.fixture
def engine_process(tmp_path: Path) -> Iterator[OpaServer]:
    """``.process.kill()`` / ``.start()`` restart it on the same port."""
    yield from _engine(tmp_path, "engine-dedicated")


@pytest.fixture(scope="session")
def engine_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpaServer]:
    yield from _engine(tmp_path_factory.mktemp("engine-auth"), "engine-auth", secrets.token_hex(16))
