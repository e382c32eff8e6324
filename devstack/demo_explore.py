"""What ``make demo``'s ``--keep-running`` prints: every URL, credential and command line a user
needs to explore the running demo (kubectl, curl, ``fedplace``), for each control plane.

:func:`control_plane` reads one control plane's servers from the demo's processes (named
``<prefix>engine``, ``<prefix>kube`` or ``<prefix>apiserver``, ``<prefix>opa-kube-sync``,
``<prefix>admission``) and its files from its folder; :func:`explore_lines` renders them.
Command lines are prefixed ``$ `` and work as printed from the directory the demo ran in
(paths inside it are shown relative to it, others absolute).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from devstack.launch import ServerProcess

__all__ = ["ControlPlane", "control_plane", "explore_lines", "fedplace_command", "shown"]

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ControlPlane:
    """One running control plane of the demo: its servers' URLs and the files clients need."""

    title: str
    kubeconfig: Path
    api_server: str
    opa_url: str
    opa_token_file: Path
    sync_url: str
    webhook_url: str
    ca_file: Path
    explain: tuple[str, ...]  # a TYPE/NAME and its namespace worth explaining, e.g. ("rs/payments", "shop")


def control_plane(title: str, procs: Sequence[ServerProcess], folder: Path, ca_file: Path, explain: tuple[str, ...],
                  prefix: str = "") -> ControlPlane | None:
    """The control plane whose processes are named with ``prefix``; None when it never started."""
    by_name = {p.name: p for p in procs}
    engine = by_name.get(prefix + "engine")
    kube = by_name.get(prefix + "kube") or by_name.get(prefix + "apiserver")
    sync = by_name.get(prefix + "opa-kube-sync")
    admission = by_name.get(prefix + "admission")
    if engine is None or kube is None or sync is None or admission is None:
        return None
    return ControlPlane(title, folder / "kubeconfig", kube.url, engine.url, folder / "opa.token", sync.url,
                        admission.url + "/mutate", ca_file, explain)


def shown(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when inside it, else absolute; quoted for a shell."""
    path = path.absolute()
    try:
        text = str(path.relative_to(cwd.absolute()))
    except ValueError:
        text = str(path)
    return shlex.quote(text)


def fedplace_command(cwd: Path) -> str:
    """How to run ``fedplace`` from ``cwd``: the script installed beside this Python, else the module."""
    script = Path(sys.executable).parent / "fedplace"
    if script.is_file() and os.access(script, os.X_OK):
        return shown(script, cwd)
    return f"{shlex.quote(sys.executable)} -m fedplace.insight.cli"


def explore_lines(planes: Sequence[ControlPlane], cwd: Path, policy_file: Path | None = None) -> list[str]:
    """The text ``--keep-running`` prints, one line per item; the first plane is the main one.
    ``policy_file`` is the shipped Rego file the what-if example proposes (a copy a user edits)."""
    fedplace = fedplace_command(cwd)
    policy_file = policy_file or ROOT / "policies" / "rules-eu-pci" / "eu_pci.rego"
    out = ["", "Everything is still running: Ctrl-C (or SIGTERM) stops every server.",
           f"Commands for another shell (from {cwd.absolute()}):"]
    for i, plane in enumerate(planes):
        opa = f"--opa-url {plane.opa_url} --opa-token-file {shown(plane.opa_token_file, cwd)}"
        kubeconfig = shlex.quote(str(plane.kubeconfig.absolute()))
        kind, namespace = plane.explain
        out += [
            "",
            f"{plane.title}",
            f"  API server          {plane.api_server}  (TLS; its CA and bearer token are in the kubeconfig)",
            f"  $ export KUBECONFIG={kubeconfig}",
            "  $ kubectl get clusters",
            "  $ kubectl get namespaces",
            f"  OPA (policy engine) {plane.opa_url}  bearer token in {shown(plane.opa_token_file, cwd)}",
            f'  $ curl -s -H "Authorization: Bearer $(cat {shown(plane.opa_token_file, cwd)})" '
            f"{plane.opa_url}/v1/data/kubernetes/clusters",
            f"  admission webhook   {plane.webhook_url}  (CA {shown(plane.ca_file, cwd)})",
            f"  opa-kube-sync       {plane.sync_url}  health {plane.sync_url}/healthz, readiness {plane.sync_url}/readyz, "
            f"metrics {plane.sync_url}/metrics" + (f", placement page {plane.sync_url}/placement" if i == 0 else ""),
            f"  $ {fedplace} explain {kind} -n {namespace} --kubeconfig {kubeconfig} {opa}",
        ]
        if i == 0:
            out += [
                f"  $ {fedplace} what-if --policy {shown(policy_file, cwd)} {opa}",
                f"    (what-if: edit a copy of {shown(policy_file, cwd)} and give it to --policy: it replaces the "
                "loaded module of that file name)",
                f"  $ {fedplace} report -o text --sync-url {plane.sync_url}",
            ]
    return out
