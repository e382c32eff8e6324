"""The Helm chart deploy/helm/fedplace, with the Helm v4 SDK (helm-python-sdk: Helm's own
Go SDK over ctypes, no helm binary).

* lint: clean (no error, no warning; strict) for every set of values below, against Kubernetes 1.24;
* values.schema.json: unknown keys and bad values are refused; the template's own guards name
  what is wrong;
* a render matrix (defaults, each pack, remediation enforced and annotations-only, monitoring,
  cert-manager vs self-signed vs existing certificates, Karmada's two sides, every value
  overridden): every object valid against the Kubernetes OpenAPI schemas kubernetes-validate
  ships (strict; it has no 1.24 schema: its oldest, 1.25, and its newest — the 1.24 check is the
  install on the real 1.24 kube-apiserver below), CRDs against kube-apiserver 1.24's CRD rules
  and custom resources against their CRD's schema (devstack/kube/crdschema.py);
* one source: the chart reads copies of deploy/'s kustomizations (files/, kept in step by
  deploy/scripts/sync-helm-files.py: test_helm_files.py), and for every point of the matrix the
  chart renders exactly the objects of the equivalent kustomize build, up to the differences
  :func:`normalise` names (and only those);
* the webhook registration: hook Jobs running ``python -m fedplace.admission.register``
  (admission/register.py), whose waiting and applying are tested here on the API server;
* the install with the SDK on the API server: the devstack's (no hooks: it serves no OpenAPI
  document, which Helm builds hooks with, and runs no pods), or the real one
  (``FEDPLACE_TEST_KUBECONFIG``, CI's conformance stage: hooks included, the test playing the
  job controller and kubelet for the hook Jobs, running their command as their service account
  under the server's RBAC). The release's namespaces are deploy/'s fixed ones (opa,
  kube-federation-scheduling-policy): helm uninstall keeps them (keepOnUninstall), so they never
  hang in Terminating on a server without kube-controller-manager, and the next run adopts them.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import difflib
import functools
import json
import logging
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.deploy.conftest import DEPLOY, Rendered, pod_spec
from tests.deploy.conftest import render as kustomize_render

helm = pytest.importorskip("helm_python", reason="install the test extra (helm-python-sdk): the Helm v4 SDK")
from helm_python import _native  # noqa: E402  (the C ABI: options the 0.2.2 wrappers do not expose)

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="install the test extra (kubernetes-validate)")
from kubernetes_asyncio import client  # noqa: E402
from kubernetes_validate import utils as kv_utils  # noqa: E402

from devstack.kube import crdschema  # noqa: E402
from fedplace.admission import register  # noqa: E402
from fedplace.common.kube_client import KubeApiError, kube_json  # noqa: E402

CHART = DEPLOY / "helm" / "fedplace"
RELEASE = "fedplace"
# The release record lives in kube-system: exempt from the webhook (so helm can always repair
# fedplace) and never one of the two namespaces the chart creates (README, "Install on a cluster").
RELEASE_NS = "kube-system"
NS = "opa"
SP_API = "scheduling.fedplace.io/v1alpha1/SchedulingPolicy"
KUBE_124 = "v1.24.0"
# The fedplace image is not published: every install names the one it pushed (image.repository is
# required). The kustomize builds compared with the chart name the same (kustomize_builds).
REPO = "registry.example/fedplace"

SS, CM = ["../self-signed"], ["../cert-manager"]
PACKS = {"packs": {"limitrange": {"enabled": True}, "schedulingpolicy": {"enabled": True}}}
RULE_SETS = ["placement-rules-hardware", "placement-rules-residency", "placement-rules-tenancy"]
ALL_RULES = {"placementRules": {"tenancy": {"enabled": True}, "hardware": {"enabled": True},
                                "residency": {"enabled": True}}}
# name: (values, kustomize overlay resources, components in the order an overlay lists them)
EQUIVALENT: dict[str, tuple[dict[str, Any], list[str], list[str]]] = {
    "defaults": ({}, SS, []),
    "cert-manager": ({"certificates": {"source": "cert-manager"}}, CM, []),
    "limitrange": ({"packs": {"limitrange": {"enabled": True}}}, SS, ["limitrange"]),
    "schedulingpolicy": ({"packs": {"schedulingpolicy": {"enabled": True}}}, SS, ["schedulingpolicy"]),
    "enforce": ({"remediation": {"mode": "enforce"}}, SS, ["remediation-enforce"]),
    "annotations-only": ({"remediation": {"mode": "enforce", "annotationsOnly": True}}, SS,
                         ["remediation-enforce", "remediation-annotations-only"]),
    "monitoring": ({"monitoring": {"enabled": True}}, SS, ["monitoring"]),
    "placement-page": ({"placementPage": {"enabled": True}}, SS, ["placement-page"]),
    "tenancy": ({"placementRules": {"tenancy": {"enabled": True}}}, SS, ["placement-rules-tenancy"]),
    "rule-sets": (ALL_RULES, SS, RULE_SETS),
    # The base and the self-signed overlay's certificates alone (kustomize_builds makes the component).
    "no-cluster-crd": ({"clusterCRD": {"enabled": False}}, ["../../base"], ["../test-helm-tls"]),
    "everything": ({**PACKS, **ALL_RULES, "certificates": {"source": "cert-manager"}, "monitoring": {"enabled": True},
                    "remediation": {"mode": "enforce", "annotationsOnly": True}, "placementPage": {"enabled": True}},
                   CM, ["limitrange", "schedulingpolicy", *RULE_SETS, "remediation-enforce",
                        "remediation-annotations-only", "monitoring", "placement-page"]),
    # Karmada: the chart installed twice (host-cluster, karmada-apiserver) is the one kustomize build.
    "karmada": ({**PACKS, "monitoring": {"enabled": True}, "remediation": {"mode": "enforce"},
                 "placementPage": {"enabled": True}, "karmada": {"enabled": True}}, SS,
                ["limitrange", "schedulingpolicy", "remediation-enforce", "monitoring", "placement-page", "karmada"]),
}
KARMADA_SIDES = ("host-cluster", "karmada-apiserver")
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
OVERRIDES = {
    "image": {"repository": "registry.example/fedplace", "tag": "1.2.3", "pullPolicy": "Always"},
    "opa": {"image": "mirror.example/opa:1.20.2", "replicas": 3,
            "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
            "syncResources": {"requests": {"cpu": "60m", "memory": "130Mi"}, "limits": {"cpu": "1", "memory": "600Mi"}}},
    "admission": {"replicas": 4,
                  "resources": {"requests": {"cpu": "300m", "memory": "200Mi"}, "limits": {"cpu": "3", "memory": "1Gi"}}},
    "tokens": {"existingSecret": "my-opa-tokens"},
    "certificates": {"source": "existing"},
    "webhook": {"caBundle": CA_BUNDLE, "waitTimeout": 100},
    "monitoring": {"enabled": True, "labels": {"release": "kube-prometheus-stack"},
                   "podMonitors": {"enabled": False}, "dashboard": {"namespace": "grafana"}},
    "keepOnUninstall": False,
    "placementPage": {"enabled": True},  # its token volume names tokens.existingSecret too
}
# The chart's example of every pod value on every workload, custom namespaces included.
EVERY_VALUE: dict[str, Any] = yaml.safe_load((CHART / "ci" / "every-value-values.yaml").read_text())
# Every set of values rendered: the equivalents, each Karmada side alone, and the overrides.
MATRIX: dict[str, dict[str, Any]] = {
    **{name: values for name, (values, _, _) in EQUIVALENT.items() if name != "karmada"},
    **{f"karmada-{side}": {**EQUIVALENT["karmada"][0],
                           "karmada": {"enabled": True, "applyTo": side},
                           "webhook": {"caBundle": CA_BUNDLE}} for side in KARMADA_SIDES},
    "karmada-apiserver-first": {"karmada": {"enabled": True, "applyTo": "karmada-apiserver"},
                                "webhook": {"register": False}},
    "overrides": OVERRIDES,
    "every-value": EVERY_VALUE,
}


def kube_version(values: dict[str, Any]) -> str:
    return "v1.30.0" if values.get("remediation", {}).get("annotationsOnly") else KUBE_124


def merged(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


# -- rendering ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    helm.disable_logging()
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def with_image(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` naming the image repository, unless they name one (or set it empty)."""
    return merged({"image": {"repository": REPO}}, values)


