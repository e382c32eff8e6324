"""The values of the Helm chart deploy/helm/fedplace a platform team sets on a cluster of its own:
the image it built and pushed, its namespaces, and every pod setting of every workload (the opa
Deployment with its sidecar, fedplace-admission, the webhook registration Jobs), with the chart's
example ci/every-value-values.yaml. And the chart as it is shipped: `helm package`, the archive
copied elsewhere, linted, rendered and installed on the API server with those values.

Rendering, linting and validating every object against the Kubernetes schemas for the example
values is in test_helm.py (its MATRIX has "every-value").
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fedplace.admission import register
from fedplace.common.kube_client import KubeApiError, kube_json
from tests.deploy.conftest import pod_spec
from tests.deploy.test_helm import (
    CHART,
    EVERY_VALUE,
    RELEASE,
    RELEASE_NS,
    WEBHOOK_PATH,
    Helm,
    chart,  # noqa: F401 - the module-scoped fixture
    docs,
    exists,
    find,
    helm,
    key,
    kube_version,
    merged,
    normalise,
    path_of,
    play_controllers,
    render_files,
    rendered,
    roll_out,
    run_job,
    webhook_of,
)

OPA_NS, POLICY_NS = EVERY_VALUE["namespaces"]["opa"], EVERY_VALUE["namespaces"]["policy"]
DEFAULT_NAMESPACES = ("opa", "kube-federation-scheduling-policy")
# Every component the chart has, so that every file's namespaces are renamed in the test below.
ALL_COMPONENTS = {"packs": {"limitrange": {"enabled": True}, "schedulingpolicy": {"enabled": True}},
                  "certificates": {"source": "cert-manager"}, "monitoring": {"enabled": True},
                  "remediation": {"mode": "enforce", "annotationsOnly": True}, "placementPage": {"enabled": True}}


def workloads(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] in ("Deployment", "Job")}


def test_image_repository_is_required_with_a_way_out(chart: Any):  # noqa: F811 - the fixture
    with pytest.raises(helm.HelmRenderError, match=r"image.repository is required: .*Dockerfile.*push it") as err:
        render_files(chart, {}, image=False)
    assert '"The image"' in str(err.value)
    readme = (CHART / "README.md").read_text()
    assert "## The image" in readme and "docker build" in readme and "docker push" in readme
    objs, hooks, _ = rendered({"image": {"repository": "r.example/fp", "tag": "sha256:" + "a" * 64}})
    images = {c["image"] for w in workloads(objs + hooks).values() for c in pod_spec(w)["containers"]}
    assert "r.example/fp@sha256:" + "a" * 64 in images
    # The tag defaults to the chart's appVersion.
    objs, _, _ = rendered({})
    assert pod_spec(find(objs, "Deployment", "fedplace-admission"))["containers"][0]["image"].endswith(":0.1.0")


def test_namespaces_are_renamed_everywhere_deploy_names_them():
    """Every place deploy/ writes its two namespaces follows the values: objects, RBAC subjects,
    Service host names (certificates' SANs, the OPA URL), flags, the webhook's exempt namespaces
    and its Service, the authorization policy, cert-manager's CA injection, service account names
    in admission policies, the registration Jobs."""
    values = merged(ALL_COMPONENTS, {"namespaces": EVERY_VALUE["namespaces"]})
    objs, hooks, notes = rendered(values, kube="v1.30.0")
    text = json.dumps(objs + hooks) + notes
    assert "kube-federation-scheduling-policy" not in text
    for gone in ('"namespace": "opa"', ".opa.svc", ":opa:", '"opa/', ",opa,", "=opa,", "-n opa"):
        assert gone not in text, gone
    # (kube-system: deploy/'s RoleBindings there, e.g. to read the API server's authentication ConfigMap.)
    namespaced = {o["metadata"].get("namespace") for o in objs + hooks} - {None}
    assert namespaced - {"kube-system"} == {OPA_NS, POLICY_NS}
    assert {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"} == {OPA_NS, POLICY_NS}
    subjects = {s["namespace"] for o in objs + hooks for s in o.get("subjects") or [] if "namespace" in s}
    assert subjects == {OPA_NS}
    webhook = webhook_of(objs)["webhooks"][0]
    assert webhook["clientConfig"]["service"]["namespace"] == OPA_NS
    (exempt,) = webhook["namespaceSelector"]["matchExpressions"]
    assert {OPA_NS, POLICY_NS} <= set(exempt["values"]) and not set(DEFAULT_NAMESPACES) & set(exempt["values"])
    admission = pod_spec(find(objs, "Deployment", "fedplace-admission"))["containers"][0]["args"]
    assert f"--policy-namespace={POLICY_NS}" in admission and f"--opa-url=https://opa.{OPA_NS}.svc:8443" in admission
    sync = pod_spec(find(objs, "Deployment", "opa"))["containers"][1]["args"]
    assert f"--policy-namespace={POLICY_NS}" in sync
    (ignore,) = [a for a in sync if a.startswith("--replicate-ignore-namespaces=")]
    assert {OPA_NS, POLICY_NS} <= set(ignore.split("=", 1)[1].split(","))
    certs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Certificate"}
    assert f"fedplace-admission.{OPA_NS}.svc" in certs["fedplace-admission-tls"]["spec"]["dnsNames"]
    assert webhook_of(objs)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{OPA_NS}/fedplace-admission-tls"
    authz = find(objs, "ConfigMap", "opa-authz")["data"]["authz.rego"]
    assert f'policy_namespaces := {{"{POLICY_NS}"}}' in authz
    policies = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("fedplace-")
                and o["metadata"]["namespace"] == POLICY_NS]
    assert len(policies) >= 4
    (job,) = [h for h in hooks if h["metadata"]["name"] == "fedplace-register-webhook"]
    assert register.parse_args(pod_spec(job)["containers"][0]["args"]).namespace == OPA_NS
    assert f"-n {OPA_NS} rollout status deployment/opa" in notes and f"-n {POLICY_NS} get cm" in notes
    # Karmada's two releases: its component's patches and objects follow the values too.
    for side in ("host-cluster", "karmada-apiserver"):
        objs, _, notes = rendered(merged(values, {"certificates": {"source": "self-signed"},
                                                  "karmada": {"enabled": True, "applyTo": side},
                                                  "webhook": {"caBundle": "QUJD"}}), kube="v1.30.0")
        text = json.dumps(objs) + notes
        assert "kube-federation-scheduling-policy" not in text, side
        for gone in ('"namespace": "opa"', ".opa.svc", ":opa:", '"opa/', ",opa,", "=opa,", "-n opa"):
            assert gone not in text, (side, gone)
        assert {o["metadata"].get("namespace") for o in objs} - {None, "kube-system"} <= {OPA_NS, POLICY_NS}, side
    karmada_webhook = webhook_of(objs)["webhooks"][0]["clientConfig"]
    assert karmada_webhook["url"] == f"https://fedplace-admission.{OPA_NS}.svc:443/mutate"
    # Self-signed: the serving certificates name the Services in the namespace the pods run in.
    import base64

    from cryptography import x509
    objs, _, _ = rendered({"namespaces": EVERY_VALUE["namespaces"]})
    tls = find(objs, "Secret", "opa-tls")
    cert = x509.load_pem_x509_certificate(base64.b64decode(tls["data"]["tls.crt"]))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"opa.{OPA_NS}.svc" in sans and tls["metadata"]["namespace"] == OPA_NS


@pytest.mark.parametrize("values, namespace, message", [
    ({"namespaces": {"opa": "same", "policy": "same"}}, RELEASE_NS, "must differ"),
    ({"namespaces": {"opa": "fedplace-system", "policy": "opa"}}, RELEASE_NS, "namespaces.policy cannot be opa"),
    ({"namespaces": {"opa": "fedplace-system"}}, "fedplace-system", "another, existing namespace"),
    ({"namespaces": {"policy": "fedplace-policies"}}, "fedplace-policies", "another, existing namespace"),
], ids=["same", "policy-named-opa", "release-in-opa", "release-in-policy"])
def test_namespaces_that_would_not_work_are_refused(chart: Any, values: dict[str, Any], namespace: str,  # noqa: F811
                                                    message: str):
    with pytest.raises(helm.HelmRenderError, match=message):
        render_files(chart, values, namespace=namespace)


def test_every_pod_value_reaches_every_workload():
    objs, hooks, _ = rendered(EVERY_VALUE)
    defaults, default_hooks, _ = rendered({})
    got, base = workloads(objs + hooks), workloads(defaults + default_hooks)
    assert set(got) == {"opa", "fedplace-admission", "fedplace-register-webhook", "fedplace-unregister-webhook"}
    component = {"opa": EVERY_VALUE["opa"], "fedplace-admission": EVERY_VALUE["admission"],
                 "fedplace-register-webhook": EVERY_VALUE["webhook"]["job"],
                 "fedplace-unregister-webhook": EVERY_VALUE["webhook"]["job"]}
    containers = {"opa": {"opa": ("resources", "securityContext"), "opa-kube-sync": ("syncResources", "syncSecurityContext")},
                  "fedplace-admission": {"admission": ("resources", "securityContext")},
                  "fedplace-register-webhook": {"register": ("resources", "securityContext")},
                  "fedplace-unregister-webhook": {"register": ("resources", "securityContext")}}
    for name, w in got.items():
        want, template, before = component[name], w["spec"]["template"], base[name]["spec"]["template"]
        spec, was = template["spec"], before["spec"]
        assert w["metadata"]["namespace"] == OPA_NS, name
        # Annotations and labels added to deploy/'s; the selector's labels untouched.
        assert template["metadata"]["annotations"].items() >= want["podAnnotations"].items(), name
        assert template["metadata"]["labels"] == {**want["podLabels"], **before["metadata"]["labels"]}, name
        pull = [s["name"] for s in spec["imagePullSecrets"]]
        assert pull == ["platform-registry"] + [s["name"] for s in want["imagePullSecrets"]], name
        assert spec["nodeSelector"] == want["nodeSelector"] and spec["tolerations"] == want["tolerations"], name
        assert spec["affinity"] == want["affinity"] and spec["priorityClassName"] == want["priorityClassName"], name
        assert spec["securityContext"] == {**was["securityContext"], **want["podSecurityContext"]}, name
        for c in spec["containers"]:
            resources_key, security_key = containers[name][c["name"]]
            (c_was,) = [x for x in was["containers"] if x["name"] == c["name"]]
            assert c["resources"] == want[resources_key], (name, c["name"])
            # One level deep: the keys set replace deploy/'s, the others stay (drop ALL, read-only root).
            assert c["securityContext"] == {**c_was["securityContext"], **want[security_key]}, (name, c["name"])
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert c["imagePullPolicy"] == "Always"
            if c["name"] != "opa":
                assert c["image"] == "registry.example/platform/fedplace:0.1.0"
        assert spec.get("serviceAccountName"), name
    assert [c["image"] for c in pod_spec(got["opa"])["containers"] if c["name"] == "opa"] == [EVERY_VALUE["opa"]["image"]]
    # Unset, nothing of it: deploy/base's pods exactly (the render-diff with kustomize says so too).
    for name, w in base.items():
        spec = w["spec"]["template"]["spec"]
        assert not {"imagePullSecrets", "nodeSelector", "tolerations", "priorityClassName"} & set(spec), name


def test_a_security_value_can_loosen_what_deploy_sets():
    """A key set to false replaces deploy/'s true (not merged away as an empty value)."""
    objs, _, _ = rendered({"admission": {"securityContext": {"readOnlyRootFilesystem": False},
                                         "podSecurityContext": {"runAsNonRoot": False}}})
    spec = pod_spec(find(objs, "Deployment", "fedplace-admission"))
    assert spec["securityContext"]["runAsNonRoot"] is False
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is False


def test_readme_documents_every_value():
    """Every leaf of values.yaml (and every key of values.schema.json) is in README.md's tables."""
    import yaml
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def leaves(d: dict[str, Any], prefix: str = "") -> list[str]:
        out = []
        for k, v in d.items():
            path = f"{prefix}{k}"
            out += leaves(v, path + ".") if isinstance(v, dict) and v else [path]
        return out

    pod_keys = {"podAnnotations", "podLabels", "imagePullSecrets", "nodeSelector", "tolerations", "affinity",
                "priorityClassName", "podSecurityContext", "resources", "securityContext"}
    missing = []
    for path in leaves(values):
        last = path.rsplit(".", 1)[-1]
        if path.startswith(("opa.", "admission.", "webhook.job.")) and last in pod_keys:
            if f"`{last}`" not in readme:
                missing.append(path)
        elif f"`{path}`" not in readme:
            missing.append(path)
    assert not missing, missing


# -- the chart as shipped ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`helm package` of the chart, the archive copied to a folder with nothing else in it."""
    out = tmp_path_factory.mktemp("package")
    archive = Path(helm.package(CHART, destination=out))
    elsewhere = tmp_path_factory.mktemp("elsewhere") / archive.name
    shutil.copy(archive, elsewhere)
    return elsewhere


def test_packaged_copy_holds_every_file_and_no_secret(packaged: Path):
    assert packaged.name == "fedplace-0.1.0.tgz"
    with helm.Chart.load(packaged) as c:
        names = {f["name"] for f in c.files}
    assert {"files/base/policies/policies.yaml", "files/base/opa/authz.rego", "files/base/kustomization.yaml",
            "files/cert-manager/certificates.yaml", "files/components/karmada/kustomization.yaml"} <= names
    assert not [n for n in names if "/secrets/" in n or n.endswith((".key", ".pem"))], names


@pytest.mark.parametrize("values", [{}, EVERY_VALUE], ids=["defaults", "every-value"])
def test_packaged_copy_lints(packaged: Path, values: dict[str, Any]):
    values = merged({"image": {"repository": "registry.example/fedplace"}}, values)
    report = helm.lint(packaged, values, strict=True, kube_version=kube_version(values), namespace=RELEASE_NS)
    assert not report["errors"], report
    assert [m["error"] for m in report["messages"]] == ["icon is recommended"], report


@pytest.mark.parametrize("values", [{}, EVERY_VALUE, merged(ALL_COMPONENTS, EVERY_VALUE)],
                         ids=["defaults", "every-value", "every-component"])
def test_packaged_copy_renders_what_the_checkout_renders(packaged: Path, values: dict[str, Any]):
    kube = "v1.30.0"
    with helm.Chart.load(packaged) as c:
        files = render_files(c, values, kube=kube)
    for template, objs in (("fedplace.yaml", rendered(values, kube=kube)[0]),
                           ("webhook-register.yaml", rendered(values, kube=kube)[1])):
        from_archive = docs(files[f"{RELEASE}/templates/{template}"])
        assert normalise(from_archive, chart=True) == normalise(objs, chart=True), template
        assert len(from_archive) == len(objs)


async def test_packaged_copy_installs_with_every_value(kube: Any, kube_api: Any, tmp_path: Path, packaged: Path,
                                                        request: pytest.FixtureRequest):
    """`helm install` of the copied archive with ci/every-value-values.yaml (as `-f`) on the API
    server: every object in the values' namespaces with the values' pod settings, the webhook
    registered by the hook Job in that namespace (on a real server through Helm's hooks, on the
    devstack run as Helm would), then `helm uninstall`."""
    external = kube.external
    kubeconfig = kube.kubeconfig if external else request.getfixturevalue("kube_proxy").kubeconfig
    values = helm.values_from_yaml((CHART / "ci" / "every-value-values.yaml").read_text())
    assert values == EVERY_VALUE
    if external and await exists(kube_api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusters.federation.fedplace.io"):
        crd = await kube_json(kube_api, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusters.federation.fedplace.io")
        if (crd["metadata"].get("annotations") or {}).get("meta.helm.sh/release-name") != RELEASE:
            values = merged(values, {"clusterCRD": {"enabled": False}})  # another test's: not ours to take
    h = Helm(kubeconfig, external, chart=packaged)
    log: list[str] = []
    stop = asyncio.Event()
    controllers = (asyncio.create_task(play_controllers(kube_api, tmp_path, log, stop, ns=OPA_NS))
                   if external else None)

    async def helm_call(fn: Any, *args: Any) -> dict[str, Any]:
        result = asyncio.create_task(asyncio.to_thread(fn, *args))
        while not result.done():
            await asyncio.sleep(0.05)
            if controllers is not None and controllers.done():
                controllers.result()
        return result.result()

    try:
        release = await helm_call(h.install, values)
        assert release["status"] == "deployed"
        installed = docs(release["manifest"])
        assert {key(o) for o in installed} == {key(o) for o in rendered(values)[0]}
        assert {o["metadata"].get("namespace") for o in installed} - {None, "kube-system"} == {OPA_NS, POLICY_NS}
        for o in installed:
            live = await kube_json(kube_api, "GET", path_of(o))
            assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE, key(o)
        for name, settings in (("opa", values["opa"]), ("fedplace-admission", values["admission"])):
            live = await kube_json(kube_api, "GET", f"/apis/apps/v1/namespaces/{OPA_NS}/deployments/{name}")
            spec = pod_spec(live)
            assert live["spec"]["replicas"] == settings["replicas"]
            assert spec["priorityClassName"] == settings["priorityClassName"] and spec["affinity"] == settings["affinity"]
            assert spec["nodeSelector"] == settings["nodeSelector"] and spec["tolerations"] == settings["tolerations"]
            assert spec["imagePullSecrets"][0] == {"name": "platform-registry"}
            assert spec["securityContext"]["fsGroup"] == settings["podSecurityContext"]["fsGroup"]
            assert live["spec"]["template"]["metadata"]["annotations"]["platform.example/owner"] == "team-federation"
        if not external:
            for d in ("opa", "fedplace-admission"):
                await roll_out(kube_api, OPA_NS, d)
            await run_job(kube_api, h.hooks()["fedplace-register-webhook"], tmp_path)
            log.append("fedplace-register-webhook")
        assert log == ["fedplace-register-webhook"]
        webhook = await kube_json(kube_api, "GET", WEBHOOK_PATH)
        ca = (await kube_json(kube_api, "GET", f"/api/v1/namespaces/{OPA_NS}/secrets/fedplace-ca"))["data"]["ca.crt"]
        assert webhook["webhooks"][0]["clientConfig"]["caBundle"] == ca
        assert webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] == OPA_NS
        if external:
            job = {h_["metadata"]["name"]: h_ for h_ in (docs(x["manifest"])[0] for x in
                                                         h.config.get_all(RELEASE).get("hooks") or [])}
            spec = pod_spec(job["fedplace-register-webhook"])
            assert spec["priorityClassName"] == values["webhook"]["job"]["priorityClassName"]

        if not external:
            await run_job(kube_api, h.hooks()["fedplace-unregister-webhook"], tmp_path)
            log.append("fedplace-unregister-webhook")
        await helm_call(h.uninstall)
        assert log[-1] == "fedplace-unregister-webhook"
        assert not await exists(kube_api, WEBHOOK_PATH)
        for o in installed:
            assert await exists(kube_api, path_of(o)) is (o["kind"] in ("Namespace", "CustomResourceDefinition")), key(o)
    finally:
        stop.set()
        if controllers is not None:
            await controllers
        if external:
            for cleanup in (lambda: kube_json(kube_api, "DELETE", WEBHOOK_PATH),
                            lambda: asyncio.to_thread(h.uninstall, True)):
                try:
                    await cleanup()
                except (KubeApiError, helm.HelmError):
                    pass
