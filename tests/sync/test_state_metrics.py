"""opa-kube-sync's gauges of the current state, beside its counters.

* ``fedplace_sync_policy_modules{policy_namespace, configmap, status}``: the
  modules of each policy ConfigMap loaded (ok) and failing now (error), as its
  ``fedplace.io/policy-status`` annotation says; back to 0 failing once fixed,
  gone with the ConfigMap (so an alert on it clears, unlike one on the counter);
* ``fedplace_sync_last_sync_timestamp_seconds{resource}``: now while OPA holds
  everything, frozen at the moment something started waiting to be written
  while OPA refuses the writes, now again once they land;
* ``fedplace_sync_objects`` and the per-resource counters exist from the start.

In process against OPA and the API server (devstack or real), the OPA faults
through the fault-injecting proxy (tests/fixtures/proxy.py).
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import aiohttp
from prometheus_client import REGISTRY

from fedplace.common.kube_client import kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.metrics import metric
from tests.sync.test_policy_hardening import Policies, eventually, policies, start_sync  # noqa: F401 - fixtures
from tests.sync.test_sync import RS  # noqa: F401 - a fixture
from tests.sync.test_sync import start_sync as sync_starter  # noqa: F401 - a fixture start_sync uses

LAST_SYNC = "fedplace_sync_last_sync_timestamp_seconds"
MODULES = "fedplace_sync_policy_modules"
REPLICASETS = "apps/v1/replicasets"


async def _true(value: bool) -> bool:
    return value


def modules(ns: str, name: str, status: str) -> float | None:
    return REGISTRY.get_sample_value(MODULES, {"policy_namespace": ns, "configmap": name, "status": status})


async def scraped(port: int | None) -> str:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
            return await r.text()


async def test_policy_modules_gauge_follows_the_configmap(policies: Policies, start_sync):  # noqa: F811 - fixtures
    svc = await start_sync()
    ns = policies.ns
    await policies.put("mixed", {"good.rego": "package fp_metrics.good\n\nx := 1\n",
                                 "bad.rego": "package fp_metrics.bad\n\nallow if {\n"})
    await eventually(lambda: policies.status_is("mixed", "error"), what="the load error")
    assert (modules(ns, "mixed", "ok"), modules(ns, "mixed", "error")) == (1, 1)
    text = await scraped(svc.port)
    assert f'{MODULES}{{configmap="mixed",policy_namespace="{ns}",status="error"}} 1.0' in text

    # binaryData keys are never loaded: they count as failing, as the annotation lists them
    await policies.put("binary", {"a.rego": "package fp_metrics.a\n\ny := 2\n"},
                       binary={"b.rego": base64.b64encode(b"package fp_metrics.b").decode()})
    await eventually(lambda: policies.status_is("binary", "error"), what="binaryData reported")
    assert (modules(ns, "binary", "ok"), modules(ns, "binary", "error")) == (1, 1)

    # fixed: nothing failing any more, while the counter of failed attempts never goes down
    errors = metric("fedplace_sync_policy_load_errors_total")
    await policies.put("mixed", {"good.rego": "package fp_metrics.good\n\nx := 1\n",
                                 "bad.rego": "package fp_metrics.bad\n\nallow := true\n"})
    await eventually(lambda: policies.status_is("mixed", "ok"), what="the fix")
    assert (modules(ns, "mixed", "ok"), modules(ns, "mixed", "error")) == (2, 0)
    assert metric("fedplace_sync_policy_load_errors_total") >= errors > 0

    # deleted: its series go
    await kube_json(policies.api, "DELETE", policies.path("mixed"))

    async def gone() -> bool:
        return modules(ns, "mixed", "ok") is None and modules(ns, "mixed", "error") is None

    await eventually(gone, what="the deleted ConfigMap's series to go")
    assert modules(ns, "binary", "error") == 1


async def test_last_sync_gauge_holds_while_writes_wait(kube_api: Any, kube_namespaces: ScratchNamespaces, opa: Any,
                                                       opa_proxy: Any, sync_starter):  # noqa: F811 - the fixture
    ns = await kube_namespaces.create("lastsync")
    await sync_starter(opa=opa_proxy)
    assert abs(metric(LAST_SYNC, resource=REPLICASETS) - time.time()) < 1  # in sync: now
    # the counters of the resource exist before anything happened (at 0 until then)
    assert REGISTRY.get_sample_value("fedplace_sync_events_applied_total",
                                     {"resource": REPLICASETS, "type": "DELETED"}) is not None
    assert REGISTRY.get_sample_value("fedplace_sync_write_errors_total", {"resource": REPLICASETS}) is not None

    # OPA refuses every write of ReplicaSets: a new one waits
    await opa_proxy.set_faults({"fail": {"path": "/v1/data/kubernetes/replicasets", "status": 503, "count": -1}})
    sent = time.time()
    await kube_json(kube_api, "POST", RS.collection_path(ns), body={
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "late", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "late"}},
                 "template": {"metadata": {"labels": {"app": "late"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    await eventually(lambda: _true(metric(LAST_SYNC, resource=REPLICASETS) < time.time() - 0.5), 5,
                     "the gauge to stop following the clock")
    stuck = metric(LAST_SYNC, resource=REPLICASETS)
    assert sent - 0.5 <= stuck <= sent + 2  # when the event arrived
    await asyncio.sleep(0.3)
    assert metric(LAST_SYNC, resource=REPLICASETS) == stuck

    # OPA takes writes again: in sync, the gauge follows the clock again
    await opa_proxy.clear_faults()
    await eventually(lambda: _true(abs(metric(LAST_SYNC, resource=REPLICASETS) - time.time()) < 0.5), 10,
                     "the gauge to follow the clock again")
    _, body = await opa.request("GET", f"/v1/data/kubernetes/replicasets/{ns}/late")
    assert body["result"]["metadata"]["name"] == "late"
