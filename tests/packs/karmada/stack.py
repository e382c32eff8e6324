"""fedplace on a Karmada-shaped API server, for the Karmada end-to-end tests: the sync and the
webhook in process (:func:`tests.fixtures.stack.webhook_stack`) with the flags deploy/'s
Karmada component gives them, the shipped policy ConfigMaps and the settings module
``control_plane := "karmada"`` loaded."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

from fedplace.common.kube_client import kube_json
from tests.fixtures.stack import eventually, policy_loaded, webhook_stack
from tests.packs.karmada.test_e2e import EU, PCI, SETTINGS, deployment, rule
from tests.packs.limitrange.conftest import pack_configmaps

__all__ = ["app_reading_config", "fedplace_on_karmada", "replicated"]


async def _ready(sync: Any) -> bool:
    return bool(sync.is_ready())


@asynccontextmanager
async def fedplace_on_karmada(opa: Any, kube: Any, kube_api: Any, tmp_path: Path, *, policy_ns: str, app_ns: str,
                              replicate: Sequence[str]) -> AsyncIterator[Any]:
    """The started stack (``tests.fixtures.stack.Stack``), its sync ready: Clusters,
    ``replicate`` (group/version/plural) and ResourceBindings replicated, bindings remediated
    (enforce, no guard, no leader election), the webhook registered for bindings in ``app_ns``."""
    flags = [arg for r in replicate for arg in ("--replicate", r)]
    async with webhook_stack(
            opa, kube, kube_api, tmp_path, name=f"fedplace-karmada-{app_ns}", policy_ns=policy_ns,
            sync_flags=[*flags, "--replicate", "work.karmada.io/v1alpha2/resourcebindings",
                        "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters",
                        "--replicate-ignore-namespaces", policy_ns,
                        "--remediate", "enforce", "--remediate-debounce", "0.05",
                        "--remediate-max-fraction", "1", "--leader-election", "false",
                        "--remediate-resource", "work.karmada.io/v1alpha2/resourcebindings"],
            webhook_rules=[rule("work.karmada.io", "v1alpha2", ["resourcebindings"])],
            namespaces=[app_ns]) as stack:
        configmaps = pack_configmaps()
        for cm, data in (("fedplace-lib", configmaps["fedplace-lib"]),
                         ("fedplace-federation", configmaps["fedplace-federation"]),
                         ("fedplace-karmada", configmaps["fedplace-karmada"]),
                         ("fedplace-settings", {"settings.rego": SETTINGS})):
            await kube_json(kube_api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm}, "data": data})
            await eventually(lambda cm=cm: policy_loaded(kube_api, policy_ns, cm), what=f"{cm} to load")
        await eventually(lambda: _ready(stack.sync), what="the sync to be ready")
        yield stack


async def replicated(opa: Any, path: str) -> bool:
    """Whether ``data.kubernetes`` at ``path`` (``plural/namespace/name``) is in OPA."""
    status, body = await opa.request("GET", f"/v1/data/kubernetes/{path}")
    return status == 200 and "result" in (body or {})


async def app_reading_config(api: Any, opa: Any, ns: str) -> None:
    """The ConfigMap ``cfg`` requiring PCI >= 3 and the Deployment ``app`` requiring the EU that
    reads it (``envFrom``), both in ``ns`` and replicated into OPA."""
    await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "annotations": {PCI: "3"}},
        "data": {"k": "v"}})
    app = deployment("app", {EU: "true"})
    app["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cfg"}}]
    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=app)
    await eventually(lambda: replicated(opa, f"configmaps/{ns}/cfg"), what="the ConfigMap replicated")
    await eventually(lambda: replicated(opa, f"deployments/{ns}/app"), what="the template replicated")
