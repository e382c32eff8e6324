"""The placement page: one self-contained HTML document for a view (:mod:`fedplace.insight.view`).

* clusters with their regions and labels;
* the placement matrix: workloads grouped by their constraints and current
  placement (rows) × clusters (columns, by region), a dot where the group
  runs; groups placed on any cluster (no preferences) and denied groups
  marked;
* every workload with its constraints and placement;
* Karmada's bindings (when a binding type is replicated): each with its
  template, the clusters the policy excluded (its fedplace.io/excluded-clusters)
  and why (fedplace.io/placement); those excluding every cluster first and
  marked;
* denials (workloads whose decision now denies) and the last remediations,
  with times.

No external assets (styles and the tiny script are inline; works offline).
With ``refresh`` the page fetches itself every ``refresh`` seconds and swaps
its content in place (scroll kept); without JavaScript a meta refresh does it.
When loaded, it records how long it took to lay out in
``<html data-rendered-ms>`` (used by bench/insight.py).

opa-kube-sync serves it behind ``--placement-page`` (:func:`add_routes`:
``GET /placement`` and the model as ``GET /placement.json``), from its
informers' caches and its remediator's records (:func:`sync_view`);
``fedplace report`` writes it to a file.
"""

from __future__ import annotations

import calendar
import html
import json
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from aiohttp import web

from fedplace.insight.view import BINDING_RESOURCES, TEMPLATE_PLURALS, build_view, iso

__all__ = ["MAX_GROUPS", "add_routes", "render", "sync_view"]

MAX_GROUPS = 300  # matrix rows; the workloads table lists every workload anyway
NAMES_SHOWN = 3
PLACEMENT_SHOWN = 6
ROWS_INLINE = 100  # workloads rows in the HTML itself; the others from the JSON beside them

