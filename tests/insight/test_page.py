"""The placement page: rendered (insight/page.py), served by opa-kube-sync behind --placement-page,
written by ``fedplace report``, and shown in a real headless Chromium.

The browser test runs Debian's ``chromium`` (``apt-get install chromium``; .ci/run
installs it) against the page the sync serves, reads the matrix back from the
DOM the browser built, and leaves a screenshot in the test's tmp dir. It is
skipped, saying why, when no chromium is installed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
import yaml

from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH
from devstack.karmada import CLUSTERS as KARMADA_CLUSTERS_RES
from devstack.karmada import RESOURCE_BINDINGS, install_crds
from devstack.scratch import install_crd, unique_name
from fedplace.insight import page, report
from fedplace.insight.view import CONSTRAINT_PREFIX, build_view
from fedplace.sync.app import SyncApp
from fedplace.sync.config import parse_args
from tests.insight.conftest import (EU, EXCLUDED, KARMADA_CLUSTERS, MANIFEST, NS, PCI, PREFS, TEMPLATES, WHY, cluster,
                                    karmada_cluster, resource_binding, rs, run_command, template)

RS = Resource("apps", "v1", "replicasets", True)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class Matrix(HTMLParser):
    """The placement matrix as a browser's DOM holds it: cluster columns, and per row its
    workloads and the clusters marked."""

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] = []
        self.rows: list[tuple[list[str], list[str], bool]] = []  # (workloads, clusters marked, any cluster)
        self._in = False
        self._cell = 0
        self._row: tuple[list[str], list[str], bool] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "matrix":
            self._in = True
        if not self._in:
            return
        classes = (a.get("class") or "").split()
        if tag == "th" and "c" in classes:
            self.columns.append(a.get("data-cluster") or "")
        elif tag == "tr" and a.get("data-workloads") is not None:
            self._row = ((a.get("data-workloads") or "").split(), [], False)
            self.rows.append(self._row)
            self._cell = 0
        elif tag == "td" and self._row is not None:
            if "any" in classes:
                self.rows[-1] = self._row = (self._row[0], self._row[1], True)
            elif "c" in classes:
                if "y" in classes:
                    self._row[1].append(self.columns[self._cell])
                self._cell += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._in:
            self._in = False

    def placement(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for workloads, marked, anywhere in self.rows:
            for w in workloads:
                out[w] = "any" if anywhere else sorted(marked)
        return out


def matrix_of(html: str) -> Matrix:
    m = Matrix()
    m.feed(html)
    return m


# -- the page on its own -------------------------------------------------------------------


def small_view() -> dict[str, Any]:
    clusters = {"eu-1": cluster("eu-1", "europe-west1", "2"), "us-1": cluster("us-1", "us-east1", "<b>3</b>")}
    placed = rs("a", {EU: "true", PREFS: json.dumps({"clusters": {"eu-1": {"weight": 1}}})})
    loose = rs("b", {})
    return build_view(clusters, [("replicasets", placed), ("replicasets", loose)], source="test",
                      denials=[{"resource": "replicasets", "namespace": "insight-shop", "name": "a",
                                "errors": ["no <cluster>"], "time": "2026-01-02T03:04:05Z"}],
                      remediations=[{"time": "2026-01-02T03:04:00Z", "resource": "replicasets",
                                     "namespace": "insight-shop", "name": "a", "outcome": "patched",
                                     "changes": {PREFS: '{"clusters":{"eu-1":{"weight":1}}}'},
                                     "old": {PREFS: '{"clusters":{"us-1":{"weight":1}}}'}}])


def test_render_matrix_tables_and_escaping():
    html = page.render(small_view(), refresh=5, now=1767323050.0)
    m = matrix_of(html)
    assert m.columns == ["eu-1", "us-1"]
    assert m.placement() == {"insight-shop/a": ["eu-1"], "insight-shop/b": "any"}
    assert "<b>3</b>" not in html and "pci-compliance-level=&lt;b&gt;3&lt;/b&gt;" in html
    hostile = build_view({}, [("replicasets", rs("x", {CONSTRAINT_PREFIX + "t": "</script><!--"}))], source="t")
    assert "</script><!--" not in page.render(hostile).split('id="workloads-data">')[1].split("</script>")[0]
    assert "no &lt;cluster&gt;" in html and "denied now" in html
    assert "1: us-1 → 1: eu-1" in html and "(5 s ago)" in html  # the remediation, with its time
    assert '<meta http-equiv="refresh" content="5">' in html
    # self-contained: no external scripts, styles, fonts or images
    for needle in ("src=", "href=", "url(", "@import", "http://", "https://"):
        assert needle not in html, needle


def test_large_views_cap_the_matrix_rows():
    clusters = {f"c{i}": cluster(f"c{i}", "europe-west1", "1") for i in range(5)}
    workloads = [("replicasets", rs(f"w{i}", {PREFS: json.dumps({"clusters": {f"c{i % 5}": {}}}),
                                              CONSTRAINT_PREFIX + "team": str(i)}))
                 for i in range(page.MAX_GROUPS + 20)]
    html = page.render(build_view(clusters, workloads, source="test"))
    assert len(matrix_of(html).rows) == page.MAX_GROUPS
    assert f"Showing the {page.MAX_GROUPS} largest of {page.MAX_GROUPS + 20} groups" in html
    # the workloads table: the first rows in the HTML, all of them in the JSON the script reads
    table = html.split('<table id="workloads">')[1].split("</table>")[0]
    assert table.count("<tr>") == page.ROWS_INLINE + 1  # and the header
    data = html.split('<script type="application/json" id="workloads-data">')[1].split("</script>")[0]
    rows = json.loads(data)
    assert len(rows) == page.MAX_GROUPS + 20 and rows[0][0] == "insight-shop/w0" and rows[0][3] == "1: c0"


# -- served by opa-kube-sync -----------------------------------------------------------------


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            if await check():
                return
        except (KubeApiError, aiohttp.ClientError, KeyError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text()


@pytest.fixture
async def placed(kube: Any, kube_api: Any, opa: Any, kube_namespaces: Any) -> AsyncIterator[dict[str, Any]]:
    """The API server with clusters, ReplicaSets and the federation policy ConfigMaps, and a
    function starting opa-kube-sync (remediation enforced) on it."""
    api = kube_api
    ns, policy_ns = await kube_namespaces.create("insight"), await kube_namespaces.create("policy")
    await install_crd(api, CLUSTER_CRD)
    suffix = unique_name("x").split("-")[1]
    names = {f"eu-a-{suffix}": ("europe-west1", "3"), f"eu-b-{suffix}": ("eu-west-1", "1"),
             f"us-c-{suffix}": ("us-east1", "3")}
    for name, (region, pci) in names.items():
        await kube_json(api, "POST", CLUSTERS_PATH, body=cluster(name, region, pci))
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if doc["metadata"]["name"] in ("fedplace-federation", "fedplace-lib"):
            doc["metadata"]["namespace"] = policy_ns
            await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body=doc)
    for name, ann in (("payments", {EU: "true", PCI: "2"}), ("ledger", {PCI: "3"}), ("web", {EU: "true"}),
                      ("blog", {})):
        await kube_json(api, "POST", RS.collection_path(ns), body=rs(name, ann, namespace=ns))
    services: list[SyncApp] = []

    async def start(*extra: str) -> SyncApp:
        argv = ["--opa-url", opa.url + "/v1", "--kubeconfig", str(kube.kubeconfig), "--listen", "127.0.0.1:0",
                "--replicate", "apps/v1/replicasets", "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters",
                "--policy-namespace", policy_ns, "--opa-check-interval", "0.2", *extra]
        svc = SyncApp(parse_args(argv))
        services.append(svc)
        await svc.start()

        async def ready() -> bool:
            return svc.is_ready()

        await eventually(ready, 20, "the sync to be ready")
        return svc

    try:
        yield {"api": api, "ns": ns, "clusters": list(names), "start": start, "suffix": suffix}
    finally:
        for svc in services:
            await svc.stop()


REMEDIATE = ("--remediate", "enforce", "--remediate-debounce", "0.05", "--remediate-max-fraction", "1",
             "--leader-election", "false")


async def test_the_page_is_off_by_default(placed: dict[str, Any]):
    svc = await placed["start"]()
    status, _ = await get(f"http://127.0.0.1:{svc.port}/placement")
    assert status == 404


async def remediated_view(placed: dict[str, Any], svc: SyncApp) -> dict[str, Any]:
    """Wait for the first pass, then downgrade eu-a to PCI 1: ledger (PCI 3) moves to us-c alone,
    payments (EU, PCI 2) has no cluster left (denied, its placement left as it was); returns
    the view once all is in."""
    api, ns, suffix = placed["api"], placed["ns"], placed["suffix"]
    base = f"http://127.0.0.1:{svc.port}"

    async def view_has(check: Callable[[dict[str, Any]], bool]) -> bool:
        status, text = await get(base + "/placement.json")
        return status == 200 and check(json.loads(text))

    def placement(view: dict[str, Any]) -> dict[str, Any]:
        return {w["name"]: w["placement"] for w in view["workloads"]}

    await eventually(lambda: view_has(lambda v: placement(v).get("ledger") == [f"eu-a-{suffix}", f"us-c-{suffix}"]),
                     20, "the first remediation pass placed ledger")
    await kube_json(api, "PATCH", f"{CLUSTERS_PATH}/eu-a-{suffix}",
                    body={"metadata": {"labels": {"pci-compliance-level": "1"}}},
                    content_type="application/merge-patch+json")
    await eventually(lambda: view_has(lambda v: placement(v).get("ledger") == [f"us-c-{suffix}"]
                                      and [d["name"] for d in v["denials"]] == ["payments"]),
                     20, "ledger re-placed and payments unsatisfiable")
    _, text = await get(base + "/placement.json")
    return json.loads(text)


async def test_served_by_the_sync_with_remediations_and_denials(placed: dict[str, Any]):
    svc = await placed["start"](*REMEDIATE, "--placement-page", "--placement-page-refresh", "2")
    suffix = placed["suffix"]
    view = await remediated_view(placed, svc)
    assert [c["name"] for c in view["clusters"]] == [f"eu-b-{suffix}", f"eu-a-{suffix}", f"us-c-{suffix}"]
    assert view["clusters"][1]["labels"] == {"pci-compliance-level": "1"}
    [payments] = view["denials"]
    assert payments["errors"] == ["no cluster satisfies the placement policy (EU jurisdiction required: true, "
                                  "PCI compliance level >= 2)"]
    assert payments["time"].endswith("Z")
    moves = {r["name"]: (r["before"], r["after"]) for r in view["remediations"] if r["before"] is not None}
    assert moves["ledger"] == ([f"eu-a-{suffix}", f"us-c-{suffix}"], [f"us-c-{suffix}"])
    assert all(r["outcome"] == "patched" and r["time"].endswith("Z") for r in view["remediations"])
    status, html = await get(f"http://127.0.0.1:{svc.port}/placement")
    assert status == 200 and "refreshes every 2 s" in html
    assert matrix_of(html).placement()[f"{placed['ns']}/ledger"] == [f"us-c-{suffix}"]


async def test_report_writes_the_same_view(placed: dict[str, Any], opa: Any, tmp_path: Path):
    svc = await placed["start"](*REMEDIATE, "--placement-page")
    await remediated_view(placed, svc)
    from_sync = tmp_path / "sync.html"
    code, out, err = await run_command(report, ["-o", str(from_sync), "--sync-url", f"http://127.0.0.1:{svc.port}"])
    assert code == 0, err
    html = from_sync.read_text()
    assert "Last remediations" in html and "refreshes every" not in html
    from_opa = tmp_path / "opa.html"
    code, out, err = await run_command(report, ["-o", str(from_opa), "--opa-url", opa.url])
    assert code == 0, err
    assert out.startswith(f"wrote {from_opa}: 3 clusters, 4 workloads, 1 denied")
    a, b = matrix_of(html), matrix_of(from_opa.read_text())
    assert a.columns == b.columns and a.placement() == b.placement()
    assert "payments" in from_opa.read_text().split('id="denials"')[1]


# -- in a real browser ------------------------------------------------------------------------


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run installs it): "
                "the placement page is not rendered in a browser here")


async def chromium(binary: str, tmp: Path, *args: str) -> str:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    proc = await asyncio.create_subprocess_exec(
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,900", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode()


async def test_rendered_in_headless_chromium(placed: dict[str, Any], tmp_path: Path):
    binary = browser()
    svc = await placed["start"](*REMEDIATE, "--placement-page")
    view = await remediated_view(placed, svc)
    url = f"http://127.0.0.1:{svc.port}/placement"
    dom = await chromium(binary, tmp_path, "--dump-dom", url)
    assert 'data-rendered-ms="' in dom, "the page's script ran in the browser"
    m = matrix_of(dom)
    ns, suffix = placed["ns"], placed["suffix"]
    assert m.columns == [c["name"] for c in view["clusters"]]
    got = m.placement()
    assert got[f"{ns}/ledger"] == [f"us-c-{suffix}"]
    assert got[f"{ns}/blog"] == "any"
    assert got[f"{ns}/web"] == [f"eu-a-{suffix}", f"eu-b-{suffix}"]
    assert got[f"{ns}/payments"] == [f"eu-a-{suffix}"]  # denied now: left where it was
    assert "denied now" in dom
    assert len(m.rows) == len({tuple(r[0]) for r in m.rows})
    workloads = dom.split('<table id="workloads">')[1].split("</table>")[0]
    assert workloads.count("<tr>") == 1 + 4 and 'id="workloads-count" class="muted">showing 4 of 4' in dom
    screenshot = tmp_path / "placement.png"
    await chromium(binary, tmp_path, f"--screenshot={screenshot}", url)
    assert screenshot.exists() and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {screenshot}")


async def test_rows_beyond_the_first_come_from_the_json_in_chromium(tmp_path: Path):
    """250 workloads: 100 rows in the HTML, and the script adds the rest when the end of the
    table scrolls into view (a window tall enough to show it)."""
    binary = browser()
    clusters = {"eu-1": cluster("eu-1", "europe-west1", "2")}
    workloads = [("replicasets", rs(f"w{i:03d}", {PREFS: json.dumps({"clusters": {"eu-1": {}}})}))
                 for i in range(250)]
    html = tmp_path / "report.html"
    html.write_text(page.render(build_view(clusters, workloads, source="test")))
    dom = await chromium(binary, tmp_path, "--window-size=1200,40000", "--virtual-time-budget=3000", "--dump-dom",
                         html.as_uri())
    table = dom.split('<table id="workloads">')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 250
    assert "insight-shop/w249" in table and "showing 250 of 250" in dom


# -- Karmada's bindings ----------------------------------------------------------------------------


def binding_rows(html: str) -> list[tuple[str, list[str]]]:
    """The bindings table's rows in the HTML: (the row's class, its cells' text)."""
    table = html.split('<table id="bindings">')[1].split("</table>")[0].split("<tbody>")[1]
    rows = []
    for tr in table.split("<tr")[1:]:
        head, _, body = tr.partition(">")
        cls = head.split('class="')[1].split('"')[0] if 'class="' in head else ""
        cells = [c.split(">", 1)[1].split("</td")[0] for c in body.split("<td")[1:]]
        rows.append((cls, [unescape(c) for c in cells]))
    return rows


