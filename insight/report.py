"""``fedplace report``: the placement page (insight/page.py) as a static HTML file, or its model.

    fedplace report --opa-url … [--opa-token-file …] > placement.html
    fedplace report --output-file placement.html --sync-url http://opa-kube-sync:8182
    fedplace report -o json          (the page's model: what the sync serves at /placement.json)
    fedplace report -o text          (the counts, and what is denied or excluded everywhere)
    fedplace report --group-by label:tier > placement.html   (columns grouped by a cluster label)

From OPA (the default): the clusters, workloads and Karmada bindings
opa-kube-sync replicated, with every workload's decision asked of the live OPA
now (read only; workloads the policies cannot tell apart share one question,
see insight/inputs.py), so the denials are current, and the placement rules'
answer for each workload and template (insight/rules.py: the cells' reasons) (a binding's exclusions are
its annotations, as the webhook and the remediator wrote them); remediations
are only known to the sync. With ``--sync-url``: exactly the view opa-kube-sync
serves at ``/placement`` (started with ``--placement-page``), its remediator's
records included.

Like kubectl, the result goes to standard output (``-o html``, the default,
``text``, ``json`` or ``yaml``); ``--output-file FILE`` writes it to FILE and
prints a one-line summary instead. The HTML page is not written to a terminal
(the command says to redirect it or give ``--output-file``). ``-o`` was once the
file: ``-o placement.html`` is refused with a message saying so.

Exit status (insight/command.py): 0; 2 on a usage error or when the file
cannot be written; 3 when OPA or the sync cannot be reached.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from fedplace.common.opa_client import OpaClient, OpaError, OpaMalformedResponse, OpaUnavailable
from fedplace.insight import reasons, rules
from fedplace.insight.command import CliError, Unreachable, UsageError, guarded
from fedplace.insight.evaluate import LiveOpa
from fedplace.insight.options import (
    add_data_arguments,
    add_opa_arguments,
    add_output_argument,
    decision_path,
    dump,
    http_url,
    opa_settings,
    prepare,
    read_text,
    split_list,
)
from fedplace.insight.page import render
from fedplace.insight.view import (
    DEFAULT_GROUP_BY,
    TEMPLATE_PLURALS,
    build_view,
    group_by,
    iso,
    placed_plurals,
    template_key,
)
from fedplace.insight.whatif import bindings_of, decide_workloads, workloads_of

__all__ = ["DESCRIPTION", "EPILOG", "FORMATS", "add_arguments", "from_opa", "from_sync", "render_text", "run"]

PROG = "fedplace report"
FORMATS = ("html", "text", "json", "yaml")
DESCRIPTION = """\
Write the placement page: the clusters, the workloads and where they run (a
placement matrix), the workloads denied now, the last remediations, and
Karmada's bindings — one self-contained HTML file that works offline. It is
built from OPA (the replicated objects, with every workload's decision asked
now) or taken from opa-kube-sync's own page (--sync-url), which also knows the
remediations."""
EPILOG = """\
examples:
  fedplace report --opa-url https://opa.example:8181 --opa-token-file reader.token > placement.html
  fedplace report --sync-url http://opa-kube-sync:8182 --output-file placement.html
  fedplace report -o text

The result goes to standard output, as with kubectl; the HTML page is not
written to a terminal: redirect it or give --output-file.

