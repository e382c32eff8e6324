"""What the demo's --keep-running prints (devstack/demo_explore.py), without running the demo."""

from __future__ import annotations

import shlex
from pathlib import Path

from devstack.demo_explore import control_plane, explore_lines, shown
from devstack.launch import ServerProcess

NAMES = ("engine", "kube", "opa-kube-sync", "admission")


def processes(tmp: Path, prefix: str = "", kube: str = "kube") -> list[ServerProcess]:
    return [ServerProcess(prefix + (kube if n == "kube" else n), [], "/", tmp, port=8000 + i,
                          scheme="https" if n in ("kube", "admission") else "http") for i, n in enumerate(NAMES)]


def test_a_control_plane_is_read_from_the_demo_processes(tmp_path: Path) -> None:
    plane = control_plane("main", processes(tmp_path), tmp_path, tmp_path / "ca.crt", ("rs/x", "shop"))
    assert plane is not None
    assert (plane.opa_url, plane.api_server, plane.sync_url, plane.webhook_url) == (
        "http://127.0.0.1:8000", "https://127.0.0.1:8001", "http://127.0.0.1:8002", "https://127.0.0.1:8003/mutate")
    assert plane.kubeconfig == tmp_path / "kubeconfig" and plane.opa_token_file == tmp_path / "opa.token"
    karmada = control_plane("k", processes(tmp_path, "karmada-", "apiserver"), tmp_path / "k", tmp_path / "ca.crt",
                            ("rb/y", "shop"), prefix="karmada-")
    assert karmada is not None and karmada.api_server == "https://127.0.0.1:8001"


def test_a_control_plane_missing_a_server_is_none(tmp_path: Path) -> None:
    assert control_plane("main", processes(tmp_path)[:3], tmp_path, tmp_path / "ca.crt", ("rs/x", "shop")) is None
    assert control_plane("k", processes(tmp_path), tmp_path, tmp_path / "ca.crt", ("rb/y", "shop"),
                         prefix="karmada-") is None


def test_the_lines_name_every_url_credential_and_command(tmp_path: Path) -> None:
    main = control_plane("main", processes(tmp_path / "w"), tmp_path / "w", tmp_path / "w" / "ca.crt",
                         ("replicaset/payments", "shop"))
    assert main is not None
    text = "\n".join(explore_lines([main], tmp_path))
    for needed in ("export KUBECONFIG=" + str(tmp_path / "w" / "kubeconfig"), "http://127.0.0.1:8000",
                   "w/opa.token", "https://127.0.0.1:8003/mutate", "http://127.0.0.1:8002/healthz",
                   "http://127.0.0.1:8002/metrics", "http://127.0.0.1:8002/placement"):
        assert needed in text, needed
    commands = [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("$ ")]
    whatif = shlex.split(next(c for c in commands if " what-if " in c))
    assert whatif[whatif.index("--policy") + 1] == str(Path(__file__).resolve().parents[2]
                                                          / "policies" / "rules-eu-pci" / "eu_pci.rego")
    assert whatif[whatif.index("--opa-token-file") + 1] == "w/opa.token"
    explain = shlex.split(next(c for c in commands if " explain " in c))
    assert explain[explain.index("explain") + 1:explain.index("explain") + 4] == ["replicaset/payments", "-n", "shop"]


def test_paths_inside_the_directory_are_relative_others_absolute(tmp_path: Path) -> None:
    assert shown(tmp_path / "a b" / "c", tmp_path) == "'a b/c'"
    assert shown(Path("/elsewhere/x"), tmp_path) == "/elsewhere/x"
