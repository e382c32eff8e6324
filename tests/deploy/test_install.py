"""deploy/: least privilege for the sync, a staged install, cert-manager exempt, and the
operations guide's commands — checked on the rendered manifests and by running the install
script against a stand-in kubectl that records what it is asked, in order."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import DEPLOY, ROOT, Rendered, render
from tests.deploy.test_semantics import NS, grants, pod_spec, sync_config

STAGE = "fedplace.io/install-stage"
SYNC_SA = ("opa-kube-sync", NS)
INSTALL = DEPLOY / "scripts" / "install.sh"


def stage_of(o: dict[str, Any]) -> str | None:
    return (o["metadata"].get("labels") or {}).get(STAGE)


# -- 11: the webhook configuration is applied last ----------------------------------------------------------


def test_only_the_webhook_configuration_is_in_the_last_stage(overlay: Rendered):
    last = [o for o in overlay.objects if stage_of(o) == "webhook"]
    assert [(o["kind"], o["metadata"]["name"]) for o in last] == [("MutatingWebhookConfiguration", "fedplace-admission")]
    first = [o for o in overlay.objects if stage_of(o) != "webhook"]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in first}
    # Everything the webhook's pods need to become Ready is in the first stage.
    assert {("Deployment", "fedplace-admission"), ("Deployment", "opa"), ("Service", "fedplace-admission"),
            ("Service", "opa"), ("Namespace", NS)} <= kinds
    assert not any(o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration") for o in first)


def fake_kubectl(tmp_path: Path, cert_manager: bool) -> tuple[Path, Path]:
    """A kubectl that logs each call (one JSON array per line) and answers what install.sh reads."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "kubectl"
    script.write_text(f"""#!/usr/bin/env python3
import json, sys
args = sys.argv[1:]
with open({str(log)!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if args[:4] == ["-n", "opa", "get", "certificate"]:
    sys.exit(0 if {cert_manager!r} else 1)
if args[:4] == ["-n", "opa", "get", "secret"]:
    print("Q0EtUEVN", end="")
elif "--dry-run=client" in args:
    print(json.dumps({{"kind": "MutatingWebhookConfiguration", "webhooks": [{{"clientConfig": {{}}}}]}}))
elif args[:2] == ["patch", "--local"]:
    doc = json.load(sys.stdin)
    doc["webhooks"][0]["clientConfig"]["caBundle"] = json.loads(args[args.index("-p") + 1])[0]["value"]
    print(json.dumps(doc))
elif args[:2] == ["apply", "-f"]:
    with open({str(log)!r}, "a") as f:
        f.write(json.dumps(["<stdin>", json.load(sys.stdin)]) + "\\n")
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def run_install(tmp_path: Path, *args: str, cert_manager: bool = True) -> list[list[Any]]:
    kubectl, log = fake_kubectl(tmp_path, cert_manager)
    overlay = DEPLOY / "overlays" / ("cert-manager" if cert_manager else "self-signed")
    proc = subprocess.run(["bash", str(INSTALL), "--overlay", str(overlay), "--timeout", "30s", *args],
                          env={**os.environ, "KUBECTL": str(kubectl)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def index(calls: list[list[Any]], *words: str) -> int:
    for i, call in enumerate(calls):
        if all(w in call for w in words):
            return i
    raise AssertionError(f"no call with {words}: {calls}")


@pytest.mark.parametrize("cert_manager", [True, False], ids=["cert-manager", "self-signed"])
def test_install_registers_the_webhook_only_after_both_rollouts(tmp_path: Path, cert_manager: bool):
    calls = run_install(tmp_path, cert_manager=cert_manager)
    first = index(calls, "apply", f"{STAGE}!=webhook")
    opa = index(calls, "rollout", "status", "deployment/opa")
    admission = index(calls, "rollout", "status", "deployment/fedplace-admission")
    for i in (opa, admission):  # kubectl < 1.27: one resource per rollout status
        assert sum(a.startswith("deployment/") for a in calls[i]) == 1
    if cert_manager:
        ready = index(calls, "wait", "--for=condition=Ready", "certificate/fedplace-admission-tls")
        assert first < ready < opa
        last = index(calls, "<stdin>")
        webhook = calls[last][1]
        assert webhook["webhooks"][0]["clientConfig"]["caBundle"] == "Q0EtUEVN", "caBundle set before it is applied"
        assert index(calls, "apply", f"{STAGE}=webhook", "--dry-run=client") > admission
    else:
        last = index(calls, "apply", f"{STAGE}=webhook")
        assert not any("--dry-run=client" in c for c in calls)
    assert first < opa < admission < last == len(calls) - 1


def test_uninstall_deletes_the_webhook_configuration_first(tmp_path: Path):
    calls = run_install(tmp_path, "--uninstall")
    assert calls[0][:3] == ["delete", "mutatingwebhookconfiguration", "fedplace-admission"]
    assert calls[1][:2] == ["delete", "-k"] and len(calls) == 2


# -- 10: the sync may patch ReplicaSets only when enforcing; annotations only with the policy ----------------


def test_sync_cannot_patch_workloads_unless_remediation_is_enforced(rendered: dict[str, Rendered]):
    for name in ("base", "cert-manager", "self-signed"):
        got = grants(rendered[name], *SYNC_SA)
        assert not {g for g in got if g[3] in ("patch", "update", "create", "delete") and g[2] == "replicasets"}, name
    assert sync_config(rendered["cert-manager"]).remediator.mode == "dry-run"
    enforce = grants(rendered["test-enforce"], *SYNC_SA)
    assert (None, "apps", "replicasets", "patch") in enforce


@pytest.fixture(scope="module")
def annotations_only(kubectl: str, workspace: Path) -> Rendered:
    overlay = workspace / "overlays" / "test-annotations-only"
    overlay.mkdir(exist_ok=True)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../cert-manager\n"
        "components:\n  - ../../components/remediation-enforce\n  - ../../components/remediation-annotations-only\n")
    return render(kubectl, overlay)


def test_annotations_only_policy_binds_the_sync_account_to_annotations(annotations_only: Rendered):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    policy = annotations_only.get("ValidatingAdmissionPolicy", "fedplace-remediator-annotations-only")
    binding = annotations_only.get("ValidatingAdmissionPolicyBinding", "fedplace-remediator-annotations-only")
    for o in (policy, binding):
        kubernetes_validate.validate(o, "1.30", strict=True)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    sa = pod_spec(annotations_only.get("Deployment", "opa", NS))["serviceAccountName"]
    (cond,) = policy["spec"]["matchConditions"]
    assert cond["expression"] == f"request.userInfo.username == 'system:serviceaccount:{NS}:{sa}'"
    # Every remediated kind (--remediate-resource) is matched, by exactly one policy.
    remediated = {(r.group, r.plural) for r in sync_config(annotations_only).remediator.resources}
    matched: list[tuple[str, str]] = []
    for name, fields in (("fedplace-remediator-annotations-only", ("object.spec == oldObject.spec",)),
                         ("fedplace-remediator-annotations-only-configmaps", ("object.data", "object.binaryData",
                                                                               "object.immutable")),
                         ("fedplace-remediator-annotations-only-secrets", ("object.data", "object.stringData",
                                                                            "object.type", "object.immutable"))):
        policy = annotations_only.get("ValidatingAdmissionPolicy", name)
        binding = annotations_only.get("ValidatingAdmissionPolicyBinding", name)
        for o in (policy, binding):
            kubernetes_validate.validate(o, "1.30", strict=True)
        assert binding["spec"]["policyName"] == name and binding["spec"]["validationActions"] == ["Deny"]
        (cond,) = policy["spec"]["matchConditions"]
        assert cond["expression"] == f"request.userInfo.username == 'system:serviceaccount:{NS}:{sa}'"
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
            assert rule["operations"] == ["UPDATE"] and rule["apiVersions"] == ["v1"]
            matched += [(g, r) for g in rule["apiGroups"] for r in rule["resources"]]
        checked = " ".join(v["expression"] for v in policy["spec"]["validations"])
        for field in (*fields, "labels", "ownerReferences", "finalizers"):
            assert field in checked, (name, field)
        assert "annotations" not in checked
        assert policy["spec"]["failurePolicy"] == "Fail"
    assert sorted(matched) == sorted(remediated) and len(matched) == len(set(matched))


# -- 13: the operations guide --------------------------------------------------------------------------------


OPERATIONS = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def test_operations_guide_rollout_status_names_one_resource_per_command():
    for line in OPERATIONS.splitlines():
        if "rollout status" in line:
            resources = re.findall(r"\b(?:deploy|deployment)/[\w-]+", line)
            assert len(resources) <= 1, line


def test_operations_guide_states_the_real_minimums_and_every_tool():
    assert "≥ 1.24" in OPERATIONS and "kubectl` ≥ 1.27" not in OPERATIONS
    assert "standalone `kustomize`" in OPERATIONS
    assert "--dry-run=server" in OPERATIONS and "namespaces" in OPERATIONS
    assert "deploy/scripts/install.sh" in OPERATIONS and "--uninstall" in OPERATIONS
