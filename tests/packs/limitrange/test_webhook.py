"""The pack through fedplace-admission over HTTP (AdmissionReview in, JSONPatch or 403 out).

OPA is the devstack engine (or FEDPLACE_TEST_OPA_URL) holding the pack's
modules as the sync loads them; LimitRanges are in its data as the sync
replicates them. Every semantic goes through the webhook
here — the reference table's cases (defaults, min as request, max as default,
min / max / ratio, exact quantities, pod totals, init containers and
sidecars, several LimitRanges) — plus every pod-bearing kind (item 3),
malformed quantities, and the composition with the placement policy and
another pack's patches in one decision (item 4).
"""

from __future__ import annotations

import copy
from typing import Any

from devstack.federation import cluster
from tests.packs.limitrange import harness
from tests.packs.limitrange.conftest import (
    POLICY_PREFIX,
    Stack,
    apply_response,
    dependency_order,
    load_modules,
    pack_modules,
)
from tests.packs.limitrange.k8s_limitranger import set_defaults_pod
from tests.packs.limitrange.reference import CASES, container, item, lr, pod

DEFAULTS = lr("defaults", item("Container", default={"cpu": "500m", "memory": "512Mi"},
                               defaultRequest={"cpu": "100m", "memory": "128Mi"}))
LIMITS = lr("limits", item("Container", max={"cpu": "2", "memory": "1Gi"}))


