"""``fedplace-node-admit`` against the policy engine (the ``opa`` fixture), as shell, socket and grpc plugin.

The shipped pack (policies/nodeadmission) is PUT into the engine over its REST
API; the plugin runs as the real console script (shell type: executed by the
manager per pod; socket and grpc: one serving process) or, for the failure
paths, as the library object talking HTTP to the engine. Engine failures are
injected by the fault-injecting proxy in front of it (``opa_proxy``,
tests/fixtures/proxy.py), on the devstack and on real servers alike.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from devstack.launch import free_port
from devstack.nodeadmit_demo import PACK, PACK_ORDER, pack_modules
from fedplace.common.config import ConfigError
from fedplace.common.opa_query import OpaOutcome
from fedplace.nodeadmit.opa_plugin import (
    REASON_DENIED,
    REASON_POLICY_ERROR,
    NodeAdmitPlugin,
    config_from_mapping,
    result_from_outcome,
)
from fedplace.nodeadmit.result import REASON_FAILED, AdmitResult
from tests.fixtures.opa import OpaServer
from tests.nodeadmit.conftest import NODE_ADMIT, Node, pod

FAST_RETRY = {"initial": 0.02, "max": 0.1, "jitter": 0.01}


async def load_pack(opa: OpaServer) -> None:
    for module_id, source in pack_modules().items():
        status, body = await opa.put_policy(module_id, source)
        assert status == 200, body


def test_the_load_order_names_every_module_of_the_pack() -> None:
    shipped = {p.name for p in PACK.glob("*.rego") if not p.name.endswith("_test.rego")}
    assert set(PACK_ORDER) == shipped


def plugin_config(server: OpaServer, node_facts: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"opa": {"url": server.url, **top.pop("opa", {})}, "deadline": 2, "retry": FAST_RETRY,
            "node": {"name": "node-1", **(node_facts or {})}, **top}


def write_config(node: Node, doc: dict[str, Any], name: str = "node-admit.yaml") -> Path:
    path = node.root / name
    path.write_text(json.dumps(doc))
    return path


def privileged_pod() -> dict[str, Any]:
    return pod("miner", hostNetwork=True, containers=[
        {"name": "app", "image": "x", "securityContext": {"privileged": True}}])


async def library_verdict(doc: dict[str, Any], the_pod: dict[str, Any]) -> AdmitResult:
    plugin = NodeAdmitPlugin(config_from_mapping(doc))
    try:
        return await plugin(the_pod)
    finally:
        await plugin.close()


# -- one plugin, three types -------------------------------------------------------------


async def test_the_opa_plugin_as_shell_socket_and_grpc(opa: OpaServer, node: Node) -> None:
    await load_pack(opa)
    config = write_config(node, plugin_config(opa))
    (node.bin / "fedplace-node-admit").symlink_to(NODE_ADMIT)
    served = node.node_admit_server(config)
    node.config([
        {"name": "fedplace-node-admit", "type": "shell", "args": ["--config", str(config)]},
        {"name": "node-admit-socket", "type": "socket", "socket": str(served["socket"])},
        {"name": "node-admit-grpc", "type": "grpc", "port": served["port"]},
    ])
    async with node.manager() as manager:
        fine = await manager.admit(pod())
        assert fine.admit, fine
        assert [(p.name, p.result.admit, p.failed) for p in fine.plugins] == [
            ("fedplace-node-admit", True, False), ("node-admit-socket", True, False), ("node-admit-grpc", True, False)]

        bad = await manager.admit(privileged_pod())
    assert not bad.admit
    assert bad.reason == "HostNetworkForbidden"  # violations sorted by reason: the first one's
    expected = ("the pod uses the host's network namespace (spec.hostNetwork); "
                'container "app" (spec.containers[0]) is privileged')
    assert bad.message == "; ".join(f"{name}: {expected}" for name in
                                    ("fedplace-node-admit", "node-admit-socket", "node-admit-grpc"))
    assert all(p.result == AdmitResult(False, "HostNetworkForbidden", expected) for p in bad.plugins)


async def test_node_facts_reach_the_policy(opa: OpaServer, node: Node) -> None:
    await load_pack(opa)
    facts = {"allowedHostPaths": ["/var/log"], "runtimeClasses": ["runc", "gvisor"],
             "allowedUnsafeSysctls": ["net.core.*"], "labels": {"fedplace.io/pool": "serverless"}}
    doc = plugin_config(opa, facts)
    allowed = pod(volumes=[{"name": "logs", "hostPath": {"path": "/var/log/app"}}], runtimeClassName="gvisor",
                  securityContext={"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]})
    assert (await library_verdict(doc, allowed)).admit
    refused = await library_verdict(doc, pod(runtimeClassName="kata"))
    assert refused == AdmitResult(False, "RuntimeClassUnsupported",
                                  'runtime class "kata" is not available on this node (it has: runc, gvisor)')


async def test_a_policy_may_read_any_fact(opa: OpaServer) -> None:
    """input is {pod, node}: a site policy can decide on the node's labels."""
    status, body = await opa.put_policy("site/pool.rego", """package io.k8s.node.admission
deny contains {"reason": "PoolReserved", "message": sprintf("pool %s is reserved", [pool])} if {
    pool := input.node.labels["fedplace.io/pool"]
    not input.pod.metadata.namespace == "batch"
}
""")
    assert status == 200, body
    doc = plugin_config(opa, {"labels": {"fedplace.io/pool": "gpu"}})
    refused = await library_verdict(doc, pod(namespace="web"))
    assert refused == AdmitResult(False, "PoolReserved", "pool gpu is reserved")
    assert (await library_verdict(doc, pod(namespace="batch"))).admit


