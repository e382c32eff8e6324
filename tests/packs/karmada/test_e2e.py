"""End to end: Karmada placement decided by OPA, through the API server.

On the devstack or the real servers (FEDPLACE_TEST_OPA_URL / FEDPLACE_TEST_KUBECONFIG):
the test CRDs shaped like Karmada's (devstack/karmada/crds.yaml); opa-kube-sync in
process replicating Karmada Clusters, Deployments (the templates) and ResourceBindings,
remediating the bindings; the TLS webhook registered for templates, bindings and
PropagationPolicies; the policy ConfigMaps deploy/ ships plus the settings module
``control_plane := "karmada"``. Karmada's detector and scheduler are the devstack
stand-ins (devstack/karmada/standins.py), run one pass at a time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from kubernetes_asyncio import client

from devstack.karmada import CLUSTERS, PROPAGATION_POLICIES, RESOURCE_BINDINGS, install_crds
from devstack.karmada.standins import DEPLOYMENTS, Detector, Scheduler
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.fixtures.karmada import skip_when_real_karmada
from tests.fixtures.kube import ScratchNamespaces
from tests.fixtures.stack import eventually
from tests.metrics import metric

from .helpers import (
    ADDED,
    EU,
    EXCLUDED,
    PCI,
    WHY,
    deployment,
    excluded,
    fedplace_on_karmada,
    replicated,
    three_clusters,
)


def propagation_policy(name: str, template: str, affinity: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": template}],
                     "placement": {"clusterAffinity": affinity}}}


@pytest.fixture
async def karmada(opa: Any, kube: Any, kube_api: client.ApiClient, kube_namespaces: ScratchNamespaces,
                  tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """The whole path, with three Karmada Clusters (EU PCI 3, EU PCI 1, US PCI 3)."""
    skip_when_real_karmada()
    await install_crds(kube_api)
    policy_ns = await kube_namespaces.create("kd-policy")
    app_ns = await kube_namespaces.create("kd-shop")
    async with three_clusters(kube_api) as (names, suffix), \
            fedplace_on_karmada(opa, kube, kube_api, tmp_path, policy_ns=policy_ns, app_ns=app_ns):
        yield {"api": kube_api, "opa": opa, "ns": app_ns, "clusters": names,
               "detector": Detector(kube_api, [DEPLOYMENTS], namespaces=[app_ns]),
               "scheduler": Scheduler(kube_api, namespaces=[app_ns], cluster_bindings=False,
                                      cluster_selector=f"fedplace-test={suffix}")}


async def binding(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return await kube_json(api, "GET", RESOURCE_BINDINGS.object_path(name, ns))


async def test_templates_bindings_and_policies_on_karmada(karmada: dict[str, Any]) -> None:
    api, opa, ns, c = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"]
    apps = f"/apis/apps/v1/namespaces/{ns}/deployments"

    # A template no cluster satisfies is denied, with the policy's message.
    with pytest.raises(KubeApiError) as denied:
        await kube_json(api, "POST", apps, body=deployment("nowhere", {EU: "true", PCI: "9"}))
    assert denied.value.status == 403
    assert "no cluster satisfies the placement policy (EU jurisdiction required, PCI compliance level >= 9)" \
        in denied.value.message

    # A satisfiable one is admitted untouched (no Federation v1 annotations on Karmada).
    web = await kube_json(api, "POST", apps, body=deployment("web", {EU: "true", PCI: "2"}))
    assert set(web["metadata"]["annotations"]) == {EU, PCI}
    await eventually(lambda: replicated(opa, f"deployments/{ns}/web"), what="the template replicated")

    # A PropagationPolicy naming only forbidden clusters for it is denied.
    with pytest.raises(KubeApiError) as refused:
        await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns),
                        body=propagation_policy("us-only", "web", {"clusterNames": [c["us1"]]}))
    assert refused.value.status == 403
    assert "only on clusters the placement policy forbids" in refused.value.message

    # The detector's binding is narrowed: user exclusion and clusterNames kept, forbidden ones excluded.
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=propagation_policy(
        "web", "web", {"clusterNames": [c["us1"], c["eu1"]], "exclude": ["zz-user"]}))
    report = await karmada["detector"].reconcile_once()
    assert report.created == [f"{ns}/web-deployment"], report
    b = await binding(api, ns, "web-deployment")
    affinity = b["spec"]["placement"]["clusterAffinity"]
    assert affinity["clusterNames"] == [c["us1"], c["eu1"]]
    assert affinity["exclude"][0] == "zz-user" and {c["us1"], c["eu2"]} <= set(affinity["exclude"])
    assert c["eu1"] not in affinity["exclude"]
    assert c["us1"] in excluded(b, c) and c["eu1"] not in excluded(b, c)
    assert "clusters excluded by the placement policy" in b["metadata"]["annotations"][WHY]

    # Karmada's scheduler (stand-in) honours it.
    await karmada["scheduler"].schedule_once()
    b = await binding(api, ns, "web-deployment")
    assert [t["name"] for t in b["spec"]["clusters"]] == [c["eu1"]]

    # The policy changes: the detector overwrites the placement; the webhook narrows it again.
    policy_path = PROPAGATION_POLICIES.object_path("web", ns)
    await kube_json(api, "PATCH", policy_path, content_type="application/merge-patch+json",
                    body={"spec": {"placement": {"clusterAffinity": {"clusterNames": None, "exclude": ["zz-other"]}}}})
    report = await karmada["detector"].reconcile_once()
    assert report.updated == [f"{ns}/web-deployment"], report
    b = await binding(api, ns, "web-deployment")
    assert b["spec"]["placement"]["clusterAffinity"]["exclude"][0] == "zz-other"
    assert "zz-user" not in b["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert {c["us1"], c["eu2"]} <= set(b["spec"]["placement"]["clusterAffinity"]["exclude"])
    settled_rv = b["metadata"]["resourceVersion"]

    # No fight: nothing writes the binding again once it is narrowed. Karmada's detector
    # rewrites the placement from the policy whenever it reconciles the template (its
    # placement differs from the narrowed one, so it sends an update): the webhook narrows
    # that back to what is stored, and the API server stores nothing (no new version).
    await asyncio.sleep(1.5)
    assert (await binding(api, ns, "web-deployment"))["metadata"]["resourceVersion"] == settled_rv
    report = await karmada["detector"].reconcile_once()
    assert report.updated == [f"{ns}/web-deployment"], report
    assert (await binding(api, ns, "web-deployment"))["metadata"]["resourceVersion"] == settled_rv

    # A cluster is downgraded: remediation re-narrows the binding (exactly once), no cluster is
    # left, the binding says why and the template gets a Warning Event.
    patched = metric("fedplace_remediation_patches_total", mode="enforce")
    await kube_json(api, "PATCH", CLUSTERS.object_path(c["eu1"], None), content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"pci-compliance-level": "1"}}})

    async def all_excluded() -> dict[str, Any] | None:
        obj = await binding(api, ns, "web-deployment")
        return obj if c["eu1"] in obj["spec"]["placement"]["clusterAffinity"]["exclude"] else None

    b = await eventually(all_excluded, what="the binding re-narrowed")
    assert set(c.values()) <= set(excluded(b, c))
    why = b["metadata"]["annotations"][WHY]
    assert why.startswith("no cluster satisfies the placement policy (EU jurisdiction required, "
                          "PCI compliance level >= 2)")
    # each cluster with the values of the requirements it fails: eu1 is in the EU, its level too low
    assert f"{c['eu1']} (label pci-compliance-level: 1)" in why
    # The record: the list fedplace wrote begins with the user's one entry.
    assert json.loads(b["metadata"]["annotations"][ADDED])["clusterAffinity"]["user"] == 1

    async def warned() -> bool:
        events = await kube_json(api, "GET", f"/api/v1/namespaces/{ns}/events")
        return any(e["involvedObject"].get("kind") == "Deployment" and e["involvedObject"]["name"] == "web"
                   and e["reason"] == "PlacementUnsatisfiable" for e in events["items"])

    await eventually(warned, what="a Warning Event on the template")
    await asyncio.sleep(1.0)
    assert metric("fedplace_remediation_patches_total", mode="enforce") - patched == 1

    # Upgraded again: the policy's exclusion of it is taken back, the user's stays.
    await kube_json(api, "PATCH", CLUSTERS.object_path(c["eu1"], None), content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"pci-compliance-level": "3"}}})

    async def freed() -> dict[str, Any] | None:
        obj = await binding(api, ns, "web-deployment")
        return obj if c["eu1"] not in obj["spec"]["placement"]["clusterAffinity"]["exclude"] else None

    b = await eventually(freed, what="the exclusion taken back")
    assert b["spec"]["placement"]["clusterAffinity"]["exclude"][0] == "zz-other"
    await karmada["scheduler"].schedule_once()
    assert [t["name"] for t in (await binding(api, ns, "web-deployment"))["spec"]["clusters"]] == [c["eu1"]]


async def test_a_binding_ahead_of_its_template_is_closed_then_narrowed(karmada: dict[str, Any]) -> None:
    """A binding the webhook sees before its template is replicated excludes every cluster;
    once the template reaches OPA, remediation narrows it to what the policy forbids. A
    change of the template's requirements re-narrows it too."""
    api, ns, c = karmada["api"], karmada["ns"], karmada["clusters"]
    early = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
             "metadata": {"name": "late-deployment"},
             "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "late"},
                      "replicas": 1, "placement": {}}}
    b = await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=early)
    assert set(c.values()) <= set(b["spec"]["placement"]["clusterAffinity"]["exclude"])
    assert "not replicated (yet)" in b["metadata"]["annotations"][WHY]

    await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=deployment("late", {PCI: "3"}))

    async def narrowed_to(forbidden: set[str]) -> dict[str, Any] | None:
        obj = await binding(api, ns, "late-deployment")
        ours = set(obj["spec"]["placement"]["clusterAffinity"].get("exclude", [])) & set(c.values())
        return obj if ours == forbidden else None

    b = await eventually(lambda: narrowed_to({c["eu2"]}), what="the binding narrowed to the policy's exclusions")
    assert "clusters excluded by the placement policy" in b["metadata"]["annotations"][WHY]

    # The template now also needs the EU: us1 joins the exclusions.
    await kube_json(api, "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/late",
                    content_type="application/merge-patch+json", body={"metadata": {"annotations": {EU: "true"}}})
    await eventually(lambda: narrowed_to({c["eu2"], c["us1"]}), what="the binding re-narrowed after a template edit")


