"""The Karmada component (deploy/components/karmada) on top of each overlay: it
changes only what it should, every object is valid, the webhook gets exactly
the bindings and (Cluster)PropagationPolicies besides the base's kinds (main
resources only) and is called by a URL its certificate names, the sync
replicates Karmada's Clusters instead of the federation ones plus the bindings
it remediates, both services talk to karmada-apiserver through a kubeconfig,
the RBAC is exactly what the flags need (patch on bindings only when
enforcing, in either order of the components), every object says which API
server it goes to, and the settings module compiles with the shipped packs and
switches the placement policy to Karmada, evaluated by OPA's own evaluator."""

from __future__ import annotations

import base64
import copy
import functools
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.conftest import OVERLAYS, ROOT, Rendered, container, flag, pod_spec, rego_sources, render
from tests.deploy.test_semantics import (
    EXEMPT,
    admission_args,
    covers,
    grants,
    mounted_secret,
    secret_key_for,
    sync_config,
    webhooks,
)
from tests.deploy.test_semantics import test_admission_rbac_is_exactly_what_it_uses as admission_rbac_is_exact
from tests.deploy.test_semantics import test_rbac_has_no_wildcards_or_escalation as rbac_has_no_wildcards
from tests.deploy.test_semantics import test_sync_rbac_follows_its_flags as sync_rbac_follows_its_flags

kubernetes_validate = pytest.importorskip("kubernetes_validate")
opa_bindings = pytest.importorskip("opa_bindings")

NS = "opa"
POLICY_NS = "kube-federation-scheduling-policy"
SETTINGS = "fedplace-placement-settings"
KUBECONFIG_SECRET = "fedplace-karmada-kubeconfig"
LABEL = "fedplace.io/apply-to"
KARMADA_NAMESPACES = {"karmada-system", "karmada-cluster"}

KARMADA_CLUSTERS = ("cluster.karmada.io", "v1alpha1", "clusters", False)
FEDERATION_CLUSTERS = ("federation.fedplace.io", "v1beta1", "clusters", False)
BINDINGS = {("work.karmada.io", "v1alpha2", "resourcebindings", True),
            ("work.karmada.io", "v1alpha2", "clusterresourcebindings", False)}
POLICIES = {("policy.karmada.io", "v1alpha1", "propagationpolicies", True),
            ("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", False)}
# (group, version, resource, scope) the component adds to the webhook, each for CREATE and UPDATE.
KARMADA_RULES = {("work.karmada.io", "v1alpha2", "resourcebindings", "Namespaced"),
                 ("work.karmada.io", "v1alpha2", "clusterresourcebindings", "Cluster"),
                 ("policy.karmada.io", "v1alpha1", "propagationpolicies", "Namespaced"),
                 ("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", "Cluster")}

# Overlays rendered with the component: name -> (resources, components), as an operator writes them.
VARIANTS = {
    **{f"karmada-{name}": (f"../{name}", ["karmada"]) for name in OVERLAYS},
    # The documented order: the component last, so the others' objects are labelled too.
    "karmada-enforce": ("../cert-manager", ["remediation-enforce", "karmada"]),
    # The other order still grants the patch on bindings (remediation-enforce adds it then).
    "karmada-enforce-after": ("../cert-manager", ["karmada", "remediation-enforce"]),
    # With the other packs' components (each addresses opa-kube-sync as containers/1).
    "karmada-all": ("../self-signed", ["limitrange", "schedulingpolicy", "remediation-enforce",
                                       "remediation-annotations-only", "karmada"]),
}


@pytest.fixture(scope="module", autouse=True)
def _cache_schemas():
    """kubernetes-validate re-reads the 2 MB definitions file per object; cache it (as test_render does)."""
    from kubernetes_validate import utils as kv_utils

    original = kv_utils.schema_contents
    kv_utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    yield
    kv_utils.schema_contents = original


