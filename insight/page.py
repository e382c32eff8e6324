"""The placement page: one self-contained HTML document for a view (:mod:`fedplace.insight.view`).

* policy ConfigMaps that fail to load, first (opa-kube-sync knows them);
* the placement matrix: workloads grouped by kind, the placement rules' answer
  and current placement (rows) × clusters (columns, grouped by a cluster
  property the operator chooses: the region by default, the provider, or a
  label), a mark where the group runs, per cell why the placement rules allow
  the cluster or not — each forbidding rule with its requirement id, what it
  requires, the cluster's value, rule set and who imposed it, from the
  placement-rules contract (:class:`fedplace.insight.reasons.Rule`; shown on
  hover) — groups placed on any cluster and denied groups marked, and a
  workloads-per-cluster bar;
  ReplicaSets are placed by their replica-set-preferences, every other kind
  the policy places (Deployments, Secrets, …) by its cluster selector, matched
  against the clusters' labels;
* every workload with what the placement rules require of it and its placement;
* Karmada's bindings (when a binding type is replicated): each with its
  template, the clusters the policy excluded (its fedplace.io/excluded-clusters)
  and why (fedplace.io/placement); those excluding every cluster first and
  marked;
* denials (workloads whose decision now denies) and the last remediations,
  with times, placements and cluster selectors in words.

Rendered from the Jinja2 templates in ``templates/`` (package data), auto-escaped:
this module prepares plain values, the templates write the markup. No external
assets (styles and the tiny script are inline; works offline).
With ``refresh`` the page fetches itself every ``refresh`` seconds and swaps
its content in place (scroll kept); without JavaScript a meta refresh does it.
When loaded, it records how long it took to lay out in
``<html data-rendered-ms>`` (used by bench/insight.py).

opa-kube-sync serves it behind ``--placement-page`` (:func:`add_routes`:
``GET /placement`` and the model as ``GET /placement.json``; with a token file
both need the token, as a bearer token or as the password of HTTP Basic
authentication, which browsers ask for), from its informers' caches, its
remediator's records, its policy loaders' state and the placement rules'
answers it keeps (:func:`sync_view`, :func:`page_objects`);
``fedplace report`` writes it to a file.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import functools
import hmac
import json
import logging
import re
import time
from typing import Any, Callable, Mapping, Sequence

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension
from markupsafe import Markup

from fedplace.common.opa_client import TokenSource
from fedplace.insight.reasons import ALLOWED, NOT_ALLOWED, PLACED, PLACED_FORBIDDEN, Rule, settings_of
from fedplace.insight.view import (
    BINDING_RESOURCES,
    DEFAULT_GROUP_BY,
    TEMPLATE_PLURALS,
    VIA_PREFS,
    VIA_SELECTOR,
    build_view,
    group_by_text,
    iso,
    policy_entry,
    template_key,
)

__all__ = ["EAGER_REASON_CELLS", "MAX_GROUPS", "add_routes", "page_objects", "render", "sync_view"]

log = logging.getLogger(__name__)

MAX_GROUPS = 300  # matrix rows; the workloads table lists every workload anyway
NAMES_SHOWN = 3
PLACEMENT_SHOWN = 6
ROWS_INLINE = 100  # workloads rows in the HTML itself; the others from the JSON beside them
# Matrices up to this many cells get every cell's reason as its tooltip (title) when loaded;
# larger ones as the pointer reaches a cell (setting 300,000 titles would slow the layout).
EAGER_REASON_CELLS = 20000
BAR_PX = 48  # the tallest workloads-per-cluster bar

STRANDED = "every cluster excluded"  # a binding's status when the policy excludes every cluster
# A matrix cell's look per state (reasons.Rule.cell): a class after "c", and its mark.
CELL_CLASS = {PLACED: " y", PLACED_FORBIDDEN: " y bad", ALLOWED: " ok", NOT_ALLOWED: ""}
CELL_MARK = {PLACED: "●", PLACED_FORBIDDEN: "●", ALLOWED: "○", NOT_ALLOWED: ""}


class _Compact(Extension):
    """The page's HTML templates (``*.html.j2``) are written indented over many lines; their
    output is not: a line break and the indentation after it are dropped (a space that matters
    is written out, e.g. ``{{ " " }}``). The inline style and script are left as they are."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return re.sub(r"\n[ \t]*", "", source) if name and name.endswith(".html.j2") else source