def render_files(chart: Any, values: dict[str, Any], *, kube: str = KUBE_124, api_versions: tuple[str, ...] = (SP_API,),
                 namespace: str = RELEASE_NS, image: bool = True) -> dict[str, str]:
    """``helm template``: {template path: manifest}, with :func:`with_image` unless ``image`` is
    false. The API versions say the SchedulingPolicy CRD is served (as on an upgrade) unless told
    otherwise; Chart.render (0.2.2) takes neither option."""
    values = with_image(values) if image else values
    opts = {"name": RELEASE, "namespace": namespace, "kube_version": kube, "api_versions": list(api_versions)}
    return json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(opts)))


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=LOADER) if d]


@functools.lru_cache(maxsize=None)
def _rendered(values_json: str, kube: str, api_versions: tuple[str, ...]) -> tuple[str, str, str]:
    with helm.Chart.load(CHART) as c:
        files = render_files(c, json.loads(values_json), kube=kube, api_versions=api_versions)
    out = tuple(files.pop(f"{RELEASE}/templates/{name}", "")
                for name in ("fedplace.yaml", "webhook-register.yaml", "NOTES.txt"))
    assert not [k for k, v in files.items() if docs(v)], f"templates the tests do not know: {sorted(files)}"
    return out  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def _parsed(values_json: str, kube: str, api_versions: tuple[str, ...]) -> tuple[Any, Any, str]:
    main, hooks, notes = _rendered(values_json, kube, api_versions)
    return docs(main), docs(hooks), notes