def karmada_view() -> dict[str, Any]:
    clusters = {n: karmada_cluster(n, r, p) for n, (r, p) in KARMADA_CLUSTERS.items()}
    templates = {("Deployment", NS, n): template(n, a) for n, a in TEMPLATES.items()}

    def rb(name: str, excluded: list[str] | None, why: str | None = None, **extra: Any) -> dict[str, Any]:
        b = resource_binding(name)
        ann = {**({EXCLUDED: json.dumps(excluded)} if excluded is not None else {}), **({WHY: why} if why else {})}
        b["metadata"]["annotations"] = ann
        b["spec"].update(extra)
        return b

    bindings = [("resourcebindings", rb("web", ["us-1"], "clusters excluded by the placement policy (…): us-1",
                                        clusters=[{"name": "eu-1", "replicas": 2}])),
                ("resourcebindings", rb("vault", ["eu-1", "eu-2", "us-1"], "no cluster satisfies <the> policy")),
                ("resourcebindings", rb("blog", None)),
                ("resourcebindings", rb("gone", ["eu-1", "eu-2", "us-1"], "template Deployment insight-shop/gone "
                                                                         "not replicated (yet)")),
                ("clusterresourcebindings", {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
                                             "metadata": {"name": "gate-ingressclass", "annotations": {EXCLUDED: "[]"}},
                                             "spec": {"resource": {"kind": "IngressClass", "name": "gate"}}})]
    return build_view(clusters, [], source="test", bindings=bindings, template_of=templates.get)


