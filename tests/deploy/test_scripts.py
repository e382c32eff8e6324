"""deploy/scripts: certificates (gen-certs.sh), tokens (gen-tokens.sh), the
policy ConfigMap generator — and that no secret material is ever committed."""

from __future__ import annotations

import base64
import datetime as dt
import re
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import DEPLOY, ROOT, SCRIPTS, Rendered, run

x509 = pytest.importorskip("cryptography.x509", reason="cryptography (test extra) decodes the certificates")
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID  # noqa: E402

NS = "opa"


def needs_openssl():
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed by gen-certs.sh")


def tls_secret(r: Rendered, name: str) -> dict[str, bytes]:
    s = r.secret(name, NS)
    assert s is not None and s["type"] == "kubernetes.io/tls", name
    return {k: base64.b64decode(v) for k, v in s["data"].items()}


def dns_sans(cert) -> list[str]:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)


# -- the self-signed overlay, as rendered ----------------------------------------


@pytest.mark.parametrize("svc", ["fedplace-admission", "opa"])
def test_serving_certificates(rendered: dict[str, Rendered], svc: str):
    data = tls_secret(rendered["self-signed"], f"{svc}-tls")
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    assert {f"{svc}.{NS}.svc", f"{svc}.{NS}.svc.cluster.local"} <= set(dns_sans(cert))
    cert.verify_directly_issued_by(ca)
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert 300 <= days <= 400


def test_webhook_ca_bundle_is_the_signing_ca(rendered: dict[str, Rendered]):
    r = rendered["self-signed"]
    ca = tls_secret(r, "fedplace-admission-tls")["ca.crt"]
    for w in r.get("MutatingWebhookConfiguration", "fedplace-admission")["webhooks"]:
        assert base64.b64decode(w["clientConfig"]["caBundle"]) == ca
        # …and the whole webhook survived the patch.
        assert w["rules"] and w["failurePolicy"] == "Fail"


def test_tls_handshake_as_the_api_server_does_it(rendered: dict[str, Rendered], tmp_path: Path):
    """A client trusting only caBundle reaches <svc>.<ns>.svc with hostname checks on."""
    r = rendered["self-signed"]
    data = tls_secret(r, "fedplace-admission-tls")
    (tmp_path / "tls.crt").write_bytes(data["tls.crt"])
    (tmp_path / "tls.key").write_bytes(data["tls.key"])
    ca_bundle = base64.b64decode(r.get("MutatingWebhookConfiguration", "fedplace-admission")
                                 ["webhooks"][0]["clientConfig"]["caBundle"]).decode()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(tls.recv(16))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client_ctx = ssl.create_default_context(cadata=ca_bundle)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with client_ctx.wrap_socket(raw, server_hostname="fedplace-admission.opa.svc") as tls:
            tls.sendall(b"ping")
            assert tls.recv(16) == b"ping"
    t.join(5)
    listener.close()
    assert not errors, errors


# -- gen-certs.sh on its own ------------------------------------------------------


