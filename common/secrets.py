"""What fedplace lets OPA see of a Secret: its metadata and type, never its content.

Placement decides from where an object may run, never from what a Secret
holds, so a core/v1 Secret's values reach OPA through no path: opa-kube-sync
replicates Secrets without them (``sync.replicate.strip``), the admission
webhook and ``fedplace explain`` send them without them as the decision input.
A policy therefore cannot decide on Secret values (docs/policies.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTENT_FIELDS", "LAST_APPLIED", "without_secret_content"]

CONTENT_FIELDS = ("data", "stringData")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # kubectl's copy of the applied object


def without_secret_content(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` itself unless it is a core/v1 Secret carrying content; then a shallow copy
    without ``data``, ``stringData`` and kubectl's last-applied annotation (which copies
    them). Pure; never changes ``obj``."""
    if obj.get("kind") != "Secret" or obj.get("apiVersion", "v1") != "v1":
        return obj
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    copied = isinstance(annotations, dict) and LAST_APPLIED in annotations
    if not copied and not any(key in obj for key in CONTENT_FIELDS):
        return obj
    out = {k: v for k, v in obj.items() if k not in CONTENT_FIELDS}
    if copied:
        out["metadata"] = {**meta, "annotations": {k: v for k, v in annotations.items() if k != LAST_APPLIED}}
    return out