async def test_a_decided_binding_keeps_its_exclusions_when_its_template_is_gone(karmada: dict[str, Any]) -> None:
    """A binding fedplace decided before is written again (as Karmada's detector does, placement
    reset to the policy's, annotations kept) while its template is not in OPA: it keeps the
    exclusions decided last instead of excluding every cluster, says so, and remediation leaves
    it so."""
    api, opa, ns, c = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"]
    apps = f"/apis/apps/v1/namespaces/{ns}/deployments"
    await kube_json(api, "POST", apps, body=deployment("keep", {EU: "true"}))
    await eventually(lambda: replicated(opa, f"deployments/{ns}/keep"), what="the template replicated")
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=propagation_policy(
        "keep", "keep", {"exclude": ["zz-user"]}))
    await karmada["detector"].reconcile_once()
    b = await binding(api, ns, "keep-deployment")
    assert b["spec"]["placement"]["clusterAffinity"]["exclude"][0] == "zz-user"
    before = excluded(b, c)
    assert before == [c["us1"]]

    await kube_json(api, "DELETE", f"{apps}/keep")

    async def gone() -> bool:
        return not await replicated(opa, f"deployments/{ns}/keep")

    await eventually(gone, what="the template gone from OPA")
    # The detector's write: the placement reset to the policy's, the annotations kept; from the
    # binding as it is now, again on a conflict, as the detector writes (remediation may have
    # rewritten the why since the template went).
    for attempt in range(5):
        b = await binding(api, ns, "keep-deployment")
        b["spec"]["placement"] = {"clusterAffinity": {"exclude": ["zz-user"]}}
        try:
            b = await kube_json(api, "PUT", RESOURCE_BINDINGS.object_path("keep-deployment", ns), body=b)
            break
        except KubeApiError as exc:
            if exc.status != 409 or attempt == 4:
                raise
    assert c["us1"] in b["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert c["eu1"] not in b["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert excluded(b, c) == before
    assert f"template Deployment {ns}/keep not replicated (yet)" in b["metadata"]["annotations"][WHY]
    assert "excluded when the binding was last decided stay excluded" in b["metadata"]["annotations"][WHY]

    # A cluster change makes remediation evaluate every binding: this one stays as it is.
    await kube_json(api, "PATCH", CLUSTERS.object_path(c["eu2"], None), content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"pci-compliance-level": "2"}}})
    await asyncio.sleep(1.5)
    after = await binding(api, ns, "keep-deployment")
    assert after["spec"]["placement"] == b["spec"]["placement"]
    assert after["metadata"]["annotations"][EXCLUDED] == b["metadata"]["annotations"][EXCLUDED]

    # A new binding of an unknown template still excludes every cluster.
    early = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
             "metadata": {"name": "unknown-deployment"},
             "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "unknown"},
                      "placement": {}}}  # as Karmada's detector writes it (no placement: an attached binding)
    fresh = await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=early)
    assert set(c.values()) <= set(fresh["spec"]["placement"]["clusterAffinity"]["exclude"])


