"""Fixtures of the Karmada stand-in tests: the test CRDs installed (never removed: other tests on
a shared server may use them), and the cluster-scoped objects a test creates, deleted after it."""

from __future__ import annotations

from typing import AsyncIterator

import pytest_asyncio
from kubernetes_asyncio import client

from devstack.karmada import install_crds
from tests.fixtures.karmada import skip_when_real_karmada
from tests.fixtures.kube import KubeServer

from .helpers import ClusterScoped


@pytest_asyncio.fixture
async def karmada_api(kube: KubeServer, kube_api: client.ApiClient) -> client.ApiClient:
    """``kube_api`` on a server with devstack/karmada/crds.yaml installed and Established (skipped
    while real Karmada runs there)."""
    skip_when_real_karmada()
    await install_crds(kube_api)
    return kube_api


@pytest_asyncio.fixture
async def cluster_scoped(karmada_api: client.ApiClient) -> AsyncIterator[ClusterScoped]:
    objects = ClusterScoped(karmada_api)
    try:
        yield objects
    finally:
        await objects.cleanup()
