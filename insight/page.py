"""The placement page: one self-contained HTML document for a view (:mod:`fedplace.insight.view`).

* policy ConfigMaps that fail to load, first (opa-kube-sync knows them);
* the placement matrix: workloads grouped by kind, constraints and current
  placement (rows) × clusters (columns, grouped by jurisdiction — EU or not,
  as the policy reads the region — then by region, with a legend), a mark
  where the group runs, per cell why the policy allows the cluster or not
  (:class:`fedplace.insight.reasons.Rule`: shown on hover), groups placed on
  any cluster and denied groups marked, and a workloads-per-cluster bar;
  ReplicaSets are placed by their replica-set-preferences, every other kind
  the policy places (Deployments, Secrets, …) by its cluster selector, matched
  against the clusters' labels;
* every workload with its constraints and placement;
* Karmada's bindings (when a binding type is replicated): each with its
  template, the clusters the policy excluded (its fedplace.io/excluded-clusters)
  and why (fedplace.io/placement); those excluding every cluster first and
  marked;
* denials (workloads whose decision now denies) and the last remediations,
  with times, placements and cluster selectors in words.

No external assets (styles and the tiny script are inline; works offline).
With ``refresh`` the page fetches itself every ``refresh`` seconds and swaps
its content in place (scroll kept); without JavaScript a meta refresh does it.
When loaded, it records how long it took to lay out in
``<html data-rendered-ms>`` (used by bench/insight.py).

opa-kube-sync serves it behind ``--placement-page`` (:func:`add_routes`:
``GET /placement`` and the model as ``GET /placement.json``; with a token file
both need the token, as a bearer token or as the password of HTTP Basic
authentication, which browsers ask for), from its informers' caches, its
remediator's records and its policy loaders' state (:func:`sync_view`);
``fedplace report`` writes it to a file.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import hmac
import html
import json
import logging
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from aiohttp import web

from fedplace.common.opa_client import TokenSource
from fedplace.insight.reasons import ALLOWED, NOT_ALLOWED, PLACED, PLACED_FORBIDDEN, Rule, settings_of
from fedplace.insight.view import (BINDING_RESOURCES, JURISDICTIONS, TEMPLATE_PLURALS, VIA_PREFS, VIA_SELECTOR,
                                   build_view, iso, policy_entry)

__all__ = ["EAGER_REASON_CELLS", "MAX_GROUPS", "add_routes", "render", "sync_view"]

log = logging.getLogger(__name__)

MAX_GROUPS = 300  # matrix rows; the workloads table lists every workload anyway
NAMES_SHOWN = 3
PLACEMENT_SHOWN = 6
ROWS_INLINE = 100  # workloads rows in the HTML itself; the others from the JSON beside them
# Matrices up to this many cells get every cell's reason as its tooltip (title) when loaded;
# larger ones as the pointer reaches a cell (setting 300,000 titles would slow the layout).
EAGER_REASON_CELLS = 20000
BAR_PX = 48  # the tallest workloads-per-cluster bar

STYLE = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2329;background:#fff}
header{padding:12px 20px;background:#1d2f46;color:#fff}header h1{font-size:18px;margin:0 0 4px}
header p{margin:0;opacity:.85}main{padding:8px 20px 40px}h2{font-size:15px;margin:22px 0 8px}
table{border-collapse:collapse}th,td{border:1px solid #d8dde3;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f1f4f7;font-weight:600}.note{color:#7a4b00;background:#fff6e0;padding:6px 10px;margin:6px 0}
.scroll{overflow:auto;width:max-content;max-width:100%;max-height:80vh;border:1px solid #d8dde3}
#matrix{table-layout:fixed}#matrix td.c{width:16px;min-width:16px;padding:0;text-align:center;cursor:default}
#matrix th.c{width:16px;padding:4px 0;writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;
font-weight:500;font-size:11px}#matrix th.w{position:sticky;left:0;background:#f1f4f7;z-index:1;min-width:260px}
#matrix thead th{position:sticky;top:0;z-index:2}#matrix thead th.w{z-index:3}
#matrix thead th.j{padding:2px;font-size:11px;line-height:14px}
#matrix th.j div{width:0;min-width:100%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
#matrix th.rg{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-size:11px;padding:4px 0;
font-weight:600;text-align:left;vertical-align:middle}#matrix thead tr.rgs th{top:19px}
@supports (writing-mode:sideways-lr){#matrix th.c,#matrix th.rg{writing-mode:sideways-lr;transform:none}}
#matrix th.j.eu,.sw.eu{background:#dce8fb}#matrix th.j.out,.sw.out{background:#ece6f6}
#matrix th.j.none,.sw.none{background:#eceff1}#matrix col.w{width:280px}#matrix col.c{width:16px}
#matrix col.start{border-left:2px solid #8896a6}col.odd{background:#f7f9fb}
#matrix td.y{background:#2f7d32;color:#fff}#matrix td.y.bad,.sw.bad{background:#c62828;color:#fff}
#matrix td.ok,.sw.ok{color:#2f7d32}#matrix td.any{color:#555;font-style:italic}#matrix td.err{color:#b3261e}
#matrix td.any div,#matrix td.err div{width:0;min-width:100%}#matrix tfoot th.w{font-weight:500;vertical-align:bottom}
#matrix td.bar{vertical-align:bottom;height:52px}#matrix td.bar i{display:block;background:#1d5fa8;margin:0 2px}
.sw{display:inline-block;min-width:16px;height:16px;text-align:center;border:1px solid #d8dde3;margin-right:4px;
line-height:16px}.sw.y{background:#2f7d32;color:#fff}#legend{margin:4px 0 8px;padding:0;list-style:none;
columns:2 24em}#legend li{margin:2px 0}#cell-reason{min-height:2.8em;margin:4px 0;padding:4px 8px;
background:#f1f4f7;border-left:3px solid #1d5fa8;max-width:1100px}
#policies.failing{border:2px solid #b3261e;background:#fdf1f0;padding:6px 12px;margin:10px 0}
#policies.failing h2{color:#b3261e;margin-top:6px}#policies li{margin:3px 0}
#workloads-filter,#bindings-filter{width:28em;max-width:90vw}
#matrix tr.denied th.w{background:#fde2e1}.denied-tag{color:#b3261e;font-weight:600}
code{font:12px ui-monospace,Menlo,Consolas,monospace}.muted{color:#69737d}
details summary{cursor:pointer;color:#1d5fa8}
section.long{content-visibility:auto;contain-intrinsic-size:auto 1200px}
#workloads,#clusters{table-layout:fixed}
#bindings tr.stranded td{background:#fde2e1}header .denied-tag{color:#ffb4ab}
"""

