"""The Detector stand-in against an API server: policies turned into bindings, the detector-style
overwrite of spec.placement, ClusterPropagationPolicies and cluster-scoped templates, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio import client

from devstack.karmada import CLUSTER_PROPAGATION_POLICIES, CLUSTER_RESOURCE_BINDINGS, PROPAGATION_POLICIES
from devstack.karmada.standins import CPP_NAME, DEPLOYMENTS, PP_NAME, PP_NAMESPACE, Detector, TemplateKind
from devstack.scratch import unique_name
from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from tests.fixtures.kube import ScratchNamespaces
from tests.kube.helpers import WebhookTLS, mwc_body, register_webhook, webhook_server

from .helpers import DEPLOYMENTS_PATH, ClusterScoped, deployment, get_binding, policy, wait_for

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
CLUSTER_ROLES = TemplateKind(Resource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False), "ClusterRole")

P1 = {"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "prod"}}, "exclude": ["m1"]},
      "replicaScheduling": {"replicaSchedulingType": "Divided"}}
P2 = {"clusterAffinities": [{"affinityName": "primary", "clusterNames": ["m2"]},
                            {"affinityName": "backup", "clusterNames": ["m3"]}]}


async def create_deployment(api: client.ApiClient, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    return await kube_json(api, "POST", DEPLOYMENTS_PATH.format(ns=ns), body=body)


async def missing(api: client.ApiClient, ns: str, name: str) -> bool:
    try:
        await get_binding(api, ns, name)
    except KubeApiError as exc:
        return exc.status == 404
    return False


async def test_detector_creates_a_binding_per_selected_template(karmada_api: client.ApiClient,
                                                                kube_namespace: str) -> None:
    ns, api = kube_namespace, karmada_api
    web = await create_deployment(api, ns, deployment("web", replicas=3, labels={"tier": "front"}))
    await create_deployment(api, ns, deployment("other", replicas=1, labels={"tier": "back"}))
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
        "front", [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"tier": "front"}}}],
        placement=P1))
    detector = Detector(api, [DEPLOYMENTS], namespaces=[ns])

    report = await detector.reconcile_once()
    assert report.created == [f"{ns}/web-deployment"] and not report.updated and not report.refused
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["resource"] == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "web",
                                      "uid": web["metadata"]["uid"],
                                      "resourceVersion": web["metadata"]["resourceVersion"]}
    assert rb["spec"]["replicas"] == 3
    assert rb["spec"]["placement"] == P1
    assert "clusters" not in rb["spec"]
    assert rb["metadata"]["annotations"] == {PP_NAME: "front", PP_NAMESPACE: ns}
    assert rb["metadata"]["ownerReferences"][0]["uid"] == web["metadata"]["uid"]
    assert await missing(api, ns, "other-deployment")

    # nothing changed: nothing written
    report = await detector.reconcile_once()
    assert report.unchanged == [f"{ns}/web-deployment"] and not report.created and not report.updated
    assert (await get_binding(api, ns, "web-deployment"))["metadata"]["resourceVersion"] == rb["metadata"]["resourceVersion"]

    # the template scaled: spec.replicas and spec.resource.resourceVersion follow
    scaled = await kube_json(api, "PATCH", DEPLOYMENTS_PATH.format(ns=ns) + "/web", body={"spec": {"replicas": 5}},
                             content_type=MERGE)
    assert (await detector.reconcile_once()).updated == [f"{ns}/web-deployment"]
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["replicas"] == 5
    assert rb["spec"]["resource"]["resourceVersion"] == scaled["metadata"]["resourceVersion"]


async def test_detector_overwrites_placement_and_keeps_other_annotations(karmada_api: client.ApiClient,
                                                                         kube_namespace: str) -> None:
    ns, api = kube_namespace, karmada_api
    await create_deployment(api, ns, deployment("web"))
    pp_path = PROPAGATION_POLICIES.object_path("web", ns)
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
        "web", [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}], placement=P1))
    detector = Detector(api, [DEPLOYMENTS], namespaces=[ns])
    await detector.reconcile_once()
    rb_path = f"/apis/work.karmada.io/v1alpha2/namespaces/{ns}/resourcebindings/web-deployment"
    # someone else's annotation, the scheduler's result, and an exclusion patched in (as an admission would)
    await kube_json(api, "PATCH", rb_path, content_type=MERGE, body={
        "metadata": {"annotations": {"example.com/note": "kept"}},
        "spec": {"clusters": [{"name": "m2", "replicas": 2}]}})
    await kube_json(api, "PATCH", rb_path, content_type=JSON_PATCH, body=[
        {"op": "add", "path": "/spec/placement/clusterAffinity/exclude", "value": ["m1", "m4"]}])

    # the policy is unchanged, yet the binding's placement differs from it: overwritten
    assert (await detector.reconcile_once()).updated == [f"{ns}/web-deployment"]
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["placement"] == P1

    # the policy's placement changes shape: the binding's is replaced whole, nothing of P1 left
    await kube_json(api, "PATCH", pp_path, content_type=JSON_PATCH,
                    body=[{"op": "replace", "path": "/spec/placement", "value": P2}])
    assert (await detector.reconcile_once()).updated == [f"{ns}/web-deployment"]
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["placement"] == P2
    assert rb["metadata"]["annotations"] == {"example.com/note": "kept", PP_NAME: "web", PP_NAMESPACE: ns}
    assert rb["spec"]["clusters"] == [{"name": "m2", "replicas": 2}]

    # a policy without placement: the binding's is empty (Karmada's detector writes {}; only the
    # dependencies distributor's bindings have none)
    await kube_json(api, "PATCH", pp_path, content_type=MERGE, body={"spec": {"placement": None}})
    await detector.reconcile_once()
    assert (await get_binding(api, ns, "web-deployment"))["spec"]["placement"] == {}


async def test_cluster_propagation_policy_and_precedence(karmada_api: client.ApiClient, kube_namespace: str,
                                                         cluster_scoped: ClusterScoped) -> None:
    ns, api = kube_namespace, karmada_api
    await create_deployment(api, ns, deployment("web"))
    cpp_name = unique_name("cpp")
    await cluster_scoped.create(CLUSTER_PROPAGATION_POLICIES, policy(
        cpp_name, [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "web"}],
        placement=P2, kind="ClusterPropagationPolicy", priority=100))
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
        "all", [{"apiVersion": "apps/v1", "kind": "Deployment"}], placement=P1))
    detector = Detector(api, [DEPLOYMENTS], namespaces=[ns])

    await detector.reconcile_once()  # a PropagationPolicy beats a ClusterPropagationPolicy of any priority
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["placement"] == P1
    assert rb["metadata"]["annotations"] == {PP_NAME: "all", PP_NAMESPACE: ns}

    await kube_json(api, "DELETE", PROPAGATION_POLICIES.object_path("all", ns))
    assert (await detector.reconcile_once()).updated == [f"{ns}/web-deployment"]
    rb = await get_binding(api, ns, "web-deployment")
    assert rb["spec"]["placement"] == P2
    assert rb["metadata"]["annotations"] == {CPP_NAME: cpp_name}  # the PropagationPolicy's annotations gone


async def test_cluster_scoped_template_gets_a_cluster_resource_binding(karmada_api: client.ApiClient,
                                                                       cluster_scoped: ClusterScoped) -> None:
    api = karmada_api
    role_name = f"fedplace-test:{unique_name('role')}"
    role = await kube_json(api, "POST", CLUSTER_ROLES.resource.collection_path(), body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role_name},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
    cluster_scoped.delete_later(CLUSTER_ROLES.resource, role_name)
    cpp_name = unique_name("cpp")
    await cluster_scoped.create(CLUSTER_PROPAGATION_POLICIES, policy(
        cpp_name, [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": role_name}],
        placement=P1, kind="ClusterPropagationPolicy"))
    crb_name = role_name.replace(":", ".") + "-clusterrole"
    cluster_scoped.delete_later(CLUSTER_RESOURCE_BINDINGS, crb_name)

    report = await Detector(api, [CLUSTER_ROLES], namespaces=[]).reconcile_once()
    assert crb_name in report.created
    crb = await kube_json(api, "GET", CLUSTER_RESOURCE_BINDINGS.object_path(crb_name))
    assert crb["kind"] == "ClusterResourceBinding"
    assert crb["spec"]["resource"] == {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                       "name": role_name, "uid": role["metadata"]["uid"],
                                       "resourceVersion": role["metadata"]["resourceVersion"]}
    assert "replicas" not in crb["spec"] and crb["spec"]["placement"] == P1
    assert crb["metadata"]["annotations"] == {CPP_NAME: cpp_name}


async def test_refused_binding_is_logged_and_the_pass_goes_on(karmada_api: client.ApiClient,
                                                              kube_namespaces: ScratchNamespaces) -> None:
    api = karmada_api
    marker = unique_name("deny")
    ns = await kube_namespaces.create("fp-karmada", labels={"fedplace.io/test": marker})

    async def respond(review: dict[str, Any]) -> dict[str, Any]:
        req = review["request"]
        if req["kind"]["kind"] == "ResourceBinding" and req["name"].startswith("denied-"):
            return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "placement refused"}}
        return {"allowed": True}

    tls = WebhookTLS()
    async with webhook_server(tls, respond) as hook:
        rules = [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["CREATE"]},
                 {"apiGroups": ["work.karmada.io"], "apiVersions": ["v1alpha2"], "resources": ["resourcebindings"],
                  "operations": ["CREATE", "UPDATE"]}]
        await register_webhook(api, mwc_body(unique_name("karmada-deny"), "deny.karmada.fedplace.io",
                                             {"url": hook.url, "caBundle": tls.ca_bundle}, rules=rules,
                                             namespace_selector={"matchLabels": {"fedplace.io/test": marker}}),
                               hook, ns)
        for name in ("allowed", "denied"):
            await create_deployment(api, ns, deployment(name))
        await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
            "all", [{"apiVersion": "apps/v1", "kind": "Deployment"}], placement=P1))

        report = await Detector(api, [DEPLOYMENTS], namespaces=[ns]).reconcile_once()
    assert report.created == [f"{ns}/allowed-deployment"]
    assert list(report.refused) == [f"{ns}/denied-deployment"]
    refusal = report.refused[f"{ns}/denied-deployment"]
    assert refusal.status == 403 and "placement refused" in refusal.message
    assert await missing(api, ns, "denied-deployment")
    assert (await get_binding(api, ns, "allowed-deployment"))["spec"]["placement"] == P1


async def test_run_keeps_reconciling(karmada_api: client.ApiClient, kube_namespace: str) -> None:
    ns, api = kube_namespace, karmada_api
    task = asyncio.create_task(Detector(api, [DEPLOYMENTS], namespaces=[ns]).run(interval=0.05))
    try:
        await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=policy(
            "all", [{"apiVersion": "apps/v1", "kind": "Deployment"}], placement=P1))
        await create_deployment(api, ns, deployment("late"))

        async def bound() -> dict[str, Any] | None:
            return None if await missing(api, ns, "late-deployment") else await get_binding(api, ns, "late-deployment")

        rb = await wait_for(bound, "the binding of a Deployment created while the detector runs")
        assert rb["spec"]["placement"] == P1
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
