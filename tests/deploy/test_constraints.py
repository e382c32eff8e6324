"""constraints.txt pins every package `make install` puts into the virtualenv, and the suite runs
with exactly those versions: what passes here is what the Dockerfile and CI build."""

from __future__ import annotations

import importlib.metadata
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.conftest import ROOT

CONSTRAINTS = ROOT / "constraints.txt"


def pins() -> dict[str, Version]:
    out: dict[str, Version] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"constraints.txt: {line!r} is not one == pin"
        out[canonicalize_name(req.name)] = Version(specs[0].version)
    return out


def declared() -> list[Requirement]:
    """fedplace's runtime and test requirements and the devstack's, bar the two projects themselves."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    devstack = tomllib.loads((ROOT / "devstack" / "pyproject.toml").read_text())["project"]
    lines = project["dependencies"] + [r for extra in ("nodeadmit", "test")
                                       for r in project["optional-dependencies"][extra]]
    lines += devstack["dependencies"]
    reqs = [Requirement(line) for line in lines]
    return [r for r in reqs if canonicalize_name(r.name) not in {"fedplace", "fedplace-devstack"}]


def test_every_declared_requirement_is_pinned_within_its_range():
    pinned = pins()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is not pinned in constraints.txt (make lock)"
        assert req.specifier.contains(pinned[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pinned[name]}, outside pyproject.toml's {req}"


def test_the_suite_runs_with_the_pinned_versions():
    """Every pinned package is installed at its pin, kubernetes_asyncio among them: the tests of
    common/kube_slim.py (tests/sync/test_sync.py) exercise the locked version of the library whose
    module layout it relies on."""
    for name, version in pins().items():
        installed = Version(importlib.metadata.version(name))
        assert installed == version, f"{name} {installed} installed, constraints.txt pins {version} (make install)"


def test_kubernetes_asyncio_has_an_upper_bound():
    """common/kube_slim.py depends on the library's internals: a new major release is taken only
    after `make lock` and the suite say it still works."""
    (req,) = [r for r in declared() if canonicalize_name(r.name) == "kubernetes-asyncio"]
    assert any(spec.operator == "<" for spec in req.specifier), str(req)
