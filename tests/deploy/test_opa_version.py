"""One OPA version story: production runs the OPA release whose compiler decides every test run.

The compiler of record (``opa_bindings``, OPA's own Go library built into the
``opa-golib-python-bindings`` wheel the Makefile pins) compiles and evaluates the
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
