"""``fedplace report``: the placement page (insight/page.py) as a static HTML file.

    fedplace report -o placement.html --opa-url … [--opa-token-file …]
    fedplace report -o placement.html --sync-url http://opa-kube-sync:8182

From OPA (the default): the clusters, workloads and Karmada bindings
opa-kube-sync replicated, with every workload's decision asked of the live OPA
now (read only; workloads the policies cannot tell apart share one question,
see insight/inputs.py), so the denials are current (a binding's exclusions are
its annotations, as the webhook and the remediator wrote them); remediations
are only known to the sync. With ``--sync-url``: exactly the view opa-kube-sync
serves at ``/placement`` (started with ``--placement-page``), its remediator's
records included.

Exit status: 0; 2 when the view cannot be had or the file not written.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from fedplace.common.opa_client import OpaClient, OpaError
from fedplace.insight.evaluate import LiveOpa
from fedplace.insight.options import add_data_arguments, add_opa_arguments, decision_path, opa_settings, split_list
from fedplace.insight.page import render
from fedplace.insight.view import TEMPLATE_PLURALS, build_view, iso
from fedplace.insight.whatif import bindings_of, decide_workloads, workloads_of

__all__ = ["add_arguments", "from_opa", "from_sync", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="placement.html", metavar="FILE", help="the HTML file to write")
    parser.add_argument("--sync-url", metavar="URL",
                        help="take the view from opa-kube-sync (--placement-page) instead of asking OPA")
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
        workloads = workloads_of(data, split_list(args.resources))
        binding_plurals = [p for p in (args.resource_bindings, args.cluster_resource_bindings) if p and p in data]
        plurals = await template_plurals(opa) if binding_plurals else {}
        live = LiveOpa(opa)
        try:
            decisions, asked = await decide_workloads(live, path, [w.obj for w in workloads], await live.parse())
        finally:
            await live.close()
    now = time.time()
    denials = [{"resource": w.resource, "namespace": w.namespace, "name": w.name, "errors": d.errors,
                "time": iso(now)} for w, d in zip(workloads, decisions) if d.denied]
    clusters = data.get(args.clusters_resource)
    bindings = ([(b.resource, b.obj) for b in bindings_of(data, args.resource_bindings, args.cluster_resource_bindings)]
                if binding_plurals else None)
    return build_view(clusters if isinstance(clusters, dict) else {}, [(w.resource, w.obj) for w in workloads],
                      source=f"OPA {opa.base_url} ({asked} decisions asked)", denials=denials, generated=now,
                      notes=["Remediations are recorded by opa-kube-sync: fedplace report --sync-url shows them."],
                      bindings=bindings, template_of=template_lookup(data, plurals))


async def from_sync(url: str, timeout: float) -> dict[str, Any]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async with session.get(url.rstrip("/") + "/placement.json") as resp:
            if resp.status != 200:
                raise OpaError(f"{url}/placement.json answered {resp.status} (is the sync run with --placement-page?)")
            return await resp.json()


async def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        view = await (from_sync(args.sync_url, args.opa_timeout) if args.sync_url else from_opa(args))
    except (OpaError, aiohttp.ClientError, TimeoutError) as exc:
        err.write(f"fedplace report: {exc}\n")
        return 2
    try:
        Path(args.output).write_text(render(view), encoding="utf-8")
    except OSError as exc:
        err.write(f"fedplace report: {exc}\n")
        return 2
    bindings = view.get("bindings")
    karmada = ""
    if bindings is not None:
        stranded = sum(1 for b in bindings if b.get("every_cluster_excluded"))
        karmada = f"{len(bindings)} Karmada bindings ({stranded} with every cluster excluded), "
    out.write(f"wrote {args.output}: {len(view['clusters'])} clusters, {len(view['workloads'])} workloads, "
              f"{karmada}{len(view['denials'])} denied\n")
    return 0