def gen_certs(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    needs_openssl()
    return run(["bash", str(SCRIPTS / "gen-certs.sh"), "--out", str(out), *args])


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_gen_certs_keeps_renews_and_rotates(tmp_path: Path):
    out = tmp_path / "certs"
    gen_certs(out)
    first = snapshot(out)
    assert set(first) == {"ca.crt", "ca.key", "fedplace-admission.crt", "fedplace-admission.key", "opa.crt",
                          "opa.key", "cabundle-patch.yaml"}
    for name in first:
        if name.endswith(".key"):
            assert stat.S_IMODE((out / name).stat().st_mode) & 0o077 == 0, f"{name} readable by others"
    gen_certs(out)
    assert snapshot(out) == first, "a re-run without --force changes nothing"
    gen_certs(out, "--force")
    renewed = snapshot(out)
    assert renewed["ca.crt"] == first["ca.crt"] and renewed["cabundle-patch.yaml"] == first["cabundle-patch.yaml"]
    assert renewed["opa.crt"] != first["opa.crt"] and renewed["fedplace-admission.key"] != first["fedplace-admission.key"]
    gen_certs(out, "--rotate-ca")
    rotated = snapshot(out)
    assert rotated["ca.crt"] != first["ca.crt"]
    ca = x509.load_pem_x509_certificate(rotated["ca.crt"])
    for svc in ("opa", "fedplace-admission"):
        x509.load_pem_x509_certificate(rotated[f"{svc}.crt"]).verify_directly_issued_by(ca)
    patch = yaml.safe_load(rotated["cabundle-patch.yaml"])
    assert patch[0] == {"op": "test", "path": "/webhooks/0/name", "value": "placement.federation.fedplace.io"}
    assert base64.b64decode(patch[1]["value"]) == rotated["ca.crt"]


def test_gen_certs_other_namespace_and_secret_manifests(tmp_path: Path):
    proc = gen_certs(tmp_path / "c", "--namespace", "fedplace-system", "--days", "30", "--print-secrets")
    secrets = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert [s["metadata"]["name"] for s in secrets] == ["fedplace-admission-tls", "opa-tls"]
    for s in secrets:
        assert s["metadata"]["namespace"] == "fedplace-system" and s["type"] == "kubernetes.io/tls"
        assert set(s["data"]) == {"tls.crt", "tls.key", "ca.crt"}
        svc = s["metadata"]["name"][: -len("-tls")]
        cert = x509.load_pem_x509_certificate(base64.b64decode(s["data"]["tls.crt"]))
        assert f"{svc}.fedplace-system.svc" in dns_sans(cert)
        assert (cert.not_valid_after_utc - cert.not_valid_before_utc) <= dt.timedelta(days=31)
    kv = pytest.importorskip("kubernetes_validate")
    for s in secrets:
        kv.validate(s, "1.37", strict=True)


# -- gen-tokens.sh ---------------------------------------------------------------


def test_gen_tokens(tmp_path: Path):
    out = tmp_path / "secrets"
    run(["bash", str(SCRIPTS / "gen-tokens.sh"), "--out", str(out)])
    files = {p.name: p.read_text() for p in out.iterdir()}
    assert set(files) == {"sync-token", "admission-token", "reader-token", "notifications-token",
                          "sync-token-alt", "admission-token-alt", "reader-token-alt"}
    assert files.pop("sync-token-alt") == files.pop("admission-token-alt") == files.pop("reader-token-alt") == ""
    for name, value in files.items():
        assert re.fullmatch(r"[0-9a-f]{64}", value), f"{name}: 64 hex characters, no newline"
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in out.iterdir())
    assert len(set(files.values())) == 4
    run(["bash", str(SCRIPTS / "gen-tokens.sh"), "--out", str(out)])
    assert {p.name: p.read_text() for p in out.iterdir() if p.name in files} == files
    run(["bash", str(SCRIPTS / "gen-tokens.sh"), "--out", str(out), "--force"])
    assert all(files[p.name] != p.read_text() for p in out.iterdir() if p.name in files)


def test_gen_tokens_rotation_steps_refuse_out_of_order(tmp_path: Path):
    out = tmp_path / "secrets"
    script = ["bash", str(SCRIPTS / "gen-tokens.sh"), "--out", str(out)]
    run(script)
    before = {p.name: p.read_text() for p in out.iterdir()}
    proc = run([*script, "--promote"], check=False)
    assert proc.returncode == 1 and "nothing staged" in proc.stderr
    assert {p.name: p.read_text() for p in out.iterdir()} == before  # nothing written
    run([*script, "--stage"])
    staged = {p.name: p.read_text() for p in out.iterdir()}
    proc = run([*script, "--stage"], check=False)
    assert proc.returncode == 1 and "rotation is under way" in proc.stderr
    assert {p.name: p.read_text() for p in out.iterdir()} == staged


def test_rendered_secrets_come_only_from_generated_files(rendered: dict[str, Rendered], workspace: Path):
    """Every Secret value in the output is a file the scripts generated: nothing is baked in."""
    generated = {p.read_bytes() for d in (workspace / "base" / "secrets",
                                          workspace / "overlays" / "self-signed" / "generated")
                 for p in d.iterdir()}
    for name, r in rendered.items():
        for s in r.of_kind("Secret"):
            assert not s.get("stringData"), f"{name}: {s['metadata']['name']} has stringData"
            for key, value in (s.get("data") or {}).items():
                assert base64.b64decode(value) in generated, f"{name}: {s['metadata']['name']}/{key}"


# -- the policy ConfigMap generator ----------------------------------------------


def test_committed_policy_configmaps_are_current():
    proc = run([sys.executable, str(SCRIPTS / "sync-policy-configmap.py"), "--check"], check=False)
    assert proc.returncode == 0, proc.stderr


