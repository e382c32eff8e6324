"""The placement page component (deploy/components/placement-page) on top of each overlay, and
with the Karmada component: opa-kube-sync serves the page (its own flag parser says so), behind
the token of a file that is mounted from the reader token of the Secret the base generates, and
nothing else of the Deployment changes. The Helm chart's ``placementPage.enabled`` renders the
same objects (tests/deploy/test_helm.py compares the two builds)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import OVERLAYS, Rendered, container, pod_spec
from tests.deploy.conftest import with_components as conftest_with_components
from tests.deploy.test_semantics import secret_key_for, sync, sync_config

NS = "opa"


def with_components(kubectl: str, workspace: Path, base: str, *components: str) -> Rendered:
    return conftest_with_components(kubectl, workspace, base, *components, prefix="test-placement-page")


@pytest.fixture(scope="module")
def builds(kubectl: str, workspace: Path, rendered: dict[str, Rendered]) -> dict[str, tuple[Rendered, Rendered]]:
    """name -> (the build with the component, the same without it)."""
    out = {name: (with_components(kubectl, workspace, f"../{name}", "placement-page"), rendered[name])
           for name in OVERLAYS}
    out["karmada"] = (with_components(kubectl, workspace, "../self-signed", "placement-page", "karmada"),
                      with_components(kubectl, workspace, "../self-signed", "karmada"))
    return out


@pytest.fixture(scope="module", params=[*OVERLAYS, "karmada"])
def build(request: pytest.FixtureRequest, builds: dict[str, tuple[Rendered, Rendered]]) -> tuple[Rendered, Rendered]:
    return builds[request.param]


def test_the_sync_serves_the_page_behind_the_reader_token(build: tuple[Rendered, Rendered]):
    r, _ = build
    config = sync_config(r)
    assert config.placement_page is True
    assert config.listen == ("0.0.0.0", 8182)  # reachable: the token is what guards it
    token_file = config.placement_page_token_file
    assert token_file == "/var/run/secrets/fedplace/placement-page/token"
    secret, key = secret_key_for(r.get("Deployment", "opa", NS), "opa-kube-sync", token_file)
    assert key == "reader-token"
    generated = r.secret("opa-tokens", NS)
    assert generated is not None and generated["metadata"]["name"] == secret  # kustomize's hashed name
    assert "reader-token" in generated["data"]
    # mounted read-only into the sidecar alone, never into OPA
    mount = next(m for m in container(r.get("Deployment", "opa", NS), "opa-kube-sync")["volumeMounts"]
                 if m["name"] == "placement-page-token")
    assert mount["readOnly"] is True
    assert not any(m["name"] == "placement-page-token"
                   for m in container(r.get("Deployment", "opa", NS), "opa").get("volumeMounts") or [])


def test_nothing_else_changes(build: tuple[Rendered, Rendered]):
    with_page, without = build
    assert sorted((o["kind"], o["metadata"]["name"]) for o in with_page.objects) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in without.objects)
    a = copy.deepcopy(with_page.get("Deployment", "opa", NS))
    b = without.get("Deployment", "opa", NS)
    c = container(a, "opa-kube-sync")
    c["args"] = [x for x in c["args"] if not x.startswith("--placement-page")]
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "placement-page-token"]
    pod_spec(a)["volumes"] = [v for v in pod_spec(a)["volumes"] if v["name"] != "placement-page-token"]
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    for other in with_page.objects:
        if other["kind"] != "Deployment" or other["metadata"]["name"] != "opa":
            assert other in without.objects, (other["kind"], other["metadata"]["name"])
    # the base alone does not serve the page
    assert sync_config(without).placement_page is False
    assert not [a for a in sync(without).get("args") or [] if a.startswith("--placement-page")]


def test_karmada_keeps_its_own_sync_flags(builds: dict[str, Any]):
    """Listed before components/karmada (which must come last), the page's flags are appended:
    Karmada's replacements of the base's arguments still apply."""
    config = sync_config(builds["karmada"][0])
    assert config.placement_page is True
    assert {r.plural for r in config.resources} >= {"resourcebindings", "clusterresourcebindings"}
