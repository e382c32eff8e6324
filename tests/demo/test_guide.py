"""docs/policies.md, "Write your own placement rule", run as written against the demo's servers.

The demo runs as ``tests/demo/test_demo.py`` runs it (``python -m devstack.demo --keep-running``,
its folder in the test's temporary directory). The guide's first two shell blocks start the demo
and set ``KUBECONFIG``, ``OPA_FLAGS`` and ``SYNC_URL`` from what it printed: the test takes the
same three from the demo's printed lines. Every other shell block of the guide then runs, in
order, in one scratch folder, with kubectl and ``fedplace`` on PATH; the webhook's decisions,
``fedplace explain`` (the rule's id and the clusters), the page and what-if are checked. A block
the test does not recognise fails it: a changed guide needs a changed test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.demo.test_demo import (
    Demo,
    demo,  # noqa: F401 - the module-scoped fixture: this module's own demo
    kubectl_dir,
)

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "policies.md"
SECTION = "## Write your own placement rule"
CLUSTERS = ("gce-europe-west1", "aws-eu-central-1", "azure-westeurope", "gce-us-central1")
GOLD = "gce-europe-west1"


def guide_blocks() -> list[str]:
    """The ```sh blocks of the guide's section, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else None]
    return re.findall(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)


def printed_environment(running: Demo) -> dict[str, str]:
    """KUBECONFIG, OPA_FLAGS and SYNC_URL of the federation control plane, as the demo printed them."""
    (block, *_) = running.blocks()
    kubeconfig = next(c for c in block if c.startswith("export KUBECONFIG=")).removeprefix("export KUBECONFIG=")
    explain = shlex.split(next(c for c in block if " explain " in c))
    opa = ["--opa-url", explain[explain.index("--opa-url") + 1],
           "--opa-token-file", explain[explain.index("--opa-token-file") + 1]]
    start = next(i for i, line in enumerate(running.lines) if "Everything is still running" in line)
    sync = next(line for line in running.lines[start:] if line.strip().startswith("opa-kube-sync "))
    return {"KUBECONFIG": shlex.split(kubeconfig)[0],
            "OPA_FLAGS": " ".join(shlex.quote(str(Path(ROOT, w))) if w.endswith(".token") else w for w in opa),
            "SYNC_URL": sync.split()[1]}


def run_block(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def until(script: str, env: dict[str, str], cwd: Path, ok, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``script`` until ``ok(result)`` (what a reader does who runs it again a second later)."""
    deadline = time.monotonic() + timeout
    while True:
        got = run_block(script, env, cwd)
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(1.0)


def test_the_guide_has_its_steps():
    blocks = guide_blocks()
    assert "devstack.demo --keep-running" in blocks[0]
    assert all(f"export {v}=" in blocks[1] for v in ("KUBECONFIG", "OPA_FLAGS", "SYNC_URL"))
    assert len(blocks) == 11, blocks


@pytest.mark.timeout(900)
def test_the_guide_works_as_written(demo: Demo, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    env = {**os.environ, **printed_environment(demo), "HOME": str(tmp_path),
           "PATH": os.pathsep.join([str(kubectl_dir(tmp_path)), str(Path(sys.executable).parent), os.environ["PATH"]])}
    for name in ("FEDPLACE_TEST_KUBECONFIG", "FEDPLACE_TEST_OPA_URL"):
        env.pop(name, None)
    work = tmp_path / "guide"
    work.mkdir()
    seen: list[str] = []
    for block in guide_blocks()[2:]:
        def out(got: subprocess.CompletedProcess[str], block: str = block) -> str:
            return f"{block}\n--- rc {got.returncode}\n{got.stdout}\n{got.stderr}"

        if block.startswith("kubectl label cluster"):
            got = run_block(block, env, work)
            assert got.returncode == 0, out(got)
            seen.append("label")
        elif block.startswith("cat > tier-rules.yaml"):
            got = run_block(block, env, work)
            assert got.returncode == 0 and "package fedplace.rules.tier" in (work / "tier-rules.yaml").read_text()
            seen.append("write")
        elif "what-if --policy tier-rules.yaml" in block:
            got = run_block(block, env, work)
            assert got.returncode == 0, out(got)  # nothing would move nor be denied
            seen.append("preview")
        elif "apply --validate=false -f tier-rules.yaml" in block:
            got = until(block, env, work, lambda g: '"status":"ok"' in g.stdout)
            assert got.returncode == 0 and '{"status":"ok"}' in got.stdout, out(got)
            seen.append("load")
        elif "name: orders" in block:
            got = run_block(block, env, work)
            assert got.returncode == 0, out(got)
            assert got.stdout.strip().endswith('{"clusters":{"gce-europe-west1":{"weight":1}},"rebalance":true}'), out(got)
            seen.append("admitted")
        elif "name: vault" in block:
            got = run_block(block, env, work)
            assert got.returncode != 0, out(got)
            assert 'admission webhook "placement.fedplace.io" denied the request' in got.stderr, out(got)
            assert "no cluster satisfies the placement policy (PCI compliance level >= 3, a gold-tier cluster)" \
                in got.stderr, out(got)
            seen.append("denied")
        elif block.startswith("fedplace explain"):
            got = run_block(block, env, work)
            assert got.returncode == 0, out(got)
            assert "a gold-tier cluster" in got.stdout and all(c in got.stdout for c in CLUSTERS), out(got)
            as_json = run_block(block.strip() + " -o json", env, work)
            assert as_json.returncode == 0, out(as_json)
            clusters = json.loads(as_json.stdout)["explanation"]["placement"]["clusters"]
            assert {name for name, c in clusters.items() if c["eligible"]} == {GOLD}
            for name in set(CLUSTERS) - {GOLD}:
                failed = [c for c in clusters[name]["checks"] if not c["ok"]]
                assert [(c["requirement"], c.get("set"), c.get("imposed_by")) for c in failed] == [
                    ("gold-tier", "tier", "workload")], (name, failed)
            seen.append("explain")
        elif "/placement" in block:
            got = until(block, env, work, lambda g: g.returncode == 0 and int(g.stdout.strip() or 0) > 0)
            assert got.returncode == 0 and int(got.stdout.strip()) > 0, out(got)
            seen.append("page")
        elif "what-if --cluster-label" in block:
            got = run_block(block, env, work)
            assert got.returncode == 1, out(got)  # a workload would be newly denied
            assert "orders" in got.stdout, out(got)
            seen.append("what-if")
        else:
            pytest.fail(f"a block of the guide this test does not know:\n{block}")
    assert seen == ["label", "write", "preview", "load", "admitted", "denied", "explain", "page", "what-if"]
