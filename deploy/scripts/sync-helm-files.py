#!/usr/bin/env python3
"""Copy the kustomize sources the Helm chart reads into the chart.

The chart deploy/helm/fedplace builds its objects from deploy/'s kustomizations
(its templates read them as `kubectl kustomize` does). So that the chart stands
alone — copied, packaged, linted or installed without the rest of the checkout —
it holds copies of them under files/:

    files/base          deploy/base
    files/components    deploy/components
    files/cert-manager  deploy/overlays/cert-manager

Generated secrets and keys (deploy/.gitignore: base/secrets/, *.key, *.pem) are
never copied. deploy/ is the source: edit there, then run this script;
tests/deploy/test_helm.py fails while the copies and deploy/ differ.

    python3 deploy/scripts/sync-helm-files.py           # rewrite files/
    python3 deploy/scripts/sync-helm-files.py --check   # exit 1 if files/ is stale

Standard library only.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "fedplace"
# files/<name>: the deploy/ folder it copies.
SOURCES = {"base": Path("base"), "components": Path("components"), "cert-manager": Path("overlays/cert-manager")}
SKIPPED_DIRS = frozenset({"secrets", "generated"})  # written by gen-tokens.sh / gen-certs.sh
SKIPPED_SUFFIXES = (".key", ".pem", ".pyc")


def wanted(deploy: Path = DEPLOY) -> dict[str, bytes]:
    """{path under files/: content} of every file the chart must hold."""
    out: dict[str, bytes] = {}
    for name, source in SOURCES.items():
        root = deploy / source
        if not root.is_dir():
            raise SystemExit(f"sync-helm-files: {root} is not a folder")
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if set(rel.parts[:-1]) & SKIPPED_DIRS or path.name.endswith(SKIPPED_SUFFIXES):
                continue
            if path.is_symlink():
                raise SystemExit(f"sync-helm-files: {path} is a link: the chart holds regular files only")
            if path.is_file():
                out[f"{name}/{rel.as_posix()}"] = path.read_bytes()
    return out


def present(chart: Path) -> dict[str, bytes | None]:
    """{path under files/: content} of what the chart holds (None: a link or other non-file)."""
    files = chart / "files"
    out: dict[str, bytes | None] = {}
    if not files.exists():
        return out
    for path in sorted(files.rglob("*")):
        rel = path.relative_to(files).as_posix()
        if path.is_symlink():
            out[rel] = None
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def differences(want: dict[str, bytes], have: dict[str, bytes | None]) -> list[str]:
    """One line per path that differs between deploy/ and files/ (empty: in sync)."""
    out = []
    for rel in sorted(set(want) | set(have)):
        if rel not in have:
            out.append(f"missing from the chart: files/{rel}")
        elif rel not in want:
            out.append(f"not in deploy/: files/{rel}")
        elif have[rel] is None:
            out.append(f"a link, not a copy: files/{rel}")
        elif have[rel] != want[rel]:
            out.append(f"differs from deploy/: files/{rel}")
    return out


def write(chart: Path, want: dict[str, bytes]) -> None:
    """Replace files/ with exactly ``want``."""
    files = chart / "files"
    if files.is_symlink() or files.is_file():
        files.unlink()
    elif files.exists():
        shutil.rmtree(files)
    for rel, content in want.items():
        path = files / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1, listing the paths, if files/ is stale")
    parser.add_argument("--deploy", type=Path, default=DEPLOY, help="the deploy/ folder (default: this checkout's)")
    parser.add_argument("--chart", type=Path, default=CHART, help="the chart folder (default: deploy/helm/fedplace)")
    args = parser.parse_args(argv)
    want = wanted(args.deploy)
    if args.check:
        stale = differences(want, present(args.chart))
        for line in stale:
            print(line, file=sys.stderr)
        if stale:
            print("run: python3 deploy/scripts/sync-helm-files.py", file=sys.stderr)
        return 1 if stale else 0
    write(args.chart, want)
    return 0


if __name__ == "__main__":
    sys.exit(main())