def _script_json(value: Any) -> Markup:
    """``value`` as JSON to sit inside ``<script type="application/json">`` (not parsed as HTML
    there, so not entity-escaped): ``</`` and ``<!--`` written so as not to end the element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return Markup(text.replace("</", "<\\/").replace("<!--", "<\\u0021--"))


def _each_markup(keys: Sequence[Any], table: Mapping[Any, Markup]) -> Markup:
    """The markup ``table`` has (made by a template, so escaped) for each of ``keys``, in a row:
    a matrix row's cells at the cost of a dict look-up each."""
    return Markup("".join([table[k] for k in keys]))


def _seconds_since(stamp: str | None, now: float) -> int | None:
    """Whole seconds from ``stamp`` (``YYYY-MM-DDTHH:MM:SSZ``) to ``now``, at least 0; None when
    ``stamp`` is empty or not in that form."""
    if not stamp:
        return None
    try:
        return max(0, int(now - calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))))
    except ValueError:
        return None


def _static(env: Environment, name: str) -> Markup:
    """The text of ``name`` (a file beside the templates) as it is: not a template (the style
    sheet's ``{#id`` would open a template comment)."""
    assert env.loader is not None
    return Markup(env.loader.get_source(env, name)[0].rstrip("\n"))


@functools.cache
def _environment() -> Environment:
    """The page's templates (package data: templates/), auto-escaping."""
    env = Environment(loader=PackageLoader("fedplace.insight", "templates"), autoescape=True,
                      extensions=[_Compact], undefined=StrictUndefined, keep_trailing_newline=False)
    env.filters.update(
        plural=lambda n: "s" if n != 1 else "",
        placement=_placement,
        workload=_workload,
        labels_text=_labels_text,
        changes_text=lambda changes: "; ".join(f"{k} → {'(removed)' if v is None else v}"
                                               for k, v in (changes or {}).items()),
        error_position=lambda e: ", ".join(f"{k} {e[k]}" for k in ("row", "col") if e.get(k) is not None),
        script_json=_script_json,
        each_markup=_each_markup)
    env.globals.update(static=functools.partial(_static, env),
                       seconds_since=_seconds_since, max_groups=MAX_GROUPS, names_shown=NAMES_SHOWN,
                       eager_reason_cells=EAGER_REASON_CELLS, stranded=STRANDED,
                       cell_class=CELL_CLASS, cell_mark=CELL_MARK)
    return env



def _workload(w: Mapping[str, Any]) -> str:
    return f"{w['namespace']}/{w['name']}"


def _requires(text: str | None) -> str:
    """What the placement rules require of a workload, in words (its answer's ``requires``)."""
    return text or ("no placement rule answer yet" if text is None else "no requirement")


def _labels_text(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items())


def _placement(names: Sequence[str] | None) -> str:
    """Where a workload runs, in words (plain text)."""
    if names is None:
        return "any cluster"
    if not names:
        return "none"
    more = f" … +{len(names) - PLACEMENT_SHOWN}" if len(names) > PLACEMENT_SHOWN else ""
    return f"{len(names)}: {', '.join(names[:PLACEMENT_SHOWN])}{more}"


def _lazy(rows: list[list[str]]) -> dict[str, Any]:
    """A long table's rows (each a list of texts, the status last) and how many are in the HTML."""
    return {"rows": rows, "shown": min(len(rows), ROWS_INLINE)}


def _placement_of(w: Mapping[str, Any]) -> str:
    """A workload's placement in words: the clusters, and a cluster selector's requirements."""
    if w.get("via") == VIA_SELECTOR:
        if w.get("selector_error"):
            return f"cluster-selector unreadable: {w['selector_error']}"
        if w["placement"] is None:
            return "any cluster (no cluster-selector)"
        return f"{_placement(w['placement'])} — selector: {w.get('selector_text') or ''}"
    return _placement(w["placement"])


