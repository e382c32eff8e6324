"""The SchedulingPolicy component (deploy/components/schedulingpolicy) on top of
each overlay: it renders, every object is valid (Kubernetes schemas; the
SchedulingPolicies against the component's own CRD schema), the sync
replicates what the pack reads and may list and watch it, the webhook sends
SchedulingPolicies, and the default policies, RBAC and settings decide as the
design says when evaluated by the pack under OPA's own evaluator."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest

from devstack.schedulingpolicy import modules
from tests.deploy.conftest import OVERLAYS, ROOT, Rendered, render
from tests.deploy.test_semantics import covers, grants, structural_problems, sync_config, webhooks

kubernetes_validate = pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")
opa_bindings = pytest.importorskip("opa_bindings")

NS = "opa"
POLICY_NS = "kube-federation-scheduling-policy"
GROUP = "scheduling.fedplace.io"
CRD_NAME = f"schedulingpolicies.{GROUP}"
REPLICATED = {
    (GROUP, "v1alpha1", "schedulingpolicies", False),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    ("rbac.authorization.k8s.io", "v1", "roles", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    ("scheduling.k8s.io", "v1", "priorityclasses", False),  # which class is the global default
}


@pytest.fixture(scope="module")
def with_component(kubectl: str, workspace: Path, rendered: dict[str, Rendered]) -> dict[str, Rendered]:
    """Each overlay plus the component, as an operator adds it; and the overlay alone."""
    out = {}
    for name in OVERLAYS:
        overlay = workspace / "overlays" / f"test-schedulingpolicy-{name}"
        overlay.mkdir(exist_ok=True)
        (overlay / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources:\n  - ../{name}\ncomponents:\n  - ../../components/schedulingpolicy\n")
        out[name] = render(kubectl, overlay)
    return out


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest, with_component: dict[str, Rendered]) -> Rendered:
    return with_component[request.param]


def crd_schema(r: Rendered) -> dict[str, Any]:
    (version,) = r.get("CustomResourceDefinition", CRD_NAME)["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def policy(name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": name}, "spec": spec}


@functools.cache
def pack_modules() -> dict[str, str]:
    """The pack as deployed, and the design's examples (seed_test.rego)."""
    seed = "policies/schedulingpolicy/seed_test.rego"
    return {**modules(), seed: (ROOT / seed).read_text()}


def opa(extra: dict[str, str] | None = None, data: Any = None) -> Any:
    engine = opa_bindings.OpaEngine()
    for mid, src in {**pack_modules(), **(extra or {})}.items():
        engine.add_policy(mid, src)
    if data is not None:
        engine.add_data(data)
    return engine


def evaluate(engine: Any, query: str, input_doc: Any = None) -> Any:
    result = engine.eval_query(f"x := {query}", input_doc)
    return result[0]["x"] if result else None


@functools.cache
def seed_specs() -> dict[str, Any]:
    """The design's examples, as the Rego tests hold them (seed_test.rego)."""
    return evaluate(opa(), "data.io.k8s.federation.schedulingpolicy.seed_test.specs")


# -- rendering and schemas ---------------------------------------------------------


