"""Render every kustomization and validate each object offline against the
Kubernetes OpenAPI schemas (kubernetes-validate, strict: unknown fields fail)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY, Rendered, render, run

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="install the test extra (kubernetes-validate) for offline schema validation")
from kubernetes_validate import utils as kv_utils  # noqa: E402

# The oldest schemas the package ships (the manifests target 1.24: policy/v1,
# restricted Pod Security labels, kubernetes.io/metadata.name; a 1.24 API
# server applied all of it) and the newest.
K8S_VERSIONS = ("1.25", kv_utils.major_minor(kv_utils.latest_version()))


@pytest.fixture(scope="module", autouse=True)
def _cache_schemas():
    """kubernetes-validate re-reads the 2 MB definitions file per object; cache it."""
    original = kv_utils.schema_contents
    kv_utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    yield
    kv_utils.schema_contents = original


def test_every_overlay_renders(rendered: dict[str, Rendered]):
    for name, r in rendered.items():
        assert r.objects, f"{name} rendered nothing"
        for o in r.objects:
            assert o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"), (name, o)


def test_no_duplicate_objects(overlay: Rendered):
    keys = [(o["apiVersion"].split("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in overlay.objects]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_objects_valid_against_kubernetes_schemas(overlay: Rendered, version: str):
    checked = 0
    errors = []
    for o in overlay.objects:
        if o["apiVersion"].startswith("cert-manager.io/"):
            continue  # no schema shipped; see test_cert_manager_objects_well_formed
        try:
            kubernetes_validate.validate(o, version, strict=True)
            checked += 1
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.path)
            errors.append(f"{o['kind']}/{o['metadata']['name']}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(exc.message)
    assert not errors, "\n".join(errors)
    assert checked >= 20


def test_validator_is_strict_and_catches_mistakes():
    """The validation above is meaningful: a typo'd field and a bad enum fail."""
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "x"},
        "webhooks": [{"name": "a.b.c", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "clientConfig": {"service": {"name": "s", "namespace": "n"}}, "timeoutSecond": 10}],
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(webhook, K8S_VERSIONS[-1], strict=True)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "a.b"}, "spec": {"group": "b", "scope": "Cluster",
                                                 "names": {"plural": "a", "kind": "A"},
                                                 "versions": [{"name": "v1", "served": True, "storage": True,
                                                               "schema": {"openAPIV3Schema": {"typo": 1}}}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(crd, K8S_VERSIONS[-1], strict=True)


# cert-manager.io/v1 fields used here, per cert-manager's API reference.
CERT_SPEC_FIELDS = {"secretName", "commonName", "dnsNames", "duration", "renewBefore", "usages", "privateKey",
                    "issuerRef", "isCA", "subject", "ipAddresses", "uris", "secretTemplate"}
USAGES = {"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
          "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
          "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
          "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"}
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(h|m|s|ms))+$")


def test_cert_manager_objects_well_formed(rendered: dict[str, Rendered]):
    r = rendered["cert-manager"]
    issuers = {o["metadata"]["name"]: o for o in r.of_kind("Issuer")}
    certs = r.of_kind("Certificate")
    assert certs and issuers
    for o in issuers.values():
        assert o["apiVersion"] == "cert-manager.io/v1"
        assert o["metadata"].get("namespace")
        kinds = set(o["spec"]) & {"selfSigned", "ca", "acme", "vault", "venafi"}
        assert len(kinds) == 1, o
        if "ca" in o["spec"]:
            # A CA issuer signs with the key pair of a Certificate marked isCA.
            ca_secret = o["spec"]["ca"]["secretName"]
            assert any(c["spec"]["secretName"] == ca_secret and c["spec"].get("isCA") for c in certs), ca_secret
    for c in certs:
        spec = c["spec"]
        assert c["apiVersion"] == "cert-manager.io/v1"
        assert set(spec) <= CERT_SPEC_FIELDS, set(spec) - CERT_SPEC_FIELDS
        assert spec["secretName"] and spec["issuerRef"]["name"] in issuers, spec
        assert spec["issuerRef"].get("kind", "Issuer") == "Issuer"
        assert issuers[spec["issuerRef"]["name"]]["metadata"]["namespace"] == c["metadata"]["namespace"]
        assert set(spec.get("usages", [])) <= USAGES
        for key in ("duration", "renewBefore"):
            if key in spec:
                assert GO_DURATION.match(spec[key]), spec[key]
        pk = spec.get("privateKey", {})
        assert pk.get("algorithm", "RSA") in {"RSA", "ECDSA", "Ed25519"}
        assert pk.get("rotationPolicy", "Never") in {"Never", "Always"}
        if not spec.get("isCA"):
            assert spec.get("dnsNames"), f"{c['metadata']['name']}: a serving certificate needs DNS SANs"


def test_committed_tree_needs_generated_tokens(kubectl: str):
    """No fallback token: without scripts/gen-tokens.sh the base does not build."""
    if (DEPLOY / "base" / "secrets").exists():
        pytest.skip("this checkout has generated tokens in deploy/base/secrets")
    proc = run([kubectl, "kustomize", str(DEPLOY / "base")], check=False)
    assert proc.returncode != 0
    assert "secrets/sync-token" in proc.stderr or "secrets/sync-token" in proc.stdout


def test_base_builds_with_tokens_only(rendered: dict[str, Rendered]):
    """The base carries no TLS material: that is the overlays' job."""
    base = rendered["base"]
    assert {s["metadata"]["name"].rsplit("-", 1)[0] for s in base.of_kind("Secret")} == {"opa-tokens"}
    assert not base.of_kind("Certificate")
    webhook = base.get("MutatingWebhookConfiguration", "fedplace-admission")
    assert all("caBundle" not in w["clientConfig"] for w in webhook["webhooks"])


def test_render_is_deterministic(kubectl: str, workspace: Path, rendered: dict[str, Rendered]):
    again = render(kubectl, workspace / "overlays" / "self-signed")
    assert again.text == rendered["self-signed"].text
