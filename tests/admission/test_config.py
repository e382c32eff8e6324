"""Configuration parsing and validation (pure) and the CLI's exit code 2."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedplace.admission.__main__ import main
from fedplace.admission.config import (
    DEFAULT_DECISION_PATH,
    AdmissionConfig,
    ConfigError,
    config_from_mapping,
    load_config,
    split_opa_url,
)


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_defaults() -> None:
    cfg = load_config([])
    assert cfg.listen == "127.0.0.1:8443"
    assert not cfg.tls.enabled
    assert cfg.policy_namespace == "kube-federation-scheduling-policy"
    assert cfg.opa.decision_url == "http://127.0.0.1:8181" + DEFAULT_DECISION_PATH
    assert cfg.opa.query_path == "io/k8s/federation/admission"
    assert cfg.deadline == 5.0
    assert cfg.max_body_bytes == 3 * 1024 * 1024
    assert cfg.event_loop == "auto"
    assert cfg.speedups == {"lean-http", "first-attempt"}


@pytest.mark.parametrize("flag,expected", [("none", set()), ("lean-http", {"lean-http"}),
                                           ("lean-http, first-attempt", {"lean-http", "first-attempt"})])
def test_speedups_flag(flag: str, expected: set[str]) -> None:
    assert load_config(["--speedups", flag]).speedups == expected


def test_yaml_file_and_flags_override(tmp_path: Path) -> None:
    token = write(tmp_path, "tok", "s3cret\n")
    path = write(tmp_path, "c.yaml", f"""
listen: 0.0.0.0:9443
policy_namespace: pol
opa:
  url: http://opa:8181/v1
  token_file: {token}
  timeout: 1.5
deadline: 4
retry: {{initial: 0.1, max: 0.5}}
log_level: debug
event_loop: uvloop
""")
    assert load_config(["--config", path]).event_loop == "uvloop"
    cfg = load_config(["--config", path, "--deadline", "3", "--policy-namespace", "other",
                       "--listen", "127.0.0.1:0", "--event-loop", "asyncio"])
    assert cfg.listen_host == "127.0.0.1" and cfg.listen_port == 0
    assert cfg.policy_namespace == "other"
    assert cfg.deadline == 3.0
    assert cfg.opa.url == "http://opa:8181" and cfg.opa.token_file == token and cfg.opa.timeout == 1.5
    assert cfg.retry.initial == 0.1 and cfg.retry.maximum == 0.5
    assert cfg.log_level == "debug"
    assert cfg.event_loop == "asyncio"


def test_proposal_format(tmp_path: Path) -> None:
    doc = {"EnforceSchedulingPolicy": {
        "url": "https://opa.federation.svc.cluster.local:8181/v1/data/io/k8s/federation/annotations",
        "token": "super-secret-token-value"}}
    cfg = load_config(["--config", write(tmp_path, "c.json", json.dumps(doc))])
    assert cfg.opa.url == "https://opa.federation.svc.cluster.local:8181"
    assert cfg.opa.decision_path == "/v1/data/io/k8s/federation/annotations"
    assert cfg.opa.query_path == "io/k8s/federation/annotations"
    assert cfg.opa.token == "super-secret-token-value"
    assert "super-secret" not in repr(cfg)


def test_opa_url_flag_with_full_decision_url() -> None:
    cfg = load_config(["--opa-url", "http://127.0.0.1:1/v1/data/a/b"])
    assert cfg.opa.url == "http://127.0.0.1:1" and cfg.opa.decision_path == "/v1/data/a/b"


@pytest.mark.parametrize("url,root,path", [
    ("http://opa:8181", "http://opa:8181", None),
    ("http://opa:8181/", "http://opa:8181", None),
    ("http://opa:8181/v1", "http://opa:8181", None),
    ("https://opa/prefix/v1/data/x/y", "https://opa/prefix", "/v1/data/x/y"),
])
def test_split_opa_url(url: str, root: str, path: str | None) -> None:
    assert split_opa_url(url) == (root, path)


BAD = [
    ({"listen": "nohost"}, "listen"),
    ({"listen": "1.2.3.4:99999"}, "listen"),
    ({"deadline": 0}, "deadline"),
    ({"deadline": 60}, "deadline"),
    ({"deadline": "five"}, "deadline"),
    ({"opa": {"url": "ftp://x"}}, "opa.url"),
    ({"opa": {"url": "http://"}}, "opa.url"),
    ({"opa": {"timeout": -1}}, "opa.timeout"),
    ({"opa": {"decision_path": "/v2/x"}}, "opa.decision_path"),
    ({"opa": {"token": "a", "token_file": __file__}}, "opa.token"),
    ({"opa": {"token_file": "/nonexistent/token"}}, "opa.token_file"),
    ({"opa": {"tokn": "x"}}, "opa.tokn"),
    ({"retry": {"initial": 1, "max": 0.5}}, "retry.max"),
    ({"tls": {"cert_file": __file__}}, "tls.private_key_file"),
    ({"tls": {"client_ca_file": __file__}}, "tls.client_ca_file"),
    ({"tls": {"cert_file": "/nonexistent.crt", "private_key_file": __file__}}, "tls.cert_file"),
    ({"log_level": "loud"}, "log_level"),
    ({"event_loop": "trio"}, "event_loop"),
    ({"event_loop": None}, "event_loop"),
    ({"speedups": ["turbo"]}, "speedups"),
    ({"speedups": 3}, "speedups"),
    ({"max_body_bytes": 10}, "max_body_bytes"),
    ({"events": {"burst": 0}}, "events.burst"),
    ({"surprise": 1}, "surprise"),
    ({"policy_namespace": ""}, "policy_namespace"),
    ({"EnforceSchedulingPolicy": {"token": "x"}}, "EnforceSchedulingPolicy.url"),
    ({"EnforceSchedulingPolicy": {"url": "http://x", "extra": 1}}, "EnforceSchedulingPolicy.extra"),
]


@pytest.mark.parametrize("doc,field", BAD, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD)])
def test_invalid_config_names_the_field(doc: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_mapping(doc)
    assert err.value.field == field
    assert str(err.value).startswith(field + ":")


def test_main_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "c.yaml", "opa:\n  timeout: -3\n")
    assert main(["--config", path]) == 2
    assert "opa.timeout" in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "missing.yaml")]) == 2
    path = write(tmp_path, "bad.yaml", "opa: [unclosed\n")
    assert main(["--config", path]) == 2


def test_console_script_exits_2() -> None:
    exe = Path(sys.executable).with_name("fedplace-admission")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "fedplace.admission"]
    proc = subprocess.run([*argv, "--deadline", "-1"], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "KUBECONFIG": ""})
    assert proc.returncode == 2
    assert "deadline" in proc.stderr


def test_dataclass_is_frozen() -> None:
    cfg = AdmissionConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.deadline = 1  # type: ignore[misc]