def rendered(values: dict[str, Any], *, kube: str | None = None,
             api_versions: tuple[str, ...] = (SP_API,)) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(the objects of deploy/, the hook template's objects, NOTES.txt) for ``values`` — shared between
    tests: copy before changing."""
    main, hooks, notes = _parsed(json.dumps(values, sort_keys=True), kube or kube_version(values), api_versions)
    return list(main), list(hooks), notes


def everything(values: dict[str, Any]) -> list[dict[str, Any]]:
    main, hooks, _ = rendered(values)
    return main + hooks


def key(o: dict[str, Any]) -> tuple[str, str, str, str]:
    group = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
    return (group, o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [key(o) for o in objs])
    return found[0]


def webhook_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The webhook configuration: the plain object, or the one the registration Job applies."""
    plain = [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"]
    if plain:
        return plain[0]
    return json.loads(find(objs, "ConfigMap", "fedplace-admission-webhook")["data"]["webhook.json"])


# -- the chart and its one source ------------------------------------------------------------------


@pytest.mark.parametrize("name", MATRIX)
def test_lint_is_clean(name: str):
    values = MATRIX[name]
    report = helm.lint(CHART, with_image(values), strict=True, kube_version=kube_version(values), namespace=RELEASE_NS)
    assert not report["errors"], report
    # Info only; the one there is: the project has no icon to point at.
    assert [m["error"] for m in report["messages"]] == ["icon is recommended"], report
    assert all(m["severity"] < 2 for m in report["messages"])


def test_values_schema_refuses_unknown_and_invalid_values(chart: Any):
    chart.validate_schema({})
    chart.validate_schema({"global": {"imageRegistry": "anything"}})  # as a parent chart passes it
    chart.validate_schema(OVERRIDES)
    for bad in ({"bogus": 1}, {"packs": {"limitrange": {"enabled": "yes"}}}, {"remediation": {"mode": "on"}},
                {"certificates": {"source": "vault"}}, {"karmada": {"applyTo": "both"}},
                {"monitoring": {"labels": {"release": 1}}}, {"webhook": {"caBundle": "not base64!"}},
                {"opa": {"replicas": -1}}, {"opa": {"podLabels": {"a": 1}}}, {"admission": {"nodeSelecter": {}}},
                {"imagePullSecrets": ["my-registry"]}, {"webhook": {"job": {"tolerations": {}}}},
                {"namespaces": {"opa": "Not_A_Namespace"}}, {"admission": {"priorityClassName": 1}}):
        with pytest.raises(helm.HelmValuesError):
            chart.validate_schema(bad)


@pytest.mark.parametrize("values, kube, message", [
    ({"remediation": {"mode": "enforce", "annotationsOnly": True}}, KUBE_124, "needs Kubernetes >= 1.30"),
    ({"remediation": {"annotationsOnly": True}}, "v1.30.0", "set remediation.mode=enforce"),
    ({"karmada": {"enabled": True}}, KUBE_124, "set karmada.applyTo"),
    ({"karmada": {"applyTo": "host-cluster"}}, KUBE_124, "karmada.enabled is not"),
    ({"karmada": {"enabled": True, "applyTo": "karmada-apiserver"}}, KUBE_124, "needs webhook.caBundle"),
], ids=["annotations-only-on-1.24", "annotations-only-dry-run", "karmada-side", "karmada-off", "karmada-ca"])
def test_render_refuses_what_would_not_work(chart: Any, values: dict[str, Any], kube: str, message: str):
    with pytest.raises(helm.HelmRenderError, match=re.escape(message)):
        render_files(chart, values, kube=kube)


def test_release_namespace_cannot_be_one_the_chart_creates(chart: Any):
    for ns in (NS, "kube-federation-scheduling-policy"):
        with pytest.raises(helm.HelmRenderError, match="another, existing namespace"):
            render_files(chart, {}, namespace=ns)
    main = docs(render_files(chart, {"namespaces": {"create": False}}, namespace=NS)[f"{RELEASE}/templates/fedplace.yaml"])
    assert not [o for o in main if o["kind"] == "Namespace"]


# -- every object valid ----------------------------------------------------------------------------

# kubernetes-validate ships no 1.24 schema: its oldest (1.25) and its newest.
K8S_SCHEMAS = ("1.25", kv_utils.major_minor(kv_utils.latest_version()))
NO_SCHEMA_GROUPS = ("cert-manager.io", "monitoring.coreos.com")  # their CRDs are not ours (test_render.py)


@pytest.fixture(scope="module", autouse=True)
def _cache_schemas():
    original = kv_utils.schema_contents
    kv_utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    yield
    kv_utils.schema_contents = original


@functools.lru_cache(maxsize=None)
def _validate(obj_json: str, version: str) -> str | None:
    o = json.loads(obj_json)
    try:
        kubernetes_validate.validate(o, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{o['kind']}/{o['metadata']['name']}: {'/'.join(str(p) for p in exc.path)}: {exc.message}"
    except kubernetes_validate.SchemaNotFoundError as exc:
        return exc.message
    return None


def custom_resource_causes(o: dict[str, Any], crd: dict[str, Any]) -> list[str]:
    """What kube-apiserver (1.24) would refuse or silently drop (unknown fields) in a custom resource."""
    schema = crdschema.version_schema(crd, o["apiVersion"].split("/")[1])
    assert schema is not None, f"{crd['metadata']['name']} serves no {o['apiVersion']}"
    causes = [f"{c[0]}: {c[1]}" for c in crdschema.validate(copy.deepcopy(o), schema)]
    pruned = copy.deepcopy(o)
    crdschema.prune(pruned, schema, root=True)
    if pruned != o:
        causes.append("fields the CRD's schema does not know (the API server would drop them)")
    return causes


@pytest.mark.parametrize("name", MATRIX)
def test_every_object_is_valid(name: str):
    values = MATRIX[name]
    objs = everything(values)
    crds = {(o["spec"]["group"], o["spec"]["names"]["kind"]): o for o in objs if o["kind"] == "CustomResourceDefinition"}
    errors: list[str] = []
    checked = 0
    for o in objs:
        group = key(o)[0]
        if o["kind"] == "CustomResourceDefinition":
            errors += [f"CRD {o['metadata']['name']}: {c[0]}: {c[1]}" for c in crdschema.crd_causes(o["spec"])]
        if (group, o["kind"]) in crds:
            errors += [f"{o['kind']}/{o['metadata']['name']}: {c}" for c in custom_resource_causes(o, crds[group, o["kind"]])]
            checked += 1
            continue
        if group in NO_SCHEMA_GROUPS:
            continue
        # ValidatingAdmissionPolicy is Kubernetes >= 1.30 (the chart refuses it on older servers).
        versions = K8S_SCHEMAS[-1:] if o["kind"].startswith("ValidatingAdmissionPolicy") else K8S_SCHEMAS
        for version in versions:
            problem = _validate(json.dumps(o, sort_keys=True), version)
            if problem:
                errors.append(f"{version}: {problem}")
        checked += 1
    assert not errors, "\n".join(errors)
    assert checked >= 15, checked


def test_custom_resource_check_is_meaningful():
    objs = everything(MATRIX["schedulingpolicy"])
    crd = find(objs, "CustomResourceDefinition", "schedulingpolicies.scheduling.fedplace.io")
    policy = copy.deepcopy(find(objs, "SchedulingPolicy", "restricted"))
    assert custom_resource_causes(policy, crd) == []
    policy["spec"]["allowed"]["schedulerNames"] = "default-scheduler"
    assert custom_resource_causes(policy, crd)
    policy = copy.deepcopy(find(objs, "SchedulingPolicy", "restricted"))
    policy["spec"]["typo"] = 1
    assert custom_resource_causes(policy, crd)


# -- the same objects as kustomize -----------------------------------------------------------------

HASHED = re.compile(r"^(opa-authz|opa-tokens)-[a-z0-9]{10}$")
HASHED_REF = re.compile(r'"(opa-authz|opa-tokens)-[a-z0-9]{10}"')
# Objects only the chart has, and why: the self-signed CA it issues the serving certificates from
# (kustomize's self-signed overlay keeps the CA key on disk, overlays/self-signed/generated/).
CHART_ONLY = {("", "Secret", NS, "fedplace-ca")}


def normalise(objs: list[dict[str, Any]], chart: bool) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """The objects by identity, up to what differs by design (and nothing else):

    * kustomize's generated opa-authz and opa-tokens carry a content hash suffix (and the
      Deployments refer to it); the chart keeps the plain names and rolls the pods with
      ``checksum/<name>`` pod-template annotations instead (dropped here);
    * Secret data: random tokens and certificates, made anew by each side — the keys are compared,
      not the values; likewise a caBundle is compared for being set, not for its bytes;
    * the chart hands the webhook configuration to its registration Job in the ConfigMap
      fedplace-admission-webhook (unwrapped here) instead of installing it directly;
    * ``helm.sh/resource-policy: keep`` (keepOnUninstall) on the CRDs and namespaces: Helm's;
    * :data:`CHART_ONLY`.
    The hook Jobs and their RBAC are another template (webhook-register.yaml), not compared.
    """
    out: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for o in copy.deepcopy(objs):
        if chart and o["kind"] == "ConfigMap" and o["metadata"]["name"] == "fedplace-admission-webhook":
            o = json.loads(o["data"]["webhook.json"])
        if chart and key(o) in CHART_ONLY:
            continue
        meta = o["metadata"]
        meta["name"] = HASHED.sub(r"\1", meta["name"])
        if o["kind"] == "Secret":
            o["data"] = sorted(o.get("data") or {})
        if o["kind"] == "MutatingWebhookConfiguration":
            for w in o["webhooks"]:
                if w["clientConfig"].get("caBundle"):
                    w["clientConfig"]["caBundle"] = "<set>"
        if o["kind"] == "Deployment":
            o["spec"] = json.loads(HASHED_REF.sub(r'"\1"', json.dumps(o["spec"])))
            template = o["spec"]["template"]["metadata"]
            for k in [k for k in template.get("annotations") or {} if k.startswith("checksum/")]:
                del template["annotations"][k]
        annotations = meta.get("annotations") or {}
        annotations.pop("helm.sh/resource-policy", None)
        if "annotations" in meta and not annotations:
            del meta["annotations"]
        assert key(o) not in out, f"twice: {key(o)}"
        out[key(o)] = o
    return out


def differences(a: dict[Any, Any], b: dict[Any, Any]) -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            out.append(f"only kustomize: {k}")
        elif k not in a:
            out.append(f"only the chart: {k}")
        elif a[k] != b[k]:
            diff = difflib.unified_diff(yaml.safe_dump(a[k]).splitlines(), yaml.safe_dump(b[k]).splitlines(),
                                        "kustomize", "chart", lineterm="", n=2)
            out.append(f"{k}:\n" + "\n".join(diff))
    return out


@pytest.fixture(scope="module")
def kustomize_builds(kubectl: str, workspace: Path) -> dict[str, list[dict[str, Any]]]:
    """Each equivalent as an overlay of the test workspace (tokens and certificates generated),
    listing the components in the order the chart applies them."""
    # The self-signed overlay's certificates without its cluster-crd component: a component with
    # the same generators and patch (and copies of its generated files: kustomize reads nothing
    # outside a kustomization's folder).
    tls = workspace / "overlays" / "test-helm-tls"
    tls.mkdir(exist_ok=True)
    ss = yaml.safe_load((workspace / "overlays" / "self-signed" / "kustomization.yaml").read_text())
    for f in (workspace / "overlays" / "self-signed" / "generated").iterdir():
        (tls / "generated").mkdir(exist_ok=True)
        (tls / "generated" / f.name).write_bytes(f.read_bytes())
    (tls / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component",
        "secretGenerator": ss["secretGenerator"], "patches": ss["patches"]}))
    (base_image,) = [i["newName"] for i in yaml.safe_load((workspace / "base" / "kustomization.yaml").read_text())["images"]
                     if i["name"] == "fedplace"]
    out = {}
    for name, (_, resources, components) in EQUIVALENT.items():
        overlay = workspace / "overlays" / f"test-helm-{name}"
        overlay.mkdir(exist_ok=True)
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources,
            "components": [c if c.startswith("../") else f"../../components/{c}" for c in components],
            "images": [{"name": base_image, "newName": REPO}]}))
        out[name] = kustomize_render(kubectl, overlay).objects
    return out