def test_render_karmada_bindings():
    view = karmada_view()
    html = page.render(view, now=1767323050.0)
    # a Karmada Cluster's region is its spec.region
    assert [(c["name"], c["region"]) for c in view["clusters"]] == [
        ("eu-1", "eu-west-1"), ("eu-2", "europe-west4"), ("us-1", "us-east-1")]
    rows = binding_rows(html)
    # every cluster excluded first, marked; then by namespace and name
    assert [r[1][0] for r in rows] == [f"{NS}/gone-deployment", f"{NS}/vault-deployment", "gate-ingressclass",
                                       f"{NS}/blog-deployment", f"{NS}/web-deployment"]
    assert [r[0] for r in rows] == ["stranded", "stranded", "", "", ""]
    gone, vault, gate, blog, web = (r[1] for r in rows)
    assert vault[2:] == [f"Deployment {NS}/vault", "eu-jurisdiction-required=true, pci-compliance-level=2",
                         "every cluster — 3: eu-1, eu-2, us-1", "—", "no cluster satisfies <the> policy",
                         "every cluster excluded"]
    assert gone[2] == f"Deployment {NS}/gone (not replicated)" and gone[3] == "—"
    assert web[4:7] == ["1: us-1", "1: eu-1", "clusters excluded by the placement policy (…): us-1"]
    assert web[-1] == "ok" and gate[1:5] == ["ClusterResourceBinding", "IngressClass gate (not replicated)", "—",
                                             "none"]
    assert blog[4] == "—" and blog[-1] == "not decided yet (no fedplace.io/excluded-clusters)"
    assert "<the>" not in html.split('id="bindings-data"')[0] and "&lt;the&gt;" in html  # escaped
    assert 'Karmada bindings <span class="muted">(5)</span> <span class="denied-tag">2 with every cluster excluded' \
        in html
    assert '5 Karmada bindings (<span class="denied-tag">2 with every cluster excluded</span>)' in html
    data = json.loads(html.split('<script type="application/json" id="bindings-data">')[1].split("</script>")[0])
    assert data[1] == vault
    # without a replicated binding type: no section
    plain = page.render(build_view({}, [], source="t"))
    assert 'id="bindings"' not in plain and "Karmada" not in plain


