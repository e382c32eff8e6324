"""What kube-apiserver 1.24's ``ValidatePodUpdate`` lets an update change in a Pod's spec.

An update may change only ``containers[*].image``, ``initContainers[*].image``,
``activeDeadlineSeconds``, ``terminationGracePeriodSeconds`` (to 1 when it was
negative) and ``tolerations`` — by adding tolerations or changing an existing one's
``tolerationSeconds``. Everything else in the spec is immutable. This is the 1.24
rule: the 1.27+ relaxations for Pods with ``schedulingGates`` (node selector and
affinity set while gated) are not modelled, and neither is the diff the real
message appends to the ``spec`` error (clients should not parse it).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["SPEC_FORBIDDEN", "TOLERATIONS_FORBIDDEN", "pod_update_causes"]

SPEC_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
    "existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
    "previously negative)"
)
TOLERATIONS_FORBIDDEN = "Forbidden: existing toleration can not be modified except its tolerationSeconds"


def _tolerations_kept(old: list[Any], new: list[Any]) -> bool:
    """Every old toleration is still there, its ``tolerationSeconds`` aside."""
    def bare(t: Any) -> Any:
        return {k: v for k, v in t.items() if k != "tolerationSeconds"} if isinstance(t, dict) else t
    remaining = [bare(t) for t in new]
    return all(bare(t) in remaining for t in old)


def _semantic(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with empty lists and objects dropped (Semantic.DeepEqual: empty is nil)."""
    return {k: v for k, v in spec.items() if v not in ([], {}, None)}


def pod_update_causes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """The (field, message) causes refusing ``new`` as an update of the Pod ``old`` (``[]``: allowed)."""
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    new_spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    causes: list[tuple[str, str]] = []
    old_tol = old_spec.get("tolerations") or []
    if not _tolerations_kept(old_tol, new_spec.get("tolerations") or []):
        causes.append(("spec.tolerations", TOLERATIONS_FORBIDDEN))
    munged = copy.deepcopy(new_spec)
    for key in ("containers", "initContainers"):
        for mine, theirs in zip(munged.get(key) or [], old_spec.get(key) or [], strict=False):  # counts may differ
            if isinstance(mine, dict) and isinstance(theirs, dict):
                if "image" in theirs:
                    mine["image"] = theirs["image"]
                else:
                    mine.pop("image", None)
    for key in ("activeDeadlineSeconds", "tolerations"):
        if key in old_spec:
            munged[key] = old_spec[key]
        else:
            munged.pop(key, None)
    grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = grace
    if _semantic(munged) != _semantic(old_spec):
        causes.append(("spec", SPEC_FORBIDDEN))
    return causes