@pytest.fixture(scope="module")
def with_component(kubectl: str, workspace: Path) -> dict[str, Rendered]:
    out = {}
    for name, (base, components) in VARIANTS.items():
        overlay = workspace / "overlays" / f"test-{name}"
        overlay.mkdir(exist_ok=True)
        (overlay / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources:\n  - {base}\ncomponents:\n" + "".join(f"  - ../../components/{c}\n" for c in components))
        out[name] = render(kubectl, overlay)
    return out


@pytest.fixture(scope="module", params=[f"karmada-{name}" for name in OVERLAYS])
def overlay(request: pytest.FixtureRequest, with_component: dict[str, Rendered]) -> Rendered:
    return with_component[request.param]


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest, with_component: dict[str, Rendered]) -> Rendered:
    return with_component[request.param]


def base_of(r: Rendered, rendered: dict[str, Rendered]) -> Rendered:
    return rendered[r.name.removeprefix("test-karmada-")]


def key(o: dict[str, Any]) -> tuple[str, str, str | None, str]:
    return o["apiVersion"].split("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]


def unlabelled(o: dict[str, Any]) -> dict[str, Any]:
    o = copy.deepcopy(o)
    labels = o["metadata"].get("labels") or {}
    labels.pop(LABEL, None)
    if not labels:
        o["metadata"].pop("labels", None)
    return o


def resources(r: Rendered) -> set[tuple[str, str, str, bool]]:
    return {(x.group, x.version, x.plural, x.namespaced) for x in sync_config(r).resources}


def remediated(r: Rendered) -> set[tuple[str, str, str, bool]]:
    return {(x.group, x.version, x.plural, x.namespaced) for x in sync_config(r).remediator.resources}


# -- what the component changes -------------------------------------------------------


def test_component_changes_only_what_it_should(overlay: Rendered, rendered: dict[str, Rendered]):
    base = base_of(overlay, rendered)
    keys = [key(o) for o in overlay.objects]
    assert len(keys) == len(set(keys)), "duplicate objects"
    before = {key(o): o for o in base.objects}
    after = {key(o): unlabelled(o) for o in overlay.objects}
    assert set(after) - set(before) == {
        ("rbac.authorization.k8s.io", "ClusterRole", None, "fedplace:opa-kube-sync:karmada"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", None, "fedplace:opa-kube-sync:karmada"),
        ("v1", "ConfigMap", POLICY_NS, SETTINGS),
    }
    # Karmada serves its own Clusters: the federation Cluster CRD (components/cluster-crd) goes.
    assert set(before) - set(after) == {
        ("apiextensions.k8s.io", "CustomResourceDefinition", None, "clusters.federation.fedplace.io")}
    assert not [o for o in overlay.of_kind("CustomResourceDefinition")], "Karmada's CRDs are Karmada's"
    changed = {k for k in set(after) & set(before) if after[k] != before[k]}
    assert changed == {("apps", "Deployment", NS, "opa"), ("apps", "Deployment", NS, "fedplace-admission"),
                       ("admissionregistration.k8s.io", "MutatingWebhookConfiguration", None, "fedplace-admission"),
                       ("rbac.authorization.k8s.io", "ClusterRole", None, "fedplace:opa-kube-sync"),
                       ("v1", "Namespace", None, NS)}  # labelled to stay on karmada-apiserver


@pytest.mark.parametrize("version", ("1.25", "latest"))
def test_objects_valid_against_kubernetes_schemas(variant: Rendered, version: str):
    from kubernetes_validate import utils as kv_utils

    v = kv_utils.major_minor(kv_utils.latest_version()) if version == "latest" else version
    errors, checked = [], 0
    for o in variant.objects:
        if o["apiVersion"].startswith(("cert-manager.io/", "scheduling.fedplace.io/")):
            continue  # no schema shipped (tests/deploy/test_render.py, test_schedulingpolicy_component.py)
        if o["kind"].startswith("ValidatingAdmissionPolic") and v == "1.25":
            continue  # GA in 1.30: the component says so
        try:
            kubernetes_validate.validate(o, v, strict=True)
            checked += 1
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{o['kind']}/{o['metadata']['name']}: {'/'.join(map(str, exc.path))}: {exc.message}")
    assert not errors, "\n".join(errors)
    assert checked > 25


# -- the webhook -------------------------------------------------------------------------


def rule_set(hook: dict[str, Any]) -> set[tuple[str, str, str, str, str]]:
    return {(g, v, res, op, rule.get("scope", "*")) for rule in hook["rules"] for g in rule["apiGroups"]
            for v in rule["apiVersions"] for res in rule["resources"] for op in rule["operations"]}


def test_webhook_gets_exactly_the_bindings_and_policies_besides_the_base_s_kinds(overlay: Rendered,
                                                                                  rendered: dict[str, Rendered]):
    (hook,) = webhooks(overlay)
    (before,) = webhooks(base_of(overlay, rendered))
    assert hook["rules"][:len(before["rules"])] == before["rules"], "the base's kinds (templates) are still sent"
    added = rule_set(hook) - rule_set(before)
    assert added == {(g, v, res, op, scope) for g, v, res, scope in KARMADA_RULES for op in ("CREATE", "UPDATE")}
    for _, _, res, op, _ in rule_set(hook):
        assert "*" not in res and "/" not in res, "main resources only: never */status"
        assert op in ("CREATE", "UPDATE")
    # Nothing else about the webhook changes but how it is called and what it exempts.
    same = {k: v for k, v in hook.items() if k not in ("rules", "clientConfig", "namespaceSelector")}
    assert same == {k: v for k, v in before.items() if k not in ("rules", "clientConfig", "namespaceSelector")}
    assert hook["failurePolicy"] == "Fail", "fail closed: Karmada's controllers retry a refused write"


def test_webhook_is_called_by_a_url_its_certificate_names(overlay: Rendered, rendered: dict[str, Rendered]):
    (hook,) = webhooks(overlay)
    (before,) = webhooks(base_of(overlay, rendered))
    cc = hook["clientConfig"]
    assert "service" not in cc, "karmada-apiserver would look the Service up in its own API"
    assert {k: v for k, v in cc.items() if k != "url"} == {k: v for k, v in before["clientConfig"].items()
                                                           if k != "service"}, "caBundle kept"
    url = urlsplit(cc["url"])
    ref = before["clientConfig"]["service"]
    assert (url.scheme, url.hostname, url.port, url.path) == \
        ("https", f"{ref['name']}.{ref['namespace']}.svc", ref["port"], ref["path"])
    svc = overlay.get("Service", ref["name"], ref["namespace"])
    assert any(p["port"] == url.port for p in svc["spec"]["ports"])
    # The serving certificate names that host.
    w = overlay.get("Deployment", "fedplace-admission", NS)
    secret_name = mounted_secret(w, "admission", admission_args(overlay).tls_cert_file)
    secret = overlay.secret(secret_name, NS)
    if secret is not None:  # self-signed: the certificate itself
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    else:  # cert-manager: the Certificate it issues
        (cert,) = [c for c in overlay.of_kind("Certificate") if c["spec"]["secretName"] == secret_name]
        names = cert["spec"]["dnsNames"]
    assert url.hostname in names


def test_webhook_and_sync_exempt_karmada_s_own_namespaces(overlay: Rendered):
    (hook,) = webhooks(overlay)
    exprs = hook["namespaceSelector"]["matchExpressions"]
    exempt = {v for e in exprs if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"
              for v in e["values"]}
    assert exempt == EXEMPT | KARMADA_NAMESPACES
    assert sync_config(overlay).ignore_namespaces == exempt, "exempt from admission ⇒ not replicated or remediated"


# -- the sync ----------------------------------------------------------------------------


def test_sync_replicates_karmada_clusters_instead_of_the_federation_ones(overlay: Rendered,
                                                                         rendered: dict[str, Rendered]):
    got, before = resources(overlay), resources(base_of(overlay, rendered))
    assert KARMADA_CLUSTERS in got and FEDERATION_CLUSTERS not in got
    assert [r for r in got if r[2] == "clusters"] == [KARMADA_CLUSTERS], "one data.kubernetes.clusters"
    assert got - before == {KARMADA_CLUSTERS} | BINDINGS | POLICIES
    assert before - got == {FEDERATION_CLUSTERS}
    assert sync_config(overlay).replicate_path == "kubernetes", "the packs read data.kubernetes"


def test_sync_remediates_the_bindings_and_replicates_each(variant: Rendered, rendered: dict[str, Rendered]):
    got = remediated(variant)
    assert got - remediated(rendered["cert-manager"]) == BINDINGS
    assert got <= resources(variant), "the remediator reads what the sync replicates"


def test_settings_name_only_kinds_the_sync_replicates_and_the_webhook_sends(overlay: Rendered):
    kinds = evaluate(engine(overlay), "data.io.k8s.federation.karmada.templates")
    replicated = {plural for _, _, plural, _ in resources(overlay)}
    assert set(kinds.values()) <= replicated, "a template not replicated excludes every cluster from its binding"
    (hook,) = webhooks(overlay)
    sent = {res for _, _, res, op, _ in rule_set(hook) if op == "CREATE"}
    assert set(kinds.values()) <= sent, "templates no cluster satisfies are denied"


def test_services_talk_to_karmada_apiserver_with_their_own_kubeconfig(overlay: Rendered):
    keys = set()
    for deploy, cname in (("opa", "opa-kube-sync"), ("fedplace-admission", "admission")):
        w = overlay.get("Deployment", deploy, NS)
        path = flag(container(w, cname), "--kubeconfig")
        assert path, f"{cname}: no --kubeconfig"
        secret, k = secret_key_for(w, cname, path)
        assert secret == KUBECONFIG_SECRET
        keys.add(k)
        # The host cluster's service account token is mounted nowhere.
        assert pod_spec(w)["automountServiceAccountToken"] is False
        assert not any("serviceAccountToken" in s for v in pod_spec(w)["volumes"]
                       for s in (v.get("projected") or {}).get("sources", []))
        for c in pod_spec(w)["containers"]:
            assert not any(m["mountPath"].startswith("/var/run/secrets/kubernetes.io")
                           for m in c.get("volumeMounts") or [])
    assert keys == {"opa-kube-sync", "fedplace-admission"}, "one identity each"
    assert overlay.secret(KUBECONFIG_SECRET, NS) is None, "made by hand on the host (docs/karmada.md)"
    assert admission_args(overlay).kubeconfig == flag(container(overlay.get("Deployment", "fedplace-admission", NS),
                                                                "admission"), "--kubeconfig")
    assert sync_config(overlay).kubeconfig


# -- RBAC --------------------------------------------------------------------------------


def test_rbac_is_exactly_what_the_flags_need(variant: Rendered):
    """The base's checks, on every variant: enforcing needs patch on the bindings, dry-run none."""
    sync_rbac_follows_its_flags(variant)
    admission_rbac_is_exact(variant)
    if variant.name != "test-karmada-all":  # the SchedulingPolicy pack's sync reads RBAC objects, by design
        rbac_has_no_wildcards(variant)


def test_sync_may_read_karmada_clusters_and_bindings(variant: Rendered):
    got = grants(variant, "opa-kube-sync", NS)
    enforcing = sync_config(variant).remediator.mode == "enforce"
    for group, _, plural, _ in BINDINGS:
        verbs = {v for scope, g, res, v in got if (g, res) == (group, plural)}
        assert verbs == ({"get", "list", "watch", "patch"} if enforcing else {"get", "list", "watch"}), plural
        assert all(covers(got, None, group, plural, v) for v in verbs), "cluster-wide"
    assert {v for _, g, res, v in got if (g, res) == ("cluster.karmada.io", "clusters")} == {"list", "watch"}
    assert not {v for _, g, _, v in got if g == "federation.fedplace.io"}, "federation Clusters not replicated"
    for plural in ("propagationpolicies", "clusterpropagationpolicies"):
        verbs = {v for _, g, res, v in got if (g, res) == ("policy.karmada.io", plural)}
        assert verbs == {"list", "watch"}, f"{plural}: replicated (the user's exclude entries), never written"
        assert covers(got, None, "policy.karmada.io", plural, "list"), "cluster-wide"


def test_enforced_remediation_covers_bindings_in_either_order(with_component: dict[str, Rendered]):
    for name in ("karmada-enforce", "karmada-enforce-after"):
        r = with_component[name]
        assert sync_config(r).remediator.mode == "enforce"
        got = grants(r, "opa-kube-sync", NS)
        for group, _, plural, _ in BINDINGS:
            assert covers(got, None, group, plural, "patch"), (name, plural)
        # Exactly one of the two patches applied.
        rules = [rule for o in r.of_kind("ClusterRole") for rule in o["rules"] if "patch" in rule["verbs"]
                 and "work.karmada.io" in rule["apiGroups"]]
        assert len(rules) == 1, (name, rules)


# -- where each object goes ----------------------------------------------------------------


def test_the_opa_namespace_stays_on_karmada_apiserver(variant: Rendered):
    """Karmada's namespace controller copies every namespace to the members unless it is labelled."""
    (ns,) = [o for o in variant.of_kind("Namespace") if o["metadata"]["name"] == NS]
    assert ns["metadata"]["labels"]["namespace.karmada.io/skip-auto-propagation"] == "true"


def test_sync_replicates_the_propagation_policies(variant: Rendered):
    """The user's exclude entries of a binding are those its (Cluster)PropagationPolicy holds."""
    assert {r for r in resources(variant) if r[0] == "policy.karmada.io"} == POLICIES


def test_every_object_says_which_api_server_it_goes_to(variant: Rendered):
    where = {key(o): (o["metadata"].get("labels") or {}).get(LABEL) for o in variant.objects}
    if variant.name == "test-karmada-enforce-after":
        # Listed after this component, another component's objects are not labelled: hence "list it last".
        assert {k for k, v in where.items() if v is None} == {
            ("rbac.authorization.k8s.io", kind, None, "fedplace:opa-kube-sync:remediate")
            for kind in ("ClusterRole", "ClusterRoleBinding")}
        return
    assert set(where.values()) <= {"host-cluster", "karmada-apiserver", "both"}, \
        [k for k, v in where.items() if v is None]
    host = {k for k, v in where.items() if v in ("host-cluster", "both")}
    api = {k for k, v in where.items() if v in ("karmada-apiserver", "both")}
    for o in variant.objects:
        k = key(o)
        if o["kind"] in ("Deployment", "Service", "PodDisruptionBudget") or \
                o["apiVersion"].startswith(("cert-manager.io/", "monitoring.coreos.com/")):
            assert where[k] == "host-cluster", k
        elif o["kind"] in ("ServiceAccount",) or k == ("v1", "Namespace", None, NS):
            assert where[k] == "both", k
        elif o["kind"] in ("Secret", "ConfigMap") and o["metadata"].get("namespace") == NS:
            assert where[k] == "host-cluster", k
        else:  # webhook, RBAC, policy namespace and ConfigMaps, CRDs, admission policies, SchedulingPolicies
            assert where[k] == "karmada-apiserver", k
    # What the pods need is on the host: their namespace, service accounts, Secrets, ConfigMaps.
    for w in variant.of_kind("Deployment"):
        ns = w["metadata"]["namespace"]
        assert ("v1", "Namespace", None, ns) in host
        assert ("v1", "ServiceAccount", ns, pod_spec(w)["serviceAccountName"]) in host
        for v in pod_spec(w)["volumes"]:
            if "configMap" in v:
                assert ("v1", "ConfigMap", ns, v["configMap"]["name"]) in host
            if "secret" in v and v["secret"]["secretName"] != KUBECONFIG_SECRET and variant.secret(
                    v["secret"]["secretName"], ns) is not None:
                assert ("v1", "Secret", ns, variant.secret(v["secret"]["secretName"], ns)["metadata"]["name"]) in host
    # What the RBAC names exists on karmada-apiserver: namespaces, subjects, roles.
    for b in variant.of_kind("RoleBinding") + variant.of_kind("ClusterRoleBinding"):
        ns = b["metadata"].get("namespace")
        if ns and ns != "kube-system":
            assert ("v1", "Namespace", None, ns) in api, ns
        for s in b["subjects"]:
            if s["kind"] == "ServiceAccount" and s["namespace"] != "kube-system":
                assert ("v1", "ServiceAccount", s["namespace"], s["name"]) in api
        ref = b["roleRef"]
        assert ("rbac.authorization.k8s.io", ref["kind"], None if ref["kind"] == "ClusterRole" else ns,
                ref["name"]) in api


# -- the settings module, evaluated with the shipped packs ----------------------------------


def test_the_pack_s_configmap_is_in_the_base(overlay: Rendered):
    cm = overlay.get("ConfigMap", "fedplace-karmada", POLICY_NS)
    assert cm["data"] == rego_sources()["fedplace-karmada"]


def policy_modules(r: Rendered, without: str | None = None) -> dict[str, str]:
    """The modules opa-kube-sync loads from the build: every policy ConfigMap and its replicated root."""
    out = {"opa-kube-sync/replicated-root.rego": (ROOT / "policies/lib/generated/replicated_root.rego").read_text()}
    for cm in r.of_kind("ConfigMap"):
        meta = cm["metadata"]
        if meta.get("namespace") == POLICY_NS and meta["name"] != without:
            out.update({f"{POLICY_NS}/{meta['name']}/{k}": v for k, v in cm["data"].items()})
    return out


def karmada_cluster(name: str, region: str, level: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"pci-compliance-level": level}}, "spec": {"region": region}}


