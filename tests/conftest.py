"""Shared pytest configuration.

Server fixtures live in tests/fixtures/ (one module per server) and are loaded
here as plugins. Each can point at an external server instead of starting a
devstack one:

* ``FEDPLACE_TEST_OPA_URL`` (+ ``FEDPLACE_TEST_OPA_TOKEN``): a real OPA.
* ``FEDPLACE_TEST_KUBECONFIG``: a real Kubernetes API server.

Tests marked ``devstack_only`` need the devstack's fault injection and are
skipped when the server they use is external. The marker may say why
(``@pytest.mark.devstack_only(reason="...")``); the skip then shows it.
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = [
    "tests.fixtures.opa",
    "tests.fixtures.kube",
    "tests.fixtures.proxy",
    "tests.fixtures.karmada",
]

# Local test servers must never be reached through a proxy.
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")
os.environ.setdefault("no_proxy", os.environ["NO_PROXY"])


def external_opa() -> bool:
    return bool(os.environ.get("FEDPLACE_TEST_OPA_URL"))


def external_kube() -> bool:
    return bool(os.environ.get("FEDPLACE_TEST_KUBECONFIG"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not (external_opa() or external_kube()):
        return
    for item in items:
        marker = item.get_closest_marker("devstack_only")
        if marker is not None:
            why = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "needs devstack fault injection")
            item.add_marker(pytest.mark.skip(reason=f"devstack only: {why} (an external server is configured)"))