# Inline, no dependencies: (1) record the layout time; (2) the long tables (workloads, and
# Karmada's bindings): the first rows are in the HTML, the rest come from the JSON beside each,
# 500 at a time as the reader scrolls to its end, or filtered by its search box; a row whose last
# cell (the status) is not "ok" has that cell marked, and a bindings row excluding every cluster
# is marked whole; (3) with a refresh interval, fetch the page again and swap <header> and
# <main>, keeping each filter and how many rows were shown.
SCRIPT = """(function(){var every=%s,state={};
function table(id,marks){var data=document.getElementById(id+"-data"),body=document.querySelector("#"+id+" tbody");
if(!data||!body)return;var st=state[id]||(state[id]={q:"",shown:0}),all=JSON.parse(data.textContent),list=all,
shown=body.rows.length,box=document.getElementById(id+"-filter"),count=document.getElementById(id+"-count"),
more=document.getElementById(id+"-more");
function row(r){var tr=document.createElement("tr"),last=r[r.length-1];if(marks[last])tr.className=marks[last];
for(var i=0;i<r.length;i++){var td=document.createElement("td");td.textContent=r[i];
if(i==r.length-1&&r[i]!="ok")td.className="denied-tag";tr.appendChild(td)}return tr}
function add(n){var f=document.createDocumentFragment(),end=Math.min(list.length,shown+n);
for(;shown<end;shown++)f.appendChild(row(list[shown]));body.appendChild(f);st.shown=shown;
count.textContent="showing "+shown+" of "+list.length}
function filter(){var q=box.value.toLowerCase();st.q=box.value;list=q?all.filter(function(r){
return r.join(" ").toLowerCase().indexOf(q)>=0}):all;body.textContent="";shown=0;add(500)}
box.addEventListener("input",filter);if(st.q){box.value=st.q;filter()}
else if(st.shown>shown){add(st.shown-shown)}
if(more.getBoundingClientRect().top<innerHeight)add(500);
new IntersectionObserver(function(e){if(e[0].isIntersecting)add(500)}).observe(more)}
function reasons(){var m=document.getElementById("matrix"),d=document.getElementById("matrix-reasons"),
panel=document.getElementById("cell-reason");if(!m||!d)return;var R=JSON.parse(d.textContent),
heads=m.querySelectorAll("thead tr.names th.c");
function why(td){if(td.title)return td.title;var tr=td.parentNode,r=tr.getAttribute("data-row");
if(r===null||!td.classList.contains("c"))return"";var p=R.rows[+r],c=td.cellIndex-1,h=heads[c];
if(p<0||!h)return"";return h.getAttribute("data-cluster")+" ("+(h.getAttribute("data-region")||"no region")+"): "+
R.texts[R.patterns[p][c]]}
var t0=m.tHead.getBoundingClientRect().top,hr=m.tHead.rows,tops=[];for(var k=0;k<hr.length;k++)
tops.push(Math.max(0,Math.floor(hr[k].getBoundingClientRect().top-t0)-1));for(k=0;k<hr.length;k++){var ths=hr[k].cells;
for(var j=0;j<ths.length;j++)if(ths[j].rowSpan<2)ths[j].style.top=tops[k]+"px"}
function show(e){var td=e.target.closest?e.target.closest("td"):null;if(!td||!m.contains(td))return;var t=why(td);
if(!t)return;td.title=t;var l=td.parentNode.getAttribute("data-label");panel.textContent=(l?l+" — ":"")+t}
m.addEventListener("mouseover",show);m.addEventListener("focusin",show);
if(+m.getAttribute("data-cells")<=%d){var cells=m.querySelectorAll("tbody td.c");
for(var i=0;i<cells.length;i++)if(!cells[i].title)cells[i].title=why(cells[i])}}
function tables(){table("workloads",{});table("bindings",{"%s":"stranded"})}
addEventListener("load",function(){tables();void document.body.offsetHeight;
document.documentElement.setAttribute("data-rendered-ms",String(Math.round(performance.now())));reasons()});
if(!every)return;setInterval(function(){fetch(location.href,{cache:"no-store"}).then(function(r){
return r.ok?r.text():null}).then(function(t){if(!t)return;var d=new DOMParser().parseFromString(t,"text/html"),
m=d.querySelector("main"),h=d.querySelector("header");if(m){document.querySelector("main").replaceWith(m);tables();
reasons()}
if(h){document.querySelector("header").replaceWith(h)}}).catch(function(){})},every*1000)})();"""

