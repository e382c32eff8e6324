"""Write a kubeconfig pointing at the devstack server (usable with KUBECONFIG=…)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml


def kubeconfig(server: str, token: str | None, name: str = "fedplace-devstack") -> dict:
    user: dict = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], server: str, token: str | None) -> Path:
    """Write atomically with mode 0600 (it may hold a token)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(kubeconfig(server, token), fh, sort_keys=False)
    os.replace(tmp, target)
    return target