def _workloads(workloads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The workloads table."""
    return _lazy([[_workload(w), w["kind"], _requires(w.get("requires")), _placement_of(w), w["source"] or "",
                   "denied: " + "; ".join(w["denied"]) if w["denied"] else "ok"] for w in workloads])


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


def _bindings(view: Mapping[str, Any]) -> dict[str, Any] | None:
    """Karmada's bindings (None: not replicated): template, excluded clusters, why, status; and
    how many exclude every cluster (the view lists them first)."""
    bindings = view.get("bindings")
    if bindings is None:
        return None
    rows = []
    for b in bindings:
        t = b["template"]
        template = (t["text"] + ("" if t["replicated"] else " (not replicated)")) if t else "(no template)"
        rows.append([_binding_name(b), b["kind"], template,
                     _requires(b.get("requires")) if t and t["replicated"] else "—",
                     _excluded_text(b), _placement(b["scheduled"]) if b["scheduled"] else "—",
                     b["why"] or "", _binding_status(b)])
    return {**_lazy(rows), "stranded": sum(1 for b in bindings if b["every_cluster_excluded"])}


def _kinds(members: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(sorted({w["kind"] or w["resource"] for w in members}))


def _any_text(via: str | None) -> str:
    if via == VIA_SELECTOR:
        return "any cluster (no cluster-selector)"
    if via == VIA_PREFS:
        return "any cluster (no replica-set-preferences)"
    return "any cluster (a kind the policy does not place)"


def _column_groups(clusters: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Any]
                   ) -> list[tuple[Any, int]]:
    """Runs of equal ``key`` over the (ordered) clusters: (value, length)."""
    runs: list[tuple[Any, int]] = []
    for c in clusters:
        k = key(c)
        if runs and runs[-1][0] == k:
            runs[-1] = (k, runs[-1][1] + 1)
        else:
            runs.append((k, 1))
    return runs


def _matrix(view: Mapping[str, Any]) -> dict[str, Any]:
    """The placement matrix's content (templates/matrix.html.j2): workloads grouped by placement,
    the placement rules' answer, denial, developer's choice and selector, largest groups first
    (at most MAX_GROUPS); per row each cluster's cell state, its reason kept once in ``reasons``
    (texts, the rows' patterns of text indexes, each row's pattern; -1 for a row without
    cells). Columns: the clusters in the view's order, in runs of the same group value."""
    clusters = view["clusters"]
    settings = settings_of(view.get("settings"))
    answers = view.get("rules") or []
    grouping = view.get("group_by") or DEFAULT_GROUP_BY
    for c in clusters:  # a view from an older sync
        c.setdefault("group", c.get("region") or "")
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for w in view["workloads"]:
        placement = tuple(w["placement"]) if w["placement"] is not None else None
        rule = Rule.of(w, settings)
        key = (placement, w.get("requires"), bool(w["denied"]), rule,
               w.get("selector_text") if w.get("selector") is not None else None, w.get("selector_error"))
        groups.setdefault(key, []).append(w)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), _requires(kv[0][1]), kv[0][0] or (),
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
    texts: dict[str, int] = {}
    patterns: dict[tuple[int, ...], int] = {}
    row_patterns: list[int] = []
    rows = []
    for (placement, requires, denied, rule, selector_text, selector_error), members in ordered[:MAX_GROUPS]:
        names = [_workload(w) for w in members]
        required = _requires(requires) if rule.via is not None else "not placed by the policy"
        row: dict[str, Any] = {
            "denied": denied, "names": names, "kinds": _kinds(members), "requires": required,
            "kind_names": sorted({w["kind"] for w in members}), "selector_text": selector_text,
            "selector_error": selector_error, "label": f"{_kinds(members)} · {required} · {len(names)}",
            "cells": None, "unknown": [], "why": "", "any_text": _any_text(rule.via)}
        rows.append(row)
        if selector_error:
            row_patterns.append(-1)
            row["why"] = (f"the cluster selector is unreadable ({selector_error}): the policy denies it, and "
                          "Kubernetes Federation cannot place it")
            continue
        if placement is None and not rule.constrained(answers):
            row_patterns.append(-1)
            row["why"] = ("no placement rule constrains it: the policy leaves it alone, and Kubernetes "
                          "Federation places it on any cluster")
            continue
        on = set(placement) if placement is not None else None  # None: no annotation, so every cluster
        pattern = []
        row["cells"] = []
        for c in clusters:
            state, why = rule.cell(c, on is None or c["name"] in on, denied, settings, answers)
            if on is None:
                why += (f" (no {'cluster-selector' if rule.via == VIA_SELECTOR else 'replica-set-preferences'}: "
                        "any cluster)")
            pattern.append(texts.setdefault(why, len(texts)))
            row["cells"].append(state)
        row_patterns.append(patterns.setdefault(tuple(pattern), len(patterns)))
        row["unknown"] = [n for n in placement or () if n not in index]
    top = max(counts, default=0) or 1
    return {
        "clusters": clusters, "workloads": len(view["workloads"]), "groups": len(ordered), "rows": rows,
        "anywhere": anywhere, "group_by": group_by_text(grouping),
        "group_runs": _column_groups(clusters, lambda c: c["group"]),
        "bars": [(c["name"], n, round(BAR_PX * n / top)) for c, n in zip(clusters, counts, strict=True)],
        "reasons": {"texts": sorted(texts, key=texts.__getitem__),
                    "patterns": [list(p) for p in sorted(patterns, key=patterns.__getitem__)],
                    "rows": row_patterns}}