async def test_a_user_exclusion_fedplace_had_added_stays_the_users(karmada: dict[str, Any]) -> None:
    """The user copies the narrowed list into the PropagationPolicy (so it names clusters
    fedplace had added); when one of them becomes allowed, it stays excluded: it is the user's."""
    api, opa, ns, c = karmada["api"], karmada["opa"], karmada["ns"], karmada["clusters"]
    apps = f"/apis/apps/v1/namespaces/{ns}/deployments"
    await kube_json(api, "POST", apps, body=deployment("own", {EU: "true", PCI: "2"}))
    await eventually(lambda: replicated(opa, f"deployments/{ns}/own"), what="the template replicated")
    await kube_json(api, "POST", PROPAGATION_POLICIES.collection_path(ns), body=propagation_policy(
        "own", "own", {"exclude": ["zz-user"]}))
    await karmada["detector"].reconcile_once()
    narrowed = (await binding(api, ns, "own-deployment"))["spec"]["placement"]["clusterAffinity"]["exclude"]
    assert narrowed[0] == "zz-user" and {c["eu2"], c["us1"]} <= set(narrowed) and c["eu1"] not in narrowed

    await kube_json(api, "PATCH", PROPAGATION_POLICIES.object_path("own", ns),
                    content_type="application/merge-patch+json",
                    body={"spec": {"placement": {"clusterAffinity": {"exclude": narrowed}}}})

    async def policy_replicated() -> bool:
        status, body = await opa.request("GET", f"/v1/data/kubernetes/propagationpolicies/{ns}/own")
        return status == 200 and (body or {}).get("result", {}).get("spec", {}).get("placement", {}) == {
            "clusterAffinity": {"exclude": narrowed}}

    await eventually(policy_replicated, what="the edited policy replicated")
    await karmada["detector"].reconcile_once()

    # eu2 upgraded: the placement policy allows it now, the user still excludes it.
    await kube_json(api, "PATCH", CLUSTERS.object_path(c["eu2"], None), content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"pci-compliance-level": "3"}}})

    async def redecided() -> dict[str, Any] | None:
        obj = await binding(api, ns, "own-deployment")
        return obj if c["eu2"] not in excluded(obj, c) else None

    b = await eventually(redecided, what="the binding re-decided")
    assert b["spec"]["placement"]["clusterAffinity"]["exclude"] == narrowed