# -- fail closed -------------------------------------------------------------------------


async def test_no_policy_loaded_rejects(opa: OpaServer) -> None:
    result = await library_verdict(plugin_config(opa), pod())
    assert (result.admit, result.reason) == (False, REASON_POLICY_ERROR)
    assert "data.io.k8s.node.admission is undefined" in result.message


async def test_opa_unreachable_rejects_within_the_deadline() -> None:
    doc = {"opa": {"url": f"http://127.0.0.1:{free_port()}"}, "deadline": 0.5, "retry": FAST_RETRY}
    started = time.monotonic()
    result = await library_verdict(doc, pod())
    assert time.monotonic() - started < 1.5
    assert (result.admit, result.reason) == (False, REASON_POLICY_ERROR)
    assert "could not be evaluated (failing closed)" in result.message and "attempts" in result.message


async def test_transient_engine_errors_are_retried(opa_proxy: OpaServer) -> None:
    await load_pack(opa_proxy)
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/io/k8s/node", "status": 503, "count": 2}})
    assert (await library_verdict(plugin_config(opa_proxy), pod())).admit
    assert (await opa_proxy.faults())["rules"][0]["count"] == 0  # both 503s were met


async def test_a_cut_connection_is_retried(opa_proxy: OpaServer) -> None:
    await load_pack(opa_proxy)
    await opa_proxy.set_faults({"cut": {"path": "/v1/data/io/k8s/node", "method": "POST", "count": 2}})
    assert (await library_verdict(plugin_config(opa_proxy), pod())).admit
    assert (await opa_proxy.faults())["proxy_rules"][0]["count"] == 0


async def test_persistent_engine_errors_reject_naming_the_cause(opa_proxy: OpaServer) -> None:
    await load_pack(opa_proxy)
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/io/k8s/node", "status": 500, "count": -1}})
    result = await library_verdict(plugin_config(opa_proxy, deadline=0.6), pod())
    assert (result.admit, result.reason) == (False, REASON_POLICY_ERROR)
    assert ": 500" in result.message and "attempts" in result.message


async def test_a_slow_engine_is_cut_off_by_the_deadline(opa_proxy: OpaServer) -> None:
    await load_pack(opa_proxy)
    await opa_proxy.set_faults({"latency": 3})
    started = time.monotonic()
    result = await library_verdict(plugin_config(opa_proxy, deadline=0.5), pod())
    assert time.monotonic() - started < 1.5
    assert (result.admit, result.reason) == (False, REASON_POLICY_ERROR)
    assert "timed out" in result.message


@pytest.mark.parametrize("rule", [
    'deny := "no"',
    "deny := [3]",
    'deny := [{"reason": "Two Words", "message": "x"}]',
    "deny := [{\"reason\": \"NoMessage\"}]",
])
async def test_a_malformed_decision_rejects(opa: OpaServer, rule: str) -> None:
    status, body = await opa.put_policy("site/bad.rego", f"package io.k8s.node.admission\n{rule}\n")
    assert status == 200, body
    result = await library_verdict(plugin_config(opa), pod())
    assert (result.admit, result.reason) == (False, REASON_POLICY_ERROR)
    assert "malformed node admission decision (failing closed)" in result.message


async def test_the_engine_token(opa_auth: OpaServer, node: Node) -> None:
    await load_pack(opa_auth)
    token = node.root / "token"
    token.write_text(opa_auth.token or "")
    assert (await library_verdict(plugin_config(opa_auth, opa={"token_file": str(token)}), pod())).admit
    token.write_text("wrong")
    refused = await library_verdict(plugin_config(opa_auth, opa={"token_file": str(token)}), pod())
    assert (refused.admit, refused.reason) == (False, REASON_POLICY_ERROR) and "401" in refused.message