KARMADA_TEMPLATES = {"vault": {EU: "true", PCI: "2"}, "ledger": {PCI: "3"}, "blog": {}}


@pytest.fixture
async def karmada_placed(kube: Any, kube_api: Any, opa: Any, kube_namespaces: Any) -> AsyncIterator[dict[str, Any]]:
    """The API server with Karmada's CRDs, three Karmada Clusters (deleted after), Deployment
    templates and their ResourceBindings, the policy ConfigMaps; and opa-kube-sync replicating them,
    remediating the bindings, serving the page."""
    api = kube_api
    await install_crds(api)
    ns, policy_ns = await kube_namespaces.create("insight-k"), await kube_namespaces.create("policy")
    suffix = unique_name("x").split("-")[1]
    names = {"eu-a": (f"eu-a-{suffix}", "eu-west-1", "3"), "eu-b": (f"eu-b-{suffix}", "europe-west4", "1"),
             "us-c": (f"us-c-{suffix}", "us-east-1", "3")}
    created: list[str] = []
    services: list[SyncApp] = []
    try:
        for name, region, pci in names.values():
            await kube_json(api, "POST", KARMADA_CLUSTERS_RES.collection_path(None),
                            body=karmada_cluster(name, region, pci))
            created.append(name)
        for doc in yaml.safe_load_all(MANIFEST.read_text()):
            if doc["metadata"]["name"] in ("fedplace-federation", "fedplace-lib", "fedplace-karmada"):
                doc["metadata"]["namespace"] = policy_ns
                await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body=doc)
        for name, ann in KARMADA_TEMPLATES.items():
            await kube_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                            body=template(name, ann, namespace=ns))
            await kube_json(api, "POST", RESOURCE_BINDINGS.collection_path(ns), body=resource_binding(
                name, {"clusterAffinity": {"exclude": ["zz-user"]}}, namespace=ns))
        svc = SyncApp(parse_args([
            "--opa-url", opa.url + "/v1", "--kubeconfig", str(kube.kubeconfig), "--listen", "127.0.0.1:0",
            "--replicate", "apps/v1/deployments", "--replicate", "work.karmada.io/v1alpha2/resourcebindings",
            "--replicate-cluster", "cluster.karmada.io/v1alpha1/clusters", "--replicate-ignore-namespaces", policy_ns,
            "--policy-namespace", policy_ns, "--opa-check-interval", "0.2", *REMEDIATE,
            "--remediate-resource", "work.karmada.io/v1alpha2/resourcebindings", "--placement-page"]))
        services.append(svc)
        await svc.start()

        async def ready() -> bool:
            return svc.is_ready()

        await eventually(ready, 20, "the sync to be ready")
        yield {"api": api, "ns": ns, "clusters": {k: v[0] for k, v in names.items()},
               "url": f"http://127.0.0.1:{svc.port}"}
    finally:
        for svc in services:
            await svc.stop()
        for name in created:
            try:
                await kube_json(api, "DELETE", KARMADA_CLUSTERS_RES.object_path(name, None))
            except KubeApiError:
                pass


