"""The documentation has a way in and says what is.

* ``docs/README.md`` is the index: it links every page under ``docs/``, and the
  repository's README links to it;
* every relative link in ``docs/`` and the README resolves: the file exists and, for
  a link into a Markdown page, so does the heading its ``#anchor`` names (GitHub's
  anchors: lower case, punctuation dropped, spaces as hyphens, ``-1``, ``-2``… for
  repeated headings);
* each page opens, right under its title, with whom it is for (a paragraph starting
  "For ");
* no page cites this repository's issues by number (the word "issue" followed by a
  number, or "#" and a number); a reference to another repository's
  (``karmada-io/karmada#1461``) is fine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
INDEX = DOCS / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
DOCUMENTS = [ROOT / "README.md", *PAGES]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w/.-])#\d+\b", re.IGNORECASE)


def without_code(text: str) -> str:
    """``text`` with fenced code blocks blanked (their lines kept, so line numbers stay)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of the Markdown file ``path``."""
    seen: dict[str, int] = {}
    found = set()
    for line in without_code(path.read_text(encoding="utf-8")).splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(path: Path) -> list[str]:
    """The link targets of ``path`` that are not URLs or e-mail addresses."""
    targets = LINK.findall(without_code(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def linked_files(path: Path) -> set[Path]:
    """The files ``path`` links to, resolved."""
    return {(path.parent / t.split("#", 1)[0]).resolve() for t in relative_links(path) if not t.startswith("#")}


def test_slug_follows_github() -> None:
    assert slug("Policy engine — `bench/engine.py`") == "policy-engine--benchenginepy"
    assert slug("Readiness, metrics") == "readiness-metrics"
    assert slug("Exploring it (`--keep-running`)") == "exploring-it---keep-running"


def test_the_index_links_every_page() -> None:
    linked = linked_files(INDEX)
    missing = [p.name for p in PAGES if p != INDEX and p.resolve() not in linked]
    assert not missing, f"docs/README.md links no {missing}"


def test_the_readme_links_the_index() -> None:
    assert INDEX.resolve() in linked_files(ROOT / "README.md")


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_each_page_says_whom_it_is_for(path: Path) -> None:
    paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    assert paragraphs[0].startswith("# "), "the page starts with its title"
    assert paragraphs[1].startswith("For "), f"the paragraph under the title says whom it is for: {paragraphs[1][:80]!r}"


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers(path: Path) -> None:
    hits = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if ISSUE.search(line)]
    assert not hits, "issue numbers in " + str(path.relative_to(ROOT)) + ":\n" + "\n".join(hits)


# Built, so that this file cites no issue itself.
WORD, HASH = "issue", "#"


@pytest.mark.parametrize("line, cited", [
    (f"Targets ({WORD} 29): ≤ 2 ms", True),
    (f"see {WORD} {HASH}12", True),
    (f"fixed in {HASH}40.", True),
    ("karmada-io/karmada#1461 says so", False),
    ("the 1,000-cluster row", False),
    ("[Helm](#helm)", False),
])
def test_issue_pattern(line: str, cited: bool) -> None:
    assert bool(ISSUE.search(line)) is cited