EU = "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"
PCI = "policy.federation.alpha.kubernetes.io/pci-compliance-level"
DATA = {"kubernetes": {
    "clusters": {"eu-1": karmada_cluster("eu-1", "eu-west-1", "3"), "us-1": karmada_cluster("us-1", "us-east-1", "3")},
    "deployments": {"shop": {"pay": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {"name": "pay", "namespace": "shop", "annotations": {EU: "true"}}}}},
}}


_ENGINES: dict[tuple[str, str | None], Any] = {}


def engine(r: Rendered, without: str | None = None) -> Any:
    """OPA's evaluator holding the build's policy modules (one per render, reused) and DATA."""
    k = (r.name, without)
    if k not in _ENGINES:
        e = opa_bindings.OpaEngine()
        for mid, src in policy_modules(r, without).items():
            e.add_policy(mid, src)
        e.add_data(copy.deepcopy(DATA))
        _ENGINES[k] = e
    return _ENGINES[k]


def evaluate(e: Any, query: str, input_doc: Any = None) -> Any:
    result = e.eval_query(f"x := {query}", input_doc)
    return result[0]["x"] if result else None


def test_settings_module_compiles_with_the_packs_and_switches_to_karmada(with_component: dict[str, Rendered]):
    r = with_component["karmada-all"]  # every pack's ConfigMap and settings loaded together, as in OPA
    e = engine(r)
    assert evaluate(e, "data.io.k8s.federation.placement.control_plane") == "karmada"
    assert evaluate(e, "data.io.k8s.federation.placement.karmada") is True
    assert evaluate(e, "data.io.k8s.federation.placement.settings_errors") == []
    assert evaluate(e, "data.io.k8s.federation.karmada.settings_errors") == []
    # The shipped karmada_templates are the pack's own defaults, written out.
    default = engine(r, without=SETTINGS)
    assert evaluate(e, "data.io.k8s.federation.karmada.templates") == \
        evaluate(default, "data.io.k8s.federation.karmada.templates")
    assert evaluate(default, "data.io.k8s.federation.placement.control_plane") == "federation-v1"