exit status: 0 done; 2 usage error, or the file cannot be written; 3 OPA or
opa-kube-sync cannot be reached."""


def _file_hint(text: str) -> str | None:
    if "." in text or "/" in text:
        return (f"-o is the output format now ({', '.join(FORMATS)}); to write the page to {text}, "
                f"use --output-file {text} (or redirect: > {text})")
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_argument(parser, FORMATS, default="html", hint=_file_hint,
                        help="what to write: html (the page, default), text (a summary), json or yaml "
                             "(the page's data)")
    parser.add_argument("--output-file", metavar="FILE",
                        help="write to FILE instead of standard output, and print a one-line summary")
    parser.add_argument("--sync-url", type=http_url, metavar="URL",
                        help="take the page's data from opa-kube-sync (started with --placement-page) "
                             "instead of asking OPA")
    parser.add_argument("--sync-token-file", metavar="FILE",
                        help="bearer token for the sync's page (its --placement-page-token-file)")
    parser.add_argument("--group-by", type=group_by, default=DEFAULT_GROUP_BY, metavar="region|provider|label:KEY",
                        help="the cluster property the placement matrix groups its columns by (default region; "
                             "from OPA only: with --sync-url the sync's own grouping)")
    add_data_arguments(parser)
    add_opa_arguments(parser)


async def template_plurals(opa: OpaClient) -> dict[str, str]:
    """The template kinds the Karmada pack decides (kind -> plural: its setting karmada_templates,
    data.io.k8s.federation.karmada.templates), or its default when OPA does not say."""
    try:
        found = await opa.get_data(["io", "k8s", "federation", "karmada", "templates"])
    except OpaError:
        found = None
    if isinstance(found, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        return dict(found)
    return dict(TEMPLATE_PLURALS)


def template_lookup(data: dict[str, Any], plurals: dict[str, str]) -> Any:
    """``(kind, namespace, name)`` -> the replicated template, or None."""
    def find(key: tuple[str, str, str]) -> Any:
        kind, namespace, name = key
        collection = data.get(plurals.get(kind, ""))
        if not isinstance(collection, dict):
            return None
        found = collection.get(namespace) if namespace else collection
        return found.get(name) if isinstance(found, dict) else None
    return find


async def from_opa(args: argparse.Namespace) -> dict[str, Any]:
    root, path = args.replicate_path.strip("/"), decision_path(args)
    async with OpaClient(opa_settings(args)) as opa:
        data = await opa.get_data([root])
        data = data if isinstance(data, dict) else {}
        settings = await reasons.read_settings(opa)
        workloads = workloads_of(data, split_list(args.resources) if args.resources else placed_plurals(data, settings))
        binding_plurals = [p for p in (args.resource_bindings, args.cluster_resource_bindings) if p and p in data]
        plurals = await template_plurals(opa) if binding_plurals else {}
        bindings = bindings_of(data, args.resource_bindings, args.cluster_resource_bindings) if binding_plurals else []
        find = template_lookup(data, plurals)
        templates = [t for t in (find(k) for k in (template_key(b.obj) for b in bindings) if k is not None)
                     if isinstance(t, dict)]
        live = LiveOpa(opa)
        try:
            asts = await live.parse()
            decisions, asked = await decide_workloads(live, path, [w.obj for w in workloads], asts)
            answers = await rules.ask(live, [*(w.obj for w in workloads), *templates], asts)
        finally:
            await live.close()
    now = time.time()
    denials = [{"resource": w.resource, "namespace": w.namespace, "name": w.name, "errors": d.errors,
                "time": iso(now)} for w, d in zip(workloads, decisions, strict=True) if d.denied]
    clusters = data.get(args.clusters_resource)
    return build_view(clusters if isinstance(clusters, dict) else {}, [(w.resource, w.obj) for w in workloads],
                      source=f"OPA {opa.base_url} ({asked} decisions asked)", denials=denials, generated=now,
                      notes=["Remediations are recorded by opa-kube-sync: fedplace report --sync-url shows them."],
                      bindings=[(b.resource, b.obj) for b in bindings] if binding_plurals else None,
                      template_of=find, settings=settings, answers=answers, grouping=args.group_by)


def sync_token(path: str | None) -> str | None:
    """The sync page's bearer token from ``--sync-token-file`` (None without it)."""
    if path is None:
        return None
    token = read_text(path, "--sync-token-file").strip()
    if not token:
        raise UsageError(f"--sync-token-file {path}: the file is empty (a bearer token is expected)")
    return token


