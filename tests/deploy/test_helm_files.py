"""The Helm chart deploy/helm/fedplace is self-contained: it holds copies of the kustomize sources it
reads (files/), which deploy/scripts/sync-helm-files.py writes from deploy/ and checks. No Helm
needed: these run wherever the deploy tests run."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from tests.deploy.conftest import DEPLOY, run

CHART = DEPLOY / "helm" / "fedplace"
SYNC = DEPLOY / "scripts" / "sync-helm-files.py"


def test_chart_holds_current_copies_of_deploy():
    """The chart is self-contained: regular files only (no link out of it), and files/ holds
    exactly what deploy/ has (deploy/scripts/sync-helm-files.py --check); appVersion is the image
    tag deploy/base sets."""
    links = [p for p in CHART.rglob("*") if p.is_symlink()]
    assert not links, links
    proc = run([sys.executable, str(SYNC), "--check"], check=False)
    assert proc.returncode == 0, proc.stderr
    assert (CHART / "files" / "base" / "kustomization.yaml").read_bytes() == (DEPLOY / "base" / "kustomization.yaml").read_bytes()
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    kust = yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text())
    (image,) = [i for i in kust["images"] if i["name"] == "fedplace"]
    assert meta["appVersion"] == image["newTag"] and meta["apiVersion"] == "v2"
    assert meta["kubeVersion"] == ">=1.24.0-0"


def test_sync_check_names_what_is_stale(tmp_path: Path, workspace: Path):
    """--check fails on a changed, a missing and an extra copy, and on a link; a sync repairs
    them and leaves the tokens gen-tokens.sh wrote (the test workspace has them) out."""
    assert sorted(p.name for p in (workspace / "base" / "secrets").iterdir())
    chart = tmp_path / "fedplace"
    shutil.copytree(CHART, chart)
    files = chart / "files"
    (files / "base" / "opa" / "authz.rego").write_text("package tampered\n")
    (files / "components" / "limitrange" / "rbac.yaml").unlink()
    (files / "cert-manager" / "extra.yaml").write_text("{}\n")
    (files / "components" / "monitoring" / "dashboard.json").unlink()
    (files / "components" / "monitoring" / "dashboard.json").symlink_to(DEPLOY / "components" / "monitoring" / "dashboard.json")
    check = [sys.executable, str(SYNC), "--check", "--chart", str(chart), "--deploy", str(workspace)]
    proc = run(check, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[:-1] == [
        "differs from deploy/: files/base/opa/authz.rego",
        "not in deploy/: files/cert-manager/extra.yaml",
        "missing from the chart: files/components/limitrange/rbac.yaml",
        "a link, not a copy: files/components/monitoring/dashboard.json",
    ]
    run([sys.executable, str(SYNC), "--chart", str(chart), "--deploy", str(workspace)])
    assert run(check, check=False).returncode == 0
    assert not [p for p in files.rglob("*") if "secrets" in p.parts or p.is_symlink()]
