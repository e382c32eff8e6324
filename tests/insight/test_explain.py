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

from devstack.karmada import RESOURCE_BINDINGS, install_crds
from fedplace.common.kube_client import kube_json
from fedplace.insight import explain
from tests.insight.conftest import (
    EU,
    EXCLUDED,
    KARMADA_CLUSTERS,
    NS,
    PCI,
    PREFS,
    WHY,
    resource_binding,
    rs,
    run_command,
    template,
)


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
    assert "placement: EU jurisdiction required, PCI compliance level >= 2: 2 of 4 clusters eligible" in out
    assert ('eu-jurisdiction: EU jurisdiction required (reads region; annotation '
            'policy.federation.alpha.kubernetes.io/eu-jurisdiction-required: "true"; rule set eu_pci, imposed by '
            'workload)') \
        in out
    rows = lines_of(out)
    assert list(rows) == ["aws-eu-central-1", "gce-europe-west1", "azure-westeurope", "gce-us-central1"]
    assert rows["gce-europe-west1"].startswith("✓ gce-europe-west1") and "selected" in rows["gce-europe-west1"]
    assert "label pci-compliance-level 2 ✓ PCI compliance level >= 2" in rows["gce-europe-west1"]
    assert "region europe-west1 ✓ EU jurisdiction required" in rows["gce-europe-west1"]
    assert "region eu-central-1 ✓ EU jurisdiction required" in rows["aws-eu-central-1"]
    assert rows["azure-westeurope"].startswith("✗") and "selected" not in rows["azure-westeurope"]
    # each forbidding rule with its values: the cluster's, what it requires, its id, rule set and imposer
    assert ("label pci-compliance-level 1 ✗ PCI compliance level >= 2 [pci-compliance-level: rule set eu_pci, "
            "imposed by workload]") in rows["azure-westeurope"]
    assert ("region us-central1 ✗ EU jurisdiction required [eu-jurisdiction: rule set eu_pci, imposed by workload]"
            in rows["gce-us-central1"])


async def test_denied_object_and_json_output(federation: Any, tmp_path: Path):
    obj = tmp_path / "rs.json"
    obj.write_text(json.dumps(rs("nowhere", {EU: "true", PCI: "4"})))
    code, out, err = await run_command(explain, ["-f", str(obj), "-o", "json", "--fail-on-denial",
                                                 *federation.flags()])
    assert code == 1, err
    doc = json.loads(out)
    assert doc["object"] == {"kind": "ReplicaSet", "namespace": "insight-shop", "name": "nowhere"}
    assert len(doc["decision"]["errors"]) == 1
    placement = doc["explanation"]["placement"]
    assert not any(c["eligible"] for c in placement["clusters"].values())
    aws = placement["clusters"]["aws-eu-central-1"]["checks"]
    assert {"requirement": "pci-compliance-level", "label": "label pci-compliance-level", "value": "3",
            "required": "PCI compliance level >= 4", "ok": False, "imposed_by": "workload", "set": "eu_pci"} in aws
    code, out, _ = await run_command(explain, ["-f", str(obj), *federation.flags()])
    assert code == 0 and "DENIED" in out.splitlines()[0]
    assert f"error: {doc['decision']['errors'][0]}" in out


async def test_reads_the_object_from_the_api_server(federation: Any, kube: Any, kube_api: Any, kube_namespace: str):
    body = rs("payments", {EU: "true", PCI: "3"}, namespace=kube_namespace)
    await kube_json(kube_api, "POST", f"/apis/apps/v1/namespaces/{kube_namespace}/replicasets", body=body)
    argv = ["replicaset/payments", "-n", kube_namespace, "--kubeconfig", str(kube.kubeconfig), *federation.flags()]
    code, out, err = await run_command(explain, argv)
    assert code == 0, err
    assert out.startswith(f"ReplicaSet {kube_namespace}/payments: admitted")
    rows = lines_of(out)
    assert rows["aws-eu-central-1"].startswith("✓") and "selected" in rows["aws-eu-central-1"]
    assert "label pci-compliance-level 2 ✗ PCI compliance level >= 3 [pci-compliance-level: " in rows["gce-europe-west1"]
    code, _, err = await run_command(explain, ["replicaset/absent", "-n", kube_namespace,
                                               "--kubeconfig", str(kube.kubeconfig), *federation.flags()])
    assert code == 2 and "cannot read replicaset/absent" in err
    code, _, err = await run_command(explain, ["widget/x", *federation.flags()])
    assert code == 2 and "unknown TYPE 'widget'" in err


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


