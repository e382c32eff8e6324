"""End to end (items 1, 4, 7): the API server dispatches to the webhook, opa-kube-sync
replicates LimitRanges and loads the pack's ConfigMap, OPA decides.

Everything is the real thing, on the devstack or on real servers
(``FEDPLACE_TEST_*``): the API server (webhook dispatch over TLS),
opa-kube-sync in process with ``--replicate v1/limitranges``, the ConfigMaps
exactly as deploy/ ships them (``fedplace-lib``, ``fedplace-federation``,
then ``fedplace-limitrange``), fedplace-admission in process. The pack is off
until its ConfigMap is added; then ReplicaSets, Deployments, StatefulSets,
DaemonSets, Jobs and CronJobs created through the API server come back with
the defaults, a violation is refused with the pack's message, and a
LimitRange edited in the API server changes the next decision. Pods come
defaulted by Kubernetes' own LimitRanger before the webhook sees them: they
are stored as Kubernetes alone would store them, and the pack denies only
what breaks a LimitRange.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually, policy_loaded, rules, webhook_stack
from tests.packs.limitrange import harness
from tests.packs.limitrange.conftest import pack_configmaps
from tests.packs.limitrange.k8s_limitranger import admit
from tests.packs.limitrange.reference import container, item, lr


async def put_configmap(api: client.ApiClient, namespace: str, name: str, data: dict[str, str]) -> None:
    await kube_json(api, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


@pytest.fixture
async def system(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                 tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """The sync, the TLS webhook registered with the API server, placement policies loaded."""
    policy_ns = await kube_namespaces.create("lr-e2e-policy")
    app_ns = await kube_namespaces.create("lr-e2e-shop")
    configmaps = pack_configmaps()
    async with webhook_stack(
            opa, kube, kube_api, tmp_path, name=f"fedplace-limitrange-{app_ns}", policy_ns=policy_ns,
            sync_flags=["--replicate", "v1/limitranges", "--replicate", "apps/v1/replicasets"],
            webhook_rules=rules(("apps", ["replicasets", "deployments", "statefulsets", "daemonsets"]),
                                ("", ["pods"]), ("batch", ["jobs", "cronjobs"])),
            namespaces=[app_ns]) as stack:
        for cm in ("fedplace-lib", "fedplace-federation"):
            await put_configmap(kube_api, policy_ns, cm, configmaps[cm])
            await eventually(lambda cm=cm: policy_loaded(kube_api, policy_ns, cm), what=f"{cm} to load")
        await eventually(lambda: _true(stack.sync.is_ready()), what="the sync to be ready")
        yield {"api": kube_api, "opa": opa, "policy_ns": policy_ns, "ns": app_ns, "configmaps": configmaps}


async def _true(value: bool) -> bool:
    return value


def replicaset(name: str, ns: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": list(containers)}}}}


async def test_limitranges_enforced_through_the_api_server(system: dict[str, Any]):
    api, ns, opa = system["api"], system["ns"], system["opa"]
    limits = lr("limits", item("Container", max={"memory": "1Gi"}, default={"cpu": "500m", "memory": "256Mi"},
                               defaultRequest={"cpu": "100m"}))
    limits["metadata"]["namespace"] = ns
    await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/limitranges", body=limits)

    async def replicated() -> bool:
        status, body = await opa.request("GET", f"/v1/data/kubernetes/limitranges/{ns}/limits")
        return status == 200 and bool(body.get("result"))

    await eventually(replicated, what="the LimitRange to reach OPA")

    # the pack is off until its ConfigMap is added: admitted as the API server's defaulting leaves it
    # (every container gets `resources: {}`; LimitRanges concern Pods, not templates)
    before = await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets",
                             body=replicaset("before", ns, container("app")))
    assert before["spec"]["template"]["spec"]["containers"][0]["resources"] == {}

    await put_configmap(api, system["policy_ns"], "fedplace-limitrange", system["configmaps"]["fedplace-limitrange"])
    await eventually(lambda: policy_loaded(api, system["policy_ns"], "fedplace-limitrange"), what="the pack to load")

    rs = await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets",
                         body=replicaset("web", ns, container("app")))
    assert rs["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}

    pod = await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [container("app", limits={"cpu": "1"})]}})
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "256Mi"}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"].startswith("LimitRanger plugin set: ")

    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [container("app")]}}
    job_template = {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}  # Jobs refuse Always
    workloads = {
        ("apps", "deployments", "Deployment"): {"selector": {"matchLabels": {"app": "d"}}, "template": template},
        ("apps", "statefulsets", "StatefulSet"): {"serviceName": "d", "selector": {"matchLabels": {"app": "d"}},
                                                  "template": template},
        ("apps", "daemonsets", "DaemonSet"): {"selector": {"matchLabels": {"app": "d"}}, "template": template},
        ("batch", "jobs", "Job"): {"template": job_template},
        ("batch", "cronjobs", "CronJob"): {"schedule": "0 * * * *",
                                           "jobTemplate": {"spec": {"template": job_template}}},
    }
    for (group, plural, kind), spec in workloads.items():
        created = await kube_json(api, "POST", f"/apis/{group}/v1/namespaces/{ns}/{plural}", body={
            "apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "d"}, "spec": spec})
        pod_spec = (created["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else created["spec"])["template"]["spec"]
        assert pod_spec["containers"][0]["resources"] == {
            "limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}, kind

    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets",
                        body=replicaset("big", ns, container("app", limits={"memory": "2Gi"})))
    assert denied.value.status == 403
    assert f'container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" in "{ns}")' in \
        denied.value.message

    # a LimitRange changed in the API server changes the next decision (the API server keeps
    # its default within its max)
    wide = replicaset("web2", ns, container("app", limits={"memory": "512Mi"}))
    admitted = await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets", body=wide)
    assert admitted["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "512Mi"
    limits = await kube_json(api, "GET", f"/api/v1/namespaces/{ns}/limitranges/limits")
    limits["spec"]["limits"][0]["max"]["memory"] = "256Mi"
    await kube_json(api, "PUT", f"/api/v1/namespaces/{ns}/limitranges/limits", body=limits)

    async def tightened() -> bool:
        status, body = await opa.request("GET", f"/v1/data/kubernetes/limitranges/{ns}/limits/spec/limits/0/max")
        return status == 200 and (body.get("result") or {}).get("memory") == "256Mi"

    await eventually(tightened, what="the edited LimitRange to reach OPA")
    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets",
                        body={**wide, "metadata": {**wide["metadata"], "name": "web3"}})
    assert f'container "app": memory limit 512Mi exceeds max 256Mi (LimitRange "limits" in "{ns}")' in \
        denied.value.message


async def test_pods_come_defaulted_by_kubernetes(system: dict[str, Any]):
    """Kubernetes' own LimitRanger defaults a Pod before any webhook sees it, and the API server
    gives every container `resources: {}`: the Pod is stored as Kubernetes alone would store it
    (the pack adds nothing, whatever the Pod said about resources), the pack has nothing to add to
    it, and a Pod breaking a LimitRange is denied with the pack's message."""
    api, ns, opa = system["api"], system["ns"], system["opa"]
    limits = lr("limits", item("Container", max={"memory": "1Gi"}, default={"cpu": "500m", "memory": "256Mi"},
                               defaultRequest={"cpu": "100m"}, maxLimitRequestRatio={"cpu": "10"}),
                item("Pod", max={"cpu": "2"}))
    limits["metadata"]["namespace"] = ns
    await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/limitranges", body=limits)
    await put_configmap(api, system["policy_ns"], "fedplace-limitrange", system["configmaps"]["fedplace-limitrange"])
    await eventually(lambda: policy_loaded(api, system["policy_ns"], "fedplace-limitrange"), what="the pack to load")

    async def replicated() -> bool:
        status, body = await opa.request("GET", f"/v1/data/kubernetes/limitranges/{ns}/limits")
        return status == 200 and bool(body.get("result"))

    await eventually(replicated, what="the LimitRange to reach OPA")
    stored_lr = await kube_json(api, "GET", f"/api/v1/namespaces/{ns}/limitranges/limits")

    for name, written in [("bare", container("app")), ("empty", {**container("app"), "resources": {}}),
                          ("limited", container("app", limits={"cpu": "1"})),
                          ("requested", container("app", requests={"memory": "64Mi"}))]:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
               "spec": {"containers": [written]}}
        expected = admit(pod, [stored_lr])
        assert expected.allowed, name
        created = await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod)
        assert harness.resources_of(created) == harness.resources_of(expected.pod), name
        assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == expected.annotation, name
        # what the webhook was sent (the stored Pod before it had a status): nothing to add
        sent = {k: v for k, v in created.items() if k != "status"}
        status, answer = await opa.query("io/k8s/federation/admission", sent)
        assert status == 200 and not answer["result"].get("errors"), (name, answer)
        assert "limitrange" not in (answer["result"].get("patches") or {}), (name, answer)

    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide"},
            "spec": {"containers": [container("a", limits={"cpu": "1500m"}), container("b", limits={"cpu": "1"})]}})
    assert denied.value.status == 403
    assert f'pod: cpu limit total 2500m exceeds max 2 (LimitRange "limits" in "{ns}")' in denied.value.message