async def karmada_remediated(k: dict[str, Any]) -> dict[str, Any]:
    """Wait for the bindings' first exclusions, then downgrade eu-a to PCI 1: vault (EU, PCI 2) has
    no cluster left, ledger (PCI 3) loses eu-a; returns the view once all is in."""
    c = k["clusters"]

    async def view() -> dict[str, Any]:
        _, text = await get(k["url"] + "/placement.json")
        return json.loads(text)

    def excluded(v: dict[str, Any], name: str) -> list[str] | None:
        return next((b["excluded"] for b in v["bindings"] or [] if b["name"] == f"{name}-deployment"), None)

    async def first_pass() -> bool:
        v = await view()
        return (excluded(v, "vault") is not None and c["eu-a"] not in excluded(v, "vault")
                and {c["eu-b"], c["us-c"]} <= set(excluded(v, "vault")) and excluded(v, "blog") is not None)

    await eventually(first_pass, 20, "the remediator to decide the bindings")
    await kube_json(k["api"], "PATCH", KARMADA_CLUSTERS_RES.object_path(c["eu-a"], None),
                    body={"metadata": {"labels": {"pci-compliance-level": "1"}}},
                    content_type="application/merge-patch+json")

    async def downgraded() -> bool:
        v = await view()
        return c["eu-a"] in (excluded(v, "vault") or []) and c["eu-a"] in (excluded(v, "ledger") or [])

    await eventually(downgraded, 20, "the bindings re-decided after the downgrade")
    return await view()


