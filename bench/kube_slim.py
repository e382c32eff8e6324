"""A/B of opa-kube-sync's slim kubernetes_asyncio (common/kube_slim.py) against the library's import.

Usage: .venv/bin/python bench/kube_slim.py [--runs 5]

Each run starts a fresh interpreter that imports what ``opa-kube-sync`` imports
(``fedplace.sync.app``), once after ``kube_slim.install()`` (what
``sync/__main__.py`` does) and once without it (``import kubernetes_asyncio``,
the library's way), alternating; it prints the median import time and peak
RSS of each, and the ratio. No server is involved: the saving is the
process's own (the generated API and model classes never loaded).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, resource, sys, time
started = time.perf_counter()
if sys.argv[1] == "slim":
    from fedplace.common import kube_slim
    kube_slim.install()
import fedplace.sync.app  # noqa: F401
print(json.dumps({"ms": (time.perf_counter() - started) * 1000,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def probe(mode: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         cwd="/")
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="interpreters per mode (default 5)")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"slim": [], "library": []}
    for i in range(args.runs):
        for mode in (("slim", "library") if i % 2 == 0 else ("library", "slim")):
            results[mode].append(probe(mode))
    med = {mode: {k: statistics.median(r[k] for r in rs) for k in ("ms", "rss_mb")} for mode, rs in results.items()}
    print(f"### opa-kube-sync's imports: kube_slim vs the library's import ({args.runs} interpreters each)\n")
    print("| import | time (ms, median) | peak RSS (MB, median) |")
    print("|---|---:|---:|")
    for mode, label in (("slim", "kube_slim.install(), then fedplace.sync.app"), ("library", "fedplace.sync.app")):
        print(f"| {label} | {med[mode]['ms']:.0f} | {med[mode]['rss_mb']:.1f} |")
    saved = med["library"]["rss_mb"] - med["slim"]["rss_mb"]
    print(f"\n- kube_slim saves {saved:.1f} MB ({saved / med['library']['rss_mb']:.0%} of the library import's "
          f"RSS) and {med['library']['ms'] - med['slim']['ms']:.0f} ms of start-up")


if __name__ == "__main__":
    main()