async def test_a_broken_plugin_configuration_rejects_with_its_stderr(opa: OpaServer, node: Node) -> None:
    config = write_config(node, {"opa": {"url": opa.url, "timeout": "fast"}})
    (node.bin / "fedplace-node-admit").symlink_to(NODE_ADMIT)
    node.config([{"name": "fedplace-node-admit", "type": "shell", "args": ["--config", str(config)]}])
    async with node.manager() as manager:
        result = await manager.admit(pod())
    assert (result.admit, result.reason) == (False, REASON_FAILED)
    assert "exited with status 2" in result.message
    assert "invalid configuration" in result.message and "opa.timeout" in result.message


def test_a_broken_plugin_configuration_stops_the_server(node: Node) -> None:
    import subprocess

    config = write_config(node, {"opa": {"url": "ftp://x"}})
    proc = subprocess.run([str(NODE_ADMIT), "--config", str(config), "--socket", str(node.sock / "x.sock")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "opa.url" in proc.stderr
    assert not (node.sock / "x.sock").exists()


# -- the decision contract (pure) ------------------------------------------------------------


@pytest.mark.parametrize("outcome, expected", [
    (OpaOutcome.ok({"deny": []}), AdmitResult(True)),
    (OpaOutcome.ok({"deny": [], "other": 1}), AdmitResult(True)),
    (OpaOutcome.ok({}), AdmitResult(True)),
    (OpaOutcome.ok({"deny": [{"reason": "B", "message": "b"}, {"reason": "A", "message": "z"},
                             {"reason": "A", "message": "y"}]}), AdmitResult(False, "A", "y; z; b")),
    (OpaOutcome.ok({"deny": ["plain text"]}), AdmitResult(False, REASON_DENIED, "plain text")),
])
def test_result_from_outcome(outcome: OpaOutcome, expected: AdmitResult) -> None:
    assert result_from_outcome(outcome) == expected


@pytest.mark.parametrize("outcome, fragment", [
    (OpaOutcome.failed("unavailable", "OPA POST …: 503", attempts=4), "policy engine error after 4 attempts: OPA"),
    (OpaOutcome.failed("request", "OPA POST …: 401 unauthorized"), "policy engine error: OPA POST …: 401"),
    (OpaOutcome.undefined(query_path="io/k8s/node/admission"), "data.io.k8s.node.admission is undefined"),
    (OpaOutcome.ok([]), "is a list, not an object"),
    (OpaOutcome.ok({"deny": {"a": 1}}), "deny must be a set"),
    (OpaOutcome.ok({"deny": [{"reason": 1, "message": "x"}]}), "not {reason, message} strings"),
    (OpaOutcome.ok({"deny": [{"reason": "", "message": "x"}]}), "without a \"reason\""),
])
def test_no_usable_decision_fails_closed(outcome: OpaOutcome, fragment: str) -> None:
    result = result_from_outcome(outcome)
    assert (result.admit, result.reason) == (False, REASON_POLICY_ERROR)
    assert fragment in result.message


@pytest.mark.parametrize("doc, field", [
    ({"opa": {"url": "http://x", "token": "a", "token_file": "/etc/hostname"}}, "opa.token"),
    ({"opa": {"decision_path": "/v1/policies/x"}}, "opa.decision_path"),
    ({"deadline": 0}, "deadline"),
    ({"node": []}, "node"),
    ({"node": {"labels": {"a": 1}}}, "node.labels"),
    ({"node": {"runtimeClasses": "runc"}}, "node.runtimeClasses"),
    ({"node": {"name": ""}}, "node.name"),
    ({"retry": {"initial": 1, "max": 0.5}}, "retry.max"),
    ({"log_level": "loud"}, "log_level"),
    ({"nodes": {}}, "nodes"),
])
def test_invalid_plugin_configuration_names_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_mapping(doc)
    assert err.value.field == field


def test_plugin_configuration_defaults() -> None:
    cfg = config_from_mapping({"node": {"custom": {"any": "thing"}}})
    assert cfg.opa.decision_url == "http://127.0.0.1:8181/v1/data/io/k8s/node/admission"
    assert (cfg.opa.query_path, cfg.opa.timeout, cfg.deadline) == ("io/k8s/node/admission", 1.0, 2.0)
    assert cfg.node["name"] and cfg.node["labels"] == {} and cfg.node["custom"] == {"any": "thing"}
