"""Semantic checks of the rendered manifests: what a schema cannot see.

Security context of every container, the webhook's timeouts and failure
policy against the admission flags, the wiring webhook → Service → pod port,
the flags each component is given (parsed by the components' own parsers),
least-privilege RBAC derived from those flags, the policy ConfigMaps against
policies/, and the Cluster CRD against the data model.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.conftest import Rendered, container, containers, expand_env, flag, flags, pod_spec, rego_sources

NS = "opa"
POLICY_NS = "kube-federation-scheduling-policy"
# cert-manager renews the webhook's certificate: a webhook outage must not block it.
EXEMPT = {"kube-system", NS, POLICY_NS, "cert-manager"}


def workloads(r: Rendered) -> list[dict[str, Any]]:
    return [o for o in r.objects if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")]


def admission(r: Rendered) -> dict[str, Any]:
    return container(r.get("Deployment", "fedplace-admission", NS), "admission")


def sync(r: Rendered) -> dict[str, Any]:
    return container(r.get("Deployment", "opa", NS), "opa-kube-sync")


def opa(r: Rendered) -> dict[str, Any]:
    return container(r.get("Deployment", "opa", NS), "opa")


def webhooks(r: Rendered) -> list[dict[str, Any]]:
    return r.get("MutatingWebhookConfiguration", "fedplace-admission")["webhooks"]


def admission_args(r: Rendered) -> Any:
    from fedplace.admission.config import build_parser

    return build_parser().parse_args(admission(r).get("args") or [])


def sync_config(r: Rendered) -> Any:
    c = sync(r)
    env = {"POD_NAMESPACE": NS, "POD_NAME": "opa-0"}
    env.update({e["name"]: e["value"] for e in c.get("env") or [] if "value" in e})
    args = expand_env(c.get("args") or [], env)
    try:
        from fedplace.sync.config import parse_args
    except ImportError:  # older layout
        try:
            from fedplace.sync.settings import parse_settings as parse_args  # type: ignore[no-redef]
        except ImportError:
            pytest.skip("opa-kube-sync's flag parser (sync.config) is not importable")
    return parse_args(args)


# -- every container -------------------------------------------------------------


def test_every_container_is_locked_down(overlay: Rendered):
    seen = 0
    for w in workloads(overlay):
        pod = pod_spec(w)
        psc = pod.get("securityContext") or {}
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
        for c in containers(w):
            seen += 1
            where = f"{w['metadata']['name']}/{c['name']}"
            sc = c.get("securityContext") or {}
            assert sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", psc.get("runAsUser", 1)) != 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("privileged", False) is False, where
            assert "ALL" in (sc.get("capabilities") or {}).get("drop", []), where
            assert not (sc.get("capabilities") or {}).get("add"), where
            seccomp = sc.get("seccompProfile") or psc.get("seccompProfile") or {}
            assert seccomp.get("type") == "RuntimeDefault", where
            res = c.get("resources") or {}
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(res.get(kind) or {}), f"{where}: resources.{kind}"
            assert not c["image"].endswith(":latest") and ":" in c["image"], f"{where}: image not pinned"
    assert seen == 3


def test_namespaces_enforce_restricted_pod_security(overlay: Rendered):
    for name in (NS, POLICY_NS):
        labels = overlay.get("Namespace", name)["metadata"].get("labels") or {}
        assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", name


def test_highly_available_with_disruption_budgets(overlay: Rendered):
    for name in ("fedplace-admission", "opa"):
        d = overlay.get("Deployment", name, NS)
        assert d["spec"]["replicas"] >= 2, name
        assert d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, name
        labels = d["spec"]["template"]["metadata"]["labels"]
        anti = pod_spec(d)["affinity"]["podAntiAffinity"]
        terms = [t.get("podAffinityTerm", t) for t in
                 anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])
                 + anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])]
        assert any(set(t["labelSelector"]["matchLabels"].items()) <= set(labels.items()) for t in terms), name
        pdbs = [p for p in overlay.of_kind("PodDisruptionBudget") if p["metadata"]["namespace"] == NS
                and set(p["spec"]["selector"]["matchLabels"].items()) <= set(labels.items())]
        assert len(pdbs) == 1 and pdbs[0]["spec"]["minAvailable"] == 1, name
        assert pdbs[0]["spec"]["minAvailable"] < d["spec"]["replicas"]


# -- the webhook -----------------------------------------------------------------


def test_webhook_timeout_exceeds_admission_deadline(overlay: Rendered):
    args = admission_args(overlay)
    deadline = args.deadline if args.deadline is not None else 5.0  # admission.config's default
    opa_timeout = args.opa_timeout if args.opa_timeout is not None else 2.0
    assert opa_timeout <= deadline
    for w in webhooks(overlay):
        timeout = w.get("timeoutSeconds", 10)
        assert 1 <= timeout <= 30
        # Margin for TLS, queueing and the way back, so the webhook's own
        # explained answer arrives before the API server gives up.
        assert timeout >= deadline + 3, (timeout, deadline)


def test_webhook_fails_closed_without_side_effects(overlay: Rendered):
    for w in webhooks(overlay):
        assert w["failurePolicy"] == "Fail"
        assert w["sideEffects"] == "None"
        assert w["admissionReviewVersions"] == ["v1"]
        assert w.get("matchPolicy", "Equivalent") == "Equivalent"


def test_webhook_rules_cover_replicaset_create_and_update(overlay: Rendered):
    for w in webhooks(overlay):
        covered = {(g, v, res, op) for rule in w["rules"] for g in rule["apiGroups"] for v in rule["apiVersions"]
                   for res in rule["resources"] for op in rule["operations"]}
        assert {("apps", "v1", "replicasets", "CREATE"), ("apps", "v1", "replicasets", "UPDATE")} <= covered
        for _, _, res, op in covered:
            assert "*" not in res and "/" not in res, "only main resources: no */status, */scale"
            assert op != "*"


def test_webhook_exempts_control_plane_namespaces(overlay: Rendered):
    for w in webhooks(overlay):
        exprs = w["namespaceSelector"]["matchExpressions"]
        exempt = {v for e in exprs if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"
                  for v in e["values"]}
        assert EXEMPT <= exempt, EXEMPT - exempt
        assert not w["namespaceSelector"].get("matchLabels")
    # …and they are where fedplace actually runs and reads policy from.
    for d in workloads(overlay):
        assert d["metadata"]["namespace"] in EXEMPT
    assert admission_args(overlay).policy_namespace in EXEMPT


def test_webhook_points_at_the_admission_pods(overlay: Rendered):
    for w in webhooks(overlay):
        ref = w["clientConfig"]["service"]
        assert ref["path"] == "/mutate"
        svc = overlay.get("Service", ref["name"], ref["namespace"])
        port = next(p for p in svc["spec"]["ports"] if p["port"] == ref.get("port", 443))
        deploy = overlay.get("Deployment", "fedplace-admission", ref["namespace"])
        pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
        assert set(svc["spec"]["selector"].items()) <= set(pod_labels.items())
        c = admission(overlay)
        target = port["targetPort"]
        cport = next(p for p in c["ports"] if target in (p.get("name"), p["containerPort"]))
        listen = admission_args(overlay).listen
        assert listen and int(listen.rpartition(":")[2]) == cport["containerPort"]
        assert listen.rpartition(":")[0] in ("0.0.0.0", "[::]", "::"), "must listen beyond loopback"
        assert admission_args(overlay).tls_cert_file, "the API server only calls HTTPS webhooks"


def test_admission_probes_use_https_on_its_port(overlay: Rendered):
    c = admission(overlay)
    port_names = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path and get["scheme"] == "HTTPS"
        assert port_names.get(get["port"], get["port"]) == 8443


def test_cert_manager_certificates_cover_the_services(rendered: dict[str, Rendered]):
    r = rendered["cert-manager"]
    certs = {c["spec"]["secretName"]: c for c in r.of_kind("Certificate")}
    # The webhook's serving certificate: the Secret mounted for --tls-cert-file.
    admission_secret = mounted_secret(r.get("Deployment", "fedplace-admission", NS), "admission",
                                      admission_args(r).tls_cert_file)
    cert = certs[admission_secret]
    for w in webhooks(r):
        ref = w["clientConfig"]["service"]
        assert f"{ref['name']}.{ref['namespace']}.svc" in cert["spec"]["dnsNames"]
        assert f"{ref['name']}.{ref['namespace']}.svc.cluster.local" in cert["spec"]["dnsNames"]
    # The CA injector reads that Certificate.
    annotation = r.get("MutatingWebhookConfiguration", "fedplace-admission")["metadata"]["annotations"]
    ns, _, name = annotation["cert-manager.io/inject-ca-from"].partition("/")
    assert r.get("Certificate", name, ns)["spec"]["secretName"] == admission_secret
    # OPA's certificate covers the host fedplace-admission dials.
    opa_host = urlsplit(admission_args(r).opa_url).hostname
    opa_secret = mounted_secret(r.get("Deployment", "opa", NS), "opa", flag(opa(r), "--tls-cert-file"))
    assert opa_host in certs[opa_secret]["spec"]["dnsNames"]


def mounted_secret(workload: dict[str, Any], cname: str, path: str) -> str:
    """The Secret behind the volume that holds ``path`` in container ``cname``."""
    c = container(workload, cname)
    mount = max((m for m in c.get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")),
                key=lambda m: len(m["mountPath"]), default=None)
    assert mount, f"{cname}: {path} is not on a mounted volume"
    volume = next(v for v in pod_spec(workload)["volumes"] if v["name"] == mount["name"])
    assert "secret" in volume, f"{cname}: {path} is not from a Secret"
    return volume["secret"]["secretName"]


def secret_key_for(workload: dict[str, Any], cname: str, path: str) -> tuple[str, str]:
    """(Secret, key) that provides the file ``path`` in container ``cname``."""
    c = container(workload, cname)
    mount = max((m for m in c.get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")),
                key=lambda m: len(m["mountPath"]))
    rel = path[len(mount["mountPath"].rstrip("/")) + 1:]
    volume = next(v for v in pod_spec(workload)["volumes"] if v["name"] == mount["name"])
    secret = volume["secret"]
    for item in secret.get("items") or []:
        if item["path"] == rel:
            return secret["secretName"], item["key"]
    assert not secret.get("items"), f"{path}: not among the volume's items"
    return secret["secretName"], rel


def test_every_file_flag_is_backed_by_a_mount(overlay: Rendered):
    checks = [
        ("fedplace-admission", "admission", ["--tls-cert-file", "--tls-private-key-file", "--opa-ca-file",
                                             "--opa-token-file", "--client-ca-file", "--config"]),
        ("opa", "opa-kube-sync", ["--opa-token-file", "--notifications-token-file", "--opa-ca-file",
                                  "--kubeconfig"]),
        ("opa", "opa", ["--tls-cert-file", "--tls-private-key-file"]),
    ]
    for deploy, cname, names in checks:
        w = overlay.get("Deployment", deploy, NS)
        c = container(w, cname)
        for name in names:
            path = flag(c, name)
            if path is None:
                continue
            secret, key = secret_key_for(w, cname, path)
            rendered_secret = overlay.secret(secret, NS)
            if rendered_secret is not None:
                assert key in (rendered_secret.get("data") or {}), f"{cname} {name}: {secret} has no {key}"
            else:  # issued by cert-manager: a kubernetes.io/tls Secret
                assert any(cm["spec"]["secretName"] == secret for cm in overlay.of_kind("Certificate")), secret
                assert key in ("tls.crt", "tls.key", "ca.crt")


# -- OPA and its tokens ----------------------------------------------------------


def test_opa_is_pinned_authenticated_and_authorized(overlay: Rendered):
    c = opa(overlay)
    image, _, tag = c["image"].rpartition(":")
    assert image == "openpolicyagent/opa" and tag.split(".")[0] == "1" and tag.count(".") == 2, c["image"]
    f = flags(c)
    assert c["args"][:2] == ["run", "--server"]
    assert f["--authentication"] == ["token"] and f["--authorization"] == ["basic"]
    # The authz policy file is mounted from the ConfigMap built from deploy/base/opa/authz.rego.
    policy_file = [a for a in c["args"] if not a.startswith("-") and a not in ("run",)]
    assert policy_file == ["/authz/authz.rego"]
    w = overlay.get("Deployment", "opa", NS)
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/authz")
    volume = next(v for v in pod_spec(w)["volumes"] if v["name"] == mount["name"])
    cm = next(o for o in overlay.of_kind("ConfigMap") if o["metadata"]["name"] == volume["configMap"]["name"])
    from tests.deploy.conftest import DEPLOY

    assert cm["data"]["authz.rego"] == (DEPLOY / "base" / "opa" / "authz.rego").read_text()


def test_opa_listeners_match_their_clients(overlay: Rendered):
    addrs = flags(opa(overlay))["--addr"]
    by_scheme = {urlsplit(a).scheme: urlsplit(a) for a in addrs}
    assert set(by_scheme) == {"https", "http"}
    # Plain HTTP only on loopback, for the sidecar.
    assert by_scheme["http"].hostname == "127.0.0.1"
    sync_url = urlsplit(flag(sync(overlay), "--opa-url"))
    assert (sync_url.scheme, sync_url.hostname, sync_url.port) == ("http", "127.0.0.1", by_scheme["http"].port)
    # fedplace-admission: HTTPS through Service opa to the TLS listener, verifying OPA's CA.
    adm = admission_args(overlay)
    url = urlsplit(adm.opa_url)
    assert url.scheme == "https" and adm.opa_ca_file
    svc_name, svc_ns = url.hostname.split(".")[:2]
    svc = overlay.get("Service", svc_name, svc_ns)
    port = next(p for p in svc["spec"]["ports"] if p["port"] == url.port)
    cport = next(p for p in opa(overlay)["ports"] if port["targetPort"] in (p["name"], p["containerPort"]))
    assert cport["containerPort"] == by_scheme["https"].port
    # Probes go to the diagnostic listener (no token needed), in plain HTTP.
    diag = urlsplit(flag(opa(overlay), "--diagnostic-addr"))
    assert diag.scheme == "http"
    for probe in ("readinessProbe", "livenessProbe"):
        get = opa(overlay)[probe]["httpGet"]
        ports = {p["name"]: p["containerPort"] for p in opa(overlay)["ports"]}
        assert get["path"] == "/health" and ports.get(get["port"], get["port"]) == diag.port
        assert get.get("scheme", "HTTP") == "HTTP"


def test_clients_read_the_tokens_opa_checks(overlay: Rendered):
    """The token file each client sends is the Secret key OPA's authz policy compares with."""
    w_opa = overlay.get("Deployment", "opa", NS)
    env = {e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
           for e in opa(overlay).get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
    assert not any("value" in e and "TOKEN" in e["name"] for e in opa(overlay).get("env", [])), "literal token"
    sync_file = flag(sync(overlay), "--opa-token-file")
    assert secret_key_for(w_opa, "opa-kube-sync", sync_file) == env["FEDPLACE_SYNC_TOKEN"]
    w_adm = overlay.get("Deployment", "fedplace-admission", NS)
    assert secret_key_for(w_adm, "admission", admission_args(overlay).opa_token_file) == \
        env["FEDPLACE_ADMISSION_TOKEN"]
    # Three different keys: a leaked admission token cannot write data or policies.
    notify = secret_key_for(w_opa, "opa-kube-sync", flag(sync(overlay), "--notifications-token-file"))
    assert len({env["FEDPLACE_SYNC_TOKEN"], env["FEDPLACE_ADMISSION_TOKEN"], notify}) == 3


def test_only_the_sidecar_gets_an_api_token(overlay: Rendered):
    w = overlay.get("Deployment", "opa", NS)
    assert pod_spec(w)["automountServiceAccountToken"] is False
    sa_path = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert any(m["mountPath"] == sa_path for m in sync(overlay)["volumeMounts"])
    assert not any(m["mountPath"] == sa_path for m in opa(overlay).get("volumeMounts", []))


# -- the components' flags, parsed by their own parsers --------------------------


def test_admission_flags_parse_with_its_parser(overlay: Rendered):
    args = admission_args(overlay)  # argparse exits on an unknown flag
    assert args.policy_namespace == POLICY_NS
    assert admission(overlay)["command"] == ["fedplace-admission"]


def test_sync_flags_parse_with_its_parser(overlay: Rendered):
    cfg = sync_config(overlay)
    assert sync(overlay)["command"] == ["opa-kube-sync"]
    assert cfg.policy_namespaces == [POLICY_NS]
    plurals = {(r.group, r.version, r.plural, r.namespaced) for r in cfg.resources}
    assert ("apps", "v1", "replicasets", True) in plurals
    assert ("federation.fedplace.io", "v1beta1", "clusters", False) in plurals
    assert cfg.replicate_path == "kubernetes"
    assert cfg.listen[0] == "0.0.0.0", "kubelet probes reach the pod IP"
    assert cfg.ignore_namespaces == EXEMPT, "exempt from admission ⇒ not replicated or remediated"
    assert cfg.remediator.mode == "dry-run", "the base only reports; enforcing is an explicit choice"
    assert cfg.remediator.lease_namespace == NS
    assert cfg.remediator.notifications_token_file


def test_enforce_component_switches_remediation(rendered: dict[str, Rendered]):
    cfg = sync_config(rendered["test-enforce"])
    assert cfg.remediator.mode == "enforce"
    a, b = copy.deepcopy(rendered["test-enforce"].objects), copy.deepcopy(rendered["cert-manager"].objects)
    # …and grants the patch enforcing needs (the base grants none).
    added = [o for o in a if o["metadata"]["name"] == "fedplace:opa-kube-sync:remediate"]
    assert sorted(o["kind"] for o in added) == ["ClusterRole", "ClusterRoleBinding"]
    a = [o for o in a if o not in added]
    for objs in (a, b):
        for o in objs:
            if o["kind"] == "Deployment" and o["metadata"]["name"] == "opa":
                c = container(o, "opa-kube-sync")
                c["env"] = [e for e in c["env"] if e["name"] != "FEDPLACE_REMEDIATE"]
                # A strategic merge patch moves the patched container first; order is immaterial.
                pod_spec(o)["containers"].sort(key=lambda c: c["name"])
    assert a == b, "the component changes nothing but the remediation mode"


def test_sync_probes(overlay: Rendered):
    c = sync(overlay)
    port = sync_config(overlay).listen[1]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path and ports.get(get["port"], get["port"]) == port


# -- RBAC ------------------------------------------------------------------------


def grants(r: Rendered, sa_name: str, sa_ns: str) -> set[tuple[str | None, str, str, str]]:
    """{(namespace or None for cluster-wide, apiGroup, resource, verb)} bound to a ServiceAccount."""
    out: set[tuple[str | None, str, str, str]] = set()
    for b in r.of_kind("ClusterRoleBinding") + r.of_kind("RoleBinding"):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == sa_name and s.get("namespace") == sa_ns
                   for s in b.get("subjects") or []):
            continue
        ref = b["roleRef"]
        role = r.get(ref["kind"], ref["name"], None if ref["kind"] == "ClusterRole" else b["metadata"]["namespace"])
        scope = None if b["kind"] == "ClusterRoleBinding" else b["metadata"]["namespace"]
        for rule in role["rules"]:
            for g in rule.get("apiGroups", []):
                for res in rule.get("resources", []):
                    for verb in rule["verbs"]:
                        out.add((scope, g, res, verb))
    return out


