"""What kube-apiserver 1.24 does to an object before storing it: defaulting at decode, the
built-in admission plugins (LimitRanger, ServiceAccount, Priority, DefaultTolerationSeconds),
the registry strategies and the size limits.

Every expectation was measured on a real kube-apiserver 1.24 (what it stores and what a
mutating webhook receives) and these tests run against it as against the devstack
(``FEDPLACE_TEST_KUBECONFIG``), so the two are compared on the same inputs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from typing import Any

import pytest
from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.kube import ScratchNamespaces

from .helpers import WebhookTLS, b64_patch, mwc_body, raw, register_webhook, unique, webhook_server

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOLERATIONS = [
    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
]
MESSAGE_DEFAULTS = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
POD_SPEC_DEFAULTS = {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                     "securityContext": {}, "terminationGracePeriodSeconds": 30}
M = 1024 * 1024


def token_volume(name: str) -> dict[str, Any]:
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}}


def token_mount(name: str) -> dict[str, Any]:
    return {"mountPath": TOKEN_PATH, "name": name, "readOnly": True}


def token_volume_name(pod: dict[str, Any]) -> str:
    [name] = [v["name"] for v in pod["spec"].get("volumes") or [] if v["name"].startswith("kube-api-access-")]
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", name), name
    return name


def pod_body(name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": spec}


async def create(api: client.ApiClient, ns: str, plural: str, body: dict[str, Any], group: str = "") -> dict[str, Any]:
    prefix = f"/apis/{group}/v1" if group else "/api/v1"
    return await kube_json(api, "POST", f"{prefix}/namespaces/{ns}/{plural}", body=body)


async def refused(api: client.ApiClient, ns: str, plural: str, body: dict[str, Any], group: str = "") -> KubeApiError:
    with pytest.raises(KubeApiError) as info:
        await create(api, ns, plural, body, group)
    return info.value


# ---- Pods: decode defaults, then the built-in mutating plugins ------------------------------

async def test_a_pod_is_defaulted_and_admitted_as_kube_apiserver_does(kube_api: client.ApiClient,
                                                                      kube_namespace: str) -> None:
    pod = await create(kube_api, kube_namespace, "pods", pod_body("p1", {"containers": [
        {"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}))
    vol = token_volume_name(pod)
    assert pod["spec"] == {
        "containers": [{"image": "nginx", "imagePullPolicy": "Always", "name": "c",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                        **MESSAGE_DEFAULTS, "volumeMounts": [token_mount(vol)]}],
        **POD_SPEC_DEFAULTS, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
        "serviceAccount": "default", "serviceAccountName": "default", "tolerations": TOLERATIONS,
        "volumes": [token_volume(vol)]}
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert "generation" not in pod["metadata"]


async def test_pod_fields_defaulted_at_decode(kube_api: client.ApiClient, kube_namespace: str) -> None:
    spec = {
        "hostNetwork": True,
        "initContainers": [{"name": "init", "image": "busybox:1.36", "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}}}],
        "containers": [
            {"name": "c", "image": "nginx", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
             "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
             "livenessProbe": {"httpGet": {"port": 8080}}, "readinessProbe": {"tcpSocket": {"port": 80}},
             "startupProbe": {"exec": {"command": ["a"]}},
             "resources": {"limits": {"cpu": "1000m", "memory": "1000M"}, "requests": {"cpu": "0.0001"}},
             "volumeMounts": [{"name": "s", "mountPath": "/s"}]},
            {"name": "d", "image": "nginx:latest", "imagePullPolicy": "IfNotPresent",
             "resources": {"requests": {"memory": "1048576", "cpu": "1.5"}},
             "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/x"}}}},
        ],
        "volumes": [{"name": "s", "secret": {"secretName": "x"}}, {"name": "cm", "configMap": {"name": "x"}},
                    {"name": "e"}, {"name": "h", "hostPath": {"path": "/tmp"}},
                    {"name": "da", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    {"name": "pr", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
        "tolerations": [{"key": "foo", "operator": "Exists"}],
    }
    pod = await create(kube_api, kube_namespace, "pods", pod_body("p2", spec))
    s = pod["spec"]
    probe = {"failureThreshold": 3, "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1}
    c, d = s["containers"]
    assert c["ports"] == [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"},
                          {"containerPort": 53, "hostPort": 53, "protocol": "UDP"}]
    assert c["env"] == [{"name": "X", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}]
    assert c["livenessProbe"] == {**probe, "httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"}}
    assert c["readinessProbe"] == {**probe, "tcpSocket": {"port": 80}}
    assert c["startupProbe"] == {**probe, "exec": {"command": ["a"]}}
    # quantities as Kubernetes prints them; a Pod's limits fill its missing requests
    assert c["resources"] == {"limits": {"cpu": "1", "memory": "1G"}, "requests": {"cpu": "1m", "memory": "1G"}}
    assert d["resources"] == {"requests": {"cpu": "1500m", "memory": "1048576"}}
    assert (c["imagePullPolicy"], d["imagePullPolicy"]) == ("Always", "IfNotPresent")
    assert d["lifecycle"] == {"preStop": {"httpGet": {"path": "/x", "port": 80, "scheme": "HTTP"}}}
    assert s["initContainers"][0]["resources"] == {"limits": {"cpu": "500m", "memory": "1Gi"},
                                                   "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert s["initContainers"][0]["imagePullPolicy"] == "IfNotPresent"
    vol = token_volume_name(pod)
    assert s["volumes"] == [
        {"name": "s", "secret": {"defaultMode": 420, "secretName": "x"}},
        {"configMap": {"defaultMode": 420, "name": "x"}, "name": "cm"},
        {"emptyDir": {}, "name": "e"}, {"hostPath": {"path": "/tmp", "type": ""}, "name": "h"},
        {"downwardAPI": {"defaultMode": 420, "items": [
            {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}, "path": "n"}]}, "name": "da"},
        {"name": "pr", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3600, "path": "t"}}]}},
        token_volume(vol)]
    assert [m["name"] for m in c["volumeMounts"]] == ["s", vol]
    assert s["tolerations"] == [{"key": "foo", "operator": "Exists"}, *TOLERATIONS]  # "foo" tolerates neither taint
    assert pod["status"] == {"phase": "Pending", "qosClass": "Burstable"}


@pytest.mark.parametrize("image,policy", [("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.2", "IfNotPresent"),
                                          ("reg:5000/nginx", "Always"), ("nginx@sha256:" + "0" * 64, "IfNotPresent")])
async def test_image_pull_policy_follows_the_tag(kube_api: client.ApiClient, kube_namespace: str, image: str,
                                                 policy: str) -> None:
    rs = await create(kube_api, kube_namespace, "replicasets", replica_set("r", {"name": "c", "image": image}), "apps")
    assert rs["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy


def replica_set(name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": list(containers)}}}}


# ---- workloads: their spec defaults and their pod templates ------------------------------------

TEMPLATE = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}
SELECTOR = {"matchLabels": {"a": "b"}}


def defaulted_template(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"creationTimestamp": None, "labels": labels},
            "spec": {"containers": [{"image": "nginx:1", "imagePullPolicy": "IfNotPresent", "name": "c",
                                     "resources": {}, **MESSAGE_DEFAULTS}], **POD_SPEC_DEFAULTS, **spec}}


async def test_workloads_get_their_spec_defaults_and_defaulted_pod_templates(kube_api: client.ApiClient,
                                                                            kube_namespace: str) -> None:
    ns = kube_namespace
    dep = await create(kube_api, ns, "deployments", {"metadata": {"name": "d"},
                                                     "spec": {"selector": SELECTOR, "template": TEMPLATE}}, "apps")
    assert dep["spec"] == {"progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
                           "selector": SELECTOR, "template": defaulted_template({"a": "b"}),
                           "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                                        "type": "RollingUpdate"}}
    assert (dep["metadata"]["generation"], dep["status"]) == (1, {})
    rs = await create(kube_api, ns, "replicasets", {"metadata": {"name": "r"},
                                                    "spec": {"selector": SELECTOR, "template": TEMPLATE}}, "apps")
    assert rs["spec"] == {"replicas": 1, "selector": SELECTOR, "template": defaulted_template({"a": "b"})}
    assert rs["status"] == {"replicas": 0} and "labels" not in rs["metadata"]
    sts = await create(kube_api, ns, "statefulsets", {"metadata": {"name": "s"}, "spec": {
        "selector": SELECTOR, "template": TEMPLATE,
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                         "resources": {"requests": {"storage": "1Gi"}}}}]}},
        "apps")
    assert sts["spec"] == {
        "podManagementPolicy": "OrderedReady", "replicas": 1, "revisionHistoryLimit": 10, "selector": SELECTOR,
        "serviceName": "", "template": defaulted_template({"a": "b"}),
        "updateStrategy": {"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"},
        "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "metadata": {"creationTimestamp": None, "name": "data"},
                                  "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                                           "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}]}
    assert sts["status"] == {"availableReplicas": 0, "replicas": 0}
    ds = await create(kube_api, ns, "daemonsets", {"metadata": {"name": "ds"},
                                                   "spec": {"selector": SELECTOR, "template": TEMPLATE}}, "apps")
    assert ds["spec"] == {"revisionHistoryLimit": 10, "selector": SELECTOR, "template": defaulted_template({"a": "b"}),
                          "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                                             "type": "RollingUpdate"}}
    assert ds["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "1"}
    assert ds["status"] == {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                            "numberReady": 0}
    cron = await create(kube_api, ns, "cronjobs", {"metadata": {"name": "cj"}, "spec": {
        "schedule": "* * * * *", "jobTemplate": {"spec": {"template": {
            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "nginx:1"}]}}}}}}, "batch")
    template = defaulted_template({}, restartPolicy="OnFailure")
    del template["metadata"]["labels"]
    assert cron["spec"] == {"concurrencyPolicy": "Allow", "failedJobsHistoryLimit": 1, "schedule": "* * * * *",
                            "successfulJobsHistoryLimit": 3, "suspend": False,
                            "jobTemplate": {"metadata": {"creationTimestamp": None}, "spec": {"template": template}}}


async def test_a_job_gets_its_defaults_and_a_generated_selector(kube_api: client.ApiClient, kube_namespace: str) -> None:
    bare = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "nginx:1"}]}
    job = await create(kube_api, kube_namespace, "jobs", {"metadata": {"name": "j1"}, "spec": {"template": {"spec": bare}}},
                       "batch")
    uid = job["metadata"]["uid"]
    generated = {"controller-uid": uid, "job-name": "j1"}
    assert job["spec"] == {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1, "parallelism": 1,
                           "selector": {"matchLabels": {"controller-uid": uid}}, "suspend": False,
                           "template": defaulted_template(generated, restartPolicy="Never")}
    assert job["metadata"]["labels"] == generated  # a Job's labels default to its template's
    parallel = await create(kube_api, kube_namespace, "jobs", {"metadata": {"name": "j2"}, "spec": {
        "parallelism": 3, "template": {"metadata": {"labels": {"x": "y"}}, "spec": bare}}}, "batch")
    assert "completions" not in parallel["spec"] and parallel["spec"]["parallelism"] == 3
    assert parallel["metadata"]["labels"] == {"x": "y", **{"controller-uid": parallel["metadata"]["uid"],
                                                           "job-name": "j2"}}


async def test_a_daemonset_template_change_bumps_its_template_generation(kube_api: client.ApiClient,
                                                                         kube_namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{kube_namespace}/daemonsets"
    await create(kube_api, kube_namespace, "daemonsets", {"metadata": {"name": "ds"},
                                                          "spec": {"selector": SELECTOR, "template": TEMPLATE}}, "apps")
    same = await kube_json(kube_api, "PATCH", f"{path}/ds", body={"spec": {"revisionHistoryLimit": 5}},
                           content_type="application/merge-patch+json")
    assert same["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"
    changed = await kube_json(kube_api, "PATCH", f"{path}/ds",
                              body={"spec": {"template": {"metadata": {"labels": {"a": "b", "v": "2"}}}}},
                              content_type="application/merge-patch+json")
    assert changed["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"
    assert changed["metadata"]["generation"] == 3


# ---- LimitRanges and the LimitRanger plugin -----------------------------------------------------

LIMITS = {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}, "min": {"cpu": "50m", "memory": "1000Ki"},
          "default": {"cpu": "0.5"}, "maxLimitRequestRatio": {"cpu": "10"}}


async def test_limitranges_are_stored_with_their_defaults(kube_api: client.ApiClient, kube_namespace: str) -> None:
    lr = await create(kube_api, kube_namespace, "limitranges", {"metadata": {"name": "lr"}, "spec": {"limits": [
        LIMITS, {"type": "Pod", "max": {"cpu": "4"}}, {"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}}]}})
    assert lr["spec"]["limits"] == [
        {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}, "min": {"cpu": "50m", "memory": "1000Ki"},
         "maxLimitRequestRatio": {"cpu": "10"},
         "default": {"cpu": "500m", "memory": "1Gi"},  # the max fills a missing default …
         "defaultRequest": {"cpu": "500m", "memory": "1Gi"}},  # … and the default a missing defaultRequest
        {"type": "Pod", "max": {"cpu": "4"}}, {"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}}]
    lr = await create(kube_api, kube_namespace, "limitranges", {"metadata": {"name": "mins"}, "spec": {"limits": [
        {"type": "Container", "min": {"memory": "10Mi"}, "default": {"cpu": "1"}}]}})
    assert lr["spec"]["limits"] == [{"type": "Container", "min": {"memory": "10Mi"}, "default": {"cpu": "1"},
                                     "defaultRequest": {"cpu": "1", "memory": "10Mi"}}]  # then the min
    err = await refused(kube_api, kube_namespace, "limitranges", {"metadata": {"name": "twice"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}}, {"type": "Container", "min": {"cpu": "1m"}}]}})
    assert (err.status, err.message) == (
        422, 'LimitRange "twice" is invalid: spec.limits[1].type: Duplicate value: "Container"')


async def test_limitranger_defaults_a_pod_then_checks_it(kube_api: client.ApiClient, kube_namespace: str) -> None:
    await create(kube_api, kube_namespace, "limitranges", {"metadata": {"name": "lr"}, "spec": {"limits": [LIMITS]}})
    pod = await create(kube_api, kube_namespace, "pods", pod_body("p", {
        "containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "x:1", "resources": {"requests": {"cpu": "100m"}}},
                       {"name": "c", "image": "x:1", "resources": {"limits": {"memory": "512Mi"}}}],
        "initContainers": [{"name": "i", "image": "x:1"}]}))
    assert [c["resources"] for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]] == [
        {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
        {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "1Gi"}},
        {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "500m", "memory": "512Mi"}},
        {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}]
    assert pod["metadata"]["annotations"] == {"kubernetes.io/limit-ranger": (
        "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; "
        "memory request for container b; cpu, memory limit for container b; cpu request for container c; "
        "cpu limit for container c; cpu, memory request for init container i; cpu, memory limit for init container i")}
    assert pod["status"]["qosClass"] == "Burstable"
    err = await refused(kube_api, kube_namespace, "pods", pod_body("low", {"containers": [
        {"name": "a", "image": "x:1", "resources": {"requests": {"cpu": "10m"}}}]}))
    assert (err.status, err.reason) == (403, "Forbidden")
    assert err.message == ('pods "low" is forbidden: [minimum cpu usage per Container is 50m, but request is 10m, '
                           "cpu max limit to request ratio per Container is 10, but provided ratio is 50.000000]")
    err = await refused(kube_api, kube_namespace, "pods", pod_body("big", {"containers": [
        {"name": "a", "image": "x:1", "resources": {"limits": {"cpu": "3"}, "requests": {"cpu": "1"}}}]}))
    assert err.message == 'pods "big" is forbidden: maximum cpu usage per Container is 2, but limit is 3'


async def test_a_request_above_its_limit_is_invalid(kube_api: client.ApiClient, kube_namespace: str) -> None:
    err = await refused(kube_api, kube_namespace, "deployments", {"metadata": {"name": "bad"}, "spec": {
        "selector": SELECTOR, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
            {"name": "c", "image": "x:1", "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                                         "requests": {"cpu": "2", "memory": "2Gi"}}}]}}}}, "apps")
    assert (err.status, err.reason) == (422, "Invalid")
    assert err.message.startswith('Deployment.apps "bad" is invalid: [')
    field = "spec.template.spec.containers[0].resources.requests"
    assert sorted((c["field"], c["message"]) for c in err.body["details"]["causes"]) == [  # in map order
        (field, 'Invalid value: "2": must be less than or equal to cpu limit'),
        (field, 'Invalid value: "2Gi": must be less than or equal to memory limit')]


QUANTITIES = {  # what a client sends -> what kube-apiserver 1.24 stores in a ResourceList
    "0.5": "500m", "1000m": "1", "1000M": "1G", "0.0001": "1m", "1048576": "1048576", "1.5Gi": "1536Mi",
    "1024Mi": "1Gi", "1e3": "1e3", "1000": "1k", "100": "100", "1023Ki": "1023Ki", "0.0": "0", "1e-3": "1e-3",
    "1.5e3": "1500", "5000000000": "5G", "1.1Mi": "1153433600m", "0.1Ki": "102400m", "1000Ki": "1000Ki",
    "+1": "+1", "1n": "1m", "1.0001": "1001m", "8Ei": "9223372036854775807", "2.5G": "2500M", "0.3333": "334m",
    "1500e-3": "1500e-3", "15e-1": "1500e-3", "3.000": "3", "7.77Gi": "8342973972480m", "1.23456789": "1235m",
}


async def test_quantities_are_stored_as_kubernetes_prints_them(kube_api: client.ApiClient, kube_namespace: str) -> None:
    sent = {f"example.com/q{i}": raw_value for i, raw_value in enumerate(QUANTITIES)}
    lr = await create(kube_api, kube_namespace, "limitranges", {"metadata": {"name": "q"}, "spec": {"limits": [
        {"type": "Pod", "max": {**sent, "example.com/int": 2048, "example.com/float": 0.5}}]}})
    stored = lr["spec"]["limits"][0]["max"]
    assert {sent[k]: stored[k] for k in sent} == QUANTITIES
    assert (stored["example.com/int"], stored["example.com/float"]) == ("2048", "500m")
    for bad, why in (("1K", "unable to parse quantity's suffix"), ("abc", "quantities must match the regular expression")):
        err = await refused(kube_api, kube_namespace, "limitranges", {"metadata": {"name": "bad"}, "spec": {
            "limits": [{"type": "Pod", "max": {"cpu": bad}}]}})
        assert err.status == 400
        assert err.message.startswith('LimitRange in version "v1" cannot be handled as a LimitRange: ' + why)


# ---- ServiceAccount, Priority, DefaultTolerationSeconds ------------------------------------------

async def test_a_pod_needs_its_service_account(kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces) -> None:
    ns = kube_namespaces.reserve("nosa")  # created by hand: no default ServiceAccount
    await kube_json(kube_api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    spec = {"containers": [{"name": "c", "image": "x:1"}]}
    err = await refused(kube_api, ns, "pods", pod_body("p", spec))
    assert (err.status, err.reason) == (403, "Forbidden")
    assert err.message == f'pods "p" is forbidden: error looking up service account {ns}/default: serviceaccount "default" not found'
    assert err.body["details"] == {"name": "p", "kind": "pods"}
    err = await refused(kube_api, ns, "pods", {"metadata": {"generateName": "gen-"}, "spec": {**spec, "serviceAccountName": "robot"}})
    assert err.message == f'pods "gen-" is forbidden: error looking up service account {ns}/robot: serviceaccount "robot" not found'
    await kube_json(kube_api, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body={
        "metadata": {"name": "robot"}, "imagePullSecrets": [{"name": "regcred"}], "automountServiceAccountToken": False})
    pod = await create(kube_api, ns, "pods", pod_body("r", {**spec, "serviceAccount": "robot"}))  # the deprecated alias
    assert (pod["spec"]["serviceAccountName"], pod["spec"]["serviceAccount"]) == ("robot", "robot")
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert "volumes" not in pod["spec"] and "volumeMounts" not in pod["spec"]["containers"][0]  # automount off


async def test_the_token_volume_skips_containers_that_mount_the_path(kube_api: client.ApiClient,
                                                                     kube_namespace: str) -> None:
    mounted = {"name": "a", "image": "x:1", "volumeMounts": [{"name": "v", "mountPath": TOKEN_PATH}]}
    pod = await create(kube_api, kube_namespace, "pods", pod_body("p", {
        "containers": [mounted, {"name": "b", "image": "x:1"}], "volumes": [{"name": "v", "emptyDir": {}}]}))
    vol = token_volume_name(pod)
    assert [c.get("volumeMounts") for c in pod["spec"]["containers"]] == [mounted["volumeMounts"], [token_mount(vol)]]
    assert pod["spec"]["volumes"] == [{"emptyDir": {}, "name": "v"}, token_volume(vol)]
    off = await create(kube_api, kube_namespace, "pods", pod_body("off", {
        "automountServiceAccountToken": False, "containers": [{"name": "a", "image": "x:1"}]}))
    assert "volumes" not in off["spec"]


async def test_default_tolerations_unless_tolerated(kube_api: client.ApiClient, kube_namespace: str) -> None:
    async def tolerations(name: str, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        pod = await create(kube_api, kube_namespace, "pods", pod_body(name, {
            "tolerations": given, "containers": [{"name": "a", "image": "x:1"}]}))
        return pod["spec"]["tolerations"]

    assert await tolerations("all", [{"operator": "Exists"}]) == [{"operator": "Exists"}]
    partly = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]
    assert await tolerations("partly", partly) == [
        {"effect": "NoSchedule", "key": "node.kubernetes.io/not-ready", "operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, TOLERATIONS[0]]


async def test_priority_from_the_pod_s_class(kube_api: client.ApiClient, kube_namespace: str) -> None:
    spec = {"containers": [{"name": "a", "image": "x:1"}]}
    pod = await create(kube_api, kube_namespace, "pods", pod_body("crit", {**spec, "priorityClassName": "system-node-critical"}))
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (2000001000, "PreemptLowerPriority")
    err = await refused(kube_api, kube_namespace, "pods", pod_body("nosuch", {**spec, "priorityClassName": "nosuch"}))
    assert (err.status, err.message) == (403, 'pods "nosuch" is forbidden: no PriorityClass with name nosuch was found')
    err = await refused(kube_api, kube_namespace, "pods", pod_body("five", {**spec, "priority": 5}))
    assert err.message == ('pods "five" is forbidden: the integer value of priority (5) must not be provided in pod spec; '
                           "priority admission controller computed 0 from the given PriorityClass name")


async def test_a_global_default_priorityclass_names_the_pod_s_priority(kube_api: client.ApiClient,
                                                                       kube_namespace: str) -> None:
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    name, other = unique("fp-default"), unique("fp-other")
    pc = await kube_json(kube_api, "POST", path, body={"metadata": {"name": name}, "value": 1000, "globalDefault": True,
                                                      "preemptionPolicy": "Never"})
    try:
        assert pc["preemptionPolicy"] == "Never" and pc["metadata"]["generation"] == 1
        body = pod_body("p", {"containers": [{"name": "a", "image": "x:1"}]})
        for _ in range(100):  # a real server reads PriorityClasses through an informer
            dry = await kube_json(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/pods", body=body,
                                  query=[("dryRun", "All")])
            if dry["spec"].get("priorityClassName"):
                break
            await asyncio.sleep(0.1)
        assert {k: dry["spec"].get(k) for k in ("priority", "priorityClassName", "preemptionPolicy")} == {
            "priority": 1000, "priorityClassName": name, "preemptionPolicy": "Never"}
        with pytest.raises(KubeApiError) as info:
            await kube_json(kube_api, "POST", path, body={"metadata": {"name": other}, "value": 1, "globalDefault": True})
        assert info.value.status == 403
        assert info.value.message.endswith(f"is forbidden: PriorityClass {name} is already marked as default. "
                                           "Only one default can exist")
    finally:
        for pc_name in (name, other):
            try:
                await kube_json(kube_api, "DELETE", f"{path}/{pc_name}")
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
        for _ in range(100):  # and until no default is in effect any more, for the next tests
            dry = await kube_json(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/pods",
                                  body=pod_body("q", {"containers": [{"name": "a", "image": "x:1"}]}),
                                  query=[("dryRun", "All")])
            if not dry["spec"].get("priorityClassName"):
                break
            await asyncio.sleep(0.1)


async def test_system_priorityclasses_are_served_and_protected(kube_api: client.ApiClient) -> None:
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    listed = {pc["metadata"]["name"]: pc["value"] for pc in (await kube_json(kube_api, "GET", path))["items"]}
    assert {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}.items() <= listed.items()
    with pytest.raises(KubeApiError) as info:
        await kube_json(kube_api, "DELETE", f"{path}/system-node-critical")
    assert (info.value.status, info.value.message) == (
        403, 'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: '
             "this is a system priority class and cannot be deleted")
    for body, cause in (({"metadata": {"name": "system-foo"}, "value": 10},
                         "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system "
                         "use only. error: system-foo is not a known system priority class"),
                        ({"metadata": {"name": unique("fp-big")}, "value": 2000000000},
                         "value: Forbidden: maximum allowed value of a user defined priority is 1000000000")):
        with pytest.raises(KubeApiError) as info:
            await kube_json(kube_api, "POST", path, body=body)
        assert info.value.status == 422 and info.value.message.endswith(f"is invalid: {cause}")


# ---- what a mutating webhook sees, and the plugins running again after it ------------------------

async def test_a_webhook_sees_the_defaulted_admitted_pod_and_the_plugins_run_again_after_it(
        kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    async def add_sidecar(review: dict[str, Any]) -> dict[str, Any]:
        req = review["request"]
        if req["operation"] != "CREATE" or req["kind"]["kind"] != "Pod" or req.get("name") == "plain":
            return {"allowed": True}
        ops = [{"op": "add", "path": "/spec/containers/-", "value": {"name": "side", "image": "side"}}]
        if req.get("name") == "classy":
            ops = [{"op": "add", "path": "/spec/priorityClassName", "value": "system-cluster-critical"}]
        return {"allowed": True, "patchType": "JSONPatch", "patch": b64_patch(ops)}

    tls = WebhookTLS()
    async with webhook_server(tls, add_sidecar) as hook:
        await register_webhook(kube_api, mwc_body(
            unique("mwc"), "sidecar.fedplace.io", {"url": hook.url, "caBundle": tls.ca_bundle},
            rules=[{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "configmaps"]}],
            namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": kube_namespace}}), hook, kube_namespace)
        spec = {"containers": [{"name": "app", "image": "app:1"}]}
        plain = await create(kube_api, kube_namespace, "pods", pod_body("plain", spec))
        seen = hook.reviews[-1]["request"]["object"]
        assert seen["metadata"]["creationTimestamp"] is None and "uid" not in seen["metadata"]
        assert seen["spec"] == plain["spec"]  # defaulted and through the built-in plugins already
        assert seen["status"] == {} and plain["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
        pod = await create(kube_api, kube_namespace, "pods", pod_body("sidecar", spec))
        vol = token_volume_name(pod)
        side = pod["spec"]["containers"][1]
        assert side == {"name": "side", "image": "side", "imagePullPolicy": "Always", "resources": {},
                        **MESSAGE_DEFAULTS, "volumeMounts": [token_mount(vol)]}  # defaulted, then the token mounted
        err = await refused(kube_api, kube_namespace, "pods", pod_body("classy", spec))
    assert (err.status, err.message) == (403, (
        'pods "classy" is forbidden: the integer value of priority (0) must not be provided in pod spec; '
        "priority admission controller computed 2000000000 from the given PriorityClass name"))


# ---- size limits -----------------------------------------------------------------------------------

async def test_data_over_one_mebibyte_is_refused(kube_api: client.ApiClient, kube_namespace: str) -> None:
    ns = kube_namespace
    await create(kube_api, ns, "configmaps", {"metadata": {"name": "full"}, "data": {"k": "x" * (M // 2), "j": "x" * (M // 2)}})
    err = await refused(kube_api, ns, "configmaps", {"metadata": {"name": "jam"}, "data": {"k": "x" * M, "j": "y"}})
    assert (err.status, err.reason) == (422, "Invalid")
    assert err.message == 'ConfigMap "jam" is invalid: []: Too long: must have at most 1048576 bytes'
    assert err.body["details"]["causes"] == [{"reason": "FieldValueTooLong", "field": "[]",
                                              "message": "Too long: must have at most 1048576 bytes"}]
    binary = base64.b64encode(b"x" * (M // 2 + 1)).decode()  # counted decoded
    err = await refused(kube_api, ns, "configmaps", {"metadata": {"name": "mixed"}, "data": {"k": "x" * (M // 2)},
                                                     "binaryData": {"b": binary}})
    assert err.status == 422
    status, doc, _ = await raw(kube_api, "POST", f"/api/v1/namespaces/{ns}/configmaps",
                               body=json.dumps({"metadata": {"name": "utf8"}, "data": {"k": "é" * (M // 2 + 1)}},
                                               ensure_ascii=False).encode())
    assert status == 422  # bytes, not characters
    err = await refused(kube_api, ns, "secrets", {"metadata": {"name": "s"}, "stringData": {"k": "x" * (M + 1)}})
    assert err.message == 'Secret "s" is invalid: data: Too long: must have at most 1048576 bytes'


async def test_a_body_over_three_mebibytes_is_refused(kube_api: client.ApiClient, kube_namespace: str) -> None:
    body = json.dumps({"metadata": {"name": "huge"}, "data": {"k": "x" * (3 * M)}})
    status, doc, _ = await raw(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", body=body)
    assert status == 413
    assert (doc["reason"], doc["message"]) == ("RequestEntityTooLarge", "Request entity too large: limit is 3145728")


async def test_an_object_over_etcds_request_limit_is_refused(kube_api: client.ApiClient, kube_namespace: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{kube_namespace}/leases"
    await kube_json(kube_api, "POST", path, body={"metadata": {"name": "ok"}, "spec": {"holderIdentity": "x" * 1_500_000}})
    status, doc, _ = await raw(kube_api, "POST", path, body={"metadata": {"name": "big"},
                                                             "spec": {"holderIdentity": "x" * 1_600_000}})
    assert status == 500
    assert doc == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "etcdserver: request is too large", "code": 500}