STYLE = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2329;background:#fff}
header{padding:12px 20px;background:#1d2f46;color:#fff}header h1{font-size:18px;margin:0 0 4px}
header p{margin:0;opacity:.85}main{padding:8px 20px 40px}h2{font-size:15px;margin:22px 0 8px}
table{border-collapse:collapse}th,td{border:1px solid #d8dde3;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f1f4f7;font-weight:600}.note{color:#7a4b00;background:#fff6e0;padding:6px 10px;margin:6px 0}
.scroll{overflow:auto;width:max-content;max-width:100%;max-height:80vh;border:1px solid #d8dde3}
#matrix{table-layout:fixed}#matrix td.c{width:16px;min-width:16px;padding:0;text-align:center}
#matrix th.c{width:16px;padding:4px 0;writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;
font-weight:500;font-size:11px}#matrix th.w{position:sticky;left:0;background:#f1f4f7;z-index:1;min-width:260px}
#matrix thead th{position:sticky;top:0;z-index:2}#matrix thead th.w{z-index:3}
#matrix td.y{background:#2f7d32;color:#fff}#matrix td.any{color:#555;font-style:italic;white-space:nowrap}
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
function tables(){table("workloads",{});table("bindings",{"%s":"stranded"})}
addEventListener("load",function(){tables();void document.body.offsetHeight;
document.documentElement.setAttribute("data-rendered-ms",String(Math.round(performance.now())))});
if(!every)return;setInterval(function(){fetch(location.href,{cache:"no-store"}).then(function(r){
return r.ok?r.text():null}).then(function(t){if(!t)return;var d=new DOMParser().parseFromString(t,"text/html"),
m=d.querySelector("main"),h=d.querySelector("header");if(m){document.querySelector("main").replaceWith(m);tables()}
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


def _workloads(out: list[str], workloads: Sequence[Mapping[str, Any]]) -> None:
    """The workloads table."""
    rows = [[_workload(w), w["kind"], _constraints(w["constraints"]), _placement(w["placement"]), w["source"] or "",
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


def _matrix(view: Mapping[str, Any], out: list[str]) -> None:
    clusters = view["clusters"]
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for w in view["workloads"]:
        placement = tuple(w["placement"]) if w["placement"] is not None else None
        groups.setdefault((placement, tuple(w["constraints"].items()), bool(w["denied"])), []).append(w)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), _constraints(dict(kv[0][1])), kv[0][0] or ()))
    out.append(f'<h2 id="placement">Placement matrix <span class="muted">({len(view["workloads"])} workloads in '
               f'{len(groups)} groups × {len(clusters)} clusters)</span></h2>')
    if len(ordered) > MAX_GROUPS:
        out.append(f'<p class="note">Showing the {MAX_GROUPS} largest of {len(ordered)} groups; the workloads '
                   'table below lists every workload.</p>')
    out.append('<div class="scroll"><table id="matrix"><thead><tr><th class="w">workloads (constraints)</th>')
    for c in clusters:
        labels = ", ".join(f"{k}={v}" for k, v in c["labels"].items())
        out.append(f'<th class="c" data-cluster="{_e(c["name"])}" title="{_e(c["region"])}; {_e(labels)}">'
                   f'{_e(c["name"])}</th>')
    out.append("</tr></thead><tbody>")
    index = {c["name"]: i for i, c in enumerate(clusters)}
    for (placement, constraint_items, denied), members in ordered[:MAX_GROUPS]:
        names = [_workload(w) for w in members]
        shown = ", ".join(_e(n) for n in names[:NAMES_SHOWN])
        rest = ""
        if len(names) > NAMES_SHOWN:
            rest = (f' <details><summary>+{len(names) - NAMES_SHOWN} more</summary>'
                    f'{", ".join(_e(n) for n in names[NAMES_SHOWN:])}</details>')
        tag = ' <span class="denied-tag">denied now</span>' if denied else ""
        out.append(f'<tr{" class=denied" if denied else ""} data-workloads="{_e(" ".join(names))}">'
                   f'<th class="w">{_e(_constraints(dict(constraint_items)))} · <b>{len(names)}</b>{tag}<br>'
                   f'{shown}{rest}</th>')
        if placement is None:
            out.append(f'<td class="any" colspan="{max(len(clusters), 1)}">any cluster (no replica-set-preferences)'
                       '</td></tr>')
            continue
        on = {index[n] for n in placement if n in index}
        out.append("".join('<td class="c y">●</td>' if i in on else '<td class="c"></td>'
                           for i in range(len(clusters))))
        unknown = [n for n in placement if n not in index]
        if unknown:
            out.append(f'<td class="note">not replicated: {_e(", ".join(unknown))}</td>')
        out.append("</tr>")
    out.append("</tbody></table></div>")


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
    out.append(f'<header><h1>fedplace placement</h1><p>{len(view["clusters"])} clusters · {len(w_all)} workloads · '
               f'{karmada}{len(view["denials"])} denied · generated {_e(view["generated"])} from {_e(view["source"])}'
               f'{f" · refreshes every {refresh:g} s" if refresh else ""}</p></header><main>')
    for note in view.get("notes") or []:
        out.append(f'<p class="note">{_e(note)}</p>')
    _matrix(view, out)
    _table(out, "denials", "Denied now", ("workload", "errors", "since"),
           ((_e(_workload(d)), "<br>".join(_e(e) for e in d["errors"]), _ago(d.get("time"), now))
            for d in view["denials"]), "No workload's decision denies.")
    _bindings(out, view)
    _table(out, "remediations", "Last remediations", ("time", "workload", "placement before → after", "outcome"),
           ((_ago(r.get("time"), now), _e(_workload(r)),
             (f'{_clusters_text(r["before"])} → {_clusters_text(r["after"])}' if r.get("after") is not None
              else _e(", ".join(f"{k}: {v}" for k, v in (r.get("changes") or {}).items()))),
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
            f"<script>{SCRIPT % (refresh or 0, STRANDED)}</script></body></html>")


# -- served by opa-kube-sync ---------------------------------------------------------------


def sync_view(sync: Any, clusters: str = "clusters", workloads: Sequence[str] = ("replicasets",)) -> dict[str, Any]:
    """The view from a running opa-kube-sync (``sync.app.SyncApp``, read duck-typed so that this
    layer does not import the sync): its informers' caches and its remediator's records."""
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
    remediations: list[dict[str, Any]] = []
    if remediator is None:
        notes.append("Remediation is off: workloads whose decision denies now are not listed "
                     "(fedplace report evaluates them).")
    else:
        denials = [{**d, "time": iso(d["time"])} for d in remediator.unsatisfiable.values()]
        remediations = [{**r, "time": iso(r["time"])} for r in remediator.history]
        if remediator.last_pass_time is None:
            notes.append("No remediation pass has run yet.")
    cluster_objects = {str((o.get("metadata") or {}).get("name")): o for o in objects(clusters)}
    bindings = [(p, o) for p in binding_kinds for o in objects(p)] if binding_kinds else None
    return build_view(cluster_objects, [(p, o) for p in kinds for o in objects(p)], source="opa-kube-sync (live)",
                      denials=denials, remediations=remediations, notes=notes, bindings=bindings,
                      template_of=template_of)


def add_routes(app: web.Application, view: Callable[[], Mapping[str, Any]], refresh: float | None = 10.0) -> None:
    """``GET /placement`` (the page) and ``GET /placement.json`` (the view) on ``app``."""
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=render(view(), refresh), content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store"})

    async def model(request: web.Request) -> web.Response:
        return web.json_response(view(), headers={"Cache-Control": "no-store"})

    app.router.add_get("/placement", page)
    app.router.add_get("/placement.json", model)