def covers(granted: set[tuple[str | None, str, str, str]], ns: str | None, group: str, res: str, verb: str) -> bool:
    return (None, group, res, verb) in granted or (ns is not None and (ns, group, res, verb) in granted)


SECRET_VERBS = {"fedplace:opa-kube-sync": {"get", "list", "watch"}, "fedplace:opa-kube-sync:remediate": {"patch"}}


def test_rbac_has_no_wildcards_or_escalation(overlay: Rendered):
    for role in overlay.of_kind("ClusterRole") + overlay.of_kind("Role"):
        for rule in role["rules"]:
            for key in ("verbs", "resources", "apiGroups", "resourceNames"):
                assert "*" not in (rule.get(key) or []), f"{role['metadata']['name']}: {key} has *"
            assert not rule.get("nonResourceURLs")
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            assert not {"clusterroles", "roles", "clusterrolebindings", "rolebindings"} & \
                set(rule.get("resources", [])), role["metadata"]["name"]
            if "secrets" in rule.get("resources", []):
                # Secrets are placed through the cluster selector: opa-kube-sync replicates them
                # (without their content, sync/replicate.py strip) and, enforcing, patches their
                # annotations. Nothing else may touch them.
                assert SECRET_VERBS.get(role["metadata"]["name"], set()) >= set(rule["verbs"]), role["metadata"]["name"]
        assert not role.get("aggregationRule")