STRANDED = "every cluster excluded"  # a binding's status when the policy excludes every cluster


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _workload(w: Mapping[str, Any]) -> str:
    return f"{w['namespace']}/{w['name']}"


def _constraints(c: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in c.items()) if c else "no constraints"


def _ago(stamp: str | None, now: float) -> str:
    if not stamp:
        return ""
    try:
        seconds = now - calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return _e(stamp)
    return f'<time datetime="{_e(stamp)}">{_e(stamp)}</time> <span class="muted">({max(0, int(seconds))} s ago)</span>'


def _placement(names: Sequence[str] | None) -> str:
    """Where a workload runs, in words (plain text)."""
    if names is None:
        return "any cluster"
    if not names:
        return "none"
    more = f" … +{len(names) - PLACEMENT_SHOWN}" if len(names) > PLACEMENT_SHOWN else ""
    return f"{len(names)}: {', '.join(names[:PLACEMENT_SHOWN])}{more}"


def _clusters_text(names: Sequence[str] | None) -> str:
    text = _e(_placement(names))
    return f'<span class="muted">{text}</span>' if not names else text


def _lazy_table(out: list[str], table_id: str, title: str, head: Sequence[str], rows: Sequence[Sequence[str]],
                placeholder: str, row_class: Callable[[Sequence[str]], str] = lambda r: "",
                extra_title: str = "") -> None:
    """A long table: the first rows in HTML, every row as JSON for the script (SCRIPT). The last
    cell is the status: anything but "ok" is marked."""
    shown = min(len(rows), ROWS_INLINE)
    out.append(f'<h2 id="{table_id}-title">{_e(title)} <span class="muted">({len(rows)})</span>{extra_title}</h2>'
               f'<p><input id="{table_id}-filter" type="search" aria-label="filter the {_e(table_id)}" '
               f'placeholder="{_e(placeholder)}"> '
               f'<span id="{table_id}-count" class="muted">showing {shown} of {len(rows)}</span></p>'
               f'<table id="{table_id}"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>")
    for r in rows[:shown]:
        cells = [f"<td>{_e(c)}</td>" for c in r[:-1]]
        status = f'<td class="denied-tag">{_e(r[-1])}</td>' if r[-1] != "ok" else "<td>ok</td>"
        cls = row_class(r)
        out.append(f'<tr class="{cls}">' if cls else "<tr>")
        out.append("".join(cells) + status + "</tr>")
    data = json.dumps(rows, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\u0021--")
    out.append(f'</tbody></table><p id="{table_id}-more" class="muted">'
               + ("" if shown == len(rows) else "more rows as you scroll (JavaScript)")
               + f'</p><script type="application/json" id="{table_id}-data">{data}</script>')


def _placement_of(w: Mapping[str, Any]) -> str:
    """A workload's placement in words: the clusters, and a cluster selector's requirements."""
    if w.get("via") == VIA_SELECTOR:
        if w.get("selector_error"):
            return f"cluster-selector unreadable: {w['selector_error']}"
        if w["placement"] is None:
            return "any cluster (no cluster-selector)"
        return f"{_placement(w['placement'])} — selector: {w.get('selector_text') or ''}"
    return _placement(w["placement"])


def _resource_kind(r: Mapping[str, Any]) -> str:
    return str(r.get("resource") or "")


def _remediation_text(r: Mapping[str, Any]) -> str:
    """A remediation's change, in words: the clusters before → after (replica-set-preferences),
    the cluster selector before → after, or the annotations it set."""
    parts = []
    if r.get("after") is not None or r.get("before") is not None:
        parts.append(f'{_clusters_text(r.get("before"))} → {_clusters_text(r.get("after"))}')
    if r.get("after_text") is not None:
        parts.append(f'cluster selector: {_e(r.get("before_text"))} → <b>{_e(r["after_text"])}</b>')
    if parts:
        return "<br>".join(parts)
    changes = r.get("changes") or {}
    return _e("; ".join(f"{k} → {'(removed)' if v is None else v}" for k, v in changes.items()))


def _workloads(out: list[str], workloads: Sequence[Mapping[str, Any]]) -> None:
    """The workloads table."""
    rows = [[_workload(w), w["kind"], _constraints(w["constraints"]), _placement_of(w), w["source"] or "",
             "denied: " + "; ".join(w["denied"]) if w["denied"] else "ok"] for w in workloads]
    _lazy_table(out, "workloads", "Workloads", ("workload", "kind", "constraints", "placement", "set by", "status"),
                rows, "filter: namespace/name, constraint, cluster…")


def _binding_name(b: Mapping[str, Any]) -> str:
    return f"{b['namespace']}/{b['name']}" if b["namespace"] else b["name"]


def _excluded_text(b: Mapping[str, Any]) -> str:
    excluded = b["excluded"]
    if excluded is None:
        return "—"
    text = _placement(excluded)
    return f"every cluster — {text}" if b["every_cluster_excluded"] else text


def _binding_status(b: Mapping[str, Any]) -> str:
    if b["every_cluster_excluded"]:
        return STRANDED
    if b["excluded"] is None:
        return "not decided yet (no fedplace.io/excluded-clusters)"
    return "ok"


def _bindings(out: list[str], view: Mapping[str, Any]) -> None:
    """Karmada's bindings: template, excluded clusters, why; those excluding every cluster first
    and marked."""
    bindings = view.get("bindings")
    if bindings is None:
        return
    rows = []
    for b in bindings:
        t = b["template"]
        template = (t["text"] + ("" if t["replicated"] else " (not replicated)")) if t else "(no template)"
        rows.append([_binding_name(b), b["kind"], template,
                     _constraints(b["constraints"]) if b["constraints"] is not None else "—",
                     _excluded_text(b), _placement(b["scheduled"]) if b["scheduled"] else "—",
                     b["why"] or "", _binding_status(b)])
    stranded = sum(1 for b in bindings if b["every_cluster_excluded"])
    extra = (f' <span class="denied-tag">{stranded} with every cluster excluded</span>' if stranded else "")
    _lazy_table(out, "bindings", "Karmada bindings", ("binding", "kind", "template", "template constraints",
                                                       "excluded clusters", "scheduled on", "why", "status"),
                rows, "filter: namespace/name, template, cluster…",
                row_class=lambda r: "stranded" if r[-1] == STRANDED else "", extra_title=extra)


def _kinds(members: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(sorted({w["kind"] or w["resource"] for w in members}))


def _any_text(via: str | None) -> str:
    if via == VIA_SELECTOR:
        return "any cluster (no cluster-selector)"
    if via == VIA_PREFS:
        return "any cluster (no replica-set-preferences)"
    return "any cluster (a kind the policy does not place)"


def _column_groups(clusters: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str]
                   ) -> list[tuple[str, int]]:
    """Runs of equal ``key`` over the (ordered) clusters: (value, length)."""
    runs: list[tuple[str, int]] = []
    for c in clusters:
        k = key(c)
        if runs and runs[-1][0] == k:
            runs[-1] = (k, runs[-1][1] + 1)
        else:
            runs.append((k, 1))
    return runs


JURISDICTION_CLASS = {"EU": "eu", "outside the EU": "out", "no region": "none"}


def _legend(out: list[str], clusters: Sequence[Mapping[str, Any]], anywhere: int) -> None:
    regions: dict[str, list[str]] = {}
    for c in clusters:
        regions.setdefault(c["jurisdiction"], [])
        if c["region"] and c["region"] not in regions[c["jurisdiction"]]:
            regions[c["jurisdiction"]].append(c["region"])
    out.append('<ul id="legend">'
               '<li><span class="sw y">●</span>runs there, and the policy allows it</li>'
               '<li><span class="sw bad">●</span>runs there, but the policy does not allow it now (denied now, '
               'or not re-placed yet)</li>'
               '<li><span class="sw ok">○</span>the policy allows it, not used (the developer\'s choice, or the '
               'placement annotation is older than the policy)</li>'
               '<li><span class="sw"></span>the policy does not allow it (or the developer excluded it)</li>'
               '<li><i>any cluster</i>: no placement constraints and no placement annotation'
               + (f' ({anywhere} workload{"s" if anywhere != 1 else ""})' if anywhere else "") + '</li>')
    for j in JURISDICTIONS:
        if j in regions:
            names = ", ".join(_e(r) for r in regions[j]) or "—"
            what = {"EU": "EU jurisdiction (the region as the policy reads it)",
                    "outside the EU": "outside the EU", "no region": "clusters without a region"}[j]
            out.append(f'<li><span class="sw {JURISDICTION_CLASS[j]}">&nbsp;</span>{what}'
                       f'{": " + names if j != "no region" else ""}</li>')
    out.append("<li>columns: jurisdiction, then region (alternately shaded), then cluster; the bar under each "
               "column counts the workloads placed there. Hover over a cell for its reason.</li></ul>")


def _matrix(view: Mapping[str, Any], out: list[str]) -> None:
    clusters = view["clusters"]
    settings = settings_of(view.get("settings"))
    for c in clusters:  # a view from an older sync
        c.setdefault("jurisdiction", "no region" if not c.get("region") else "outside the EU")
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for w in view["workloads"]:
        placement = tuple(w["placement"]) if w["placement"] is not None else None
        rule = Rule.of(w, settings)
        key = (placement, tuple(w["constraints"].items()), bool(w["denied"]), rule,
               w.get("selector_text") if w.get("selector") is not None else None, w.get("selector_error"))
        groups.setdefault(key, []).append(w)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), _constraints(dict(kv[0][1])), kv[0][0] or (),
                                                     _kinds(kv[1])))
    index = {c["name"]: i for i, c in enumerate(clusters)}
    counts = [0] * len(clusters)
    anywhere = 0
    for (placement, *_, selector_error), members in groups.items():
        if selector_error:
            continue
        if placement is None:
            anywhere += len(members)
            continue
        for n in placement:
            if n in index:
                counts[index[n]] += len(members)
    out.append(f'<h2 id="placement">Placement matrix <span class="muted">({len(view["workloads"])} workloads in '
               f'{len(groups)} groups × {len(clusters)} clusters)</span></h2>')
    if len(ordered) > MAX_GROUPS:
        out.append(f'<p class="note">Showing the {MAX_GROUPS} largest of {len(ordered)} groups; the workloads '
                   'table below lists every workload.</p>')
    _legend(out, clusters, anywhere)
    out.append('<p id="cell-reason" aria-live="polite">Hover over a cell: why the workloads of its row may or '
               'may not run on its cluster.</p>')
    shown = ordered[:MAX_GROUPS]
    cells = len(shown) * len(clusters)
    out.append(f'<div class="scroll"><table id="matrix" data-cells="{cells}"><colgroup><col class="w">')
    odd = False
    # one <col> per region run: its first column marked (a border), alternate runs shaded
    for _, length in _column_groups(clusters, lambda c: f'{c["jurisdiction"]}\0{c["region"]}'):
        shade = " odd" if odd else ""
        out.append(f'<col class="c start{shade}">'
                   + (f'<col span="{length - 1}" class="c{shade}">' if length > 1 else ""))
        odd = not odd
    out.append('</colgroup><thead><tr class="jurs"><th class="w" rowspan="3">workloads '
               '(kind · constraints · how many)</th>')
    for jur, length in _column_groups(clusters, lambda c: c["jurisdiction"]):
        out.append(f'<th class="j {JURISDICTION_CLASS.get(jur, "none")}" colspan="{length}" title="{_e(jur)}: '
                   f'{length} clusters"><div>{_e(jur)}</div></th>')
    out.append('</tr><tr class="rgs">')
    for key, length in _column_groups(clusters, lambda c: f'{c["jurisdiction"]}\0{c["region"]}'):
        region = key.split("\0", 1)[1]
        out.append(f'<th class="rg" colspan="{length}" title="region {_e(region or "(none)")}: {length} '
                   f'clusters">{_e(region or "—")}</th>')
    out.append('</tr><tr class="names">')
    for c in clusters:
        labels = ", ".join(f"{k}={v}" for k, v in c["labels"].items())
        out.append(f'<th class="c" data-cluster="{_e(c["name"])}" data-region="{_e(c["region"])}" '
                   f'title="{_e(c["name"])}: region {_e(c["region"] or "(none)")} ({_e(c["jurisdiction"])}); '
                   f'{_e(labels)}">{_e(c["name"])}</th>')
    out.append("</tr></thead><tbody>")
    texts: dict[str, int] = {}
    patterns: dict[tuple[int, ...], int] = {}
    row_patterns: list[int] = []
    marks = {PLACED: '<td class="c y">●</td>', PLACED_FORBIDDEN: '<td class="c y bad">●</td>',
             ALLOWED: '<td class="c ok">○</td>', NOT_ALLOWED: '<td class="c"></td>'}
    for row, ((placement, constraint_items, denied, rule, selector_text, selector_error), members) in enumerate(shown):
        names = [_workload(w) for w in members]
        first = ", ".join(_e(n) for n in names[:NAMES_SHOWN])
        rest = ""
        if len(names) > NAMES_SHOWN:
            rest = (f' <details><summary>+{len(names) - NAMES_SHOWN} more</summary>'
                    f'{", ".join(_e(n) for n in names[NAMES_SHOWN:])}</details>')
        tag = ' <span class="denied-tag">denied now</span>' if denied else ""
        label = f"{_kinds(members)} · {_constraints(dict(constraint_items))} · {len(names)}"
        via = rule.via
        how = f'<br><span class="muted">cluster selector: {_e(selector_text)}</span>' if selector_text else ""
        out.append(f'<tr{" class=denied" if denied else ""} data-row="{row}" data-workloads="{_e(" ".join(names))}" '
                   f'data-kinds="{_e(" ".join(sorted({w["kind"] for w in members})))}" data-label="{_e(label)}">'
                   f'<th class="w">{_e(_kinds(members))} · {_e(_constraints(dict(constraint_items)))} · '
                   f'<b>{len(names)}</b>{tag}<br>{first}{rest}{how}</th>')
        if selector_error:
            row_patterns.append(-1)
            why = (f"the cluster selector is unreadable ({selector_error}): the policy denies it, and Kubernetes "
                   "Federation cannot place it")
            out.append(f'<td class="err" colspan="{max(len(clusters), 1)}" title="{_e(why)}"><div>cluster-selector '
                       f'unreadable: {_e(selector_error)}</div></td></tr>')
            continue
        if placement is None and not rule.constrained:
            row_patterns.append(-1)
            why = ("no placement constraint annotations: the policy leaves it alone, and Kubernetes Federation "
                   "places it on any cluster")
            out.append(f'<td class="any" colspan="{max(len(clusters), 1)}" title="{_e(why)}"><div>{_e(_any_text(via))}'
                       '</div></td></tr>')
            continue
        on = set(placement) if placement is not None else None  # None: no annotation, so every cluster
        pattern = []
        row_cells = []
        for c in clusters:
            state, why = rule.cell(c, on is None or c["name"] in on, denied, settings)
            if on is None:
                why += f" (no {'cluster-selector' if via == VIA_SELECTOR else 'replica-set-preferences'}: any cluster)"
            pattern.append(texts.setdefault(why, len(texts)))
            row_cells.append(marks[state])
        row_patterns.append(patterns.setdefault(tuple(pattern), len(patterns)))
        out.append("".join(row_cells))
        unknown = [n for n in placement or () if n not in index]
        if unknown:
            out.append(f'<td class="note">not replicated: {_e(", ".join(unknown))}</td>')
        out.append("</tr>")
    out.append("</tbody><tfoot><tr class=\"bars\"><th class=\"w\">workloads per cluster"
               + (f' <span class="muted">(and {anywhere} on any cluster)</span>' if anywhere else "") + "</th>")
    top = max(counts, default=0) or 1
    for c, n in zip(clusters, counts):
        out.append(f'<td class="c bar" data-count="{n}" title="{_e(c["name"])}: {n} workload{"s" if n != 1 else ""}">'
                   f'<i style="height:{round(BAR_PX * n / top)}px"></i></td>')
    out.append("</tr></tfoot></table></div>")
    data = {"texts": sorted(texts, key=texts.__getitem__),
            "patterns": [list(p) for p in sorted(patterns, key=patterns.__getitem__)], "rows": row_patterns}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    out.append('<script type="application/json" id="matrix-reasons">'
               + text.replace("</", "<\\/").replace("<!--", "<\\u0021--") + "</script>")