def test_karmada_mode_decides_bindings_and_templates_not_federation_annotations(with_component: dict[str, Rendered]):
    r = with_component["karmada-cert-manager"]
    decision = "data.io.k8s.federation.admission"
    replicaset = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "rs", "namespace": "shop", "annotations": {EU: "true"}}}
    # Federation v1's rules stand down: no replica-set-preferences (they do without the settings).
    assert not evaluate(engine(r), decision, replicaset).get("annotations")
    assert evaluate(engine(r, without=SETTINGS), decision, replicaset)["annotations"]
    # A binding of an EU-only template excludes the US cluster, and is never denied.
    binding = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
               "metadata": {"name": "pay-deployment", "namespace": "shop", "annotations": {}},
               "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop",
                                     "name": "pay"},
                        "placement": {}}}  # as Karmada's detector writes it (none: an attached binding)
    d = evaluate(engine(r), decision, binding)
    assert d["annotations"]["fedplace.io/excluded-clusters"] == ["us-1"]
    assert not d.get("errors")
    assert {"op": "add", "path": "/spec/placement/clusterAffinity", "value": {"exclude": ["us-1"]}} in \
        d["patches"]["karmada"]
    # A template no cluster satisfies is denied in karmada mode.
    nowhere = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "x", "namespace": "shop", "annotations": {EU: "true", PCI: "9"}}}
    assert evaluate(engine(r), decision, nowhere)["errors"]