# -- Karmada (policies/karmada/karmada_explain.rego) ---------------------------------------------------


def karmada_rows(out: str) -> dict[str, str]:
    return {name: line for name, line in lines_of(out).items() if name in KARMADA_CLUSTERS}


async def test_explains_a_binding_read_from_the_api_server(karmada: Any, kube: Any, kube_api: Any,
                                                           kube_namespace: str):
    """A ResourceBinding the webhook has not narrowed yet: per cluster, each requirement of its
    template with the cluster's value (region from spec.region, the PCI label), why it is
    excluded, and what the binding's exclude list has and would get."""
    await install_crds(kube_api)
    await karmada.client.put_data(["kubernetes", "deployments", kube_namespace],
                                  {"vault": template("vault", {EU: "true", PCI: "2"}, namespace=kube_namespace)})
    body = resource_binding("vault", {"clusterAffinity": {"exclude": ["zz-user"]}}, namespace=kube_namespace)
    body["spec"]["clusters"] = [{"name": "us-1", "replicas": 2}]
    await kube_json(kube_api, "POST", RESOURCE_BINDINGS.collection_path(kube_namespace), body=body)
    argv = ["rb/vault-deployment", "-n", kube_namespace, "--kubeconfig", str(kube.kubeconfig), *karmada.flags()]
    code, out, err = await run_command(explain, argv)
    assert code == 0, err
    assert out.startswith(f"ResourceBinding {kube_namespace}/vault-deployment: admitted\n")
    assert f'{EXCLUDED} = {{"allExcept":["eu-1"]}}' in out  # the allowed clusters are fewer
    assert "  patch: add /spec/placement/clusterAffinity/exclude = [\"zz-user\",\"eu-2\",\"us-1\"]" in out
    assert (f"karmada: Deployment {kube_namespace}/vault: EU jurisdiction required, PCI compliance level >= 2: "
            "1 of 3 clusters allowed, 2 excluded (eu-2, us-1); the decision adds 2 exclusion(s)") in out
    assert "  requires: " in out and "eu-jurisdiction: EU jurisdiction required (reads region; " in out
    assert ("  excluded clusters: the binding has (none) (fedplace.io/excluded-clusters); "
            "the decision gives eu-2, us-1") in out
    assert ("  exclude list clusterAffinity: zz-user → zz-user, eu-2, us-1   "
            "(+eu-2 +us-1; policy: eu-2, us-1; the binding's own: zz-user)") in out
    rows = karmada_rows(out)
    assert list(rows) == ["eu-1", "eu-2", "us-1"]  # allowed first
    assert rows["eu-1"].startswith("✓ eu-1") and "region eu-west-1 ✓ EU jurisdiction required" in rows["eu-1"]
    assert rows["eu-2"].startswith("✗ eu-2  excluded: the decision adds it")
    assert ("label pci-compliance-level 1 ✗ PCI compliance level >= 2 [pci-compliance-level: rule set eu_pci, "
            "imposed by workload]") in rows["eu-2"]
    assert "excluded: the decision adds it, scheduled" in rows["us-1"]
    assert "region us-east-1 ✗ EU jurisdiction required [eu-jurisdiction: rule set eu_pci" in rows["us-1"]
    assert "\nplacement:" not in out, "the Federation v1 pack stands down for a binding"

    # Narrowed as the webhook would: every exclusion is the binding's now, nothing to add.
    admitted = await karmada.webhooked(await kube_json(
        kube_api, "GET", RESOURCE_BINDINGS.object_path("vault-deployment", kube_namespace)))
    await kube_json(kube_api, "PUT", RESOURCE_BINDINGS.object_path("vault-deployment", kube_namespace), body=admitted)
    code, out, err = await run_command(explain, argv)
    assert code == 0, err
    assert "patch:" not in out
    assert out.count("excluded: the binding has it") == 2
    assert "the binding has eu-2, us-1 (fedplace.io/excluded-clusters); the decision gives eu-2, us-1" in out
    assert "exclude list clusterAffinity: zz-user, eu-2, us-1 → zz-user, eu-2, us-1   (unchanged; " in out
    summary = next(line for line in out.splitlines() if line.startswith("karmada:"))
    assert summary.endswith("; the binding's exclude lists already hold them")


