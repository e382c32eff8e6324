"""What the rule sets' end-to-end tests share: the ConfigMap a rule set's component ships, and
loading policy ConfigMaps through a running stack's opa-kube-sync."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fedplace.common.kube_client import kube_json
from tests.fixtures.stack import Stack, eventually, policy_loaded

ROOT = Path(__file__).resolve().parents[2]


def component_configmap(rule_set: str) -> dict[str, Any]:
    """The ConfigMap deploy/components/placement-rules-<set> adds."""
    path = ROOT / "deploy" / "components" / f"placement-rules-{rule_set}" / "rules.yaml"
    (cm,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return cm


async def load(api: Any, stack: Stack, policy_ns: str, configmaps: dict[str, dict[str, str]]) -> None:
    """Create ``configmaps`` ({name: data}) in ``policy_ns``; return once the sync says each is
    loaded and is ready."""
    for name, data in configmaps.items():
        await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
    for name in configmaps:
        await eventually(lambda name=name: policy_loaded(api, policy_ns, name), what=f"{name} to load")

    async def ready() -> bool:
        return stack.sync.is_ready()

    await eventually(ready, what="the sync to be ready")
