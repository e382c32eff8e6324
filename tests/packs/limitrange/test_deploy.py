"""What deploy/ ships for the LimitRange pack: its ConfigMap in base, and the
component that makes opa-kube-sync replicate LimitRanges (item 1).

Rendered offline with ``kubectl kustomize`` in tests/deploy's scratch copy of
deploy/ (its fixtures: tokens and certificates generated there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import kubectl, run, workspace  # noqa: F401 - the deploy tests' fixtures
from tests.packs.limitrange.conftest import pack_configmaps


@pytest.fixture(scope="module")
def rendered(kubectl: str, workspace: Path) -> dict[str, list[dict[str, Any]]]:  # noqa: F811
    """self-signed as shipped, and with the component (an overlay beside it in the scratch copy)."""
    overlay = workspace / "overlays" / "test-limitrange"
    overlay.mkdir(exist_ok=True)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../self-signed\ncomponents:\n  - ../../components/limitrange\n")
    return {name: [d for d in yaml.safe_load_all(run([kubectl, "kustomize", str(workspace / "overlays" / name)]).stdout)
                   if d]
            for name in ("self-signed", "test-limitrange")}


def sync_args(objects: list[dict[str, Any]]) -> list[str]:
    opa = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "opa")
    return next(c for c in opa["spec"]["template"]["spec"]["containers"] if c["name"] == "opa-kube-sync")["args"]


def test_base_ships_the_pack_configmap(rendered: dict[str, list[dict[str, Any]]]):
    cm = next(o for o in rendered["self-signed"] if o["kind"] == "ConfigMap"
              and o["metadata"]["name"] == "fedplace-limitrange")
    assert cm["metadata"]["namespace"] == "kube-federation-scheduling-policy"
    assert sorted(cm["data"]) == ["admission.rego", "quantity.rego", "ranger.rego", "view.rego"]
    assert cm["data"] == pack_configmaps()["fedplace-limitrange"]
    # without the component nothing replicates LimitRanges: the pack is inert
    assert "--replicate=v1/limitranges" not in sync_args(rendered["self-signed"])


def test_component_replicates_limitranges(rendered: dict[str, list[dict[str, Any]]]):
    objects = rendered["test-limitrange"]
    args = sync_args(objects)
    assert "--replicate=v1/limitranges" in args and "--replicate=apps/v1/replicasets" in args
    role = next(o for o in objects if o["kind"] == "ClusterRole"
                and o["metadata"]["name"] == "fedplace:opa-kube-sync:limitranges")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["limitranges"], "verbs": ["list", "watch"]}]
    binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding"
                   and o["metadata"]["name"] == "fedplace:opa-kube-sync:limitranges")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "opa-kube-sync", "namespace": "opa"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