def test_admission_rbac_is_exactly_what_it_uses(overlay: Rendered):
    sa = pod_spec(overlay.get("Deployment", "fedplace-admission", NS))["serviceAccountName"]
    assert overlay.get("ServiceAccount", sa, NS)
    got = grants(overlay, sa, NS)
    policy_ns = admission_args(overlay).policy_namespace
    needed = {(policy_ns, "", "configmaps", "list"), (policy_ns, "", "configmaps", "watch"),
              (None, "", "events", "create"), (None, "", "events", "patch")}
    for n in needed:
        assert covers(got, *n), n
    assert got == needed, f"more than needed: {got - needed}"


def test_sync_rbac_follows_its_flags(overlay: Rendered):
    """Derived from the sidecar's flags: adding --replicate=… without RBAC fails here."""
    w = overlay.get("Deployment", "opa", NS)
    sa = pod_spec(w)["serviceAccountName"]
    assert overlay.get("ServiceAccount", sa, NS)
    cfg = sync_config(overlay)
    got = grants(overlay, sa, NS)
    needed: set[tuple[str | None, str, str, str]] = set()
    for r in cfg.resources:  # informers, all namespaces
        needed |= {(None, r.group, r.plural, "list"), (None, r.group, r.plural, "watch")}
    for ns in cfg.policy_namespaces:  # policy informer + status annotation
        needed |= {(ns, "", "configmaps", v) for v in ("list", "watch", "patch")}
    needed |= {(None, "", "events", "create"), (None, "", "events", "patch")}
    if cfg.remediator.enabled:
        for r in cfg.remediator.resources:  # read a named object; merge-patch annotations only when enforcing
            needed |= {(None, r.group, r.plural, "get")}
            if cfg.remediator.mode == "enforce":
                needed |= {(None, r.group, r.plural, "patch")}
        if cfg.remediator.leader_election:
            needed |= {(cfg.remediator.lease_namespace, "coordination.k8s.io", "leases", v)
                       for v in ("get", "create", "update")}
    for n in needed:
        assert covers(got, *n), f"missing {n}"
    assert got == needed, f"more than needed: {got - needed}"


