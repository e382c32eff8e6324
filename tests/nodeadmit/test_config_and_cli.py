"""Start-up: the configuration file, the directories, the feature gate — and the console script.

An invalid configuration stops the manager before it admits anything (exit 2,
a message naming the fault); the gate off admits without calling anything; a
static pod manifest and a pod on stdin take the same path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedplace.common.config import ConfigError
from fedplace.nodeadmit.config import parse_feature_gates, plugin_config_from
from fedplace.nodeadmit.manager import AdmissionPluginManager
from tests.nodeadmit.conftest import Node, pod, run_manager

REJECT = 'cat >/dev/null\necho \'{"admit": false, "reason": "NotHere", "message": "nothing runs here"}\''


def marker_plugin(node: Node, name: str = "marker") -> Path:
    """A rejecting shell plugin that leaves a file behind when it is called."""
    called = node.root / f"{name}.called"
    node.shell(name, f"touch {called}\n{REJECT}")
    return called


# -- the configuration file ------------------------------------------------------------


def test_the_keps_example_configuration_is_valid(tmp_path: Path) -> None:
    doc = {"name": "admission-plugin", "version": "0.1",
           "plugins": [{"name": "sysctlcheck", "type": "shell"}, {"name": "fargatecheck", "type": "shell"}]}
    cfg = plugin_config_from(doc, tmp_path)
    assert [(p.name, p.type, p.timeout) for p in cfg.plugins] == [("sysctlcheck", "shell", 5.0),
                                                                   ("fargatecheck", "shell", 5.0)]
    assert (cfg.name, cfg.version) == ("admission-plugin", "0.1")


def test_extensions_per_type(tmp_path: Path) -> None:
    cfg = plugin_config_from({"timeoutSeconds": 2, "plugins": [
        {"name": "a", "type": "shell", "args": ["-v"], "timeoutSeconds": 0.5},
        {"name": "b", "type": "socket"},
        {"name": "c", "type": "socket", "socket": "/run/c/plugin.sock"},
        {"name": "d", "type": "grpc", "port": 50051},
    ]}, tmp_path)
    a, b, c, d = cfg.plugins
    assert (a.args, a.timeout) == (("-v",), 0.5)
    assert (b.socket, b.timeout) == (tmp_path / "b.sock", 2.0)
    assert c.socket == Path("/run/c/plugin.sock")
    assert d.port == 50051


@pytest.mark.parametrize("doc, field", [
    ([], "config"),
    ({"plugins": [{"name": "a", "type": "shell"}], "plugin": []}, "plugin"),
    ({}, "plugins"),
    ({"plugins": {"name": "a"}}, "plugins"),
    ({"plugins": []}, "plugins"),
    ({"plugins": ["a"]}, "plugins[0]"),
    ({"plugins": [{"type": "shell"}]}, "plugins[0].name"),
    ({"plugins": [{"name": "../../bin/sh", "type": "shell"}]}, "plugins[0].name"),
    ({"plugins": [{"name": "a", "type": "exec"}]}, "plugins[0].type"),
    ({"plugins": [{"name": "a", "type": "shell", "port": 1}]}, "plugins[0].port"),
    ({"plugins": [{"name": "a", "type": "shell", "args": "-v"}]}, "plugins[0].args"),
    ({"plugins": [{"name": "a", "type": "grpc"}]}, "plugins[0].port"),
    ({"plugins": [{"name": "a", "type": "grpc", "port": 70000}]}, "plugins[0].port"),
    ({"plugins": [{"name": "a", "type": "socket", "socket": ""}]}, "plugins[0].socket"),
    ({"plugins": [{"name": "a", "type": "shell", "timeoutSeconds": 0}]}, "plugins[0].timeoutSeconds"),
    ({"plugins": [{"name": "a", "type": "shell", "timeoutSeconds": "1s"}]}, "plugins[0].timeoutSeconds"),
    ({"timeoutSeconds": 600, "plugins": [{"name": "a", "type": "shell"}]}, "timeoutSeconds"),
    ({"plugins": [{"name": "a", "type": "shell"}, {"name": "a", "type": "socket"}]}, "plugins[1].name"),
    ({"version": 1, "plugins": [{"name": "a", "type": "shell"}]}, "version"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_invalid_configuration_names_the_field(tmp_path: Path, doc: Any, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        plugin_config_from(doc, tmp_path)
    assert err.value.field == field


def test_conf_dir_must_hold_exactly_one_configuration_file(node: Node) -> None:
    with pytest.raises(ConfigError, match="no \\*.json or \\*.conf configuration file"):
        node.manager()
    node.config([{"name": "a", "type": "shell"}])
    (node.conf / "README").write_text("not a configuration file")
    assert node.manager().plugin_config is not None
    (node.conf / "extra.conf").write_text("{}")
    with pytest.raises(ConfigError, match="more than one configuration file.*extra.conf, plugins.json"):
        node.manager()
    node.conf.rename(node.root / "gone")
    with pytest.raises(ConfigError, match="is not a directory"):
        node.manager()


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ('{"plugins": [{"name": "a", "type": "shell", "timeout": 3}]}', "plugins[0].timeout: unknown setting"),
    ('{"plugins": []}', "plugins: is empty"),
])
def test_the_console_script_refuses_to_start_on_an_invalid_configuration(node: Node, text: str, message: str) -> None:
    called = marker_plugin(node)
    (node.conf / "plugins.json").write_text(text)
    proc = run_manager(node, stdin=json.dumps(pod()))
    assert proc.returncode == 2, proc
    assert "invalid configuration, not starting" in proc.stderr and message in proc.stderr
    assert proc.stdout == ""  # no verdict at all, admitted or not
    assert not called.exists()


def test_check_config(node: Node) -> None:
    node.config([{"name": "a", "type": "shell"}, {"name": "b", "type": "grpc", "port": 50051}])
    proc = run_manager(node, "--check-config")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"featureGate": True, "plugins": ["a (shell)", "b (grpc)"]}
    node.config([{"name": "a", "type": "ssh"}])
    assert run_manager(node, "--check-config").returncode == 2


# -- the feature gate --------------------------------------------------------------------


def test_feature_gates_parse_like_the_kubelets() -> None:
    assert parse_feature_gates("") == {"PodAdmissionPlugin": False}
    assert parse_feature_gates("PodAdmissionPlugin=true") == {"PodAdmissionPlugin": True}
    assert parse_feature_gates(" PodAdmissionPlugin=False ,") == {"PodAdmissionPlugin": False}
    for bad in ("PodAdmissionPlugin", "PodAdmissionPlugin=yes", "PluggablePodAdmitHandler=true"):
        with pytest.raises(ConfigError):
            parse_feature_gates(bad)


async def test_gate_off_admits_without_calling_any_plugin_or_reading_the_config(node: Node) -> None:
    called = marker_plugin(node)
    node.config([{"name": "marker", "type": "shell"}])
    manager = node.manager(enabled=False)
    assert manager.plugin_config is None and not manager.plugins
    result = await manager.admit(pod())
    assert (result.admit, result.gate, result.plugins) == (True, False, ())
    assert not called.exists()

    (node.conf / "plugins.json").write_text("{broken")  # not even read while the gate is off
    proc = run_manager(node, gates="PodAdmissionPlugin=false", stdin=json.dumps(pod()))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["admit"] is True and json.loads(proc.stdout)["featureGate"] is False
    assert run_manager(node, gates="", stdin=json.dumps(pod())).returncode == 0  # off by default
    assert not called.exists()


def test_gate_on_calls_the_plugins(node: Node) -> None:
    called = marker_plugin(node)
    node.config([{"name": "marker", "type": "shell"}])
    proc = run_manager(node, stdin=json.dumps(pod()))
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert (out["admit"], out["reason"], out["featureGate"]) == (False, "NotHere", True)
    assert called.exists()


def test_unknown_feature_gate_stops_the_script(node: Node) -> None:
    proc = run_manager(node, gates="PodAdmissionPlugins=true", stdin=json.dumps(pod()))
    assert proc.returncode == 2 and "unrecognized feature gate" in proc.stderr


# -- static pods and API pods: one path ---------------------------------------------------


def test_static_pod_manifest_and_api_pod_on_stdin_get_the_same_verdict(node: Node) -> None:
    seen = node.root / "seen"
    node.shell("check", f"cat >> {seen}\necho >> {seen}\n"
                        "echo '{\"admit\": false, \"reason\": \"HostNetworkForbidden\", \"message\": \"no\"}'")
    node.config([{"name": "check", "type": "shell"}])
    static = pod("etcd-node1", "kube-system", hostNetwork=True)
    manifest = node.root / "etcd.yaml"
    manifest.write_text(yaml.safe_dump(static))
    from_file = run_manager(node, "--pod", str(manifest))
    from_stdin = run_manager(node, stdin=json.dumps(static))
    from_dash = run_manager(node, "--pod", "-", stdin=json.dumps(static))
    for proc in (from_file, from_stdin, from_dash):
        assert proc.returncode == 1, proc.stderr
        out = json.loads(proc.stdout)
        assert out["podStatus"] == {"phase": "Failed", "reason": "HostNetworkForbidden",
                                    "message": "Pod was rejected: check: no"}
    assert [json.loads(line) for line in seen.read_text().splitlines()] == [static] * 3


@pytest.mark.parametrize("text, message", [
    ("kind: Deployment\napiVersion: apps/v1\n", "expected a v1 Pod"),
    ("- a\n- b\n", "must be an object"),
    ("{{", "not YAML or JSON"),
    ("kind: Pod\nspec: []\n", "metadata and spec must be objects"),
])
def test_what_is_not_a_pod_is_refused(node: Node, text: str, message: str) -> None:
    node.config([{"name": "a", "type": "shell"}])
    proc = run_manager(node, stdin=text)
    assert proc.returncode == 2 and message in proc.stderr


def test_a_missing_pod_file_is_refused(node: Node) -> None:
    node.config([{"name": "a", "type": "shell"}])
    proc = run_manager(node, "--pod", str(node.root / "nope.yaml"))
    assert proc.returncode == 2 and "cannot read the pod" in proc.stderr


async def test_library_and_script_agree(node: Node) -> None:
    node.shell("ok", 'cat >/dev/null\necho \'{"admit": true, "message": "fine"}\'')
    node.config([{"name": "ok", "type": "shell"}])
    async with AdmissionPluginManager.load(node.manager_config()) as manager:
        lib = (await manager.admit(pod())).to_json()
    proc = run_manager(node, stdin=json.dumps(pod()))
    assert proc.returncode == 0
    script = json.loads(proc.stdout)
    for doc in (lib, script):
        for p in doc["plugins"]:
            p.pop("seconds")
    assert lib == script == {"admit": True, "featureGate": True, "plugins": [
        {"name": "ok", "type": "shell", "admit": True, "message": "fine", "failed": False}]}
