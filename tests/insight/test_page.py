"""The placement page: rendered (insight/page.py), served by opa-kube-sync behind --placement-page,
written by ``fedplace report``, and shown in a real headless Chromium.

The browser tests run Debian's ``chromium`` (``apt-get install chromium``; .ci/run
installs it) against the page the sync serves — ReplicaSets, Deployments and
Secrets, a policy ConfigMap that fails to load, the page's token — driven over
the DevTools protocol (:class:`Browser`): they read the matrix, the reasons of
its cells, the legend, the bars and the policy failures back from the DOM the
browser built, hover a cell, and keep screenshots as artifacts (in the test's
tmp dir and in ``.artifacts/<test>/``, which git ignores). They are skipped,
saying why, when no chromium is installed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
import pytest
import yaml

from devstack.federation import CLUSTER_CRD, CLUSTERS_PATH
from devstack.karmada import CLUSTERS as KARMADA_CLUSTERS_RES
from devstack.karmada import RESOURCE_BINDINGS, install_crds
from devstack.launch import free_port
from devstack.scratch import install_crd, unique_name
from fedplace.common.kube_client import KubeApiError, Resource, kube_json
from fedplace.common.opa_client import OpaClient, OpaSettings
from fedplace.insight import page, report, rules
from fedplace.insight.evaluate import LiveOpa
from fedplace.insight.reasons import (
    DEFAULT_SETTINGS,
    Rule,
    parse_selector,
    read_settings,
    requirement_matches,
    selector_words,
)
from fedplace.insight.view import SELECTOR, SELECTOR_SOURCE, build_view, policy_entry, workload_entry
from fedplace.sync.app import SyncApp
from fedplace.sync.config import parse_args
from tests.insight.conftest import (
    EU,
    EXCLUDED,
    KARMADA_CLUSTERS,
    MANIFEST,
    NS,
    PCI,
    PREFS,
    ROOT,
    TEMPLATES,
    WHY,
    cluster,
    karmada_cluster,
    resource_binding,
    rs,
    run_command,
    template,
)

RS = Resource("apps", "v1", "replicasets", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", True)
SECRETS = Resource("", "v1", "secrets", True)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NAME_LABEL = "fedplace.io/cluster-name"
ARTIFACTS = ROOT / ".artifacts"


@dataclass
class Row:
    """One matrix row as the DOM holds it."""

    workloads: list[str]
    kinds: list[str]
    marked: list[str] = field(default_factory=list)  # runs there (● : class y)
    forbidden: list[str] = field(default_factory=list)  # runs there, not allowed now (class y bad)
    allowed: list[str] = field(default_factory=list)  # allowed, not used (○ : class ok)
    anywhere: bool = False
    error: bool = False
    titles: dict[str, str] = field(default_factory=dict)  # cluster -> the cell's reason (its tooltip)


class Matrix(HTMLParser):
    """The placement matrix as a browser's DOM holds it: cluster columns (and their groups: the
    cluster property the page groups by), per row its workloads, the clusters marked and each
    cell's reason, and the workloads-per-cluster bar."""

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] = []
        self.groups: list[tuple[str, int]] = []  # (group header, colspan)
        self.rows: list[Row] = []
        self.bars: dict[str, int] = {}
        self._in = False
        self._cell = 0
        self._row: Row | None = None
        self._text: list[str] | None = None
        self._head: tuple[list[tuple[str, int]], int] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "matrix":
            self._in = True
        if not self._in:
            return
        classes = (a.get("class") or "").split()
        if tag == "th" and "rg" in classes:
            self._head = (self.groups, int(a.get("colspan") or 1))
            self._text = []
        elif tag == "th" and "c" in classes:
            self.columns.append(a.get("data-cluster") or "")
        elif tag == "tr":
            self._row = None
            self._cell = 0
            if a.get("data-workloads") is not None:
                self._row = Row((a.get("data-workloads") or "").split(), (a.get("data-kinds") or "").split())
                self.rows.append(self._row)
        elif tag == "td" and "bar" in classes:
            self.bars[self.columns[self._cell]] = int(a.get("data-count") or 0)
            self._cell += 1
        elif tag == "td" and self._row is not None:
            if "any" in classes:
                self._row.anywhere = True
            elif "err" in classes:
                self._row.error = True
            elif "c" in classes:
                name = self.columns[self._cell]
                if "y" in classes:
                    self._row.marked.append(name)
                if "bad" in classes:
                    self._row.forbidden.append(name)
                if "ok" in classes:
                    self._row.allowed.append(name)
                if a.get("title"):
                    self._row.titles[name] = a["title"] or ""
                self._cell += 1

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._head is not None and self._text is not None:
            self._head[0].append(("".join(self._text).strip(), self._head[1]))
            self._head, self._text = None, None
        if tag == "table" and self._in:
            self._in = False

    def placement(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for row in self.rows:
            for w in row.workloads:
                out[w] = "any" if row.anywhere else sorted(row.marked)
        return out

    def row_of(self, workload: str) -> Row:
        return next(r for r in self.rows if workload in r.workloads)


def matrix_of(html: str) -> Matrix:
    m = Matrix()
    m.feed(html)
    return m


# -- the page on its own -------------------------------------------------------------------


async def answers_from(client: OpaClient, clusters: dict[str, Any], objects: list[dict[str, Any]]
                       ) -> dict[str, Any]:
    """The placement rules' answers for ``objects`` with ``clusters`` replicated, asked of OPA
    (the shipped policies) as the page asks them."""
    await client.put_data(["kubernetes", "clusters"], clusters)
    live = LiveOpa(client)
    try:
        return await rules.ask(live, objects, await live.parse())
    finally:
        await live.close()


SMALL_CLUSTERS = {"eu-1": cluster("eu-1", "europe-west1", "2"), "us-1": cluster("us-1", "us-east1", "<b>3</b>")}


def small_workloads() -> list[tuple[str, dict[str, Any]]]:
    placed = rs("a", {EU: "true", PREFS: json.dumps({"clusters": {"eu-1": {"weight": 1}}})})
    return [("replicasets", placed), ("replicasets", rs("b", {}))]


def small_view(answers: dict[str, Any]) -> dict[str, Any]:
    return build_view(SMALL_CLUSTERS, small_workloads(), source="test", answers=answers,
                      denials=[{"resource": "replicasets", "namespace": "insight-shop", "name": "a",
                                "errors": ["no <cluster>"], "time": "2026-01-02T03:04:05Z"}],
                      remediations=[{"time": "2026-01-02T03:04:00Z", "resource": "replicasets",
                                     "namespace": "insight-shop", "name": "a", "outcome": "patched",
                                     "changes": {PREFS: '{"clusters":{"eu-1":{"weight":1}}}'},
                                     "old": {PREFS: '{"clusters":{"us-1":{"weight":1}}}'}}])


async def test_page_rules_keep_the_last_answers_until_asked_again(federation: Any):
    """After a change (forget) the page keeps showing the answers from before it, marked stale,
    until a refresh has asked every object again; OPA unreachable meanwhile keeps them too."""
    client = federation.client
    objects = [o for _, o in small_workloads()]
    await client.put_data(["kubernetes", "clusters"], SMALL_CLUSTERS)
    kept = rules.PageRules()
    live = LiveOpa(client)
    try:
        assert await kept.refresh(live, objects) == 2 and not kept.stale
        before = dict(kept.answers)
        [a_key] = [k for k, v in before.items() if v["asks"]]
        assert before[a_key]["forbidden"].keys() == {"us-1"}  # EU required: us-1 forbidden
        await client.put_data(["kubernetes", "clusters", "eu-1"], cluster("eu-1", "us-west1", "2"))
        kept.forget()
        assert kept.stale and kept.answers == before  # the page still shows the last answers
        dead = LiveOpa(OpaClient(OpaSettings(url=f"http://127.0.0.1:{free_port()}", timeout=2)))
        try:
            with pytest.raises(Exception):  # noqa: B017 - whatever the evaluator raises
                await kept.refresh(dead, objects)
        finally:
            await dead.close()
        assert kept.stale and kept.answers == before
        assert await kept.refresh(live, objects) == 2 and not kept.stale  # every object asked again
        assert kept.answers[a_key]["forbidden"].keys() == {"eu-1", "us-1"}
        assert await kept.refresh(live, objects[:1]) == 0 and len(kept.answers) == 1  # b gone: dropped
    finally:
        await live.close()


async def test_render_matrix_tables_and_escaping(federation: Any):
    answers = await answers_from(federation.client, SMALL_CLUSTERS, [o for _, o in small_workloads()])
    html = page.render(small_view(answers), refresh=5, now=1767323050.0)
    m = matrix_of(html)
    assert m.columns == ["eu-1", "us-1"]
    assert m.placement() == {"insight-shop/a": ["eu-1"], "insight-shop/b": "any"}
    assert "<b>3</b>" not in html and "pci-compliance-level=&lt;b&gt;3&lt;/b&gt;" in html
    hostile_clusters = {"c": cluster("c", "</script><!--", "1")}
    hostile_rs = rs("x", {"team": "</script><!--", EU: "true"})
    hostile = build_view(hostile_clusters, [("replicasets", hostile_rs)], source="t",
                         answers=await answers_from(federation.client, hostile_clusters, [hostile_rs]))
    hostile_html = page.render(hostile)
    assert "</script><!--" not in hostile_html.split('id="workloads-data">')[1].split("</script>")[0]
    reasons = hostile_html.split('id="matrix-reasons">')[1].split("</script>")[0]
    assert "<!--" not in reasons
    assert "eu-jurisdiction ✗ EU jurisdiction required (the cluster has </script><!--; rule set eu_pci, imposed by " \
        "workload)" in json.loads(reasons)["texts"][0]
    assert "no &lt;cluster&gt;" in html and "denied now" in html
    assert "1: us-1 → 1: eu-1" in html and "(5 s ago)" in html  # the remediation, with its time
    assert '<meta http-equiv="refresh" content="5">' in html
    # self-contained: no external scripts, styles, fonts or images
    for needle in ("src=", "href=", "url(", "@import", "http://", "https://"):
        assert needle not in html, needle


def test_large_views_cap_the_matrix_rows():
    clusters = {f"c{i}": cluster(f"c{i}", "europe-west1", "1") for i in range(5)}
    workloads = [("replicasets", rs(f"w{i}", {PREFS: json.dumps({"clusters": {f"c{i % 5}": {}, f"gone-{i}": {}}})}))
                 for i in range(page.MAX_GROUPS + 20)]
    html = page.render(build_view(clusters, workloads, source="test"))
    assert len(matrix_of(html).rows) == page.MAX_GROUPS
    assert f"Showing the {page.MAX_GROUPS} largest of {page.MAX_GROUPS + 20} groups" in html
    # the workloads table: the first rows in the HTML, all of them in the JSON the script reads
    table = html.split('<table id="workloads">')[1].split("</table>")[0]
    assert table.count("<tr>") == page.ROWS_INLINE + 1  # and the header
    data = html.split('<script type="application/json" id="workloads-data">')[1].split("</script>")[0]
    rows = json.loads(data)
    assert len(rows) == page.MAX_GROUPS + 20 and rows[0][0] == "insight-shop/w0" and rows[0][3] == "2: c0, gone-0"
    # no answer from the placement rules yet: said so, never shown as allowed
    assert rows[0][2] == "no placement rule answer yet"


def named(name: str, region: str, pci: str, label: bool = True, **labels: str) -> dict[str, Any]:
    """A federation Cluster, labelled with the name label the cluster selector selects it by."""
    c = cluster(name, region, pci)
    c["metadata"]["labels"].update(labels)
    if label:
        c["metadata"]["labels"][NAME_LABEL] = name
    return c


def obj(kind: str, name: str, annotations: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    """A Deployment or Secret (any kind) with ``annotations``."""
    o: dict[str, Any] = {"apiVersion": "v1" if kind == "Secret" else "apps/v1", "kind": kind,
                         "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)}}
    if kind == "Secret":
        o["type"] = "Opaque"
    else:
        o["spec"] = {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}
    return o


def selector(*requirements: tuple[str, str, list[str]]) -> str:
    return json.dumps([{"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in requirements])


def kinds_world() -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """ReplicaSets, a Deployment and Secrets placed by the policy (a
    Deployment and a Secret whose cluster-selector admits two clusters), and the clusters."""
    clusters = {"eu-1": named("eu-1", "europe-west1", "3"), "eu-2": named("eu-2", "eu-west-1", "1", tier="gold"),
                "eu-3": named("eu-3", "westeurope", "3", label=False), "us-1": named("us-1", "us-east1", "3"),
                "lab": named("lab", "", "3")}
    two = selector((NAME_LABEL, "In", ["eu-1", "eu-2"]))
    workloads = [
        ("replicasets", rs("payments", {EU: "true", PCI: "2", PREFS: json.dumps({"clusters": {"eu-1": {}}}),
                                        "fedplace.io/replica-set-preferences-source": "policy"})),
        ("replicasets", rs("blog", {})),
        ("deployments", obj("Deployment", "storefront", {EU: "true", SELECTOR: two, SELECTOR_SOURCE: "policy"})),
        ("secrets", obj("Secret", "card-keys", {EU: "true", SELECTOR: two, SELECTOR_SOURCE: "policy"})),
        ("secrets", obj("Secret", "gold-keys", {PCI: "1", SELECTOR_SOURCE: "policy", SELECTOR: selector(
            ("tier", "In", ["gold"]), (NAME_LABEL, "In", ["eu-1", "eu-2", "lab", "us-1"]))})),
        ("secrets", obj("Secret", "broken", {PCI: "2", SELECTOR: "[{"})),
        ("deployments", obj("Deployment", "plain", {})),
        ("deployments", obj("Deployment", "fresh", {PCI: "3"})),  # not placed yet: runs anywhere
    ]
    return clusters, workloads


async def kinds_answers(federation: Any) -> dict[str, Any]:
    clusters, workloads = kinds_world()
    return await answers_from(federation.client, clusters, [o for _, o in workloads])


def kinds_view(answers: dict[str, Any] | None = None) -> dict[str, Any]:
    clusters, workloads = kinds_world()
    old, two = selector((NAME_LABEL, "In", ["eu-1"])), selector((NAME_LABEL, "In", ["eu-1", "eu-2"]))
    return build_view(clusters, workloads, source="test", answers=answers, remediations=[
        {"time": "2026-01-02T03:04:00Z", "resource": "deployments", "namespace": NS, "name": "storefront",
         "outcome": "patched", "changes": {SELECTOR: two, SELECTOR_SOURCE: "policy"}, "old": {SELECTOR: old}}],
        policies=[policy_entry("pol", "fedplace-federation", 3, {}),
                  policy_entry("pol", "broken", 2, {"pol/broken/b.rego": [
                      {"code": "rego_parse_error", "message": "unexpected <eof> token",
                       "location": {"file": "pol/broken/b.rego", "row": 3, "col": 5}}]})])


async def test_every_kind_shows_where_the_policy_placed_it(federation: Any):
    view = kinds_view(await kinds_answers(federation))
    w = {x["name"]: x for x in view["workloads"]}
    # the finding: a Deployment and a Secret whose cluster-selector admits two clusters are placed there
    assert w["storefront"]["placement"] == w["card-keys"]["placement"] == ["eu-1", "eu-2"]
    assert w["storefront"]["via"] == "cluster-selector" and w["storefront"]["source"] == "policy"
    assert w["storefront"]["selector_text"] == "clusters eu-1, eu-2"
    assert w["gold-keys"]["placement"] == ["eu-2"] and w["gold-keys"]["selector_text"] == (
        "tier is gold; clusters eu-1, eu-2, lab, us-1")
    assert w["broken"]["placement"] is None and w["broken"]["selector_error"] == "not valid JSON"
    assert w["plain"]["placement"] is None and w["payments"]["via"] == "replica-set-preferences"
    html = page.render(view, now=1767323050.0)
    m = matrix_of(html)
    # columns grouped by region (the default; those without one last), then by name
    assert m.columns == ["eu-2", "eu-1", "us-1", "eu-3", "lab"]
    assert m.groups == [("eu-west-1", 1), ("europe-west1", 1), ("us-east1", 1), ("westeurope", 1), ("—", 1)]
    got = m.placement()
    assert got[f"{NS}/storefront"] == got[f"{NS}/card-keys"] == ["eu-1", "eu-2"]
    assert got[f"{NS}/gold-keys"] == ["eu-2"] and got[f"{NS}/payments"] == ["eu-1"]
    assert got[f"{NS}/blog"] == got[f"{NS}/plain"] == "any"
    # constrained, no selector yet: it runs on any cluster, and the page marks where it may not
    assert got[f"{NS}/fresh"] == sorted(m.columns)
    assert m.row_of(f"{NS}/fresh").forbidden == ["eu-2", "eu-3"]  # PCI 1 < 3; no name label
    assert m.row_of(f"{NS}/broken").error and "cluster-selector unreadable: not valid JSON" in html
    # a Deployment and a Secret placed alike share a row; a ReplicaSet's row is its own (no name label)
    assert m.row_of(f"{NS}/storefront") is m.row_of(f"{NS}/card-keys")
    assert m.row_of(f"{NS}/storefront").kinds == ["Deployment", "Secret"]
    assert "Deployment, Secret · EU jurisdiction required · <b>2</b>" in html
    assert m.row_of(f"{NS}/storefront").allowed == []  # eu-3: EU but not selectable
    assert m.row_of(f"{NS}/gold-keys").allowed == ["eu-1", "us-1", "lab"]  # the developer's tier excludes them
    assert "any cluster (no cluster-selector)" in html and "any cluster (no replica-set-preferences)" in html
    # the workloads-per-cluster bar: explicit placements (the "any" ones counted apart)
    assert m.bars == {"eu-2": 3, "eu-1": 3, "us-1": 0, "eu-3": 0, "lab": 0}
    assert "(and 3 on any cluster)" in html  # blog, plain, fresh (broken's selector is unreadable)
    # the legend: every mark, and the grouping
    legend = html.split('<ul id="legend">')[1].split("</ul>")[0]
    for words in ("runs there, and the placement rules allow it", "do not allow it now", "allow it, not used",
                  "clusters grouped by region"):
        assert words in legend, words
    # another grouping: a label, those without it last
    by_tier = page.render(build_view(*kinds_world(), source="t", grouping="label:tier"))
    m = matrix_of(by_tier)
    assert m.columns == ["eu-2", "eu-1", "eu-3", "lab", "us-1"] and m.groups == [("gold", 1), ("—", 4)]
    assert "clusters grouped by label tier" in by_tier


def cell_reasons(view: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(workload, cluster) -> the reason the page gives for its cell, decoded from the page's JSON
    as the script does."""
    html = page.render(view)
    m = matrix_of(html)
    data = json.loads(html.split('<script type="application/json" id="matrix-reasons">')[1].split("</script>")[0])
    out = {}
    for row, pattern in zip(m.rows, data["rows"], strict=True):
        if pattern < 0:
            continue
        for c, text in zip(m.columns, data["patterns"][pattern], strict=True):
            for w in row.workloads:
                out[(w, c)] = data["texts"][text]
    return out


async def test_each_cell_says_why(federation: Any):
    view = kinds_view(await kinds_answers(federation))
    reasons = cell_reasons(view)
    assert reasons[(f"{NS}/storefront", "eu-1")] == (
        "runs here — placement rules ✓ (EU jurisdiction required); fedplace.io/cluster-name ✓")
    assert reasons[(f"{NS}/storefront", "eu-3")] == (
        "not allowed — placement rules ✓ (EU jurisdiction required); fedplace.io/cluster-name missing ✗ (the "
        "policy cannot select this cluster)")
    # each rule forbidding the cluster: its requirement id, what it requires, the cluster's value, rule set, imposer
    assert reasons[(f"{NS}/storefront", "us-1")] == (
        "not allowed — eu-jurisdiction ✗ EU jurisdiction required (the cluster has us-east1; rule set eu_pci, "
        "imposed by workload); fedplace.io/cluster-name ✓")
    assert reasons[(f"{NS}/gold-keys", "eu-1")] == (
        "allowed by the policy, not chosen by the developer — placement rules ✓ (PCI compliance level >= 1); "
        "fedplace.io/cluster-name ✓; the developer's selector: tier is gold ✗")
    assert reasons[(f"{NS}/gold-keys", "eu-2")].startswith("runs here — placement rules ✓")
    assert reasons[(f"{NS}/fresh", "eu-2")].startswith("runs here, but the policy does not allow it now")
    assert "pci-compliance-level ✗ PCI compliance level >= 3 (the cluster has 1;" in reasons[(f"{NS}/fresh", "eu-2")]
    assert reasons[(f"{NS}/fresh", "eu-2")].endswith("(no cluster-selector: any cluster)")
    assert reasons[(f"{NS}/payments", "eu-3")].startswith("allowed, not used")  # a ReplicaSet needs no name label
    assert "pci-compliance-level ✗ PCI compliance level >= 2 (the cluster has 1;" in reasons[(f"{NS}/payments", "eu-2")]
    # the region-less cluster: no value
    assert "eu-jurisdiction ✗ EU jurisdiction required (the cluster has none;" in reasons[(f"{NS}/payments", "lab")]
    # small matrices: every cell's reason is its tooltip once loaded (the script); large ones on hover
    html = page.render(view)
    assert "<=%d" not in html and f"<={page.EAGER_REASON_CELLS}" in html


def test_policy_failures_come_first_and_selector_remediations_in_words():
    html = page.render(kinds_view(), now=1767323050.0)
    header, body = html.split("</header>")
    assert "1 policy ConfigMap failing to load" in header
    failing = body.split('<section id="policies" class="failing">')[1].split("</section>")[0]
    assert body.index('id="policies"') < body.index('id="placement"')  # before the matrix
    assert "Policy load failures" in failing and "(1 of 2 ConfigMaps, 1 module)" in failing
    assert 'data-configmap="pol/broken"' in failing and "pol/broken/b.rego" in failing
    assert "rego_parse_error" in failing and "(row 3, col 5)" in failing and "unexpected &lt;eof&gt; token" in failing
    assert "fedplace-federation" not in failing
    remediations = body.split('id="remediations"')[1].split("</table>")[0]
    assert "cluster selector: cluster eu-1 → <b>clusters eu-1, eu-2</b>" in remediations
    assert '{"key"' not in remediations and "[{" not in remediations  # words, not JSON
    # every ConfigMap loaded: one quiet line; not known (fedplace report from OPA): says who knows
    ok = page.render(build_view({}, [], source="t", policies=[policy_entry("pol", "a", 2, {})]))
    assert "Policies: 1 ConfigMap loaded, every module ok." in ok and "failing" not in ok.split("</style>")[1]
    assert "Policy load status: not known here" in page.render(build_view({}, [], source="t"))


def test_the_cluster_selector_as_the_policy_reads_it():
    assert parse_selector(None) == (None, None)
    assert parse_selector("{}") == (None, "not a list of requirements")
    assert parse_selector('[{"key": "a", "operator": "Near"}]')[1].startswith("requirement 1 (a): operator \"Near\"")
    assert parse_selector('[{"key": "a", "operator": "Gt", "values": ["x"]}]')[1] == (
        "requirement 1 (a): Gt needs one whole number")
    reqs, _ = parse_selector(selector(("t", "NotIn", ["x"]), ("p", "Gt", ["1"]), ("z", "DoesNotExist", [])))
    assert reqs is not None
    assert [requirement_matches(r, {"p": "2"}) for r in reqs] == [True, True, True]  # NotIn: the label absent
    assert [requirement_matches(r, {"t": "x", "p": "a", "z": ""}) for r in reqs] == [False, False, False]
    assert selector_words(reqs, NAME_LABEL) == "t is not x; p > 1; no label z"
    many = [{"key": NAME_LABEL, "operator": "In", "values": [f"c{i}" for i in range(9)]}]
    assert selector_words(many, NAME_LABEL, 6) == "clusters c0, c1, c2, c3, c4, c5 … +3"
    # settings: another name label, and kinds the policy does not place by the selector
    clusters = {"a": named("a", "europe-west1", "2", **{"example.com/name": "a"})}
    settings = {**DEFAULT_SETTINGS, "cluster_name_label": "example.com/name", "selector_kinds": ["Deployment"]}
    sel = selector(("example.com/name", "In", ["a"]))
    view = build_view(clusters, [("deployments", obj("Deployment", "d", {EU: "true", SELECTOR: sel})),
                                 ("secrets", obj("Secret", "s", {EU: "true", SELECTOR: sel}))], source="t",
                      settings=settings)
    d, s = sorted(view["workloads"], key=lambda x: x["kind"])
    assert d["placement"] == ["a"] and d["selector_text"] == "cluster a"
    assert s["via"] == "cluster-selector"  # it carries a selector: read it even though the policy does not place it
    karmada = build_view(clusters, [("deployments", obj("Deployment", "d", {EU: "true"}))], source="t",
                         settings={**DEFAULT_SETTINGS, "control_plane": "karmada"})
    assert karmada["workloads"][0]["via"] is None


async def test_the_cells_agree_with_the_policys_explanation(federation: Any):
    """Each cell agrees with the explanation (data.io.k8s.federation.explain.packs.placement): the
    cluster allowed when it is eligible, the placement rules it fails the explanation's failed
    ones; and the clusters a decision's annotation places an object on are the explanation's
    selected ones: for ReplicaSets and the cluster-selector kinds, every cluster."""
    client = federation.client
    clusters = {"gce-europe-west1": named("gce-europe-west1", "europe-west1", "2", tier="gold"),
                "aws-eu-central-1": named("aws-eu-central-1", "eu-central-1", "3"),
                "azure-westeurope": named("azure-westeurope", "westeurope", "3", label=False),
                "gce-us-central1": named("gce-us-central1", "us-central1", "3", tier="gold"),
                "onprem": named("onprem", "", "x"),
                "impostor": named("impostor", "europe-north1", "3", **{NAME_LABEL: "gce-us-central1"})}
    clusters["impostor"]["metadata"]["labels"][NAME_LABEL] = "gce-us-central1"  # names another cluster
    await client.put_data(["kubernetes", "clusters"], clusters)
    settings = await read_settings(client)
    assert {k: v for k, v in settings.items() if k != "from"} == {k: v for k, v in DEFAULT_SETTINGS.items()
                                                                   if k != "from"}
    assert settings["from"] == "OPA"
    entries = build_view(clusters, [], source="t")["clusters"]
    objects = [rs("r-eu", {EU: "true"}), rs("r-pci", {PCI: "3"}), rs("r-both", {EU: "true", PCI: "2"}),
               rs("r-bad", {PCI: "two"}),
               rs("r-dev", {PCI: "1", PREFS: json.dumps({"clusters": {"gce-us-central1": {}, "onprem": {}}})})]
    for kind in ("Deployment", "Secret"):
        objects += [obj(kind, "s-eu", {EU: "true"}), obj(kind, "s-pci", {PCI: "2"}),
                    obj(kind, "s-dev", {PCI: "1", SELECTOR: selector(("tier", "In", ["gold"]))}),
                    obj(kind, "s-name", {PCI: "1", SELECTOR: selector((NAME_LABEL, "In", ["aws-eu-central-1",
                                                                                            "gce-us-central1"]))}),
                    obj(kind, "s-notin", {PCI: "2", SELECTOR: selector(("tier", "NotIn", ["gold"]))})]
    compared = 0
    denied = impostors = 0
    for o in objects:
        # as the webhook leaves it: the decision's annotations merged (a denied object as it was asked)
        decision = await client.query("io/k8s/federation/admission", o) or {}
        admitted = json.loads(json.dumps(o))
        if not decision.get("errors"):
            admitted["metadata"]["annotations"].update(
                {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))
                 for k, v in (decision.get("annotations") or {}).items()})
        packs = await client.query("io/k8s/federation/explain/packs", admitted)
        explained = packs["placement"]["clusters"]
        entry = workload_entry("x", admitted, entries, settings)
        [answer] = (await answers_from(client, clusters, [admitted])).values()
        answers = [answer]
        entry["rules"] = 0
        rule = Rule.of(entry, settings)
        assert rule.constrained(answers), o["metadata"]["name"]
        if decision.get("errors"):
            denied += 1
        else:
            selected = {n for n, c in explained.items() if c["selected"]}
            placed = set(entry["placement"] or ())
            assert placed >= selected, (o["kind"], o["metadata"]["name"])
            # The cluster selector matches labels: a cluster whose name label names a selected cluster
            # is placed on too. The page shows it, in red: the policy does not allow it.
            for extra in placed - selected:
                assert o["kind"] != "ReplicaSet" and extra == "impostor", (o["kind"], o["metadata"]["name"], extra)
                state, why = rule.cell(next(c for c in entries if c["name"] == extra), True, False, settings, answers)
                assert state == "forbidden" and "fedplace.io/cluster-name names gce-us-central1 ✗" in why
                impostors += 1
        for c in entries:
            allowed, chosen, checks = rule.checks(c, settings, answers)
            want = explained[c["name"]]
            where = (o["kind"], o["metadata"]["name"], c["name"])
            failed = sorted(x["requirement"] for x in want["checks"] if not x["ok"] and x.get("set"))
            assert sorted(r["id"] for r in answer["forbidden"].get(c["name"], [])) == failed, where
            if answer["errors"]:  # malformed: the page says so in every cell, and allows none
                assert not allowed and checks[0][1].startswith("its placement request is malformed: "), where
            else:
                assert allowed == want["eligible"], where
                assert all(any(text.startswith(f"{r} ✗") for ok, text in checks if not ok) for r in failed), where
            if "requested" in want:
                assert chosen == want["requested"], where
            compared += 1
    assert compared == len(objects) * len(entries) and 0 < denied < len(objects) and impostors > 0


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


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        return r.status, await r.text()


BROKEN_POLICY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-broken"},
                 "data": {"broken.rego": "package team.broken\n\nallow if {\n"}}
STOREFRONT_SECRET = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": {"k": "c2VjcmV0"}}


@pytest.fixture
async def placed(kube: Any, kube_api: Any, opa: Any, kube_namespaces: Any) -> AsyncIterator[dict[str, Any]]:
    """The API server with clusters, ReplicaSets, a Deployment and a Secret, the federation policy
    ConfigMaps and one that fails to load, and a function starting opa-kube-sync on it (replicating
    ReplicaSets, Deployments and Secrets).

    Clusters: eu-a (europe-west1, PCI 3), eu-b (eu-west-1, PCI 1), eu-d (westeurope, PCI 1,
    without the name label the cluster selector selects by) and us-c (us-east1, PCI 3)."""
    api = kube_api
    ns, policy_ns = await kube_namespaces.create("insight"), await kube_namespaces.create("policy")
    await install_crd(api, CLUSTER_CRD)
    suffix = unique_name("x").split("-")[1]
    names = {f"eu-a-{suffix}": ("europe-west1", "3", True), f"eu-b-{suffix}": ("eu-west-1", "1", True),
             f"eu-d-{suffix}": ("westeurope", "1", False), f"us-c-{suffix}": ("us-east1", "3", True)}
    for name, (region, pci, label) in names.items():
        await kube_json(api, "POST", CLUSTERS_PATH, body=named(name, region, pci, label))
    for doc in [*yaml.safe_load_all(MANIFEST.read_text()), BROKEN_POLICY]:
        if doc["metadata"]["name"] in ("fedplace-federation", "fedplace-lib", "fedplace-rules-eu-pci", "team-broken"):
            doc["metadata"]["namespace"] = policy_ns
            await kube_json(api, "POST", f"/api/v1/namespaces/{policy_ns}/configmaps", body=doc)
    for name, ann in (("payments", {EU: "true", PCI: "2"}), ("ledger", {PCI: "3"}), ("web", {EU: "true"}),
                      ("blog", {})):
        await kube_json(api, "POST", RS.collection_path(ns), body=rs(name, ann, namespace=ns))
    await kube_json(api, "POST", DEPLOYMENTS.collection_path(ns),
                    body=obj("Deployment", "storefront", {EU: "true"}, namespace=ns))
    secret = {**STOREFRONT_SECRET, "metadata": {"name": "card-keys", "namespace": ns, "annotations": {PCI: "2"}}}
    await kube_json(api, "POST", SECRETS.collection_path(ns), body=secret)
    services: list[SyncApp] = []

    async def start(*extra: str) -> SyncApp:
        argv = ["--opa-url", opa.url + "/v1", "--kubeconfig", str(kube.kubeconfig), "--listen", "127.0.0.1:0",
                "--replicate", "apps/v1/replicasets", "--replicate", "apps/v1/deployments", "--replicate", "v1/secrets",
                "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters",
                "--policy-namespace", policy_ns, "--opa-check-interval", "0.2", *extra]
        svc = SyncApp(parse_args(argv))
        services.append(svc)
        await svc.start()

        async def ready() -> bool:
            return svc.is_ready()

        await eventually(ready, 20, "the sync to be ready")
        return svc

    try:
        yield {"api": api, "ns": ns, "clusters": list(names), "start": start, "suffix": suffix,
               "policy_ns": policy_ns}
    finally:
        for svc in services:
            await svc.stop()


REMEDIATE = ("--remediate", "enforce", "--remediate-debounce", "0.05", "--remediate-max-fraction", "1",
             "--leader-election", "false")
# Remediating every kind of the placed fixture (the page lists the remediated kinds).
REMEDIATE_ALL = (*REMEDIATE, "--remediate-resource", "apps/v1/replicasets", "--remediate-resource",
                 "apps/v1/deployments", "--remediate-resource", "v1/secrets")


async def test_the_page_is_off_by_default(placed: dict[str, Any]):
    svc = await placed["start"]()
    status, _ = await get(f"http://127.0.0.1:{svc.port}/placement")
    assert status == 404


async def remediated_view(placed: dict[str, Any], svc: SyncApp, headers: dict[str, str] | None = None
                          ) -> dict[str, Any]:
    """Wait for the first pass, then downgrade eu-a to PCI 1: ledger (PCI 3) moves to us-c alone,
    card-keys (PCI 2) too, payments (EU, PCI 2) has no cluster left (denied, its placement left as it
    was); storefront (EU) stays on eu-a and eu-b (eu-d has no name label); returns the view once
    all is in."""
    api, suffix = placed["api"], placed["suffix"]
    base = f"http://127.0.0.1:{svc.port}"

    async def view_has(check: Callable[[dict[str, Any]], bool]) -> bool:
        status, text = await get(base + "/placement.json", headers)
        return status == 200 and check(json.loads(text))

    def placement(view: dict[str, Any]) -> dict[str, Any]:
        return {w["name"]: w["placement"] for w in view["workloads"]}

    await eventually(lambda: view_has(lambda v: placement(v).get("ledger") == [f"eu-a-{suffix}", f"us-c-{suffix}"]
                                      and placement(v).get("card-keys") == [f"eu-a-{suffix}", f"us-c-{suffix}"]
                                      and placement(v).get("storefront") == [f"eu-a-{suffix}", f"eu-b-{suffix}"]),
                     20, "the first remediation pass placed ledger, card-keys and storefront")
    await kube_json(api, "PATCH", f"{CLUSTERS_PATH}/eu-a-{suffix}",
                    body={"metadata": {"labels": {"pci-compliance-level": "1"}}},
                    content_type="application/merge-patch+json")
    await eventually(lambda: view_has(lambda v: placement(v).get("ledger") == [f"us-c-{suffix}"]
                                      and placement(v).get("card-keys") == [f"us-c-{suffix}"]
                                      and [d["name"] for d in v["denials"]] == ["payments"]),
                     20, "ledger and card-keys re-placed, payments unsatisfiable")

    def answered(v: dict[str, Any]) -> bool:
        """The placement rules' answers asked again after the downgrade (eu-a forbidden to payments),
        and every workload answered (on a slow machine some answers come a refresh later)."""
        entry = next(w for w in v["workloads"] if w["name"] == "payments")
        return entry["rules"] is not None and f"eu-a-{suffix}" in v["rules"][entry["rules"]]["forbidden"] \
            and all(w["rules"] is not None for w in v["workloads"])

    await eventually(lambda: view_has(answered), 20, "the placement rules' answers after the downgrade")
    _, text = await get(base + "/placement.json", headers)
    return json.loads(text)


async def test_served_by_the_sync_with_remediations_and_denials(placed: dict[str, Any]):
    svc = await placed["start"](*REMEDIATE_ALL, "--placement-page", "--placement-page-refresh", "2")
    suffix, ns = placed["suffix"], placed["ns"]
    view = await remediated_view(placed, svc)
    # columns: by region (the default grouping)
    assert [(c["name"], c["group"]) for c in view["clusters"]] == [
        (f"eu-b-{suffix}", "eu-west-1"), (f"eu-a-{suffix}", "europe-west1"), (f"us-c-{suffix}", "us-east1"),
        (f"eu-d-{suffix}", "westeurope")]
    assert view["group_by"] == "region"
    assert view["clusters"][1]["labels"] == {NAME_LABEL: f"eu-a-{suffix}", "pci-compliance-level": "1"}
    assert view["settings"]["from"] == "OPA" and view["settings"]["cluster_name_label"] == NAME_LABEL
    [payments] = view["denials"]
    assert len(payments["errors"]) == 1 and "PCI compliance level >= 2" in payments["errors"][0]
    assert payments["time"].endswith("Z")
    moves = {r["name"]: (r["before"], r["after"]) for r in view["remediations"] if r["before"] is not None}
    assert moves["ledger"] == ([f"eu-a-{suffix}", f"us-c-{suffix}"], [f"us-c-{suffix}"])
    words = {(r["name"], r["before_text"], r["after_text"]) for r in view["remediations"] if "after_text" in r}
    assert ("card-keys", f"clusters eu-a-{suffix}, us-c-{suffix}", f"cluster us-c-{suffix}") in words
    assert all(r["outcome"] == "patched" and r["time"].endswith("Z") for r in view["remediations"])
    kinds = {w["name"]: (w["kind"], w["via"], w["source"]) for w in view["workloads"]}
    assert kinds["storefront"] == ("Deployment", "cluster-selector", "policy")
    assert kinds["card-keys"] == ("Secret", "cluster-selector", "policy")
    assert kinds["ledger"] == ("ReplicaSet", "replica-set-preferences", "policy")
    # the ConfigMap that fails to load, as the loader knows it
    [broken] = [p for p in view["policies"] if p["status"] != "ok"]
    assert (broken["namespace"], broken["configmap"], broken["failing_modules"]) == (
        placed["policy_ns"], "team-broken", 1)
    assert broken["errors"][0]["code"] == "rego_parse_error"
    assert broken["errors"][0]["module"] == f"{placed['policy_ns']}/team-broken/broken.rego"
    assert {p["configmap"] for p in view["policies"] if p["status"] == "ok"} == {
        "fedplace-federation", "fedplace-lib", "fedplace-rules-eu-pci"}
    # what the placement rules require, from their answers
    requires = {w["name"]: w["requires"] for w in view["workloads"]}
    assert requires["payments"] == "EU jurisdiction required, PCI compliance level >= 2" and requires["blog"] == ""
    assert not any("data" in w for w in view["workloads"])  # nothing of a Secret's content
    status, html = await get(f"http://127.0.0.1:{svc.port}/placement")
    assert status == 200 and "refreshes every 2 s" in html and "c2VjcmV0" not in html
    got = matrix_of(html).placement()
    assert got[f"{ns}/ledger"] == got[f"{ns}/card-keys"] == [f"us-c-{suffix}"]
    assert got[f"{ns}/storefront"] == [f"eu-a-{suffix}", f"eu-b-{suffix}"]


async def test_report_writes_the_same_view(placed: dict[str, Any], opa: Any, tmp_path: Path):
    svc = await placed["start"](*REMEDIATE_ALL, "--placement-page")
    await remediated_view(placed, svc)
    from_sync = tmp_path / "sync.html"
    code, out, err = await run_command(report, ["--output-file", str(from_sync),
                                                "--sync-url", f"http://127.0.0.1:{svc.port}"])
    assert code == 0, err
    html = from_sync.read_text()
    assert "Last remediations" in html and "refreshes every" not in html
    from_opa = tmp_path / "opa.html"
    code, out, err = await run_command(report, ["--output-file", str(from_opa), "--opa-url", opa.url,
                                                "--resources", "replicasets,deployments,secrets"])
    assert code == 0, err
    assert out.startswith(f"wrote {from_opa}: 4 clusters, 6 workloads, 1 denied")
    a, b = matrix_of(html), matrix_of(from_opa.read_text())
    assert a.columns == b.columns and a.placement() == b.placement()
    assert "payments" in from_opa.read_text().split('id="denials"')[1]


async def test_the_page_needs_its_token_and_the_rest_stays_open(placed: dict[str, Any], tmp_path: Path):
    token = tmp_path / "page.token"
    token.write_text("s3cret-token\n")
    svc = await placed["start"]("--placement-page", "--placement-page-token-file", str(token))
    base = f"http://127.0.0.1:{svc.port}"
    for path in ("/placement", "/placement.json"):
        async with aiohttp.ClientSession() as s:
            async with s.get(base + path) as r:
                assert r.status == 401 and r.headers["WWW-Authenticate"].startswith('Basic realm="fedplace')
                assert "needs a token" in await r.text()
            for bad in ({"Authorization": "Bearer nope"}, {"Authorization": "Bearer "},
                        {"Authorization": "Basic " + base64.b64encode(b"x:nope").decode()},
                        {"Authorization": "Basic !!"}):
                async with s.get(base + path, headers=bad) as r:
                    assert r.status == 401, bad
            async with s.get(base + path, headers={"Authorization": "Bearer s3cret-token"}) as r:
                assert r.status == 200
            basic = base64.b64encode(b"anyone:s3cret-token").decode()  # what a browser sends
            async with s.get(base + path, headers={"Authorization": f"Basic {basic}"}) as r:
                assert r.status == 200
    for path in ("/healthz", "/readyz", "/metrics"):
        status, _ = await get(base + path)
        assert status == 200, path
    # fedplace report reads a protected page with --sync-token-file, and says why it cannot without
    code, out, err = await run_command(report, ["-o", "json", "--sync-url", base])
    assert code == 2 and "answered 401" in err, err
    code, out, err = await run_command(report, ["-o", "json", "--sync-url", base, "--sync-token-file", str(token)])
    assert code == 0 and json.loads(out)["clusters"], err
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    code, out, err = await run_command(report, ["-o", "json", "--sync-url", base, "--sync-token-file", str(empty)])
    assert code == 2 and "the file is empty" in err, err
    # the file is re-read when it changes (a rotated Secret)
    token.write_text("rotated-token-with-another-size")
    assert (await get(base + "/placement.json", {"Authorization": "Bearer s3cret-token"}))[0] == 401
    assert (await get(base + "/placement.json", {"Authorization": "Bearer rotated-token-with-another-size"}))[0] == 200


def test_the_grouping_flag():
    base = ["--replicate", "apps/v1/replicasets", "--placement-page"]
    assert parse_args(base).placement_page_group_by == "region"
    assert parse_args([*base, "--placement-page-group-by", "provider"]).placement_page_group_by == "provider"
    assert parse_args([*base, "--placement-page-group-by", "label: tier"]).placement_page_group_by == "label:tier"
    for bad in ("zone", "label:", "tier"):
        with pytest.raises(SystemExit):
            parse_args([*base, "--placement-page-group-by", bad])


def test_the_token_flag():
    base = ["--replicate", "apps/v1/replicasets"]
    config = parse_args([*base, "--placement-page", "--placement-page-token-file", "/t"])
    assert config.placement_page_token_file == "/t"
    assert parse_args(base).placement_page_token_file is None
    # on an address others reach, the page needs a token; on loopback it may do without
    assert parse_args([*base, "--placement-page", "--listen", "127.0.0.1:8182"]).placement_page
    assert parse_args([*base, "--placement-page", "--listen", "[::1]:8182"]).placement_page
    assert parse_args([*base, "--listen", "0.0.0.0:8182"]).placement_page is False
    for argv in (["--placement-page", "--listen", "0.0.0.0:8182"], ["--placement-page", "--listen", ":8182"],
                 ["--placement-page-token-file", "/t"], ["--placement-page", "--placement-page-token-file", " "]):
        with pytest.raises(SystemExit):
            parse_args([*base, *argv])
    assert parse_args([*base, "--placement-page", "--listen", "0.0.0.0:8182",
                       "--placement-page-token-file", "/t"]).listen == ("0.0.0.0", 8182)


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


class Browser:
    """Headless Chromium driven over the DevTools protocol (its WebSocket, with aiohttp's client):
    request headers (the page's token), navigation, the DOM the browser built, the pointer,
    screenshots."""

    def __init__(self, proc: asyncio.subprocess.Process, session: aiohttp.ClientSession,
                 ws: aiohttp.ClientWebSocketResponse) -> None:
        self.proc, self.session, self.ws = proc, session, ws
        self._ids = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._events: list[tuple[str, Any]] = []
        self._event = asyncio.Event()
        self.statuses: list[int] = []  # HTTP status of each document response
        self.credentials: tuple[str, str] | None = None  # the answer to an authentication prompt
        self.prompts = 0  # authentication prompts answered
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reader = asyncio.create_task(self._read())
        self._stderr = asyncio.create_task(self._drain())

    @classmethod
    async def start(cls, binary: str, tmp: Path, width: int = 1400, height: int = 1000) -> "Browser":
        profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
        proc = await asyncio.create_subprocess_exec(
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}",
            "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        assert proc.stderr is not None
        endpoint = ""
        while not endpoint:
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert line, "chromium exited before its DevTools endpoint was up"
            text = line.decode(errors="replace")
            if "DevTools listening on " in text:
                endpoint = text.split("DevTools listening on ", 1)[1].strip()
        port = int(endpoint.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        session = aiohttp.ClientSession()
        async with session.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json()
        target = next(t for t in targets if t.get("type") == "page")
        ws = await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        self = cls(proc, session, ws)
        for domain in ("Page.enable", "Runtime.enable", "Network.enable"):
            await self.send(domain)
        return self

    async def _drain(self) -> None:
        assert self.proc.stderr is not None
        while await self.proc.stderr.readline():
            pass

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                fut = self._pending.pop(data["id"])
                if "error" in data:
                    fut.set_exception(AssertionError(f"DevTools: {data['error']}"))
                else:
                    fut.set_result(data.get("result"))
            elif "method" in data:
                method, params = data["method"], data.get("params") or {}
                if method == "Network.responseReceived" and params.get("type") == "Document":
                    self.statuses.append(params["response"]["status"])
                elif method == "Fetch.requestPaused":
                    self._later(self.send("Fetch.continueRequest", requestId=params["requestId"]))
                elif method == "Fetch.authRequired":  # the browser would prompt for a user name and password
                    self.prompts += 1
                    answer = ({"response": "ProvideCredentials", "username": self.credentials[0],
                               "password": self.credentials[1]} if self.credentials else {"response": "CancelAuth"})
                    self._later(self.send("Fetch.continueWithAuth", requestId=params["requestId"],
                                          authChallengeResponse=answer))
                self._events.append((method, params))
                self._event.set()

    def _later(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def answer_prompts(self, credentials: tuple[str, str] | None) -> None:
        """Answer the browser's authentication prompts (HTTP Basic) with ``credentials``, or cancel
        them (None) — as a person would type them in, or press Cancel."""
        self.credentials = credentials
        await self.send("Fetch.enable", handleAuthRequests=True, patterns=[{"urlPattern": "*"}])

    async def send(self, method: str, **params: Any) -> Any:
        self._ids += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = fut
        await self.ws.send_json({"id": self._ids, "method": method, "params": params})
        return await asyncio.wait_for(fut, 60)

    async def event(self, method: str, timeout: float = 60) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for i, (name, params) in enumerate(self._events):
                if name == method:
                    del self._events[: i + 1]
                    return params
            self._event.clear()
            left = deadline - asyncio.get_running_loop().time()
            assert left > 0, f"no {method} from chromium"
            try:
                await asyncio.wait_for(self._event.wait(), left)
            except TimeoutError:
                pass

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def open(self, url: str, headers: dict[str, str] | None = None, rendered: bool = True) -> int:
        """Navigate to ``url`` with ``headers`` on every request; the HTTP status of the document.
        With ``rendered``, wait for the page's script to have run (``data-rendered-ms``)."""
        await self.send("Network.setExtraHTTPHeaders", headers=headers or {})
        self._events.clear()
        self.statuses.clear()
        await self.send("Page.navigate", url=url)
        await self.event("Page.loadEventFired")
        assert self.statuses, "no document response"
        if rendered:
            for _ in range(100):
                if await self.evaluate("document.documentElement.getAttribute('data-rendered-ms')"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the page's script did not run")
        return self.statuses[-1]

    async def dom(self) -> str:
        return str(await self.evaluate("document.documentElement.outerHTML"))

    async def hover(self, css: str) -> None:
        """Move the pointer over the element ``css`` selects (scrolled into view first)."""
        x, y = await self.evaluate(f"(function(){{var e=document.querySelector({json.dumps(css)});"
                                   "e.scrollIntoView({block:'center',inline:'center'});"
                                   "var r=e.getBoundingClientRect();return [r.x+r.width/2,r.y+r.height/2]})()")
        await self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    async def screenshot(self, path: Path, full: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full:
            metrics = await self.send("Page.getLayoutMetrics")
            size = metrics["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = base64.b64decode((await self.send("Page.captureScreenshot", **params))["data"])
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        path.write_bytes(data)
        return path

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()
        self._reader.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._stderr.cancel()


@pytest.fixture
def artifacts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """Where a browser test writes its screenshots: the test's tmp dir; at the end they are also
    copied to ``.artifacts/<test>/`` (gitignored), kept for CI to upload and people to look at."""
    out = tmp_path / "artifacts"
    out.mkdir()
    yield out
    keep = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(keep, ignore_errors=True)
    pngs = sorted(out.glob("*.png"))
    if pngs:
        keep.mkdir(parents=True, exist_ok=True)
        for png in pngs:
            shutil.copy2(png, keep / png.name)


async def test_rendered_in_headless_chromium(placed: dict[str, Any], tmp_path: Path, artifacts: Path):
    """The issue's test: the page the sync serves (behind its token), in Chromium, for ReplicaSets,
    Deployments, Secrets and a policy ConfigMap that fails to load."""
    binary = browser()
    token = tmp_path / "page.token"
    token.write_text("browser-token")
    svc = await placed["start"](*REMEDIATE_ALL, "--placement-page", "--placement-page-token-file", str(token))
    auth = {"Authorization": "Bearer browser-token"}
    view = await remediated_view(placed, svc, auth)
    url = f"http://127.0.0.1:{svc.port}/placement"
    ns, suffix = placed["ns"], placed["suffix"]
    a, b, d, us = (f"{x}-{suffix}" for x in ("eu-a", "eu-b", "eu-d", "us-c"))
    chrome = await Browser.start(binary, tmp_path, height=1600)  # the whole matrix in its 80vh
    try:
        # without the token: the browser asks for it; cancelled, the page says what to give
        await chrome.answer_prompts(None)
        assert await chrome.open(url, rendered=False) == 401 and chrome.prompts == 1
        assert "The placement page needs a token" in await chrome.dom()
        await chrome.screenshot(artifacts / "placement-401.png", full=False)
        # the token as the password, as a person types it in the browser's prompt
        await chrome.answer_prompts(("me", "browser-token"))
        assert await chrome.open(url) == 200 and chrome.prompts == 2
        dom = await chrome.dom()
        m = matrix_of(dom)
        assert m.columns == [c["name"] for c in view["clusters"]] == [b, a, us, d]
        assert m.groups == [("eu-west-1", 1), ("europe-west1", 1), ("us-east1", 1), ("westeurope", 1)]
        got = m.placement()
        # ReplicaSets: replica-set-preferences
        assert got[f"{ns}/ledger"] == [us] and got[f"{ns}/blog"] == "any" and got[f"{ns}/web"] == [a, b, d]
        assert got[f"{ns}/payments"] == [a]  # denied now: left where it was, and marked so
        payments = m.row_of(f"{ns}/payments")
        assert payments.forbidden == [a] and "denied now" in dom
        # a Deployment: its cluster selector, matched against the clusters' labels (the finding)
        storefront = m.row_of(f"{ns}/storefront")
        assert got[f"{ns}/storefront"] == [a, b] and storefront.kinds == ["Deployment"]
        assert storefront.forbidden == [] and storefront.allowed == []
        # a Secret: the same, after the downgrade moved it
        keys = m.row_of(f"{ns}/card-keys")
        assert got[f"{ns}/card-keys"] == [us] and keys.kinds == ["Secret"]
        assert f"cluster selector: cluster {us}" in dom
        # every cell's reason is its tooltip (a small matrix: set when loaded)
        assert all(len(r.titles) == len(m.columns) for r in m.rows if not r.anywhere)
        assert storefront.titles[d] == (f"{d} (westeurope): not allowed — placement rules ✓ (EU jurisdiction "
                                        f"required); {NAME_LABEL} missing ✗ (the policy cannot select this cluster)")
        assert storefront.titles[a].startswith(f"{a} (europe-west1): runs here — placement rules ✓")
        assert keys.titles[a] == (f"{a} (europe-west1): not allowed — pci-compliance-level ✗ PCI compliance level "
                                  f">= 2 (the cluster has 1; rule set eu_pci, imposed by workload); {NAME_LABEL} ✓")
        assert payments.titles[a].startswith(f"{a} (europe-west1): runs here, but the policy does not allow it "
                                             "now (its decision denies now: left where it was)")
        assert "pci-compliance-level ✗ PCI compliance level >= 3 (the cluster has 1;" in m.row_of(
            f"{ns}/ledger").titles[d]
        # the workloads-per-cluster bar (blog runs on any cluster: counted apart)
        assert m.bars == {b: 2, a: 3, d: 1, us: 2} and "(and 1 on any cluster)" in dom
        # the legend, and the policy failures at the top
        assert 'id="legend"' in dom and "clusters grouped by region" in dom
        failing = dom.split('<section id="policies" class="failing">')[1].split("</section>")[0]
        assert f'data-configmap="{placed["policy_ns"]}/team-broken"' in failing
        assert "rego_parse_error" in failing and "broken.rego" in failing
        assert dom.index('id="policies"') < dom.index('id="placement"')
        header = dom.split("</header>")[0]
        assert "1 policy ConfigMap failing to load" in header
        # remediations of selectors in words
        remediations = dom.split('id="remediations"')[1].split("</table>")[0]
        assert f"cluster selector: clusters {a}, {us} → <b>cluster {us}</b>" in remediations
        assert '"key"' not in remediations and "[{" not in remediations
        workloads = dom.split('<table id="workloads">')[1].split("</table>")[0]
        assert workloads.count("<tr>") == 1 + 6 and 'id="workloads-count" class="muted">showing 6 of 6' in dom
        assert f"1: {us} — selector: cluster {us}" in workloads
        await chrome.screenshot(artifacts / "placement.png")

        # hovering a cell shows its reason above the matrix
        await chrome.hover(f'#matrix tr[data-workloads="{ns}/storefront"] td:nth-child({m.columns.index(d) + 2})')
        reason = await chrome.evaluate("document.getElementById('cell-reason').textContent")
        assert reason == f"Deployment · EU jurisdiction required · 1 — {storefront.titles[d]}"
        await chrome.screenshot(artifacts / "placement-hover.png", full=False)
        # a program sends the token as a bearer token
        fresh = await Browser.start(binary, tmp_path)
        try:
            assert await fresh.open(url + ".json", auth, rendered=False) == 200 and fresh.prompts == 0
        finally:
            await fresh.close()
    finally:
        await chrome.close()
    assert sorted(p.name for p in artifacts.glob("*.png")) == ["placement-401.png", "placement-hover.png",
                                                              "placement.png"]


async def test_large_matrices_give_reasons_on_hover_in_chromium(tmp_path: Path, artifacts: Path):
    """Beyond EAGER_REASON_CELLS cells no tooltip is set at load; hovering sets it."""
    binary = browser()
    clusters = {f"c{i:03d}": named(f"c{i:03d}", "europe-west1" if i % 2 else "us-east1", str(i % 4))
                for i in range(120)}
    # each its own placement (a row each): a cluster per bit of its number, and every third one
    workloads = [("replicasets", rs(f"w{i:03d}", {PCI: str(i % 4), PREFS: json.dumps({"clusters": {
        f"c{j:03d}": {} for j in [*(b for b in range(8) if i >> b & 1), *range(10, 120, 3)]}})}))
        for i in range(200)]
    view = build_view(clusters, workloads, source="test")  # not answered: every cell says so
    html = tmp_path / "large.html"
    html.write_text(page.render(view))
    chrome = await Browser.start(binary, tmp_path)
    try:
        await chrome.open(html.as_uri())
        m = matrix_of(await chrome.dom())
        assert len(m.rows) * len(m.columns) > page.EAGER_REASON_CELLS
        assert all(not r.titles for r in m.rows)
        await chrome.hover('#matrix tr[data-row="5"] td:nth-child(3)')
        title = await chrome.evaluate("document.querySelector('#matrix tr[data-row=\"5\"] td:nth-child(3)').title")
        assert title.startswith(f"{m.columns[1]} (") and "the placement rules have not been asked" in title
        assert await chrome.evaluate("document.getElementById('cell-reason').textContent.indexOf(" + json.dumps(title)
                                     + ")") > 0
        await chrome.screenshot(artifacts / "large-hover.png", full=False)
    finally:
        await chrome.close()


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

    def rb(name: str, excluded: Any, why: str | None = None, **extra: Any) -> dict[str, Any]:
        b = resource_binding(name)
        ann = {**({EXCLUDED: json.dumps(excluded)} if excluded is not None else {}), **({WHY: why} if why else {})}
        b["metadata"]["annotations"] = ann
        b["spec"].update(extra)
        return b

    bindings = [("resourcebindings", rb("web", ["us-1"], "clusters excluded by the placement policy (…): us-1",
                                        clusters=[{"name": "eu-1", "replicas": 2}])),
                ("resourcebindings", rb("vault", {"allExcept": []}, "no cluster satisfies <the> policy")),
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
    assert vault[2:] == [f"Deployment {NS}/vault", "no placement rule answer yet",
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
            if doc["metadata"]["name"] in ("fedplace-federation", "fedplace-lib", "fedplace-rules-eu-pci",
                                           "fedplace-karmada"):
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
        return (c["eu-a"] in (excluded(v, "vault") or []) and c["eu-a"] in (excluded(v, "ledger") or [])
                and all(b["requires"] is not None for b in v["bindings"] or []))  # the templates answered

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
    assert vault["requires"] == "EU jurisdiction required, PCI compliance level >= 2"  # its template's
    assert "PCI compliance level >= 2" in vault["why"]
    assert ledger["every_cluster_excluded"] is False and c["us-c"] not in ledger["excluded"]
    assert ledger["requires"] == "PCI compliance level >= 3" and "PCI compliance level >= 3" in ledger["why"]
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
    code, out, err = await run_command(report, ["--output-file", str(tmp_path / "sync.html"),
                                                "--sync-url", k["url"]])
    assert code == 0, err
    code, out, err = await run_command(report, ["--output-file", str(tmp_path / "opa.html"), "--opa-url", opa.url])
    assert code == 0, err
    assert "3 Karmada bindings (1 with every cluster excluded)" in out
    from_sync, from_opa = (binding_rows((tmp_path / f).read_text()) for f in ("sync.html", "opa.html"))
    assert from_opa == from_sync == rows


async def test_karmada_bindings_in_headless_chromium(karmada_placed: dict[str, Any], tmp_path: Path,
                                                     artifacts: Path):
    binary = browser()
    k = karmada_placed
    await karmada_remediated(k)
    dom = await chromium(binary, tmp_path, "--dump-dom", k["url"] + "/placement")
    assert 'data-rendered-ms="' in dom
    rows = binding_rows(dom)
    assert [r[1][0] for r in rows][0] == f"{k['ns']}/vault-deployment"
    assert rows[0][0] == "stranded" and [r[0] for r in rows[1:]] == ["", ""]
    assert 'id="bindings-count" class="muted">showing 3 of 3' in dom
    screenshot = artifacts / "karmada.png"
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
