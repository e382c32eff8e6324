"""``fedplace explain``: the decision and, per cluster, why — over HTTP against the devstack.

OPA holds the shipped policies and a replicated federation (conftest.py); the
object comes from a file or from the API server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from fedplace.common.kube_client import kube_json
from fedplace.insight import explain
from tests.insight.conftest import EU, PCI, PREFS, rs, run_command


def lines_of(out: str) -> dict[str, str]:
    """The cluster lines of the text output, by cluster name."""
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[0] in ("✓", "✗"):
            found[parts[1]] = line.strip()
    return found


async def test_explains_each_cluster_from_a_file(federation: Any, tmp_path: Path):
    obj = tmp_path / "rs.yaml"
    obj.write_text(yaml.safe_dump(rs("vault", {EU: "true", PCI: "2"})))
    code, out, err = await run_command(explain, ["-f", str(obj), *federation.flags()])
    assert code == 0, err
    assert out.startswith("ReplicaSet insight-shop/vault: admitted\n")
    assert (f'{PREFS} = {{"clusters":{{"aws-eu-central-1":{{"weight":1}},"gce-europe-west1":{{"weight":1}}}},'
            '"rebalance":true}') in out
    assert "placement: EU jurisdiction required: true, PCI compliance level >= 2: 2 of 4 clusters eligible" in out
    assert 'requires: region EU (annotation policy.federation.alpha.kubernetes.io/eu-jurisdiction-required: "true")' \
        in out
    rows = lines_of(out)
    assert list(rows) == ["aws-eu-central-1", "gce-europe-west1", "azure-westeurope", "gce-us-central1"]
    assert rows["gce-europe-west1"].startswith("✓ gce-europe-west1") and "selected" in rows["gce-europe-west1"]
    assert rows["gce-europe-west1"].endswith("region europe-west1 ✓ EU; PCI 2 ✓ >= 2")
    assert rows["aws-eu-central-1"].endswith("region eu-central-1 ✓ EU; PCI 3 ✓ >= 2")
    assert rows["azure-westeurope"].startswith("✗") and "selected" not in rows["azure-westeurope"]
    assert rows["azure-westeurope"].endswith("region westeurope ✓ EU; PCI 1 ✗ >= 2")
    assert rows["gce-us-central1"].endswith("region us-central1 ✗ EU; PCI 3 ✓ >= 2")


async def test_denied_object_and_json_output(federation: Any, tmp_path: Path):
    obj = tmp_path / "rs.json"
    obj.write_text(json.dumps(rs("nowhere", {EU: "true", PCI: "4"})))
    code, out, err = await run_command(explain, ["-f", str(obj), "-o", "json", "--fail-on-denial",
                                                 *federation.flags()])
    assert code == 1, err
    doc = json.loads(out)
    assert doc["object"] == {"kind": "ReplicaSet", "namespace": "insight-shop", "name": "nowhere"}
    assert doc["decision"]["errors"] == [
        "no cluster satisfies the placement policy (EU jurisdiction required: true, PCI compliance level >= 4)"]
    placement = doc["explanation"]["placement"]
    assert not any(c["eligible"] for c in placement["clusters"].values())
    aws = placement["clusters"]["aws-eu-central-1"]["checks"]
    assert {"requirement": "pci-compliance-level", "label": "PCI", "value": "3", "required": ">= 4",
            "ok": False} in aws
    code, out, _ = await run_command(explain, ["-f", str(obj), *federation.flags()])
    assert code == 0 and "DENIED" in out.splitlines()[0]
    assert "error: no cluster satisfies the placement policy" in out


async def test_reads_the_object_from_the_api_server(federation: Any, kube: Any, kube_api: Any, kube_namespace: str):
    body = rs("payments", {EU: "true", PCI: "3"}, namespace=kube_namespace)
    await kube_json(kube_api, "POST", f"/apis/apps/v1/namespaces/{kube_namespace}/replicasets", body=body)
    argv = ["replicaset/payments", "-n", kube_namespace, "--kubeconfig", str(kube.kubeconfig), *federation.flags()]
    code, out, err = await run_command(explain, argv)
    assert code == 0, err
    assert out.startswith(f"ReplicaSet {kube_namespace}/payments: admitted")
    rows = lines_of(out)
    assert rows["aws-eu-central-1"].startswith("✓") and "selected" in rows["aws-eu-central-1"]
    assert rows["gce-europe-west1"].endswith("region europe-west1 ✓ EU; PCI 2 ✗ >= 3")
    code, _, err = await run_command(explain, ["replicaset/absent", "-n", kube_namespace,
                                               "--kubeconfig", str(kube.kubeconfig), *federation.flags()])
    assert code == 2 and "cannot read replicaset/absent" in err
    code, _, err = await run_command(explain, ["widget/x", *federation.flags()])
    assert code == 2 and "expected TYPE/NAME" in err


async def test_other_kinds_and_policies_without_an_explanation(federation: Any, tmp_path: Path):
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    code, out, _ = await run_command(explain, ["-f", str(pod), *federation.flags()])
    assert code == 0
    assert "placement: the placement policy constrains ReplicaSets only (this is a Pod)" in out
    status, _ = await federation.opa.request(
        "DELETE", "/v1/policies/kube-federation-scheduling-policy/fedplace-federation/placement_explain.rego")
    assert status == 200
    code, out, _ = await run_command(explain, ["-f", str(pod), *federation.flags()])
    assert code == 0 and "The loaded policies expose no explanation" in out


def test_console_script(federation: Any, tmp_path: Path):
    script = Path(sys.executable).parent / "fedplace"
    assert script.exists(), "pip install -e . installs the fedplace console script"
    obj = tmp_path / "rs.yaml"
    obj.write_text(yaml.safe_dump(rs("web", {PCI: "3"})))
    proc = subprocess.run([str(script), "explain", "-f", str(obj), *federation.flags()], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"})
    assert proc.returncode == 0, proc.stderr
    assert "2 of 4 clusters eligible" in proc.stdout