def test_component_adds_only_its_own_objects(overlay: Rendered, rendered: dict[str, Rendered]):
    base = rendered[overlay.name.removeprefix("test-schedulingpolicy-")]
    key = lambda o: (o["apiVersion"].split("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])  # noqa: E731
    keys = [key(o) for o in overlay.objects]
    assert len(keys) == len(set(keys)), "duplicate objects"
    added = set(keys) - {key(o) for o in base.objects}
    assert added == {
        ("apiextensions.k8s.io", "CustomResourceDefinition", None, CRD_NAME),
        (GROUP, "SchedulingPolicy", None, "restricted"),
        (GROUP, "SchedulingPolicy", None, "privileged"),
        ("rbac.authorization.k8s.io", "ClusterRole", None, "sp:restricted"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", None, "sp:restricted"),
        ("rbac.authorization.k8s.io", "ClusterRole", None, "sp:privileged"),
        ("rbac.authorization.k8s.io", "RoleBinding", "kube-system", "sp:kube-system-privileged"),
        ("rbac.authorization.k8s.io", "ClusterRole", None, "fedplace:opa-kube-sync:schedulingpolicy"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", None, "fedplace:opa-kube-sync:schedulingpolicy"),
        ("v1", "ConfigMap", POLICY_NS, "fedplace-schedulingpolicy-settings"),
    }
    # Besides those, only the sync's arguments and the webhook's rules change.
    changed = {key(o) for o in overlay.objects if key(o) not in added and o not in base.objects}
    assert changed == {("apps", "Deployment", NS, "opa"),
                       ("admissionregistration.k8s.io", "MutatingWebhookConfiguration", None, "fedplace-admission")}


@pytest.mark.parametrize("version", ("1.25", "latest"))
def test_objects_valid_against_kubernetes_schemas(overlay: Rendered, version: str):
    from kubernetes_validate import utils as kv_utils

    v = kv_utils.major_minor(kv_utils.latest_version()) if version == "latest" else version
    errors, checked = [], 0
    for o in overlay.objects:
        if o["apiVersion"].startswith(("cert-manager.io/", f"{GROUP}/")):
            continue  # no schema shipped (SchedulingPolicies: see the CRD test below)
        try:
            kubernetes_validate.validate(o, v, strict=True)
            checked += 1
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{o['kind']}/{o['metadata']['name']}: {'/'.join(map(str, exc.path))}: {exc.message}")
    assert not errors, "\n".join(errors)
    assert checked > 25


def test_crd(overlay: Rendered):
    crd = overlay.get("CustomResourceDefinition", CRD_NAME)
    spec = crd["spec"]
    assert spec["group"] == GROUP and spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == "SchedulingPolicy" and spec["names"]["plural"] == "schedulingpolicies"
    assert spec["names"]["shortNames"] == ["schedpol"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert structural_problems(crd_schema(overlay)) == []
    sections = crd_schema(overlay)["properties"]["spec"]["properties"]
    assert set(sections) == {"required", "allowed", "default"}
    components = {"schedulerNames", "priorityClassNames", "priorityClasseNames", "nodeSelectors", "tolerations", "affinities"}
    assert set(sections["required"]["properties"]) == components
    assert set(sections["allowed"]["properties"]) == components
    assert set(sections["default"]["properties"]) == {"schedulerName", "priorityClassName", "priorityClasseName",
                                                      "nodeSelector", "tolerations", "affinity"}


def test_crd_schema_accepts_the_design_s_examples_and_the_component_s_policies(overlay: Rendered):
    schema = crd_schema(overlay)
    for name, spec in seed_specs().items():
        jsonschema.validate(policy(name, spec), schema)
    for p in overlay.of_kind("SchedulingPolicy"):
        jsonschema.validate(p, schema)


RK = "requiredDuringSchedulingIgnoredDuringExecution"

MALFORMED = {
    "names not a list": {"allowed": {"schedulerNames": "default-scheduler"}},
    "empty name": {"allowed": {"priorityClassNames": [""]}},
    "empty required list (the design: invalid)": {"required": {"priorityClassNames": []}},
    "empty required alias list": {"required": {"priorityClasseNames": []}},
    "node selector values not a list": {"allowed": {"nodeSelectors": {"disk": "ssd"}}},
    "empty required node selectors": {"required": {"nodeSelectors": {}}},
    "toleration rule operator": {"allowed": {"tolerations": [{"operators": ["Equals"]}]}},
    "toleration rule effect": {"allowed": {"tolerations": [{"effects": ["Never"]}]}},
    "empty default tolerations (the design: invalid)": {"default": {"tolerations": []}},
    "default toleration operator": {"default": {"tolerations": [{"key": "k", "operator": "In"}]}},
    "default toleration seconds": {"default": {"tolerations": [{"key": "k", "tolerationSeconds": "300"}]}},
    "affinity rule operator": {"allowed": {"affinities": {"nodeAffinities": {RK: {"nodeSelectorTerms": [
        {"matchExpressions": [{"keys": ["a"], "operators": ["Near"]}]}]}}}}},
    "pod affinity rule operator Gt": {"allowed": {"affinities": {"podAffinities": {RK: {"podAffinityTerms": [
        {"matchExpressions": [{"operators": ["Gt"]}]}]}}}}},
    "empty required affinities": {"required": {"affinities": {}}},
    "empty required affinity kind": {"required": {"affinities": {"nodeAffinities": {RK: {}}}}},
    "default scheduler empty": {"default": {"schedulerName": ""}},
    "default node selector value": {"default": {"nodeSelector": {"disk": ["ssd"]}}},
    "default affinity empty": {"default": {"affinity": {}}},
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_crd_schema_refuses_malformed_specs(overlay: Rendered, case: str):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(policy("bad", MALFORMED[case]), crd_schema(overlay))


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_the_pack_refuses_what_the_schema_refuses(case: str):
    """On a server that does not check CRD schemas (the devstack's) the pack's admission does."""
    engine = opa()
    errors = evaluate(engine, "data.io.k8s.federation.admission.errors", policy("bad", MALFORMED[case]))
    assert any(e.startswith('SchedulingPolicy "bad": spec.') for e in errors), errors


# -- wiring ---------------------------------------------------------------------------


def test_sync_replicates_what_the_pack_reads(overlay: Rendered, rendered: dict[str, Rendered]):
    cfg = sync_config(overlay)
    got = {(r.group, r.version, r.plural, r.namespaced) for r in cfg.resources}
    before = {(r.group, r.version, r.plural, r.namespaced)
              for r in sync_config(rendered[overlay.name.removeprefix("test-schedulingpolicy-")]).resources}
    assert got - before == REPLICATED
    assert cfg.replicate_path == "kubernetes", "the pack reads data.kubernetes through the replicated-root module"


def test_sync_may_list_and_watch_what_it_replicates_and_nothing_more(overlay: Rendered):
    sa = "opa-kube-sync"
    got = grants(overlay, sa, NS)
    for group, _, plural, _ in REPLICATED:
        assert covers(got, None, group, plural, "list") and covers(got, None, group, plural, "watch"), plural
    role = overlay.get("ClusterRole", "fedplace:opa-kube-sync:schedulingpolicy")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs == {"list", "watch"}, "reading RBAC objects only"
    for rule in role["rules"]:
        assert "*" not in rule["resources"] and "*" not in rule["apiGroups"]


def test_webhook_sends_schedulingpolicies(overlay: Rendered, rendered: dict[str, Rendered]):
    (hook,) = webhooks(overlay)
    (before,) = webhooks(rendered[overlay.name.removeprefix("test-schedulingpolicy-")])
    assert hook["rules"][:-1] == before["rules"], "the pod-bearing kinds are still sent"
    assert hook["rules"][-1] == {"apiGroups": [GROUP], "apiVersions": ["v1alpha1"], "resources": ["schedulingpolicies"],
                                 "operations": ["CREATE", "UPDATE"], "scope": "Cluster"}


def test_the_pack_s_configmap_is_in_the_base(overlay: Rendered):
    cm = overlay.get("ConfigMap", "fedplace-schedulingpolicy", POLICY_NS)
    shipped = {p.name for p in (ROOT / "policies/schedulingpolicy").glob("*.rego") if not p.name.endswith("_test.rego")}
    assert set(cm["data"]) == shipped


# -- what the defaults decide (OPA's evaluator, the rendered objects as replicated data) --


def replicated(r: Rendered) -> dict[str, Any]:
    """data.kubernetes as opa-kube-sync would write it for the component's objects."""
    doc: dict[str, Any] = {"schedulingpolicies": {}, "clusterroles": {}, "clusterrolebindings": {},
                           "roles": {}, "rolebindings": {}}
    plural = {"SchedulingPolicy": "schedulingpolicies", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}
    for o in r.objects:
        p = plural.get(o["kind"])
        if p is None or (o["kind"] != "SchedulingPolicy" and not o["apiVersion"].startswith("rbac.")):
            continue
        meta = o["metadata"]
        if "namespace" in meta:
            doc[p].setdefault(meta["namespace"], {})[meta["name"]] = o
        else:
            doc[p][meta["name"]] = o
    return doc


def pod(ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


def settings_module(r: Rendered) -> dict[str, str]:
    cm = r.get("ConfigMap", "fedplace-schedulingpolicy-settings", POLICY_NS)
    return {f"{POLICY_NS}/fedplace-schedulingpolicy-settings/{k}": v for k, v in cm["data"].items()}


def test_default_policies_and_rbac_decide_as_the_design_says(overlay: Rendered):
    engine = opa(settings_module(overlay), {"kubernetes": replicated(overlay)})
    sp = "data.io.k8s.federation.schedulingpolicy"
    assert evaluate(engine, f"{sp}.usable", pod("team-a", {})) == ["restricted"]
    assert evaluate(engine, f"{sp}.usable", pod("kube-system", {"serviceAccountName": "kube-proxy"})) == \
        ["privileged", "restricted"]
    assert evaluate(engine, f"{sp}.errors", pod("team-a", {"schedulerName": "default-scheduler"})) == []
    errors = evaluate(engine, f"{sp}.errors", pod("team-a", {"tolerations": [{"operator": "Exists"}]}))
    assert errors == ['SchedulingPolicy: toleration {"operator":"Exists"}: not allowed (no allowed toleration rule '
                      'covers it); policies considered for service account team-a/default: restricted (merge: smart)']
    assert evaluate(engine, f"{sp}.errors", pod("kube-system", {"tolerations": [{"operator": "Exists"}]})) == []


def test_the_component_s_policies_pass_the_pack_s_validation(overlay: Rendered):
    engine = opa()
    for p in overlay.of_kind("SchedulingPolicy"):
        assert evaluate(engine, "data.io.k8s.federation.schedulingpolicy.validate.errors", p) == []


def test_settings_module_compiles_with_the_pack_and_is_read(overlay: Rendered):
    modules = settings_module(overlay)
    engine = opa(modules)
    sp = "data.io.k8s.federation.schedulingpolicy"
    assert evaluate(engine, f"{sp}.merge_option") == "smart"
    assert evaluate(engine, f"{sp}.merge_option") in evaluate(engine, f"{sp}.merge.options")
    # The shipped settings are the pack's own defaults, written out.
    assert evaluate(engine, f"{sp}.exempt_tolerations") == evaluate(opa(), f"{sp}.default_exempt_tolerations")
    # Changing the setting is all it takes.
    (key, src), = modules.items()
    engine = opa({key: src.replace('merge := "smart"', 'merge := "simple"')})
    assert evaluate(engine, f"{sp}.merge_option") == "simple"


def test_an_api_server_pod_with_its_default_tolerations_is_admitted(overlay: Rendered):
    """DefaultTolerationSeconds adds two tolerations to every Pod: the settings exempt them."""
    tolerations = [{"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 300} for k in ("not-ready", "unreachable")]
    data = {"kubernetes": replicated(overlay)}
    engine = opa(settings_module(overlay), data)
    sp = "data.io.k8s.federation.schedulingpolicy"
    spec = {"schedulerName": "default-scheduler", "tolerations": tolerations}
    assert evaluate(engine, f"{sp}.errors", pod("team-a", spec)) == []
    modules = {k: v.replace("exempt_tolerations := [{", "exempt_tolerations := []\n\nunused := [{")
               for k, v in settings_module(overlay).items()}
    strict = opa(modules, copy.deepcopy(data))
    assert len(evaluate(strict, f"{sp}.errors", pod("team-a", spec))) == 2