def render(view: Mapping[str, Any], refresh: float | None = None, now: float | None = None) -> str:
    """The page for ``view`` (templates/page.html.j2, auto-escaped); ``refresh`` seconds between
    self-updates, or None; ``now`` (default: the time) dates the "… s ago" of denials and
    remediations."""
    return _environment().get_template("page.html.j2").render(
        view=view, refresh=refresh, now=time.time() if now is None else now,
        failing_policies=sum(1 for p in view.get("policies") or () if p.get("status") != "ok"),
        matrix=_matrix(view), bindings=_bindings(view), workloads=_workloads(view["workloads"]))


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


class _SyncSources:
    """What a running opa-kube-sync (``sync.app.SyncApp``, read duck-typed so that this layer
    does not import the sync) holds for the page: the kinds it shows, their objects, the
    bindings and their templates."""

    def __init__(self, sync: Any, workloads: Sequence[str]) -> None:
        self.sync = sync
        remediator = getattr(sync, "remediator", None)
        kinds = list(dict.fromkeys([*workloads, *(r.plural for r in getattr(remediator, "resources", {}).values()
                                                  if r.namespaced)])) if remediator is not None else list(workloads)
        # Karmada's bindings are listed on their own (the remediator may remediate them too).
        self.kinds = [k for k in kinds if k not in BINDING_RESOURCES]
        self.binding_kinds = [p for p in BINDING_RESOURCES if p in sync.replicators]

    def objects(self, plural: str) -> list[Mapping[str, Any]]:
        rep = self.sync.replicators.get(plural)
        informer = getattr(rep, "informer", None)
        return list(informer.objects.values()) if informer is not None else []

    def template_of(self, key: tuple[str, str, str]) -> Mapping[str, Any] | None:
        kind, namespace, name = key
        rep = self.sync.replicators.get(TEMPLATE_PLURALS.get(kind, ""))
        informer = getattr(rep, "informer", None)
        return informer.objects.get(f"{namespace}/{name}" if namespace else name) if informer is not None else None

    def templates(self) -> list[Mapping[str, Any]]:
        out = []
        for plural in self.binding_kinds:
            for b in self.objects(plural):
                key = template_key(b)
                found = self.template_of(key) if key is not None else None
                if isinstance(found, Mapping):
                    out.append(found)
        return out