def chart_objects(name: str) -> list[dict[str, Any]]:
    """The chart's objects for an equivalent; Karmada's two releases together."""
    values = EQUIVALENT[name][0]
    if name != "karmada":
        return rendered(values)[0]
    objs: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for side in KARMADA_SIDES:
        for o in rendered(merged(values, {"karmada": {"applyTo": side}, "webhook": {"caBundle": CA_BUNDLE}}))[0]:
            assert objs.get(key(o), o) == o, f"{key(o)} differs between the two sides"
            objs[key(o)] = o
    return list(objs.values())


@pytest.mark.parametrize("name", EQUIVALENT)
def test_chart_installs_what_kustomize_builds(name: str, kustomize_builds: dict[str, list[dict[str, Any]]]):
    built = normalise(kustomize_builds[name], chart=False)
    charted = normalise(chart_objects(name), chart=True)
    assert not differences(built, charted), "\n".join(differences(built, charted))
    assert len(built) >= 30


def test_the_comparison_sees_a_difference(kustomize_builds: dict[str, list[dict[str, Any]]]):
    built = normalise(kustomize_builds["defaults"], chart=False)
    for other in ("limitrange", "enforce", "cert-manager"):
        assert differences(built, normalise(chart_objects(other), chart=True)), other
    tampered = copy.deepcopy(chart_objects("defaults"))
    container = pod_spec(find(tampered, "Deployment", "opa"))["containers"][1]
    container["args"] = container["args"][:-1]
    assert differences(built, normalise(tampered, chart=True))


def test_karmada_sides_split_the_objects():
    host, karmada = (rendered(MATRIX[f"karmada-{side}"])[0] for side in KARMADA_SIDES)
    sides = {side: {key(o) for o in objs} for side, objs in zip(KARMADA_SIDES, (host, karmada), strict=True)}
    for side, objs in zip(KARMADA_SIDES, (host, karmada), strict=True):
        assert {o["metadata"]["labels"]["fedplace.io/apply-to"] for o in objs} == {side, "both"}
    assert {k[1] for k in sides["host-cluster"]} >= {"Deployment", "Service", "Secret", "PodMonitor"}
    assert {k[1] for k in sides["karmada-apiserver"]} >= {"MutatingWebhookConfiguration", "ClusterRole",
                                                          "CustomResourceDefinition", "SchedulingPolicy"}
    assert {k[1] for k in sides["host-cluster"] & sides["karmada-apiserver"]} == {"Namespace", "ServiceAccount"}
    # No hook Job on either side: the pods and the webhook are on different API servers (docs/karmada.md).
    for side in KARMADA_SIDES:
        assert rendered(MATRIX[f"karmada-{side}"])[1] == []
    first = rendered(MATRIX["karmada-apiserver-first"])[0]
    assert not [o for o in first if "Webhook" in o["kind"] or o["metadata"]["name"] == "fedplace-admission-webhook"]


# -- values ----------------------------------------------------------------------------------------