async def from_sync(url: str, timeout: float, token: str | None = None) -> dict[str, Any]:
    """The view opa-kube-sync serves at ``/placement.json`` (``token``: its page's bearer token);
    raises :class:`CliError` (3 when the sync cannot be reached or answers something else than the
    view)."""
    target = url.rstrip("/") + "/placement.json"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(target, headers=headers) as resp:
                if resp.status != 200:
                    code = 3 if resp.status >= 500 else 2
                    raise CliError(f"{target} answered {resp.status} (is the sync run with --placement-page?)", code)
                view = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else f"{exc.__class__.__name__}: {exc}"
        raise Unreachable(f"cannot get {target}: {reason}") from None
    if not isinstance(view, dict) or not all(isinstance(view.get(k), list) for k in ("clusters", "workloads",
                                                                                         "denials")):
        raise Unreachable(f"{target}: the answer is not the placement page's data")
    return view


def _count(view: dict[str, Any]) -> str:
    bindings = view.get("bindings")
    karmada = ""
    if isinstance(bindings, list):
        stranded = sum(1 for b in bindings if isinstance(b, dict) and b.get("every_cluster_excluded"))
        karmada = f"{len(bindings)} Karmada bindings ({stranded} with every cluster excluded), "
    return (f"{len(view['clusters'])} clusters, {len(view['workloads'])} workloads, "
            f"{karmada}{len(view['denials'])} denied")


def render_text(view: dict[str, Any], out: TextIO) -> None:
    """``-o text``: where the view comes from, the counts, what is denied and which bindings have
    every cluster excluded."""
    out.write(f"Placement at {view.get('generated')} from {view.get('source')}: {_count(view)}\n")
    denials = [d for d in view["denials"] if isinstance(d, dict)]
    if denials:
        out.write("\nDenied now:\n")
    for d in denials:
        where = f"{d.get('namespace')}/{d.get('name')}" if d.get("namespace") else d.get("name")
        errors = d.get("errors") if isinstance(d.get("errors"), list) else []
        out.write(f"  {d.get('resource')} {where}: {'; '.join(str(e) for e in errors)}\n")
    stranded = [b for b in view.get("bindings") or [] if isinstance(b, dict) and b.get("every_cluster_excluded")]
    if stranded:
        out.write("\nKarmada bindings with every cluster excluded (the workload can run nowhere):\n")
    for b in stranded:
        where = f"{b.get('namespace')}/{b.get('name')}" if b.get("namespace") else b.get("name")
        template = b.get("template") if isinstance(b.get("template"), dict) else {}
        out.write(f"  {b.get('kind') or b.get('resource')} {where} ({template.get('text', '(no template)')}): "
                  f"{b.get('why') or ''}".rstrip(": ") + "\n")
    for note in view.get("notes") or []:
        out.write(f"\nNote: {note}\n")


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    prepare(args, getattr(args, "prog", PROG), err)
    if args.output == "html" and args.output_file is None and out.isatty():
        raise UsageError("the page is HTML: redirect it (> placement.html) or give --output-file FILE "
                         "(-o text prints a summary)")
    if args.output_file is not None:
        target = Path(args.output_file)
        if not args.output_file or target.is_dir():
            raise UsageError(f"--output-file {args.output_file!r}: not a file name")
        if not target.parent.is_dir():
            raise UsageError(f"--output-file {args.output_file}: no such directory {target.parent}")
    try:
        if args.sync_url:
            token = sync_token(args.sync_token_file)
            view = await from_sync(args.sync_url, args.opa_timeout, token)
        else:
            view = await from_opa(args)
    except OpaError as exc:
        code = 3 if isinstance(exc, (OpaUnavailable, OpaMalformedResponse)) else 2
        raise CliError(f"cannot build the page from OPA: {exc}", code) from None
    if args.output == "html":
        text = render(view)
    elif args.output == "text":
        buffer = io.StringIO()
        render_text(view, buffer)
        text = buffer.getvalue()
    else:
        text = dump(view, args.output) + "\n"
    if args.output_file is None:
        out.write(text)
        return 0
    try:
        Path(args.output_file).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--output-file {args.output_file}: {exc.strerror or exc}") from None
    out.write(f"wrote {args.output_file}: {_count(view)}\n")
    return 0


async def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command (exit status as the module docstring says; every error one line on ``err``)."""
    return await guarded(getattr(args, "prog", PROG), _run, args, out, err)
