"""The policy ConfigMaps deploy/ ships, read from their sources (for the demo, the tests and the
benches): ``deploy/scripts/sync-policy-configmap.py``'s ``sources()``, from which
``deploy/base/policies/policies.yaml`` is generated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["rule_set_configmap", "shipped_policy_configmaps"]

ROOT = Path(__file__).resolve().parents[1]


def _generator():  # type: ignore[no-untyped-def]
    path = ROOT / "deploy" / "scripts" / "sync-policy-configmap.py"
    spec = importlib.util.spec_from_file_location("fedplace_sync_policy_configmap", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped_policy_configmaps() -> dict[str, dict[str, str]]:
    """{ConfigMap name: {key: Rego}} exactly as deploy/base ships them."""
    return _generator().sources()


def rule_set_configmap(rule_set: str) -> tuple[str, dict[str, str]]:
    """(ConfigMap name, {key: Rego}) of a rule set off by default (``tenancy``: the ConfigMap
    deploy/components/placement-rules-tenancy adds)."""
    (item,) = _generator().component_sources()[f"placement-rules-{rule_set}"].items()
    return item