def test_values_override_what_they_name():
    objs, hooks, _ = rendered(OVERRIDES)
    opa, admission = find(objs, "Deployment", "opa"), find(objs, "Deployment", "fedplace-admission")
    images = {c["name"]: (c["image"], c["imagePullPolicy"])
              for d in (opa, admission) for c in pod_spec(d)["containers"]}
    assert images == {"opa": ("mirror.example/opa:1.20.2", "Always"),
                      "opa-kube-sync": ("registry.example/fedplace:1.2.3", "Always"),
                      "admission": ("registry.example/fedplace:1.2.3", "Always")}
    assert opa["spec"]["replicas"] == 3 and admission["spec"]["replicas"] == 4
    resources = {c["name"]: c["resources"] for d in (opa, admission) for c in pod_spec(d)["containers"]}
    assert resources == {"opa": OVERRIDES["opa"]["resources"], "opa-kube-sync": OVERRIDES["opa"]["syncResources"],
                         "admission": OVERRIDES["admission"]["resources"]}
    # The tokens: no Secret of the chart's; every reference is to the one named.
    assert not [o for o in objs if o["kind"] == "Secret"]
    for d in (opa, admission):
        spec = json.dumps(pod_spec(d))
        assert '"opa-tokens"' not in spec and '"my-opa-tokens"' in spec
        assert "checksum/opa-tokens" in d["spec"]["template"]["metadata"]["annotations"]
    assert webhook_of(objs)["webhooks"][0]["clientConfig"]["caBundle"] == CA_BUNDLE
    monitoring = [o for o in objs if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "monitoring"]
    assert {o["kind"] for o in monitoring} == {"PrometheusRule", "ConfigMap"}
    assert all(o["metadata"]["labels"]["release"] == "kube-prometheus-stack" for o in monitoring)
    assert find(objs, "ConfigMap", "fedplace-dashboard")["metadata"]["namespace"] == "grafana"
    assert not [o for o in objs if "helm.sh/resource-policy" in (o["metadata"].get("annotations") or {})]
    (job,) = [h for h in hooks if h["metadata"]["name"] == "fedplace-register-webhook"]
    assert "--timeout=100" in pod_spec(job)["containers"][0]["args"]
    assert pod_spec(job)["containers"][0]["image"] == "registry.example/fedplace:1.2.3"


def test_defaults_keep_crds_and_namespaces_and_pin_the_base_images(kustomize_builds: dict[str, Any]):
    objs, _, _ = rendered({})
    kept = {(o["kind"], o["metadata"]["name"]) for o in objs
            if (o["metadata"].get("annotations") or {}).get("helm.sh/resource-policy") == "keep"}
    assert kept == {("Namespace", NS), ("Namespace", "kube-federation-scheduling-policy"),
                    ("CustomResourceDefinition", "clusters.federation.fedplace.io")}
    built = Rendered("self-signed", kustomize_builds["defaults"])
    for name in ("opa", "fedplace-admission"):
        want = {c["name"]: c["image"] for c in pod_spec(built.get("Deployment", name, NS))["containers"]}
        got = {c["name"]: c["image"] for c in pod_spec(find(objs, "Deployment", name))["containers"]}
        assert got == want


def test_schedulingpolicies_wait_for_their_crd():
    """As kubectl apply -k needs a second apply once the CRD is established, the default
    SchedulingPolicies come with the first helm upgrade after the CRD exists; NOTES.txt says so."""
    values = MATRIX["schedulingpolicy"]
    first, _, notes = rendered(values, api_versions=())
    assert not [o for o in first if o["kind"] == "SchedulingPolicy"]
    assert find(first, "CustomResourceDefinition", "schedulingpolicies.scheduling.fedplace.io")
    assert "run the same helm upgrade" in notes
    later, _, notes = rendered(values)
    assert {o["metadata"]["name"] for o in later if o["kind"] == "SchedulingPolicy"} == {"restricted", "privileged"}
    assert "run the same helm upgrade" not in notes


def test_notes_say_how_to_check():
    _, _, notes = rendered({})
    assert "placement page" not in notes
    assert "localhost:8182/placement" in rendered(MATRIX["placement-page"])[2]
    assert "Secret my-opa-tokens" in rendered(OVERRIDES)[2]
    for line in ("kubectl -n opa rollout status deployment/opa",
                 "kubectl -n opa rollout status deployment/fedplace-admission",
                 "annotations.fedplace\\\\.io/policy-status",  # as docs/operations.md has it
                 "get mutatingwebhookconfiguration fedplace-admission"):
        assert line in notes, line
    assert "$KARMADA" in rendered(MATRIX["karmada-karmada-apiserver"])[2]
    assert "$HOST -n opa rollout status" in rendered(MATRIX["karmada-host-cluster"])[2]


# -- self-signed certificates ----------------------------------------------------------------------


def test_self_signed_certificates_chain_to_the_webhook_ca_bundle():
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding

    objs, _, _ = rendered({})
    ca = x509.load_pem_x509_certificate(base64.b64decode(find(objs, "Secret", "fedplace-ca")["data"]["ca.crt"]))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert base64.b64decode(webhook_of(objs)["webhooks"][0]["clientConfig"]["caBundle"]) == ca.public_bytes(Encoding.PEM)
    services = {o["metadata"]["name"] for o in objs if o["kind"] == "Service"}
    for secret, service in (("fedplace-admission-tls", "fedplace-admission"), ("opa-tls", "opa")):
        s = find(objs, "Secret", secret)
        assert s["type"] == "kubernetes.io/tls" and set(s["data"]) == {"tls.crt", "tls.key", "ca.crt"}
        assert service in services
        cert = x509.load_pem_x509_certificate(base64.b64decode(s["data"]["tls.crt"]))
        ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        assert f"{service}.{NS}.svc" in sans and f"{service}.{NS}.svc.cluster.local" in sans
        assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
        assert base64.b64decode(s["data"]["ca.crt"]) == base64.b64decode(find(objs, "Secret", "fedplace-ca")["data"]["ca.crt"])


# -- the webhook, registered last ------------------------------------------------------------------