def _policies(out: list[str], view: Mapping[str, Any]) -> None:
    """The policy ConfigMaps' load status: failures first and loud; all well, one quiet line."""
    policies = view.get("policies")
    if policies is None:
        out.append('<p id="policies" class="muted">Policy load status: not known here (opa-kube-sync knows it: '
                   '<code>fedplace report --sync-url</code>, or the ConfigMaps\' <code>fedplace.io/policy-status'
                   '</code> annotation).</p>')
        return
    failing = [p for p in policies if p["status"] != "ok"]
    if not failing:
        out.append(f'<p id="policies" class="muted">Policies: {len(policies)} ConfigMap'
                   f'{"s" if len(policies) != 1 else ""} loaded, every module ok.</p>')
        return
    modules = sum(p["failing_modules"] for p in failing)
    out.append(f'<section id="policies" class="failing"><h2>Policy load failures <span class="muted">'
               f'({len(failing)} of {len(policies)} ConfigMaps, {modules} module{"s" if modules != 1 else ""})'
               '</span></h2><ul>')
    for p in failing:
        out.append(f'<li data-configmap="{_e(p["namespace"])}/{_e(p["configmap"])}"><code>{_e(p["namespace"])}/'
                   f'{_e(p["configmap"])}</code>: {p["failing_modules"]} of {p["modules"]} module'
                   f'{"s" if p["modules"] != 1 else ""} failing<ul>')
        for e in p["errors"]:
            where = ", ".join(f"{k} {e[k]}" for k in ("row", "col") if e.get(k) is not None)
            out.append(f'<li><code>{_e(e["module"])}</code>{f" ({where})" if where else ""}: '
                       f'<b>{_e(e["code"])}</b> {_e(e["message"])}</li>')
        out.append("</ul></li>")
    out.append("</ul><p class=\"muted\">OPA keeps deciding with the version it had of each failing module (none, "
               "for a new one). The ConfigMap's <code>fedplace.io/policy-status</code> annotation and its Warning "
               "Events say the same; <code>fedplace what-if --policy</code> shows a fix's compile errors before "
               "it is merged.</p></section>")


