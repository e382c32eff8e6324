"""The repository stands alone: no file refers to a path outside it.

What a clone does not contain cannot explain the code. Three kinds of
reference are checked in every tracked text file:

* relative paths climbing out of a folder (``../x``): they must resolve,
  from some folder of the repository (a kustomization's, the root where the
  docs' commands run, …), to something inside it;
* Markdown document names (``x.md``): each must be a document of the
  repository, by its path or its file name;
* links in Markdown documents (``[text](target)``) that are not URLs: the
  target exists.

The exceptions are named here with their reason (``OUTSIDE``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# References that leave the repository on purpose.
OUTSIDE = {
    # The optional real OPA and kube-apiserver CI's conformance stage uses when
    # the folder is beside the clone (README: "Tests against real servers").
    "../shared/real-servers",
    # Kubernetes' own repositories, cited by repository and path
    # (docs/policies.md: where the placement annotations are specified).
    "docs/tasks/administer-federation/cluster.md",
    "contributors/design-proposals/multicluster/federation-clusterselector.md",
    # A plugin name the node admission config refuses (test input, not a reference).
    "../../bin/sh",
    # The overlay tests/deploy/test_helm.py writes into its temporary copy of deploy/
    # (test input, not a reference).
    "../test-helm-tls",
    # An object name tests/insight/test_cli_fuzz.py feeds the CLI (test input).
    "../x",
}

CLIMB = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)")
DOCUMENT = re.compile(r"(?<![\w./-])([\w./-]*[\w-]\.md)\b")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def tracked_files() -> list[Path]:
    """The repository's text files: git's list in a checkout, the tree otherwise."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        paths = [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "__pycache__", ".pytest_cache", "node_modules"}
        paths = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    texts = []
    for path in paths:
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary (images)
        texts.append(path)
    return texts


def inside(target: Path) -> bool:
    """Whether a path resolves to something existing inside the repository."""
    resolved = target.resolve()
    return resolved.exists() and (resolved == ROOT or ROOT in resolved.parents)


def allowed(reference: str) -> bool:
    return any(reference == o or reference.startswith(o + "/") for o in OUTSIDE)


def folders() -> list[Path]:
    """Every folder of the repository that holds tracked files, the root first."""
    found = {ROOT}
    for path in tracked_files():
        found.update(p for p in path.parents if p == ROOT or ROOT in p.parents)
    return sorted(found, key=lambda p: len(p.parts))


def climbing_references(text: str, bases: list[Path]) -> list[str]:
    """Relative paths out of a folder that reach nothing in the repository from any of `bases`."""
    bad = []
    for ref in CLIMB.findall(text):
        ref = ref.rstrip(".")
        if allowed(ref) or any(inside(base / ref) for base in bases):
            continue
        bad.append(ref)
    return bad


def document_references(path: Path, text: str, documents: set[str]) -> list[str]:
    """Markdown document names that are no document of the repository."""
    names = {p.name for p in map(Path, documents)}
    bad = []
    for ref in DOCUMENT.findall(text):
        if allowed(ref) or ref.startswith("http") or "://" in ref:
            continue
        if ref in documents or Path(ref).name in names or inside(path.parent / ref):
            continue
        bad.append(ref)
    return bad


def link_references(path: Path, text: str) -> list[str]:
    """Markdown link targets (not URLs) that do not exist."""
    bad = []
    for ref in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", ref) or allowed(ref):
            continue
        if not inside(path.parent / ref):
            bad.append(ref)
    return bad


def test_no_file_refers_to_a_path_outside_the_repository():
    files = tracked_files()
    documents = {str(p.relative_to(ROOT)) for p in files if p.suffix == ".md"}
    bases = folders()
    problems = []
    for path in files:
        if path == Path(__file__).resolve():
            continue  # names the exceptions
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(ROOT)
        problems += [f"{rel}: {ref} (outside the repository)" for ref in climbing_references(text, bases)]
        problems += [f"{rel}: {ref} (no such document)" for ref in document_references(path, text, documents)]
        if path.suffix == ".md":
            problems += [f"{rel}: link to {ref} (no such file)" for ref in link_references(path, text)]
    assert problems == [], "\n".join(sorted(set(problems)))


@pytest.mark.parametrize("text, kind", [
    ("see ../notes/plan.md for why", "climb"),
    ("as the team's ARCHITECTURE-NOTES.md says", "document"),
    ("[the design](../../design/overview.md)", "link"),
])
def test_each_kind_of_outside_reference_is_caught(text, kind):
    here = ROOT / "docs" / "x.md"
    documents = {"docs/sync.md"}
    found = {
        "climb": climbing_references(text, folders()),
        "document": document_references(here, text, documents),
        "link": link_references(here, text),
    }
    assert found[kind], f"{kind} reference in {text!r} not caught"


def test_references_inside_the_repository_pass():
    here = ROOT / "docs" / "x.md"
    text = "[sync](sync.md), ../README.md, docs/policies.md and ../shared/real-servers/up"
    assert climbing_references(text, folders()) == []
    assert document_references(here, text, {"docs/sync.md", "README.md", "docs/policies.md"}) == []
    assert link_references(here, text) == []
