"""One OPA version story: production runs the OPA release whose compiler decides every test run.

The compiler of record (``opa_bindings``, OPA's own Go library built into the
``opa-golib-python-bindings`` wheel pinned in insight/opa-bindings.txt) compiles and evaluates the
policies in ``make test``; the production manifests must pin the same release, so
what the tests accepted is what production loads. (The real OPA server in CI's
conformance stage is a second, older release; docs/operations.md, "OPA versions".)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OPA_DEPLOYMENT = ROOT / "deploy" / "base" / "opa" / "deployment.yaml"
OPA_MODULE = re.compile(rb"github\.com/open-policy-agent/opa@v(\d+\.\d+\.\d+)/")


def library_version() -> str:
    """The OPA release built into the installed bindings (the Go module path in the shared library)."""
    bindings = pytest.importorskip("opa_bindings", reason="OPA's Go library (the Makefile installs it) is needed")
    library = Path(bindings.__file__).parent / "libopabridge.so"
    versions = set(OPA_MODULE.findall(library.read_bytes()))
    assert len(versions) == 1, f"expected one OPA module version in {library}, found {versions}"
    return versions.pop().decode()


def deployed_version() -> str:
    (deployment,) = [d for d in yaml.safe_load_all(OPA_DEPLOYMENT.read_text())
                     if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "opa"]
    (image,) = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "opa"]
    name, _, tag = image.rpartition(":")
    assert name == "openpolicyagent/opa", image
    return tag


def test_production_pins_the_compiler_of_records_release():
    assert deployed_version() == library_version()


def test_the_docs_name_the_pinned_release():
    version = deployed_version()
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert f"openpolicyagent/opa:{version}" in operations
    assert f"OPA {version}" in operations


def test_the_library_is_pinned_once_and_the_messages_name_that_pin():
    """insight/opa-bindings.txt is the pin: the Makefile and the Dockerfile install from it, the
    installed library is that release of the wheel, and what-if's hint is the exact command."""
    from importlib.metadata import version

    from fedplace.insight.evaluate import install_command

    pin = (ROOT / "insight" / "opa-bindings.txt").read_text().strip()
    name, _, wanted = pin.partition("==")
    assert name == "opa-golib-python-bindings" and wanted, pin
    assert "-r $(OPA_BINDINGS)" in (ROOT / "Makefile").read_text()
    assert "OPA_BINDINGS := insight/opa-bindings.txt" in (ROOT / "Makefile").read_text()
    assert "-r insight/opa-bindings.txt" in (ROOT / "Dockerfile").read_text()
    assert install_command() == f"pip install --ignore-requires-python --no-deps '{pin}'"
    pytest.importorskip("opa_bindings", reason="OPA's Go library (the Makefile installs it) is needed")
    assert version(name) == wanted
    # No other file repeats the version.
    others = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in {".py", ".toml", ".md", ""}
              and ".venv" not in p.parts and ".git" not in p.parts and p.name != "opa-bindings.txt"
              and pin in p.read_text(errors="replace")]
    assert others == [], f"the pin is repeated in {others}"