def test_lease_access_is_limited_to_the_remediator_lease(overlay: Rendered):
    cfg = sync_config(overlay)
    role = overlay.get("Role", "fedplace:opa-kube-sync:leader-election", NS)
    for rule in role["rules"]:
        if set(rule["verbs"]) - {"create"}:
            assert rule.get("resourceNames") == [cfg.remediator.lease_name]


# -- policies --------------------------------------------------------------------


def test_policy_configmaps_hold_exactly_the_policy_sources(overlay: Rendered):
    """One ConfigMap per pack folder, each holding exactly that folder's modules (module ids
    are <namespace>/<configmap>/<key>, so packs may reuse file names)."""
    cms = {o["metadata"]["name"]: o.get("data") or {} for o in overlay.of_kind("ConfigMap")
           if o["metadata"].get("namespace") == POLICY_NS}
    assert cms, "no policy ConfigMap"
    assert cms == rego_sources()
    assert not any(k.endswith("_test.rego") for data in cms.values() for k in data)


def test_policy_configmap_names_are_stable(overlay: Rendered):
    """No kustomize hash suffix: the sync keys modules by ConfigMap name."""
    names = {o["metadata"]["name"] for o in overlay.of_kind("ConfigMap") if o["metadata"].get("namespace") == POLICY_NS}
    assert {"fedplace-federation", "fedplace-lib"} <= names
    assert all(n.startswith("fedplace-") and n.removeprefix("fedplace-").replace("-", "").isalnum() for n in names), names


