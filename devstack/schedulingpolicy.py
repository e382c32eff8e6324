"""The SchedulingPolicy pack as shipped, for the demo, the benchmark and the tests
(one copy, as devstack/federation.py is for the Cluster CRD).

* :func:`pack_sources` — the pack's modules as its ConfigMap carries them
  (``{key: source}``, tests left out, as deploy/scripts/sync-policy-configmap.py does);
* :func:`modules` — what OPA holds for the pack in a deployment, by module id:
  opa-kube-sync's replicated-root module (default root), the lib's podspec, the pack;
* :func:`component` — the documents of a file of deploy/components/schedulingpolicy;
  :data:`CRDS` and :data:`SYNC_FLAGS` (what the component adds to opa-kube-sync) from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["COMPONENT", "CRDS", "SYNC_FLAGS", "component", "modules", "pack_sources"]

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "policies" / "schedulingpolicy"
COMPONENT = ROOT / "deploy" / "components" / "schedulingpolicy"


def pack_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(PACK.glob("*.rego")) if not p.name.endswith("_test.rego")}


def modules() -> dict[str, str]:
    out = {f"policies/lib/{name}": (ROOT / "policies/lib" / name).read_text()
           for name in ("generated/replicated_root.rego", "podspec.rego")}
    out.update({f"policies/schedulingpolicy/{key}": src for key, src in pack_sources().items()})
    return out


def component(name: str) -> list[Any]:
    return [d for d in yaml.safe_load_all((COMPONENT / name).read_text()) if d]


CRDS = component("crd.yaml")

# What the component adds to opa-kube-sync's arguments (sync-replicate.yaml, a JSON patch).
SYNC_FLAGS = [op["value"] for op in component("sync-replicate.yaml")[0] if op["op"] == "add"]