async def test_karmada_bindings_served_by_the_sync_and_reported(karmada_placed: dict[str, Any], opa: Any,
                                                                 tmp_path: Path):
    k = karmada_placed
    ns, c = k["ns"], k["clusters"]
    view = await karmada_remediated(k)
    bindings = {b["name"]: b for b in view["bindings"]}
    assert set(bindings) == {"vault-deployment", "ledger-deployment", "blog-deployment"}
    vault, ledger, blog = bindings["vault-deployment"], bindings["ledger-deployment"], bindings["blog-deployment"]
    assert view["bindings"][0] is not None and view["bindings"][0]["name"] == "vault-deployment"  # stands out first
    assert vault["every_cluster_excluded"] is True and set(c.values()) <= set(vault["excluded"])
    assert vault["template"] == {"kind": "Deployment", "namespace": ns, "name": "vault",
                                 "text": f"Deployment {ns}/vault", "replicated": True}
    assert vault["constraints"] == {"eu-jurisdiction-required": "true", "pci-compliance-level": "2"}
    assert vault["why"].startswith("no cluster satisfies the placement policy (EU jurisdiction required: true, "
                                   "PCI compliance level >= 2)")
    assert ledger["every_cluster_excluded"] is False and c["us-c"] not in ledger["excluded"]
    assert ledger["why"].startswith("clusters excluded by the placement policy (EU jurisdiction required: false, "
                                    "PCI compliance level >= 3)")
    assert blog["excluded"] == [] and blog["every_cluster_excluded"] is False
    assert {x["name"]: x["region"] for x in view["clusters"] if x["name"] in c.values()} == {
        c["eu-a"]: "eu-west-1", c["eu-b"]: "europe-west4", c["us-c"]: "us-east-1"}
    assert all(w["resource"] != "resourcebindings" for w in view["workloads"]), "bindings are not workloads"

    status, html = await get(k["url"] + "/placement")
    assert status == 200
    rows = binding_rows(html)
    assert rows[0][0] == "stranded" and rows[0][1][0] == f"{ns}/vault-deployment"
    assert rows[0][1][-1] == "every cluster excluded" and rows[0][1][2] == f"Deployment {ns}/vault"
    assert [r[0] for r in rows[1:]] == ["", ""]
    assert "1 with every cluster excluded" in html.split("</header>")[0]

    # fedplace report: from the sync, and from OPA's replicated data: the same bindings.
    code, out, err = await run_command(report, ["-o", str(tmp_path / "sync.html"), "--sync-url", k["url"]])
    assert code == 0, err
    code, out, err = await run_command(report, ["-o", str(tmp_path / "opa.html"), "--opa-url", opa.url])
    assert code == 0, err
    assert "3 Karmada bindings (1 with every cluster excluded)" in out
    from_sync, from_opa = (binding_rows((tmp_path / f).read_text()) for f in ("sync.html", "opa.html"))
    assert from_opa == from_sync == rows