def test_webhook_is_registered_by_a_hook_job_after_the_rollouts():
    objs, hooks, _ = rendered({})
    assert not [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"], "never a plain object"
    webhook = webhook_of(objs)
    assert webhook["metadata"]["labels"]["fedplace.io/install-stage"] == "webhook"
    jobs = {h["metadata"]["name"]: h for h in hooks if h["kind"] == "Job"}
    assert set(jobs) == {"fedplace-register-webhook", "fedplace-unregister-webhook"}
    ann = {n: j["metadata"]["annotations"] for n, j in jobs.items()}
    assert ann["fedplace-register-webhook"]["helm.sh/hook"] == "post-install,post-upgrade,post-rollback"
    assert ann["fedplace-unregister-webhook"]["helm.sh/hook"] == "pre-delete"
    for h in hooks:
        a = h["metadata"]["annotations"]
        assert set(a["helm.sh/hook-delete-policy"].split(",")) == {"before-hook-creation", "hook-succeeded"}
        if h["kind"] != "Job":  # the Jobs' account and RBAC exist only while the hooks run, before the Jobs
            assert set(a["helm.sh/hook"].split(",")) == {"post-install", "post-upgrade", "post-rollback", "pre-delete"}
            assert int(a["helm.sh/hook-weight"]) < int(ann["fedplace-register-webhook"]["helm.sh/hook-weight"])
    # What the Job runs: the registration module, waiting for every Deployment of the release and
    # taking a missing caBundle from the Secret the webhook serves with.
    job = pod_spec(jobs["fedplace-register-webhook"])
    (c,) = job["containers"]
    assert c["command"] == ["python", "-m", "fedplace.admission.register"]
    args = register.parse_args(c["args"])
    deployments = {o["metadata"]["name"] for o in objs if o["kind"] == "Deployment"}
    assert args.action == "apply" and set(args.wait_deployment) == deployments and args.namespace == NS
    tls = {v["secret"]["secretName"] for v in pod_spec(find(objs, "Deployment", "fedplace-admission"))["volumes"]
           if v["name"] == "tls"}
    assert {args.ca_bundle_from} == tls
    (mount,) = [m for m in c["volumeMounts"] if str(args.webhook_file).startswith(m["mountPath"])]
    (volume,) = [v for v in job["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == "fedplace-admission-webhook"
    undo = register.parse_args(pod_spec(jobs["fedplace-unregister-webhook"])["containers"][0]["args"])
    assert undo.action == "delete" and undo.name == webhook["metadata"]["name"]
    # Its service account may do exactly what the module does.
    grants = set()
    for role in (h for h in hooks if h["kind"] in ("Role", "ClusterRole")):
        for rule in role["rules"]:
            for res in rule["resources"]:
                for verb in rule["verbs"]:
                    grants.add((role["kind"], res, verb, frozenset(rule.get("resourceNames", ()))))
    assert grants == {
        ("ClusterRole", "mutatingwebhookconfigurations", "create", frozenset()),
        *{("ClusterRole", "mutatingwebhookconfigurations", v, frozenset({"fedplace-admission"}))
          for v in ("get", "patch", "delete")},
        ("Role", "deployments", "get", frozenset(deployments)),
        ("Role", "secrets", "get", frozenset({"fedplace-admission-tls"})),
    }
    for pod in (pod_spec(j) for j in jobs.values()):
        assert pod["serviceAccountName"] == "fedplace-webhook-registrar" and pod["restartPolicy"] == "Never"
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
            assert sc["capabilities"]["drop"] == ["ALL"] and sc["seccompProfile"]["type"] == "RuntimeDefault"
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]) and {"cpu", "memory"} <= set(c["resources"]["requests"])
    # With cert-manager the caBundle comes from the issued certificate, read by the Job.
    cm, _, _ = rendered({"certificates": {"source": "cert-manager"}})
    assert "caBundle" not in webhook_of(cm)["webhooks"][0]["clientConfig"]
    assert webhook_of(cm)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "opa/fedplace-admission-tls"
    assert rendered({"webhook": {"register": False}})[1] == []


def deployment(name: str, generation: int = 1, **status: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "generation": generation}, "spec": {"replicas": 2}, "status": status}


@pytest.mark.parametrize("status, done", [
    ({}, False),
    ({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}, False),
    ({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2}, False),
    ({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}, False),
    ({"observedGeneration": 0, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}, False),
    ({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}, True),
], ids=["new", "updating", "old-pods-left", "not-available", "not-observed", "rolled-out"])
def test_rollout_state_reads_a_deployment_as_kubectl_does(status: dict[str, int], done: bool):
    assert register.rollout_state(deployment("opa", **status))[0] is done


def test_rollout_state_stops_on_the_progress_deadline():
    d = deployment("opa", observedGeneration=1)
    d["status"]["conditions"] = [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]
    with pytest.raises(register.RolloutFailed, match="progress deadline"):
        register.rollout_state(d)


# -- on the API server -----------------------------------------------------------------------------

WEBHOOK_PATH = f"{register.WEBHOOKS_PATH}/fedplace-admission"


async def roll_out(api: Any, namespace: str, name: str) -> None:
    """The deployment controller (and kubelet) of a server that runs no pods: every replica updated and available."""
    d = await kube_json(api, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    n = d["spec"].get("replicas", 1)
    status = {"observedGeneration": d["metadata"]["generation"], "replicas": n, "updatedReplicas": n,
              "readyReplicas": n, "availableReplicas": n}
    await kube_json(api, "PATCH", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
                    body={"status": status}, content_type="application/merge-patch+json")


async def exists(api: Any, path: str) -> bool:
    try:
        await kube_json(api, "GET", path)
    except KubeApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


@pytest.fixture
def scratch_webhook(kube_namespaces: Any, tmp_path: Path) -> Any:
    """A namespace with two Deployments and the webhook's Secret, and the chart's webhook
    configuration pointed at it (a copy: the real one names the namespace opa)."""

    async def make(api: Any) -> tuple[str, Path, str]:
        ns = await kube_namespaces.create("fp-helm")
        objs, _, _ = rendered({"certificates": {"source": "cert-manager"}})
        for name in ("opa", "fedplace-admission"):
            d = copy.deepcopy(find(objs, "Deployment", name))
            d["metadata"]["namespace"] = ns
            await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=d)
        ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBscratch\n-----END CERTIFICATE-----\n").decode()
        await kube_json(api, "POST", f"/api/v1/namespaces/{ns}/secrets", body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fedplace-admission-tls"},
            "type": "Opaque", "data": {"ca.crt": ca}})
        webhook = webhook_of(objs)
        webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] = ns
        # Nothing answers for this webhook: exempt everything but a namespace no test uses, so
        # that registering it cannot refuse other requests on a shared server.
        webhook["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"fedplace-test": "never"}}
        path = tmp_path / "webhook.json"
        path.write_text(json.dumps(webhook))
        return ns, path, ca

    return make


async def test_register_waits_for_the_rollouts_then_applies_in_place(kube_api: Any, scratch_webhook: Any):
    ns, path, ca = await scratch_webhook(kube_api)
    args = register.parse_args(["apply", f"--webhook-file={path}", f"--namespace={ns}", "--wait-deployment=opa",
                                "--wait-deployment=fedplace-admission", "--ca-bundle-from=fedplace-admission-tls",
                                "--timeout=20", "--interval=0.05"])
    task = asyncio.create_task(register.run(args, api=kube_api))
    await asyncio.sleep(0.5)
    assert not task.done() and not await exists(kube_api, WEBHOOK_PATH), "registered before the rollouts"
    await roll_out(kube_api, ns, "opa")
    await asyncio.sleep(0.3)
    assert not task.done() and not await exists(kube_api, WEBHOOK_PATH), "registered before both rollouts"
    await roll_out(kube_api, ns, "fedplace-admission")
    await asyncio.wait_for(task, 10)
    live = await kube_json(kube_api, "GET", WEBHOOK_PATH)
    assert live["webhooks"][0]["clientConfig"]["caBundle"] == ca, "caBundle from ca.crt of the Secret"
    assert live["webhooks"][0]["failurePolicy"] == "Fail"
    # Again (an upgrade): the same object, changed in place — never deleted and re-created.
    changed = json.loads(path.read_text())
    changed["webhooks"][0]["timeoutSeconds"] = 9
    path.write_text(json.dumps(changed))
    await register.run(args, api=kube_api)
    again = await kube_json(kube_api, "GET", WEBHOOK_PATH)
    assert again["metadata"]["uid"] == live["metadata"]["uid"] and again["webhooks"][0]["timeoutSeconds"] == 9
    # Removed (pre-delete), twice: gone is fine.
    assert await register.delete(kube_api, "fedplace-admission") is True
    assert not await exists(kube_api, WEBHOOK_PATH)
    assert await register.delete(kube_api, "fedplace-admission") is False


async def test_register_gives_up_without_registering(kube_api: Any, scratch_webhook: Any):
    ns, path, _ = await scratch_webhook(kube_api)
    with pytest.raises(register.RolloutFailed, match="timed out"):
        await register.apply(kube_api, json.loads(path.read_text()), namespace=ns, wait=["opa"], timeout=0.3,
                             interval=0.05)
    assert not await exists(kube_api, WEBHOOK_PATH)
    # The command line: one failure line on stderr and exit 1, which fails the hook Job. (main()
    # configures the process's logging, as the Job's process would: put it back afterwards.)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        code = await asyncio.to_thread(register.main, ["--kubeconfig=/nonexistent/kubeconfig", "apply",
                                                        f"--webhook-file={path}", f"--namespace={ns}", "--timeout=0.2"])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert code == 1