async def test_a_binding_no_cluster_can_take_and_json_output(karmada: Any, tmp_path: Path):
    """Every cluster excluded stands out, with the Event the template gets; -o json has the
    explanation's exclusions, and they are what the decision's patch does."""
    await karmada.client.put_data(["kubernetes", "deployments", NS, "nowhere"],
                                  template("nowhere", {EU: "true", PCI: "9"}))
    f = tmp_path / "rb.yaml"
    f.write_text(yaml.safe_dump(resource_binding("nowhere")))
    code, out, err = await run_command(explain, ["-f", str(f), "--fail-on-denial", *karmada.flags()])
    assert code == 0, err  # a binding is never denied
    assert "  ! every cluster excluded: the workload can run nowhere" in out
    assert "every cluster excluded (0 of 3 allowed): the workload can run nowhere" in out
    assert f"  event: Warning PlacementUnsatisfiable on Deployment {NS}/nowhere: ResourceBinding nowhere-deployment:" \
        in out
    assert all(line.startswith("✗") for line in karmada_rows(out).values())
    code, out, err = await run_command(explain, ["-f", str(f), "-o", "json", *karmada.flags()])
    doc = json.loads(out)
    ex = doc["explanation"]["karmada"]
    assert list(doc["explanation"]) == ["karmada"]
    assert ex["every_cluster_excluded"] is True and ex["annotated"] is None
    assert ex["excluded"] == ["eu-1", "eu-2", "us-1"]
    assert doc["decision"]["annotations"][EXCLUDED] == {"allExcept": []}
    assert ex["why"] == doc["decision"]["annotations"][WHY]
    [created] = ex["exclusions"]
    assert created["has"] == [] and created["after"] == ["eu-1", "eu-2", "us-1"]
    assert doc["decision"]["patches"]["karmada"][0] == {
        "op": "add", "path": "/spec/placement/clusterAffinity", "value": {"exclude": created["after"]}}


async def test_a_template_on_karmada(karmada: Any, tmp_path: Path):
    """A Deployment on karmada-apiserver (control_plane "karmada"): the clusters its bindings may
    use, per cluster why; denied when none is left."""
    f = tmp_path / "deploy.yaml"
    f.write_text(yaml.safe_dump(template("api", {EU: "true", PCI: "2"})))
    code, out, err = await run_command(explain, ["-f", str(f), *karmada.flags()])
    assert code == 0, err
    assert out.startswith(f"Deployment {NS}/api: admitted\n")
    assert ("karmada: EU jurisdiction required, PCI compliance level >= 2: 1 of 3 clusters allowed; "
            "its bindings exclude the others") in out
    rows = karmada_rows(out)
    assert rows["eu-1"].startswith("✓") and rows["eu-2"].startswith("✗") and rows["us-1"].startswith("✗")
    assert "label pci-compliance-level 1 ✗ PCI compliance level >= 2 [pci-compliance-level: " in rows["eu-2"]
    assert "\nplacement:" not in out
    f.write_text(yaml.safe_dump(template("api", {EU: "true", PCI: "4"})))
    code, out, err = await run_command(explain, ["-f", str(f), "--fail-on-denial", *karmada.flags()])
    assert code == 1, err
    assert out.startswith(f"Deployment {NS}/api: DENIED\n")
    assert "  error: " in out and "PCI compliance level >= 4" in out
    assert "no cluster satisfies them (0 of 3): the template is denied" in out


def test_karmada_kinds_name_their_api_paths():
    assert explain.KINDS["rb"].object_path("a", "shop") == \
        "/apis/work.karmada.io/v1alpha2/namespaces/shop/resourcebindings/a"
    assert explain.KINDS["crb"].object_path("a", "shop") == "/apis/work.karmada.io/v1alpha2/clusterresourcebindings/a"
    assert explain.KINDS["clusterpropagationpolicy"].object_path("p", "shop") == \
        "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies/p"
