"""fedplace beside real Karmada: the fixture of the tests in this directory (each module marked
``karmada_real``: skipped unless ``KARMADA_REAL_STATE`` says real Karmada runs beside the
session's API server)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

import pytest_asyncio
from kubernetes_asyncio import client

from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES
from fedplace.common.kube_client import kube_json
from tests.fixtures.karmada import Karmada
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import Stack
from tests.karmada.helpers import policy
from tests.packs.karmada.helpers import EU, PCI, deployment, fedplace_on_karmada

MERGE = "application/merge-patch+json"
PCI_LABEL = "pci-compliance-level"
NEEDS_EU_PCI2 = {EU: "true", PCI: "2"}


@dataclass
class Fleet:
    """Real Karmada (``karmada``: its API client, the test's namespace and Clusters), the policy
    namespace fedplace reads, and what :meth:`fedplace` needs to start fedplace on it."""

    karmada: Karmada
    policy_ns: str
    opa: Any
    kube: Any
    tmp_path: Path

    @property
    def api(self) -> client.ApiClient:
        return self.karmada.api

    @property
    def ns(self) -> str:
        return self.karmada.namespace

    def fedplace(self, opa: Any = None) -> contextlib.AbstractAsyncContextManager[Stack]:
        """fedplace as deploy/ runs it for Karmada (tests/packs/karmada/helpers.py), asking
        ``opa`` (the session's by default)."""
        return fedplace_on_karmada(opa or self.opa, self.kube, self.api, self.tmp_path, policy_ns=self.policy_ns,
                                   app_ns=self.ns)

    async def cluster(self, role: str, region: str, pci: str, pods: int = 10000) -> str:
        return await self.karmada.add_cluster(role, region=region, labels={PCI_LABEL: pci}, pods=pods)

    async def set_pci(self, role: str, pci: str) -> None:
        await kube_json(self.api, "PATCH", CLUSTERS.object_path(self.karmada.clusters[role]), content_type=MERGE,
                        body={"metadata": {"labels": {PCI_LABEL: pci}}})

    async def template(self, name: str, annotations: dict[str, str], replicas: int = 2) -> dict[str, Any]:
        return await kube_json(self.api, "POST", f"/apis/apps/v1/namespaces/{self.ns}/deployments",
                               body=deployment(name, annotations, replicas))

    async def propagation_policy(self, name: str, placement: dict[str, Any]) -> dict[str, Any]:
        return await kube_json(self.api, "POST", PROPAGATION_POLICIES.collection_path(self.ns), body=policy(
            name, [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}], placement=placement))

    async def clusters_over(self, template: str, seconds: float, every: float = 0.2) -> list[dict[str, int]]:
        """``spec.clusters`` of the template's binding (by role) every ``every`` seconds for
        ``seconds``."""
        seen = []
        deadline = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < deadline:
            b = await self.karmada.binding(template)
            seen.append(self.karmada.roles(b) if b else {})
            await asyncio.sleep(every)
        return seen


@pytest_asyncio.fixture
async def fleet(karmada: Karmada, opa: Any, kube: Any, kube_namespaces: ScratchNamespaces,
                tmp_path: Path) -> AsyncIterator[Fleet]:
    assert karmada.real, "tests/karmada_real needs real Karmada (KARMADA_REAL_STATE)"
    yield Fleet(karmada, await kube_namespaces.create("kr-policy"), opa, kube, tmp_path)
