"""``make help``: every target of the Makefile, one line each with what it does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def phony_targets() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    found = re.search(r"^\.PHONY:(.*)$", text, re.M)
    assert found, "the Makefile declares its targets .PHONY"
    return found.group(1).split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_target_on_one_line() -> None:
    got = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    assert got.returncode == 0, got.stderr
    rows = [line.split(None, 1) for line in got.stdout.splitlines() if line.strip()]
    assert all(len(row) == 2 and row[1].strip() for row in rows), got.stdout
    listed = [row[0] for row in rows]
    assert sorted(listed) == sorted(phony_targets())
    assert len(listed) == len(set(listed))
    assert "demo" in listed and "test" in listed