def in_namespace(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = ns
    return obj


async def test_reference_cases_through_the_webhook(webhook: Stack):
    for case in CASES:
        await webhook.put_limitranges("shop", case.limitranges)
        response = await webhook.review(case.pod)
        if case.fedplace.errors:
            assert response["allowed"] is False, case.name
            assert response["status"]["code"] == 403
            message = response["status"]["message"]
            for error in case.fedplace.errors:
                assert error in message, (case.name, message)
        else:
            stored = set_defaults_pod(apply_response(case.pod, response))
            assert harness.resources_of(stored) == case.fedplace.resources, case.name


async def test_defaults_and_the_record_of_them_on_a_pod(webhook: Stack):
    await webhook.put_limitranges("shop", [DEFAULTS])
    response = await webhook.review(pod(container("app", limits={"cpu": "1"})))
    stored = apply_response(pod(container("app", limits={"cpu": "1"})), response)
    assert stored["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"memory": "128Mi"}}
    assert stored["metadata"]["annotations"] == {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: memory request for container app; "
                                      "memory limit for container app"}


async def test_every_pod_bearing_kind(webhook: Stack):
    await webhook.put_limitranges("shop", [DEFAULTS, LIMITS])
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [container("app")]}}
    bodies = {
        "Pod": {"spec": {"containers": [container("app")]}},
        "ReplicaSet": {"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}},
        "Deployment": {"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}},
        "StatefulSet": {"spec": {"serviceName": "x", "selector": {"matchLabels": {"app": "x"}}, "template": template}},
        "DaemonSet": {"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}},
        "Job": {"spec": {"template": template}},
        "CronJob": {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}},
    }
    for kind, body in bodies.items():
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "shop"}, **copy.deepcopy(body)}
        stored = apply_response(obj, await webhook.review(obj))
        spec = stored["spec"] if kind == "Pod" else (
            stored["spec"]["jobTemplate"]["spec"]["template"]["spec"] if kind == "CronJob"
            else stored["spec"]["template"]["spec"])
        assert spec["containers"][0]["resources"] == {
            "limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}, kind
        # and a violation in the same place is denied
        big = copy.deepcopy(obj)
        c = (big["spec"] if kind == "Pod" else (big["spec"]["jobTemplate"]["spec"]["template"]["spec"]
                                                if kind == "CronJob" else big["spec"]["template"]["spec"]))
        c["containers"][0]["resources"] = {"limits": {"memory": "2Gi"}}
        denied = await webhook.review(big)
        assert denied["allowed"] is False, kind
        assert 'container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" in "shop")' in \
            denied["status"]["message"], kind


async def test_malformed_quantities_are_denied_with_their_place(webhook: Stack):
    await webhook.put_limitranges("shop", [LIMITS])
    response = await webhook.review(pod(container("app", limits={"memory": "1GB", "cpu": "-1"})))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert 'container "app": memory limit "1GB" is not a valid quantity' in message
    assert 'container "app": cpu limit "-1" must not be negative' in message
    await webhook.put_limitranges("shop", [lr("broken", item("Container", max={"cpu": "two"}))])
    response = await webhook.review(pod(container("app")))
    assert response["allowed"] is False
    assert 'LimitRange "broken" in "shop": spec.limits[0].max[cpu] "two" is not a valid quantity' in \
        response["status"]["message"]


async def test_nothing_to_say_without_limitranges(webhook: Stack):
    await webhook.put_limitranges("elsewhere", [DEFAULTS, LIMITS])
    response = await webhook.review(pod(container("app", limits={"memory": "64Gi"})))
    assert response["allowed"] is True and "patch" not in response
    await webhook.put_limitranges("shop", [LIMITS])
    response = await webhook.review(pod(container("app", limits={"cpu": "1", "memory": "512Mi"})))
    assert response["allowed"] is True and "patch" not in response  # within bounds, nothing to default
    # a resource no LimitRange names is not looked at, however it is written
    response = await webhook.review(pod(container("app", limits={"cpu": "1", "memory": "512Mi",
                                                                 "example.com/widgets": "lots"})))
    assert response["allowed"] is True and "patch" not in response


SCHEDULING_STAND_IN = """package io.k8s.federation.admission

# A stand-in for another pack (SchedulingPolicy patches the pod spec's scheduling
# fields): its own key in patches, its own errors.
patches["schedulingpolicy"] := [{"op": "add", "path": concat("", [data.io.k8s.federation.podspec.pointer, "/nodeSelector"]),
                                 "value": {"tier": "batch"}}] if data.io.k8s.federation.podspec.spec

errors contains "schedulingpolicy: priority class forbidden" if input.metadata.labels.forbidden
"""

EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PREFS = "federation.kubernetes.io/replica-set-preferences"


async def _compose(webhook: Stack, pack_loaded_first: bool) -> None:
    federation = {n: (harness.ROOT / "policies" / n).read_text() for n in ("federation/contract.rego",
                                                                          "federation/lib.rego",
                                                                          "federation/placement.rego",
                                                                          "federation/admission.rego",
                                                                          "rules-eu-pci/eu_pci.rego")}
    others = {**federation, "other/scheduling.rego": SCHEDULING_STAND_IN}
    if pack_loaded_first:
        await load_modules(webhook.opa_client, others)
    else:  # the pack after the others, as the sync loads deploy/'s ConfigMaps (fedplace-federation first)
        for mid in reversed(dependency_order(pack_modules())):
            await webhook.opa_client.delete_policy(f"{POLICY_PREFIX}/{mid}")
        await load_modules(webhook.opa_client, others)
        await load_modules(webhook.opa_client, pack_modules())
    await webhook.opa_client.put_data(["kubernetes", "clusters"], {
        "eu": cluster("eu", "europe-west1", "2"), "us": cluster("us", "us-central1", "3")})
    await webhook.put_limitranges("shop", [DEFAULTS, LIMITS])
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "web", "namespace": "shop", "annotations": {EU: "true"}},
          "spec": {"selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container("app")]}}}}
    stored = apply_response(rs, await webhook.review(rs))
    assert '"eu"' in stored["metadata"]["annotations"].get(PREFS, "")  # placement
    pod_spec = stored["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"tier": "batch"}  # the other pack
    assert pod_spec["containers"][0]["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}  # this pack

    bad = copy.deepcopy(rs)
    bad["metadata"]["labels"] = {"forbidden": "yes"}
    bad["metadata"]["annotations"]["policy.federation.alpha.kubernetes.io/pci-compliance-level"] = "3"
    bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "3"}}
    response = await webhook.review(bad)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "no cluster satisfies the placement policy" in message
    assert "schedulingpolicy: priority class forbidden" in message
    assert 'container "app": cpu limit 3 exceeds max 2 (LimitRange "limits" in "shop")' in message


async def test_composes_with_the_placement_policy_and_other_packs(webhook: Stack):
    await _compose(webhook, pack_loaded_first=False)


async def test_composition_does_not_depend_on_load_order(webhook: Stack):
    await _compose(webhook, pack_loaded_first=True)