def _table(out: list[str], table_id: str, title: str, head: Iterable[str], rows: Iterable[Iterable[str]],
           empty: str) -> None:
    rows = list(rows)
    out.append(f'<h2 id="{table_id}-title">{_e(title)} <span class="muted">({len(rows)})</span></h2>')
    if not rows:
        out.append(f'<p class="muted" id="{table_id}">{_e(empty)}</p>')
        return
    out.append(f'<table id="{table_id}"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head)
               + "</tr></thead><tbody>")
    out.extend("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    out.append("</tbody></table>")


def render(view: Mapping[str, Any], refresh: float | None = None, now: float | None = None) -> str:
    """The page for ``view`` (escaped throughout); ``refresh`` seconds between self-updates, or None."""
    now = time.time() if now is None else now
    out: list[str] = []
    w_all = view["workloads"]
    bindings = view.get("bindings")
    stranded = sum(1 for b in bindings or () if b["every_cluster_excluded"])
    karmada = (f'{len(bindings)} Karmada bindings'
               + (f' (<span class="denied-tag">{stranded} with every cluster excluded</span>)' if stranded else "")
               + " · ") if bindings is not None else ""
    failing = sum(1 for p in view.get("policies") or () if p.get("status") != "ok")
    policies = (f'<span class="denied-tag">{failing} policy ConfigMap{"s" if failing != 1 else ""} failing to load'
                '</span> · ') if failing else ""
    out.append(f'<header><h1>fedplace placement</h1><p>{policies}{len(view["clusters"])} clusters · '
               f'{len(w_all)} workloads · '
               f'{karmada}{len(view["denials"])} denied · generated {_e(view["generated"])} from {_e(view["source"])}'
               f'{f" · refreshes every {refresh:g} s" if refresh else ""}</p></header><main>')
    _policies(out, view)
    for note in view.get("notes") or []:
        out.append(f'<p class="note">{_e(note)}</p>')
    _matrix(view, out)
    _table(out, "denials", "Denied now", ("workload", "errors", "since"),
           ((_e(_workload(d)), "<br>".join(_e(e) for e in d["errors"]), _ago(d.get("time"), now))
            for d in view["denials"]), "No workload's decision denies.")
    if view.get("stuck"):
        _table(out, "stuck", "Stuck placements", ("object", "kept where forbidden", "why", "since"),
               ((_e(_workload(d)), _e(", ".join(d["targets"])), _e(d["message"]), _ago(d.get("time"), now))
                for d in view["stuck"]), "")
    _bindings(out, view)
    _table(out, "remediations", "Last remediations", ("time", "workload", "placement before → after", "outcome"),
           ((_ago(r.get("time"), now), _e(_workload(r)) + f' <span class="muted">{_e(_resource_kind(r))}</span>',
             _remediation_text(r),
             _e(r.get("outcome", ""))) for r in view["remediations"]), "No remediation recorded.")
    out.append('<section class="long">')  # laid out when scrolled to (thousands of rows)
    _table(out, "clusters", "Clusters", ("cluster", "region", "labels"),
           ((f"<code>{_e(c['name'])}</code>", _e(c["region"]) or '<span class="muted">—</span>',
             _e(", ".join(f"{k}={v}" for k, v in c["labels"].items()))) for c in view["clusters"]), "No clusters.")
    _workloads(out, w_all)
    out.append("</section></main>")
    refresh_meta = f'<noscript><meta http-equiv="refresh" content="{refresh:g}"></noscript>' if refresh else ""
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>fedplace placement</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">{refresh_meta}'
            f"<style>{STYLE}</style></head><body>{''.join(out)}"
            f"<script>{SCRIPT % (refresh or 0, EAGER_REASON_CELLS, STRANDED)}</script></body></html>")


