"""Whether placement policies exist — from a ConfigMap informer, never a List per request.

Policies exist ⇔ the policy namespace holds at least one ConfigMap (bar
``kube-root-ca.crt``, see :mod:`fedplace.common.policy_configmaps`). Until the
informer's first list has completed, we do not know, and act as if they exist
(fail closed is the safe default).
"""

from __future__ import annotations

from kubernetes_asyncio import client

from fedplace.common.informer import Informer, InformerSettings
from fedplace.common.policy_configmaps import CONFIGMAPS, policy_informer_settings

__all__ = ["PolicyPresence"]


class PolicyPresence:
    """Wraps the ConfigMap informer of the policy namespace. Run :meth:`run` as a task."""

    def __init__(self, api: client.ApiClient, namespace: str, settings: InformerSettings | None = None) -> None:
        self.namespace = namespace
        self.informer = Informer(api, CONFIGMAPS, namespace=namespace, settings=policy_informer_settings(settings))

    async def run(self) -> None:
        await self.informer.run()

    @property
    def synced(self) -> bool:
        return self.informer.synced.is_set()

    def policies_exist(self) -> bool:
        """True when ≥ 1 ConfigMap is in the namespace, or when not yet synced."""
        return not self.synced or len(self.informer.objects) > 0

    def count(self) -> int:
        return len(self.informer.objects)

    def names(self) -> list[str]:
        """The policy ConfigMaps' names (cache keys are ``namespace/name``)."""
        return [key.rpartition("/")[2] for key in self.informer.objects]
