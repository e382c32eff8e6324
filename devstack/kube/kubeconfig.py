"""Write a kubeconfig pointing at the devstack server (usable with KUBECONFIG=…)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

__all__ = ["kubeconfig", "write_kubeconfig"]


def kubeconfig(server: str, token: str | None, name: str = "fedplace-devstack", ca_pem: bytes | None = None) -> dict:
    """A one-context kubeconfig for ``server``: the bearer ``token`` (if any) as its user and, for
    an https server, ``ca_pem`` (the CA that signed its certificate) as certificate-authority-data."""
    user: dict = {"token": token} if token else {}
    cluster: dict = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], server: str, token: str | None,
                     ca_pem: bytes | None = None) -> Path:
    """Write atomically with mode 0600 (it may hold a token)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(kubeconfig(server, token, ca_pem=ca_pem), fh, sort_keys=False)
    os.replace(tmp, target)
    return target