def page_objects(sync: Any, workloads: Sequence[str] = ("replicasets",)) -> tuple[list[Mapping[str, Any]], set[str]]:
    """The objects of a running opa-kube-sync whose placement-rule answers its page shows (the
    workloads of the kinds it shows and the bindings' templates), and the plurals they come from
    (a change of any other replicated type may change every answer)."""
    src = _SyncSources(sync, workloads)
    objects = [o for p in src.kinds for o in src.objects(p)] + src.templates()
    return objects, {*src.kinds, *src.binding_kinds, *TEMPLATE_PLURALS.values()}


def sync_view(sync: Any, clusters: str = "clusters", workloads: Sequence[str] = ("replicasets",)) -> dict[str, Any]:
    """The view from a running opa-kube-sync (``sync.app.SyncApp``, read duck-typed so that this
    layer does not import the sync): its informers' caches, its remediator's records, its policy
    loaders' state, the placement settings it last read from OPA (``placement_settings``), the
    placement rules' answers it keeps (``page_rules``, a :class:`fedplace.insight.rules.PageRules`)
    and the page's column grouping (``settings.placement_page_group_by``)."""
    src = _SyncSources(sync, workloads)
    kinds, binding_kinds = src.kinds, src.binding_kinds
    remediator = getattr(sync, "remediator", None)
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
    rules = getattr(sync, "page_rules", None)
    if rules is not None and rules.stale:
        notes.append("The placement rules are being asked again after a change of the policies or of the "
                     "data they read (clusters, namespaces, …): the reasons shown are from before it.")
    cluster_objects = {str((o.get("metadata") or {}).get("name")): o for o in src.objects(clusters)}
    bindings = [(p, o) for p in binding_kinds for o in src.objects(p)] if binding_kinds else None
    policies, pending = sync_policies(sync)
    grouping = getattr(getattr(sync, "settings", None), "placement_page_group_by", None) or DEFAULT_GROUP_BY
    return build_view(cluster_objects, [(p, o) for p in kinds for o in src.objects(p)], source="opa-kube-sync (live)",
                      denials=denials, remediations=remediations, notes=[*pending, *notes], bindings=bindings,
                      template_of=src.template_of, settings=getattr(sync, "placement_settings", None),
                      policies=policies if getattr(sync, "loaders", None) else None, stuck=stuck,
                      answers=rules.answers if rules is not None else None, grouping=grouping)


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


def add_routes(app: web.Application, view: Callable[[], Mapping[str, Any]], refresh: float | None = 10.0,
               token_file: str | None = None) -> None:
    """``GET /placement`` (the page) and ``GET /placement.json`` (the view) on ``app``. With
    ``token_file`` (re-read when it changes) both answer 401 without the token
    (:func:`_authorized`): a browser then asks for it; the app's other routes (``/healthz``,
    ``/readyz``, ``/metrics``) stay open."""
    tokens = TokenSource(token_file=token_file) if token_file else None
    unauthorized = _environment().get_template("unauthorized.html.j2").render()
    if tokens is not None and not tokens.get():
        log.warning("the placement page's token file is empty or unreadable: the page answers 401 until it has "
                    "a token", extra={"token_file": token_file})

    def refused(request: web.Request) -> web.Response | None:
        if tokens is None or _authorized(request, tokens):
            return None
        return web.Response(status=401, text=unauthorized, content_type="text/html", charset="utf-8",
                            headers={"WWW-Authenticate": 'Basic realm="fedplace placement page", charset="UTF-8"',
                                     "Cache-Control": "no-store"})

    async def page(request: web.Request) -> web.Response:
        return refused(request) or web.Response(text=render(view(), refresh), content_type="text/html",
                                                charset="utf-8", headers={"Cache-Control": "no-store"})

    async def model(request: web.Request) -> web.Response:
        return refused(request) or web.json_response(view(), headers={"Cache-Control": "no-store"})

    app.router.add_get("/placement", page)
    app.router.add_get("/placement.json", model)