# -- the Cluster CRD -------------------------------------------------------------


def structural_problems(schema: dict[str, Any], path: str = "") -> list[str]:
    """The parts of Kubernetes' structural-schema rules that matter here."""
    problems = []
    if "type" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields") \
            and not schema.get("x-kubernetes-int-or-string"):
        problems.append(f"{path or '/'}: no type")
    for key in ("$ref", "additionalItems", "patternProperties", "dependencies", "definitions", "id"):
        if key in schema:
            problems.append(f"{path}: {key} not allowed")
    if "additionalProperties" in schema and "properties" in schema:
        problems.append(f"{path}: additionalProperties with properties")
    for name, sub in (schema.get("properties") or {}).items():
        problems += structural_problems(sub, f"{path}/{name}")
    if isinstance(schema.get("items"), dict):
        problems += structural_problems(schema["items"], f"{path}/items")
    if schema.get("type") == "array" and "items" not in schema:
        problems.append(f"{path}: array without items")
    return problems


def test_cluster_crd_is_structural_and_matches_the_data_model(overlay: Rendered):
    crd = overlay.get("CustomResourceDefinition", "clusters.federation.fedplace.io")
    spec = crd["spec"]
    assert spec["group"] == "federation.fedplace.io" and spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == "Cluster" and spec["names"]["plural"] == "clusters"
    (version,) = spec["versions"]
    assert version["name"] == "v1beta1" and version["served"] and version["storage"]
    assert "status" not in (version.get("subresources") or {}), "status must be writable on create"
    schema = version["schema"]["openAPIV3Schema"]
    assert structural_problems(schema) == []
    props = schema["properties"]
    assert set(props["metadata"]) == {"type"}, "metadata may not be constrained beyond type"
    assert props["spec"]["properties"]["serverAddress"]["type"] == "string"
    assert props["status"]["properties"]["region"]["type"] == "string"
    assert props["status"]["properties"]["zones"] == {"type": "array", "items": {"type": "string"}}
    # The sync replicates exactly this resource.
    cfg = sync_config(overlay)
    assert any((r.group, r.version, r.plural, r.namespaced) == (spec["group"], "v1beta1", "clusters", False)
               for r in cfg.resources)
    # Objects like the demo's validate; wrong types do not.
    jsonschema = pytest.importorskip("jsonschema")
    good = {"apiVersion": "federation.fedplace.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "gce-europe-west1", "labels": {"pci-compliance-level": "2"}},
            "spec": {"serverAddress": "https://gce-europe-west1.example.invalid", "extra": {"kept": True}},
            "status": {"region": "europe-west1", "zones": ["europe-west1-b"]}}
    jsonschema.validate(good, schema)
    bad = copy.deepcopy(good)
    bad["status"]["zones"] = "europe-west1-b"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