# -- served by opa-kube-sync ---------------------------------------------------------------


def sync_policies(sync: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The policy ConfigMaps' load status from a running opa-kube-sync's loaders (each a
    ``sync.policy_loader.PolicyHandler``: ``namespace``, ``loaded``, ``configmaps`` of
    ``ConfigMapState``), and notes for namespaces not loaded yet."""
    entries, notes = [], []
    for loader in getattr(sync, "loaders", ()):
        if not loader.loaded.is_set():
            notes.append(f"The policy ConfigMaps of {loader.namespace} are not loaded yet.")
        for name, state in sorted(loader.configmaps.items()):
            entries.append(policy_entry(loader.namespace, name, len(state.modules) + len(state.binary_keys),
                                        state.all_errors(loader.namespace), state.warnings))
    return entries, notes


def sync_view(sync: Any, clusters: str = "clusters", workloads: Sequence[str] = ("replicasets",)) -> dict[str, Any]:
    """The view from a running opa-kube-sync (``sync.app.SyncApp``, read duck-typed so that this
    layer does not import the sync): its informers' caches, its remediator's records, its policy
    loaders' state and the placement settings it last read from OPA (``placement_settings``)."""
    def objects(plural: str) -> list[Mapping[str, Any]]:
        rep = sync.replicators.get(plural)
        informer = getattr(rep, "informer", None)
        return list(informer.objects.values()) if informer is not None else []

    def template_of(key: tuple[str, str, str]) -> Mapping[str, Any] | None:
        kind, namespace, name = key
        rep = sync.replicators.get(TEMPLATE_PLURALS.get(kind, ""))
        informer = getattr(rep, "informer", None)
        return informer.objects.get(f"{namespace}/{name}" if namespace else name) if informer is not None else None

    remediator = getattr(sync, "remediator", None)
    kinds = list(dict.fromkeys([*workloads, *(r.plural for r in getattr(remediator, "resources", {}).values()
                                              if r.namespaced)])) if remediator is not None else list(workloads)
    # Karmada's bindings are listed on their own (the remediator may remediate them too).
    kinds = [k for k in kinds if k not in BINDING_RESOURCES]
    binding_kinds = [p for p in BINDING_RESOURCES if p in sync.replicators]
    notes = [f"{p} are not replicated by this opa-kube-sync (--replicate)" for p in (clusters, *kinds)
             if p not in sync.replicators]
    denials: list[dict[str, Any]] = []
    stuck: list[dict[str, Any]] = []
    remediations: list[dict[str, Any]] = []
    if remediator is None:
        notes.append("Remediation is off: workloads whose decision denies now are not listed "
                     "(fedplace report evaluates them).")
    else:
        denials = [{**d, "time": iso(d["time"])} for d in remediator.unsatisfiable.values()]
        stuck = [{**d, "time": iso(d["time"])} for d in getattr(remediator, "stuck", {}).values()]
        remediations = [{**r, "time": iso(r["time"])} for r in remediator.history]
        if remediator.last_pass_time is None:
            notes.append("No remediation pass has run yet.")
    cluster_objects = {str((o.get("metadata") or {}).get("name")): o for o in objects(clusters)}
    bindings = [(p, o) for p in binding_kinds for o in objects(p)] if binding_kinds else None
    policies, pending = sync_policies(sync)
    return build_view(cluster_objects, [(p, o) for p in kinds for o in objects(p)], source="opa-kube-sync (live)",
                      denials=denials, remediations=remediations, notes=[*pending, *notes], bindings=bindings,
                      template_of=template_of, settings=getattr(sync, "placement_settings", None),
                      policies=policies if getattr(sync, "loaders", None) else None, stuck=stuck)


def _authorized(request: web.Request, tokens: TokenSource) -> bool:
    """The request carries the token: ``Authorization: Bearer <token>``, or HTTP Basic
    authentication with the token as the password (any user name: what a browser asks for).
    Compared in constant time; no token (the file empty or unreadable) lets nobody in."""
    expected = tokens.get()
    if not expected:
        return False
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    given = ""
    if scheme.lower() == "bearer":
        given = value.strip()
    elif scheme.lower() == "basic":
        try:
            given = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            given = ""
    return hmac.compare_digest(given.encode(), expected.encode())


UNAUTHORIZED = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>fedplace placement: "
                "token needed</title></head><body><h1>The placement page needs a token</h1><p>Give the token of "
                "opa-kube-sync's <code>--placement-page-token-file</code> as the password (any user name), or send "
                "<code>Authorization: Bearer &lt;token&gt;</code> "
                "(<code>curl -H \"Authorization: Bearer $(cat token)\" …/placement.json</code>).</p></body></html>")


