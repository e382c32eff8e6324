"""Which ConfigMaps in a policy namespace hold policy.

Every ConfigMap there is policy (docs/sync.md, "Policies") except
``kube-root-ca.crt``, which Kubernetes ≥ 1.21 publishes into every namespace:
counting it would make the webhook believe policies exist on every real
control plane (it would never fail open), and loading its ``ca.crt`` key as
Rego would fail forever. Both the admission webhook's policy informer and the
sync's policy loader list and watch through :func:`policy_informer_settings`,
so the API server filters it out.
"""

from __future__ import annotations

from dataclasses import replace

from fedplace.common.informer import InformerSettings
from fedplace.common.kube_client import Resource

__all__ = ["CONFIGMAPS", "NOT_POLICY", "policy_informer_settings"]

CONFIGMAPS = Resource("", "v1", "configmaps", True)
NOT_POLICY = ("kube-root-ca.crt",)


def policy_informer_settings(base: InformerSettings | None = None) -> InformerSettings:
    """Informer settings whose field selector leaves out ConfigMaps that are not policy."""
    selector = ",".join(f"metadata.name!={name}" for name in NOT_POLICY)
    return replace(base or InformerSettings(), field_selector=selector)