# Kinds the chart installs: (API prefix, plural, namespaced).
PLURALS = {"Namespace": ("/api/v1", "namespaces", False), "ServiceAccount": ("/api/v1", "serviceaccounts", True),
           "ConfigMap": ("/api/v1", "configmaps", True), "Secret": ("/api/v1", "secrets", True),
           "Service": ("/api/v1", "services", True),
           "Deployment": ("/apis/apps/v1", "deployments", True),
           "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
           "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
           "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
           "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
           "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
           "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
           "MutatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False)}


def path_of(o: dict[str, Any]) -> str:
    prefix, plural, namespaced = PLURALS[o["kind"]]
    ns = f"/namespaces/{o['metadata']['namespace']}" if namespaced else ""
    return f"{prefix}{ns}/{plural}/{o['metadata']['name']}"


class Helm:
    """The SDK's release actions on one API server, for one test. On the devstack: the release in
    memory (Helm writes its release Secrets as protobuf, which the devstack does not decode) and no
    hooks (Helm builds hook objects against the server's OpenAPI document, which the devstack does
    not serve; it validates the other objects against it unless told not to)."""

    def __init__(self, kubeconfig: Path, external: bool, chart: Path = CHART) -> None:
        self.external = external
        self.chart = chart
        self.config = helm.Config(kubeconfig_path=kubeconfig, namespace=RELEASE_NS,
                                  storage_driver=None if external else "memory")
        self.extra = {} if external else {"disable_hooks": True, "disable_openapi_validation": True}

    def _call(self, action: str, values: dict[str, Any], **opts: Any) -> dict[str, Any]:
        with helm.Chart.load(self.chart) as c:
            return json.loads(_native.call_string(
                action, self.config._raw(), _native.HANDLE(0), c._raw(), None, RELEASE, json.dumps(with_image(values)),
                json.dumps({"namespace": RELEASE_NS, "timeout_seconds": 60, **self.extra, **opts})))

    def install(self, values: dict[str, Any]) -> dict[str, Any]:
        return self._call("helm_install", values)

    def upgrade(self, values: dict[str, Any]) -> dict[str, Any]:
        return self._call("helm_upgrade", values)

    def uninstall(self, ignore_not_found: bool = False) -> dict[str, Any]:
        opts = {"timeout_seconds": 60, "ignore_not_found": ignore_not_found or None,
                "disable_hooks": None if self.external else True}
        return json.loads(_native.call_string("helm_uninstall", self.config._raw(), RELEASE,
                                              json.dumps({k: v for k, v in opts.items() if v is not None})))

    def hooks(self) -> dict[str, dict[str, Any]]:
        stored = self.config.get_all(RELEASE)
        return {h["name"]: docs(h["manifest"])[0] for h in stored.get("hooks") or []}


async def run_job(admin: Any, job: dict[str, Any], tmp_path: Path) -> None:
    """What a kubelet would do with the Job's pod: its command, in this process, as its service
    account (impersonated: the server's RBAC decides), its ConfigMap volumes as files."""
    pod = pod_spec(job)
    (c,) = pod["containers"]
    assert c["command"] == ["python", "-m", "fedplace.admission.register"]
    args = list(c["args"])
    ns = job["metadata"]["namespace"]
    for mount in c.get("volumeMounts") or []:
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        if "configMap" not in volume:
            continue
        cm = await kube_json(admin, "GET", f"/api/v1/namespaces/{ns}/configmaps/{volume['configMap']['name']}")
        where = tmp_path / mount["name"]
        where.mkdir(exist_ok=True)
        for k, v in cm["data"].items():
            (where / k).write_text(v)
        args = [a.replace(mount["mountPath"], str(where)) for a in args]
    sa = client_as(admin, f"system:serviceaccount:{ns}:{pod['serviceAccountName']}")
    try:
        await register.run(register.parse_args(args), api=sa)
    finally:
        await sa.close()


def client_as(admin: Any, user: str) -> Any:
    """The admin's client, impersonating ``user`` (the API server's authorizer decides)."""
    api = client.ApiClient(configuration=admin.configuration)
    api.set_default_header("Impersonate-User", user)
    return api


async def complete(api: Any, job: dict[str, Any]) -> None:
    """The job controller: the Job succeeded."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = job["metadata"]
    await kube_json(api, "PATCH", f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}/status",
                    content_type="application/merge-patch+json",
                    body={"status": {"startTime": now, "completionTime": now, "succeeded": 1, "conditions": [
                        {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]}})


async def play_controllers(admin: Any, tmp_path: Path, log: list[str], stop: asyncio.Event, ns: str = NS) -> None:
    """On a real server that runs no pods: when Helm creates a hook Job (in ``ns``), roll the
    Deployments out (the webhook must not exist before), run the Job's command and mark it complete."""
    done: set[str] = set()
    while not stop.is_set():
        jobs = (await kube_json(admin, "GET", f"/apis/batch/v1/namespaces/{ns}/jobs"))["items"]
        for job in jobs:
            uid = job["metadata"]["uid"]
            if uid in done:
                continue
            done.add(uid)
            name = job["metadata"]["name"]
            if name == "fedplace-register-webhook":
                assert not await exists(admin, WEBHOOK_PATH) or log, "the webhook was there before its Job ran"
                for d in ("opa", "fedplace-admission"):
                    await roll_out(admin, ns, d)
                # Its account reads the serving certificate's Secret (for a missing caBundle), and
                # no other (the server's RBAC, while the hook runs).
                sa = client_as(admin, f"system:serviceaccount:{ns}:{pod_spec(job)['serviceAccountName']}")
                try:
                    await kube_json(sa, "GET", f"/api/v1/namespaces/{ns}/secrets/fedplace-admission-tls")
                    with pytest.raises(KubeApiError) as refused:
                        await kube_json(sa, "GET", f"/api/v1/namespaces/{ns}/secrets/opa-tokens")
                    assert refused.value.status == 403
                finally:
                    await sa.close()
            await run_job(admin, job, tmp_path)
            await complete(admin, job)
            log.append(name)
        await asyncio.sleep(0.1)


async def test_install_upgrade_uninstall_on_the_api_server(kube: Any, kube_api: Any, tmp_path: Path,
                                                           request: pytest.FixtureRequest):
    """`helm install`, `upgrade`, `uninstall` with the SDK: every object of the release on the
    server, the tokens and the CA kept across the upgrade, the webhook registered after the
    rollouts (hook Jobs: on a real server through Helm, on the devstack run as Helm would), changed
    in place by the upgrade and gone first on uninstall; the CRD and the namespaces kept."""
    external = kube.external
    kubeconfig = kube.kubeconfig if external else request.getfixturevalue("kube_proxy").kubeconfig
    values: dict[str, Any] = {}
    if external and await exists(kube_api, path_of({"kind": "CustomResourceDefinition",
                                                    "metadata": {"name": "clusters.federation.fedplace.io"}})):
        crd = await kube_json(kube_api, "GET", path_of({"kind": "CustomResourceDefinition",
                                                        "metadata": {"name": "clusters.federation.fedplace.io"}}))
        if (crd["metadata"].get("annotations") or {}).get("meta.helm.sh/release-name") != RELEASE:
            values = {"clusterCRD": {"enabled": False}}  # another test's: not ours to take
    h = Helm(kubeconfig, external)
    log: list[str] = []
    stop = asyncio.Event()
    controllers = asyncio.create_task(play_controllers(kube_api, tmp_path, log, stop)) if external else None

    async def helm_call(fn: Any, *args: Any) -> dict[str, Any]:
        result = asyncio.create_task(asyncio.to_thread(fn, *args))
        while not result.done():
            await asyncio.sleep(0.05)
            if controllers is not None and controllers.done():
                controllers.result()  # raises what went wrong
        return result.result()

    async def register_as_helm_would(name: str) -> None:
        if not external:
            if name == "fedplace-register-webhook":
                for d in ("opa", "fedplace-admission"):
                    await roll_out(kube_api, NS, d)
            await run_job(kube_api, h.hooks()[name], tmp_path)
            log.append(name)

    try:
        release = await helm_call(h.install, values)
        assert release["status"] == "deployed"
        if not external:  # (on a real server its hook Job has run already: play_controllers checked)
            assert not await exists(kube_api, WEBHOOK_PATH), "registered with the rest"
        installed = docs(release["manifest"])
        want = {key(o) for o in rendered(values)[0]}
        assert {key(o) for o in installed} == want
        for o in installed:
            live = await kube_json(kube_api, "GET", path_of(o))
            assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE, key(o)
            if o["kind"] == "Secret":
                assert live["data"] == o["data"], key(o)
        tokens = (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{NS}/secrets/opa-tokens"))["data"]
        assert all(len(base64.b64decode(tokens[k])) == 64 for k in ("sync-token", "admission-token", "reader-token"))
        ca = (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{NS}/secrets/fedplace-ca"))["data"]
        serving = (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{NS}/secrets/fedplace-admission-tls"))["data"]

        await register_as_helm_would("fedplace-register-webhook")
        assert log == ["fedplace-register-webhook"]
        webhook = await kube_json(kube_api, "GET", WEBHOOK_PATH)
        assert webhook["webhooks"][0]["clientConfig"]["caBundle"] == ca["ca.crt"]
        if external:  # the hook's service account and RBAC went with the hook
            assert not await exists(kube_api, f"/api/v1/namespaces/{NS}/serviceaccounts/fedplace-webhook-registrar")

        upgraded = await helm_call(h.upgrade, merged(values, {"packs": {"limitrange": {"enabled": True}}}))
        assert upgraded["status"] == "deployed" and upgraded["revision"] == 2
        await register_as_helm_would("fedplace-register-webhook")
        assert log == ["fedplace-register-webhook"] * 2
        assert (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{NS}/secrets/opa-tokens"))["data"] == tokens
        assert (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{NS}/secrets/fedplace-ca"))["data"] == ca
        renewed = (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{NS}/secrets/fedplace-admission-tls"))["data"]
        assert renewed["tls.crt"] != serving["tls.crt"] and renewed["ca.crt"] == serving["ca.crt"] == ca["ca.crt"]
        sync = pod_spec(await kube_json(kube_api, "GET", f"/apis/apps/v1/namespaces/{NS}/deployments/opa"))["containers"][1]
        assert "--replicate=v1/limitranges" in sync["args"]
        assert await exists(kube_api, "/apis/rbac.authorization.k8s.io/v1/clusterroles/fedplace:opa-kube-sync:limitranges")
        again = await kube_json(kube_api, "GET", WEBHOOK_PATH)
        assert again["metadata"]["uid"] == webhook["metadata"]["uid"], "the upgrade re-created the webhook"

        await register_as_helm_would("fedplace-unregister-webhook")
        await helm_call(h.uninstall)
        assert log[-1] == "fedplace-unregister-webhook"
        assert not await exists(kube_api, WEBHOOK_PATH)
        for o in installed:
            kept = o["kind"] in ("Namespace", "CustomResourceDefinition")
            assert await exists(kube_api, path_of(o)) is kept, key(o)
    finally:
        stop.set()
        if controllers is not None:
            await controllers
        if external:  # a failed test must not leave the release nor its webhook on a shared server
            for cleanup in (lambda: kube_json(kube_api, "DELETE", WEBHOOK_PATH),
                            lambda: asyncio.to_thread(h.uninstall, True)):
                try:
                    await cleanup()
                except (KubeApiError, helm.HelmError):
                    pass