def add_routes(app: web.Application, view: Callable[[], Mapping[str, Any]], refresh: float | None = 10.0,
               token_file: str | None = None) -> None:
    """``GET /placement`` (the page) and ``GET /placement.json`` (the view) on ``app``. With
    ``token_file`` (re-read when it changes) both answer 401 without the token
    (:func:`_authorized`): a browser then asks for it; the app's other routes (``/healthz``,
    ``/readyz``, ``/metrics``) stay open."""
    tokens = TokenSource(token_file=token_file) if token_file else None
    if tokens is not None and not tokens.get():
        log.warning("the placement page's token file is empty or unreadable: the page answers 401 until it has "
                    "a token", extra={"token_file": token_file})

    def refused(request: web.Request) -> web.Response | None:
        if tokens is None or _authorized(request, tokens):
            return None
        return web.Response(status=401, text=UNAUTHORIZED, content_type="text/html", charset="utf-8",
                            headers={"WWW-Authenticate": 'Basic realm="fedplace placement page", charset="UTF-8"',
                                     "Cache-Control": "no-store"})

    async def page(request: web.Request) -> web.Response:
        return refused(request) or web.Response(text=render(view(), refresh), content_type="text/html",
                                                charset="utf-8", headers={"Cache-Control": "no-store"})

    async def model(request: web.Request) -> web.Response:
        return refused(request) or web.json_response(view(), headers={"Cache-Control": "no-store"})

    app.router.add_get("/placement", page)
    app.router.add_get("/placement.json", model)
