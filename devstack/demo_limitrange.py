"""The demo's LimitRange steps: the pack switched on by its ConfigMap,
a default injected, a violation explained, and the ``fedplace-limits`` view.

:func:`limitrange_steps` runs after devstack/demo.py's own steps, on the same
processes: opa-kube-sync already replicates ``v1/limitranges`` and the
webhook already receives ReplicaSets. The demo passes in its helpers (``say``,
``step``, ``check``, ``eventually``) so that output and failures look and
count the same as its own steps.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Awaitable, Callable

from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.common.opa_client import OpaSettings
from fedplace.insight import limits

__all__ = ["limitrange_steps"]

ROOT = Path(__file__).resolve().parents[1]
NS = "shop"
POLICY_NS = "kube-federation-scheduling-policy"
STATUS = "fedplace.io/policy-status"

LIMITRANGE = {
    "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": NS},
    "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"},
         "min": {"cpu": "50m"}, "max": {"memory": "1Gi"}},
        {"type": "Pod", "max": {"memory": "2Gi"}},
    ]},
}


def _configmaps() -> dict[str, dict[str, str]]:
    """The pack as deploy/ ships it (the pod-spec library it needs is in
    ConfigMap fedplace-lib, which the demo loads in step 3)."""
    pack = {f.name: f.read_text() for f in sorted((ROOT / "policies" / "limitrange").glob("*.rego"))
            if not f.name.endswith("_test.rego")}
    return {"fedplace-limitrange": pack}


def _replicaset(name: str, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    app = {"name": "app", "image": "nginx:1.27", **({"resources": resources} if resources else {})}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [app]}}}}


async def limitrange_steps(api: client.ApiClient, engine: Any, first: int, *, say: Callable[[str], None],
                           step: Callable[[int, str], None], check: Callable[[bool, str], None],
                           eventually: Callable[..., Awaitable[float]]) -> None:
    """Steps ``first`` … ``first + 2``. ``engine`` is the demo's OPA (``url``, ``token``)."""
    rs_path = f"/apis/apps/v1/namespaces/{NS}/replicasets"

    step(first, "Switch on the LimitRange pack (its ConfigMap) and create a LimitRange in shop")
    for name, data in _configmaps().items():
        await kube_json(api, "POST", f"/api/v1/namespaces/{POLICY_NS}/configmaps", body={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})

    async def loaded() -> bool:
        cm = await kube_json(api, "GET", f"/api/v1/namespaces/{POLICY_NS}/configmaps/fedplace-limitrange")
        status = ((cm.get("metadata") or {}).get("annotations") or {}).get(STATUS)
        return bool(status) and json.loads(status).get("status") == "ok"

    took = await eventually(loaded, 60, "the fedplace-limitrange ConfigMap to load")
    say(f"   fedplace-limitrange loaded ({took:.2f}s)")
    await kube_json(api, "POST", f"/api/v1/namespaces/{NS}/limitranges", body=LIMITRANGE)
    settings = OpaSettings(url=engine.url, token=engine.token, timeout=30.0)  # a busy machine is slow

    async def replicated() -> bool:
        doc = await limits.report(settings, NS, ["replicasets"])
        return doc.get("limitRanges") == ["limits"]

    await eventually(replicated, 30, "the LimitRange to be replicated into OPA")
    say('   LimitRange "limits": Container default cpu 500m / memory 256Mi, defaultRequest cpu 100m, '
        "min cpu 50m, max memory 1Gi; Pod max memory 2Gi")

    step(first + 1, "A ReplicaSet without resources gets the defaults; one above max is denied, explained")
    created = await kube_json(api, "POST", rs_path, body=_replicaset("api"))
    resources = created["spec"]["template"]["spec"]["containers"][0].get("resources")
    say(f"   api: container app resources = {json.dumps(resources, sort_keys=True)}")
    check(resources == {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
          "defaults injected into the pod template (limits from default, requests from defaultRequest / the limit)")
    try:
        await kube_json(api, "POST", rs_path, body=_replicaset("batch", {"limits": {"memory": "2Gi"}}))
        check(False, "batch (memory limit 2Gi) should have been denied")
    except KubeApiError as exc:
        say(f"   {exc.status}: {exc.message}")
        check(exc.status == 403 and 'container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" in "shop")'
              in exc.message, "denied (403), naming the container, resource, value, bound and LimitRange")

    step(first + 2, "fedplace-limits: the effective limits of shop, and the ReplicaSets they affect now")
    out = io.StringIO()
    limits.render(await limits.report(settings, NS, ["replicasets"]), out)
    for line in out.getvalue().rstrip().splitlines():
        say(f"   {line}" if line else "")
    doc = await limits.report(settings, NS, ["replicasets"])
    older = {w["name"] for w in doc["workloads"] if w["defaults"]}
    # The ReplicaSets whose pod template still has no resources: created before the LimitRange
    # and not written since (a remediation patch after it, on a slow machine, is an UPDATE the
    # pack defaults, as it should).
    listed = await kube_json(api, "GET", rs_path)
    bare = {rs["metadata"]["name"] for rs in listed["items"]
            if not any(c.get("resources") for c in rs["spec"]["template"]["spec"]["containers"])}
    check(bool(bare) and bare <= older and {"web-eu", "blog"} <= bare,
          "ReplicaSets created before the LimitRange are shown with the defaults they would get")
