"""Item 5: ``fedplace-limits`` — the effective limits of a namespace and who violates them now.

OPA (devstack engine, or FEDPLACE_TEST_OPA_URL) holds the pack and replicated
data as opa-kube-sync would write it: two LimitRanges in a namespace and a
few workloads (one violating, one created before the defaults existed, one
fine). The command is run in process and as the installed console script.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.insight import limits
from tests.packs.limitrange.conftest import POLICY_PREFIX, dependency_order, load_modules, pack_modules
from tests.packs.limitrange.reference import container, item, lr

NS = "cli-shop"


def rs(name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {"containers": list(containers)}}}}


@pytest.fixture
async def world(opa: Any) -> Any:
    client = OpaClient(OpaSettings(url=opa.url, token=opa.token))
    await load_modules(client, pack_modules())
    a = lr("a-defaults", item("Container", default={"cpu": "500m"}, defaultRequest={"cpu": "100m"}))
    b = lr("b-bounds", item("Container", max={"cpu": "2", "memory": "1Gi"}, min={"memory": "64Mi"}),
           item("Pod", max={"memory": "2Gi"}))
    for r in (a, b):
        r["metadata"]["namespace"] = NS
    running = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "old", "namespace": NS},
               "spec": {"containers": [container("app", limits={"cpu": "1", "memory": "3Gi"})]},
               "status": {"phase": "Running"}}
    await client.put_data(["kubernetes"], {
        "limitranges": {NS: {"a-defaults": a, "b-bounds": b}},
        "replicasets": {NS: {
            "big": rs("big", container("app", limits={"cpu": "1", "memory": "4Gi"})),
            "legacy": rs("legacy", container("app", requests={"memory": "100Mi"}, limits={"memory": "100Mi"})),
            "fine": rs("fine", container("app", limits={"cpu": "1", "memory": "256Mi"})),
        }, "elsewhere": {"x": rs("x", container("app", limits={"memory": "9Gi"}))}},
        "pods": {NS: {"old": running}},
    })
    yield opa
    if getattr(opa, "external", False):
        for mid in reversed(dependency_order(pack_modules())):
            await client.delete_policy(f"{POLICY_PREFIX}/{mid}")
        await client.delete_data(["kubernetes"])
    await client.close()


def args_for(opa: Any, tmp_path: Path, *extra: str) -> list[str]:
    argv = ["--namespace", NS, "--opa-url", opa.url, *extra]
    if opa.token:
        token = tmp_path / "opa.token"
        token.write_text(opa.token)
        argv += ["--opa-token-file", str(token)]
    return argv


async def run(argv: list[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    limits.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = await limits.run(parser.parse_args(argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def test_table_shows_effective_limits_and_violations(world: Any, tmp_path: Path):
    code, out, _ = await run(args_for(world, tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f'Effective limits in namespace "{NS}" (2 LimitRanges: a-defaults, b-bounds)'
    header = lines[2].split()
    assert header[:3] == ["LimitRange", "Type", "Resource"]
    rows = {tuple(line.split()[:3]): line for line in lines[4:9]}
    # the defaults as stored, where they come from, and which apply
    assert rows[("a-defaults", "Container", "cpu")].split()[3:] == ["-", "-", "100m", "500m", "-"]
    cpu_b = rows[("b-bounds", "Container", "cpu")]
    assert "2 (from max) *" in cpu_b  # shadowed by a-defaults' cpu default
    memory_b = rows[("b-bounds", "Container", "memory")]
    assert memory_b.split()[3:5] == ["64Mi", "1Gi"] and "1Gi (from max)" in memory_b and "*" not in memory_b
    assert rows[("b-bounds", "Pod", "memory")].split()[3:] == ["-", "2Gi", "-", "-", "-"]
    assert "* not applied: a LimitRange earlier by name sets this default" in out
    # workloads: the violating one with the webhook's messages, the one missing defaults
    assert "Workloads: 4 checked, 2 violating the limits now, 1 missing defaults" in out
    assert "ReplicaSet big: would be denied" in out
    assert f'container "app": memory limit 4Gi exceeds max 1Gi (LimitRange "b-bounds" in "{NS}")' in out
    assert f'pod: memory limit total 4Gi exceeds max 2Gi (LimitRange "b-bounds" in "{NS}")' in out
    assert "ReplicaSet legacy: would get defaults when next created or updated" in out
    assert 'container "app": cpu request 100m (LimitRange "a-defaults")' in out
    assert 'container "app": cpu limit 500m (LimitRange "a-defaults")' in out
    assert "fine" not in out and "elsewhere" not in out
    # a running Pod is checked as if created now
    assert "Pod old: would be denied" in out
    assert f'container "app": memory limit 3Gi exceeds max 1Gi (LimitRange "b-bounds" in "{NS}")' in out


async def test_json_output_and_resources_filter(world: Any, tmp_path: Path):
    code, out, _ = await run(args_for(world, tmp_path, "--output", "json", "--resources", "replicasets"))
    assert code == 0
    doc = json.loads(out)
    assert doc["limitRanges"] == ["a-defaults", "b-bounds"]
    assert [w["name"] for w in doc["workloads"]] == ["big", "fine", "legacy"]
    big = doc["workloads"][0]
    assert big["resource"] == "replicasets" and big["kind"] == "ReplicaSet" and len(big["violations"]) == 2
    cpu_a = next(r for r in doc["limits"] if r["limitRange"] == "a-defaults")
    assert cpu_a["defaultApplies"] is True and cpu_a["defaultFrom"] == "default"


async def test_exit_status(world: Any, tmp_path: Path):
    code, _, _ = await run(args_for(world, tmp_path, "--fail-on-violations"))
    assert code == 1
    code, out, _ = await run(args_for(world, tmp_path, "--fail-on-violations", "--resources", "deployments"))
    assert code == 0 and "Workloads: 0 checked" in out
    empty = ["--namespace", "nowhere", *args_for(world, tmp_path)[2:]]
    code, out, _ = await run(empty)
    assert code == 0 and 'No LimitRanges in namespace "nowhere"' in out


async def test_every_namespace_and_the_contexts_namespace(world: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    """-A: every namespace with replicated LimitRanges; without -n, the kubeconfig context's
    namespace (only the kubeconfig is read), as kubectl."""
    flags = args_for(world, tmp_path)[2:]
    code, out, err = await run(["-A", "--fail-on-violations", *flags])
    assert code == 1, err
    assert out.startswith(f'Effective limits in namespace "{NS}"') and out.count("Effective limits") == 1
    code, out, _ = await run(["-A", "-o", "yaml", *flags])
    assert [d["namespace"] for d in yaml.safe_load(out)["items"]] == [NS]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k", "namespace": NS}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    code, out, _ = await run(flags)
    assert code == 0 and out.startswith(f'Effective limits in namespace "{NS}" (2 LimitRanges')


async def test_without_the_pack_it_says_so(opa: Any, tmp_path: Path):
    code, out, err = await run(args_for(opa, tmp_path))
    assert code == 2 and out == ""
    assert "cannot get the report from OPA" in err and "fedplace-limitrange" in err


def test_console_script(world: Any, tmp_path: Path):
    script = Path(sys.executable).parent / "fedplace-limits"
    assert script.exists(), "pip install -e . installs the fedplace-limits console script"
    proc = subprocess.run([str(script), *args_for(world, tmp_path, "--fail-on-violations")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"})
    assert proc.returncode == 1, proc.stderr
    assert "ReplicaSet big: would be denied" in proc.stdout


def test_fedplace_limits_subcommand(world: Any, tmp_path: Path):
    """``fedplace limits`` is the same command as ``fedplace-limits`` (insight/cli.py)."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}
    argv = args_for(world, tmp_path, "--fail-on-violations")
    one = subprocess.run([str(bindir / "fedplace"), "limits", *argv], capture_output=True, text=True, timeout=60,
                         env=env)
    other = subprocess.run([str(bindir / "fedplace-limits"), *argv], capture_output=True, text=True, timeout=60,
                           env=env)
    assert (one.returncode, one.stdout) == (other.returncode, other.stdout) == (1, other.stdout), one.stderr
    assert "ReplicaSet big: would be denied" in one.stdout
