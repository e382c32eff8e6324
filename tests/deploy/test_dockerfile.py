"""The Dockerfile and .dockerignore, checked statically (no container engine
is needed): multi-stage, slim non-root runtime, a build context that holds
what the build copies and nothing else."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.deploy.conftest import ROOT, container

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        op, _, args = full.partition(" ")
        out.append((op.upper(), args.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for op, args in instructions():
        if op == "FROM":
            result.append([])
        if result:
            result[-1].append((op, args))
    return result


def global_args() -> dict[str, str]:
    out = {}
    for op, args in instructions():
        if op == "FROM":
            break
        if op == "ARG" and "=" in args:
            k, _, v = args.partition("=")
            out[k] = v
    return out


def resolve(image: str) -> str:
    for k, v in global_args().items():
        image = image.replace("${" + k + "}", v).replace("$" + k, v)
    return image


def test_multi_stage_with_a_slim_python_runtime():
    st = stages()
    assert len(st) >= 2
    builder_from = st[0][0][1].split()
    assert builder_from[-2].upper() == "AS", "the builder stage is named"
    final_image = resolve(st[-1][0][1].split()[0])
    assert final_image == "python:3.11-slim"
    assert resolve(builder_from[0]) == final_image, "same base: the copied virtualenv's python must exist"


def test_runtime_runs_as_a_numeric_non_root_user():
    final = stages()[-1]
    users = [args for op, args in final if op == "USER"]
    assert users, "no USER in the final stage"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric, so runAsNonRoot can verify it"
    # The manifests run the same uid.
    assert int(uid) == 65532
    # USER comes after everything that needs root.
    assert [op for op, _ in final].index("USER") > max(i for i, (op, _) in enumerate(final) if op == "RUN")


def test_runtime_has_no_build_tools_and_copies_the_venv():
    final = stages()[-1]
    runs = " ".join(args for op, args in final if op == "RUN")
    for tool in ("apt-get install", "apk add", "gcc", "build-essential", "pip install", "make "):
        assert tool not in runs, f"final stage runs {tool!r}"
    copies = [args for op, args in final if op == "COPY"]
    assert any(c.startswith("--from=builder") for c in copies)
    assert all(c.startswith("--from=") for c in copies), "the runtime copies only from the builder"


def test_builder_installs_the_package_not_editable():
    runs = " ".join(args for op, args in stages()[0] if op == "RUN")
    assert re.search(r"pip install (\S+ )*\.(\s|$)", runs), runs
    assert " -e " not in runs and "--editable" not in runs
    assert "[devstack" not in runs and "[test" not in runs, "no development extras in the image"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for cmd in ("fedplace-admission", "opa-kube-sync"):
        assert cmd in scripts
        assert f"{cmd} --help" in runs, f"the build smoke-tests {cmd}"


def copied_sources() -> list[str]:
    out = []
    for op, args in stages()[0]:
        if op == "COPY" and not args.startswith("--from"):
            parts = [p for p in args.split() if not p.startswith("--")]
            out += parts[:-1]
    return out


def local_imports(package: Path) -> set[str]:
    """The repository folders a folder's modules import: fedplace.X is folder X, devstack itself."""
    found: set[str] = set()
    for f in package.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "fedplace" and len(parts) > 1:
                    found.add(parts[1])
                elif parts[0] == "devstack":
                    found.add("devstack")
    return found


def test_copied_sources_exist_are_in_the_context_and_suffice():
    sources = copied_sources()
    ignore = DockerIgnore(DOCKERIGNORE.read_text())
    for src in sources:
        path = ROOT / src.rstrip("/")
        assert path.exists(), src
        files = [path] if path.is_file() else [p for p in path.rglob("*.py")]
        assert files and not any(ignore.excluded(str(p.relative_to(ROOT))) for p in files), \
            f"{src} is excluded by .dockerignore"
    copied = {s.rstrip("/") for s in sources}
    # Every folder pyproject.toml maps into the package is copied (setuptools needs them all)...
    mapped = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values())
    assert mapped <= copied, f"mapped into fedplace but not copied: {mapped - copied}"
    # ...and so is every folder the two commands import (transitively).
    needed = {"admission", "sync"}
    frontier = set(needed)
    while frontier:
        pkg = frontier.pop()
        for dep in local_imports(ROOT / pkg) - needed:
            needed.add(dep)
            frontier.add(dep)
    assert needed <= copied, f"imported but not copied: {needed - copied}"
    assert "devstack" not in copied and "tests" not in copied


def test_deployments_run_the_image_commands(rendered):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    r = rendered["cert-manager"]
    for deploy, cname in (("fedplace-admission", "admission"), ("opa", "opa-kube-sync")):
        c = container(r.get("Deployment", deploy, "opa"), cname)
        assert c["command"][0] in scripts
        assert "fedplace" in c["image"].rsplit("/", 1)[-1]


# -- .dockerignore ---------------------------------------------------------------


class DockerIgnore:
    """moby/patternmatcher semantics: last match wins, `!` re-includes, a
    pattern matching a parent directory matches everything below it."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = line[1:].strip() if negate else line
            pattern = pattern.strip("/")
            self.rules.append((negate, re.compile(self._regex(pattern))))

    @staticmethod
    def _regex(pattern: str) -> str:
        out, i = "^", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out += "(.*/)?"
                i += 3
            elif pattern.startswith("**", i):
                out += ".*"
                i += 2
            elif pattern[i] == "*":
                out += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                out += "[^/]"
                i += 1
            else:
                out += re.escape(pattern[i])
                i += 1
        return out + "$"

    def excluded(self, path: str) -> bool:
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        result = False
        for negate, rx in self.rules:
            if any(rx.match(p) for p in prefixes):
                result = not negate
        return result


@pytest.mark.parametrize("path", [
    ".venv/bin/python", "tests/deploy/test_dockerfile.py", ".git/config", "common/__pycache__/x.cpython-311.pyc",
    "deploy/base/secrets/sync-token", "deploy/overlays/self-signed/generated/ca.key", ".pytest_cache/v/x",
    "devstack/kube/server.py", "bench/engine.py", "docs/operations.md", "fedplace.egg-info/PKG-INFO",
    ".devstack/state", "admission/__pycache__/server.cpython-311.pyc",
])
def test_dockerignore_excludes(path: str):
    assert DockerIgnore(DOCKERIGNORE.read_text()).excluded(path)


@pytest.mark.parametrize("path", ["pyproject.toml", "README.md", "common/opa_client.py", "admission/handler.py",
                                  "sync/__main__.py", "remediator/config.py"])
def test_dockerignore_keeps(path: str):
    assert not DockerIgnore(DOCKERIGNORE.read_text()).excluded(path)
