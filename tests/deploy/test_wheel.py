"""What `pip install fedplace` and the image's pip steps install: one package, fedplace.

Both tests install into a fresh virtualenv, offline: the dependencies (aiohttp, …,
and OPA's library) come from the test environment's site-packages through a
``.pth`` line, which adds that folder to ``sys.path`` without running its own
``.pth`` files, so the editable installs of the repository (fedplace, the
devstack) stay out of sight. Commands run outside the repository, so nothing
is imported from its folders.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.deploy.conftest import ROOT
from tests.deploy.test_dockerfile import copied_sources, stages

pytestmark = pytest.mark.timeout(300)

# Imports every module of the installed fedplace; prints the modules that failed and
# whether anything imported the devstack.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import fedplace
failed = {}
for info in pkgutil.walk_packages(fedplace.__path__, "fedplace."):
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed[info.name] = repr(exc)
print(json.dumps({"failed": failed, "file": fedplace.__file__,
                  "devstack": sorted(m for m in sys.modules if m.split(".")[0] == "devstack")}))
"""


def fresh_venv(path: Path) -> Path:
    """A virtualenv without pip whose dependencies come from this environment; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def pip(python: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    """This environment's pip acting on ``python``'s environment, offline; ``env`` added to ours."""
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stdout + done.stderr


def console_scripts(dist_info_entry_points: str) -> list[str]:
    names, section = [], ""
    for line in dist_info_entry_points.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[console_scripts]" and "=" in line:
            names.append(line.split("=")[0].strip())
    return names


def check_install(python: Path, scripts: list[str], cwd: Path) -> None:
    """Every module imports without the devstack; every command answers --help."""
    done = subprocess.run([str(python), "-c", IMPORT_ALL], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == {}
    assert report["devstack"] == [], "the product imports the devstack"
    assert str(ROOT) not in report["file"], "fedplace came from the repository, not the install"
    bindir = python.parent
    for name in scripts:
        run = subprocess.run([str(bindir / name), "--help"], cwd=cwd, capture_output=True, text=True)
        assert run.returncode == 0 and "usage" in run.stdout.lower(), f"{name} --help: {run.stderr[-2000:]}"


def test_the_wheel_holds_fedplace_alone_and_its_commands_start(tmp_path):
    dist = tmp_path / "dist"
    pip(Path(sys.executable), "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(ROOT),
        cwd=tmp_path)
    (wheel,) = dist.glob("fedplace-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert {n.split("/")[0] for n in names} == {"fedplace", dist_info}, "the wheel holds fedplace/ alone"
    packages = {str(Path(n).parent) for n in names if n.endswith("/__init__.py")}
    assert packages == {"fedplace", "fedplace/admission", "fedplace/common", "fedplace/insight", "fedplace/nodeadmit",
                        "fedplace/nodeadmit/api", "fedplace/remediator", "fedplace/sync"}
    assert "fedplace/insight/opa-bindings.txt" in names, "what-if's install hint reads the pin"
    templates = {f"fedplace/insight/templates/{p.name}" for p in (ROOT / "insight" / "templates").iterdir()}
    assert templates and templates <= set(names), f"the placement page's templates: {sorted(templates - set(names))}"
    # Every folder of the product is in the wheel, module for module.
    for package in packages - {"fedplace"}:
        folder = ROOT / Path(package).relative_to("fedplace")
        expected = {f"{package}/{p.name}" for p in folder.glob("*.py")}
        assert expected <= set(names), f"missing from the wheel: {sorted(expected - set(names))}"
    scripts = console_scripts(zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode())
    assert set(scripts) == {"fedplace", "fedplace-admission", "opa-kube-sync", "fedplace-limits",
                            "fedplace-node-admit-manager", "fedplace-node-admit"}

    python = fresh_venv(tmp_path / "venv")
    pip(python, "install", "--no-deps", "--no-index", str(wheel), cwd=tmp_path)
    check_install(python, scripts, cwd=tmp_path)


def test_the_dockerfile_pip_steps_make_a_working_install(tmp_path):
    """The builder stage's COPY and RUN steps, followed in a virtualenv: the build context the
    Dockerfile copies into /src, then its RUN commands with /opt/fedplace the virtualenv, the
    stage's PIP_CONSTRAINT (constraints.txt) and pip offline (--no-index --no-build-isolation:
    what a registry would give is here already)."""
    src = tmp_path / "src"
    src.mkdir()
    for source in copied_sources():
        origin = ROOT / source.rstrip("/")
        if origin.is_dir():
            subprocess.run(["cp", "-r", str(origin), str(src / origin.name)], check=True)
        else:
            (src / origin.name).write_bytes(origin.read_bytes())
    venv = tmp_path / "opt-fedplace"
    python = fresh_venv(venv)
    runs = [args for op, args in stages()[0] if op == "RUN"]
    settings: dict[str, str] = {}
    for op, args in stages()[0]:
        if op == "ENV":
            settings.update(word.split("=", 1) for word in shlex.split(args))
    assert settings.get("PIP_CONSTRAINT") == "/src/constraints.txt", "the builder installs the pinned versions"
    pip_env = {"PIP_CONSTRAINT": str(src / "constraints.txt")}
    steps = [step.strip() for run in runs for step in run.split("&&")]
    installs = [s for s in steps if s.startswith("/opt/fedplace/bin/pip install")]
    assert installs, "the builder installs with the virtualenv's pip"
    assert any("-r insight/opa-bindings.txt" in s for s in installs), "OPA's library at fedplace's one pin"
    for step in steps:
        if step.startswith("python -m venv"):
            continue  # made above
        words = shlex.split(step.replace(">/dev/null", ""))
        if words[0] == "/opt/fedplace/bin/pip":
            pip(python, *words[1:2], "--no-index", "--no-build-isolation", *words[2:], cwd=src, env=pip_env)
            continue
        words[0] = words[0].replace("/opt/fedplace", str(venv))
        words = [w.replace("/opt/fedplace", str(venv)) for w in words]
        done = subprocess.run(words, cwd=src, capture_output=True, text=True)
        assert done.returncode == 0, f"{step}: {done.stderr[-2000:]}"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    installed = {p.name for p in Path(site).iterdir() if not p.name.endswith((".pth", ".dist-info"))}
    assert installed - {"__pycache__"} == {"fedplace"}, f"the image's virtualenv holds {sorted(installed)}"
    check_install(python, ["fedplace", "fedplace-admission", "opa-kube-sync"], cwd=tmp_path)