def test_policy_generator_detects_staleness(tmp_path: Path):
    stale = tmp_path / "policies.yaml"
    stale.write_text((DEPLOY / "base" / "policies" / "policies.yaml").read_text().replace("package", "packag", 1))
    proc = run([sys.executable, str(SCRIPTS / "sync-policy-configmap.py"), "--check", "--output", str(stale)],
               check=False)
    assert proc.returncode == 1 and "stale" in proc.stderr
    run([sys.executable, str(SCRIPTS / "sync-policy-configmap.py"), "--output", str(stale)])
    assert stale.read_text() == (DEPLOY / "base" / "policies" / "policies.yaml").read_text()


def test_policy_generator_checks_the_rule_set_components(tmp_path: Path):
    """Every placement-rules-* component it generates is checked, and one no rule set generates is stale."""
    components = tmp_path / "components"
    shutil.copytree(DEPLOY / "components", components)
    tenancy = components / "placement-rules-tenancy" / "rules.yaml"
    tenancy.write_text(tenancy.read_text().replace("package", "packag", 1))
    stray = components / "placement-rules-gone" / "rules.yaml"
    stray.parent.mkdir()
    stray.write_text("kind: ConfigMap\n")
    (components / "placement-rules-hardware" / "kustomization.yaml").unlink()
    base = tmp_path / "policies.yaml"
    shutil.copyfile(DEPLOY / "base" / "policies" / "policies.yaml", base)
    cmd = [sys.executable, str(SCRIPTS / "sync-policy-configmap.py"), "--components", str(components), "--output", str(base)]
    proc = run([*cmd, "--check"], check=False)
    assert proc.returncode == 1
    for rel in ("placement-rules-tenancy/rules.yaml", "placement-rules-gone/rules.yaml",
                "placement-rules-hardware/kustomization.yaml"):
        assert f"{components / rel} is stale" in proc.stderr
    run(cmd)
    assert run([*cmd, "--check"], check=False).returncode == 0
    assert not stray.parent.exists()
    for rel in ("placement-rules-tenancy/rules.yaml", "placement-rules-hardware/kustomization.yaml"):
        assert (components / rel).read_text() == (DEPLOY / "components" / rel).read_text()


# -- nothing secret is committed -------------------------------------------------


def committable_files() -> list[Path]:
    """Files under deploy/ that git would commit (tracked or untracked, not ignored)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    out = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "deploy"], cwd=ROOT).stdout
    return [ROOT / line for line in out.splitlines() if (ROOT / line).is_file()]


SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"-----BEGIN CERTIFICATE-----"),
    re.compile(r"\b[0-9a-f]{32,}\b"),  # hex tokens like gen-tokens.sh makes
    re.compile(r"\b(LS0tLS1CRUdJT|eyJ)[A-Za-z0-9+/=]{20,}"),  # base64 PEM, JWTs
    re.compile(r"(?i)\b(token|password|secret)\s*[:=]\s*['\"]?[A-Za-z0-9+_\-]{16,}(?![A-Za-z0-9+/_.\-])"),
]


def test_no_secret_material_in_committable_files():
    files = committable_files()
    assert any(f.name == "kustomization.yaml" for f in files)
    for f in files:
        text = f.read_text(errors="replace")
        for pattern in SECRET_PATTERNS:
            m = pattern.search(text)
            assert m is None, f"{f.relative_to(ROOT)}: looks like secret material: {m.group(0)[:40]}…"
        # (A Helm chart's templates are Go templates, not YAML: the patterns above cover them.)
        template = f.relative_to(DEPLOY).parts[:1] == ("helm",) and "templates" in f.parts
        if f.suffix in (".yaml", ".yml") and "GENERATED" not in text[:200] and not template:
            for doc in yaml.safe_load_all(text):
                if isinstance(doc, dict) and doc.get("kind") == "Secret":
                    assert not doc.get("data") and not doc.get("stringData"), f"{f}: a Secret with values"


def test_generated_secrets_are_gitignored():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    for rel in ("deploy/base/secrets/sync-token", "deploy/overlays/self-signed/generated/ca.key",
                "deploy/overlays/self-signed/generated/ca.crt",
                "deploy/overlays/self-signed/generated/cabundle-patch.yaml"):
        proc = run(["git", "check-ignore", "-q", rel], cwd=ROOT, check=False)
        assert proc.returncode == 0, f"{rel} is not ignored by git"