async def test_karmada_bindings_in_headless_chromium(karmada_placed: dict[str, Any], tmp_path: Path):
    binary = browser()
    k = karmada_placed
    await karmada_remediated(k)
    dom = await chromium(binary, tmp_path, "--dump-dom", k["url"] + "/placement")
    assert 'data-rendered-ms="' in dom
    rows = binding_rows(dom)
    assert [r[1][0] for r in rows][0] == f"{k['ns']}/vault-deployment"
    assert rows[0][0] == "stranded" and [r[0] for r in rows[1:]] == ["", ""]
    assert 'id="bindings-count" class="muted">showing 3 of 3' in dom
    screenshot = tmp_path / "karmada.png"
    await chromium(binary, tmp_path, f"--screenshot={screenshot}", "--window-size=1400,1400", k["url"] + "/placement")
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {screenshot}")


async def test_many_bindings_come_from_the_json_in_chromium(tmp_path: Path):
    """250 bindings: 100 rows in the HTML, the script adds the rest, keeping the marks."""
    binary = browser()
    clusters = {"eu-1": karmada_cluster("eu-1", "eu-west-1", "2")}
    bindings = []
    for i in range(250):
        b = resource_binding(f"b{i:03d}")
        b["metadata"]["annotations"] = {EXCLUDED: json.dumps(["eu-1"] if i % 50 == 0 else [])}
        bindings.append(("resourcebindings", b))
    html = tmp_path / "report.html"
    html.write_text(page.render(build_view(clusters, [], source="test", bindings=bindings)))
    dom = await chromium(binary, tmp_path, "--window-size=1200,40000", "--virtual-time-budget=3000", "--dump-dom",
                         html.as_uri())
    rows = binding_rows(dom)
    assert len(rows) == 250 and "showing 250 of 250" in dom
    assert [r[1][0] for r in rows if r[0] == "stranded"] == [f"{NS}/b{i:03d}-deployment" for i in range(0, 250, 50)]
    assert rows[-1][1][0] == f"{NS}/b249-deployment"
