"""Benchmark the SchedulingPolicy pack's admission decision on the devstack engine and a real OPA.

Usage: .venv/bin/python bench/schedulingpolicy.py [--queries 500] [--rounds 10] [--worst-case]
       [--opa-url URL [--opa-token-file PATH]]

Replicated data: 200 SchedulingPolicies (one per team, each granted by its own
ClusterRole), 300 ClusterRoles in all, and 5,000 RBAC bindings: 250
ClusterRoleBindings and 4,750 RoleBindings over 250 namespaces (the usual
shape of a multi-tenant cluster: most grants are namespaced); with
``--worst-case`` also all 5,000 as ClusterRoleBindings (every one is read on
every request). The admitted object is a Deployment as the API server sends
it (its pod template defaulted at decode: ``schedulerName:
default-scheduler``, ``dnsPolicy``, ``restartPolicy``, …) whose template sets
all five components (scheduler, priority class, node selector, tolerations,
pod and node affinities), its service account granted two policies (the
cluster-wide ``restricted`` one and its team's).

Three decisions are timed, each ``--queries`` times in sequence per server
(after ``WARMUP`` unmeasured ones):
the Deployment admitted unchanged, the same with the components unset
(defaults patched in), and one that is denied (six violations; the denial
also validates the usable policies to name invalid ones). A last row times a
constant rule of the pack on the same server and data: what any query costs
there (HTTP, JSON, the server's own work), to subtract from the others.

Each shape is measured twice in the run: with the bindings' subject index
beside the data (``data.kubernetes_index``, as opa-kube-sync writes it:
common/subject_index.py), and, the baseline, without it (the pack then reads
every binding).

Servers, both loaded with the same modules and data, asked in alternating
blocks (``--rounds``) so both see the same machine load:

* ``engine`` — the devstack fedplace-engine, started by the benchmark, as the
  webhook asks it: POST /v1/data/io/k8s/federation/admission;
* ``real OPA`` — with ``--opa-url``, that OPA (a scratch one: see
  bench/common.py; its ``data.kubernetes`` and the benchmark's modules are
  removed at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, pct  # noqa: E402
from devstack.schedulingpolicy import modules  # noqa: E402
from fedplace.common.kube_client import Resource  # noqa: E402
from fedplace.common.subject_index import subject_index  # noqa: E402

QUERY_PATH = "io/k8s/federation/admission"
RK = "requiredDuringSchedulingIgnoredDuringExecution"
PK = "preferredDuringSchedulingIgnoredDuringExecution"
GROUP = "scheduling.fedplace.io"
POLICIES = 200
NAMESPACES = 250
BINDINGS = 5_000
CRB = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)
RB = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True)
INDEXED, SCAN = "with the subject index", "baseline: no index"
WARMUP = 50  # unmeasured decisions per case and server before the timed ones


def team_spec(i: int) -> dict[str, Any]:
    """A team's policy: required arch, its priority classes, a dedicated taint, zone affinity."""
    return {
        "required": {"nodeSelectors": {"kubernetes.io/arch": ["amd64", "arm64"]},
                     "priorityClassNames": [f"team-{i}-high", f"team-{i}-low"]},
        "allowed": {
            "nodeSelectors": {"disk": ["ssd", "hdd"], "topology.kubernetes.io/region": []},
            "tolerations": [{"keys": ["dedicated"], "operators": ["Equal"], "values": [f"team-{i}"], "effects": ["NoSchedule"]},
                            {"keys": ["gpu"], "operators": ["Exists"], "effects": ["NoSchedule", "PreferNoSchedule"]}],
            "affinities": {
                "nodeAffinities": {RK: {"nodeSelectorTerms": [{"matchExpressions": [
                    {"keys": ["topology.kubernetes.io/zone"], "operators": ["In", "NotIn"], "values": ["z1", "z2", "z3"]}]}]}},
                "podAntiAffinities": {},
            },
        },
        "default": {"nodeSelector": {"kubernetes.io/arch": "amd64"}, "priorityClassName": f"team-{i}-low",
                    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": f"team-{i}", "effect": "NoSchedule"}]},
    }


def use_role(name: str, names: list[str] | None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [GROUP], "resources": ["schedulingpolicies"], "verbs": ["use"]}
    if names:
        rule["resourceNames"] = names
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": [rule]}


def binding(name: str, ns: str | None, role: str, subjects: list[dict[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding" if ns else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects}


def world(cluster_bindings: int) -> dict[str, Any]:
    """data.kubernetes: policies, roles and BINDINGS bindings, ``cluster_bindings`` of them cluster-wide."""
    policies = {f"team-{i}": {"apiVersion": f"{GROUP}/v1alpha1", "kind": "SchedulingPolicy",
                              "metadata": {"name": f"team-{i}"}, "spec": team_spec(i)} for i in range(POLICIES)}
    policies["restricted"] = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": "restricted"},
                              "spec": {"allowed": {"schedulerNames": ["default-scheduler"]}}}
    roles = {f"sp:team-{i}": use_role(f"sp:team-{i}", [f"team-{i}"]) for i in range(POLICIES)}
    roles["sp:restricted"] = use_role("sp:restricted", ["restricted"])
    for i in range(99):  # view/edit/admin-like roles; every tenth has verbs ["*"]
        roles[f"role-{i}"] = {"metadata": {"name": f"role-{i}"}, "rules": [
            {"apiGroups": ["", "apps"], "resources": ["pods", "deployments", "configmaps"],
             "verbs": ["*"] if i % 10 == 0 else ["get", "list", "watch"]}]}
    # Each namespace's service accounts may use their team's policy: a RoleBinding
    # there, or (no RoleBindings at all) a ClusterRoleBinding to the namespace's group.
    team_grants = [(f"ns-{i}", f"sp:team-{i % POLICIES}") for i in range(NAMESPACES)]
    namespaced = BINDINGS - cluster_bindings
    crbs = {"sp:restricted": binding("sp:restricted", None, "sp:restricted",
                                     [{"kind": "Group", "name": "system:authenticated"}])}
    if not namespaced:
        for ns, role in team_grants:
            crbs[f"{role}-{ns}"] = binding(f"{role}-{ns}", None, role, [{"kind": "Group", "name": f"system:serviceaccounts:{ns}"}])
    for i in range(cluster_bindings - len(crbs)):
        crbs[f"crb-{i}"] = binding(f"crb-{i}", None, f"role-{i % 99}",
                                   [{"kind": "User", "name": f"user-{i}"},
                                    {"kind": "ServiceAccount", "name": "ci", "namespace": f"ns-{i % NAMESPACES}"}])
    rbs: dict[str, dict[str, Any]] = {}
    for i in range(namespaced):
        ns = f"ns-{i % NAMESPACES}"
        if i < NAMESPACES:
            b = binding(f"sp-team-{ns}", ns, team_grants[i][1], [{"kind": "Group", "name": f"system:serviceaccounts:{ns}"}])
        else:
            b = binding(f"rb-{i}", ns, f"role-{i % 99}", [{"kind": "User", "name": f"user-{i}"}])
        rbs.setdefault(ns, {})[b["metadata"]["name"]] = b
    assert len(crbs) + sum(map(len, rbs.values())) == BINDINGS
    return {"schedulingpolicies": policies, "clusterroles": roles, "clusterrolebindings": crbs,
            "roles": {}, "rolebindings": rbs}


# What a Kubernetes 1.24 API server adds to a pod template at decode, before any
# admission plugin or webhook sees the object.
DECODE_DEFAULTS = {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                   "securityContext": {}, "terminationGracePeriodSeconds": 30}
CONTAINER_DEFAULTS = {"imagePullPolicy": "IfNotPresent", "resources": {},
                      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}


def deployment(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A Deployment of ns-7 as the API server sends it to admission, its template setting ``pod_spec``."""
    template_spec = {**DECODE_DEFAULTS, "serviceAccountName": "web",
                     "containers": [{"name": "web", "image": "nginx:1.27", **CONTAINER_DEFAULTS}], **pod_spec}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns-7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "progressDeadlineSeconds": 600,
                     "revisionHistoryLimit": 10,
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                     "template": {"metadata": {"labels": {"app": "web"}, "creationTimestamp": None},
                                  "spec": template_spec}}}


ALL_FIVE = {
    "schedulerName": "default-scheduler",
    "priorityClassName": "team-7-high",
    "nodeSelector": {"kubernetes.io/arch": "arm64", "disk": "ssd"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-7", "effect": "NoSchedule"},
                    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {RK: {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]}]}]}},
        "podAntiAffinity": {PK: [{"weight": 100, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}}]},
    },
}

DENIED = {
    "schedulerName": "gpu-scheduler",
    "priorityClassName": "team-8-high",
    "nodeSelector": {"kubernetes.io/arch": "i386", "disk": "nvme"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-8", "effect": "NoSchedule"}],
    "affinity": {"podAffinity": {RK: [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}]}},
}

CASES = {
    "all five set, admitted": (deployment(ALL_FIVE), lambda d: not d.get("errors") and not d.get("patches")),
    "none set, defaults patched": (deployment({}), lambda d: not d.get("errors") and len(d["patches"]["schedulingpolicy"]) == 3),
    "all five set, denied": (deployment(DENIED), lambda d: len(d.get("errors", [])) == 6),
}


FLOOR = "floor: a constant rule of the pack"
FLOOR_PATH = "io/k8s/federation/schedulingpolicy/prefix"


def index_of(kube: dict[str, Any]) -> dict[str, Any]:
    """The subject index opa-kube-sync writes for ``kube``'s bindings."""
    return {"clusterrolebindings": subject_index(CRB, kube["clusterrolebindings"]),
            "rolebindings": subject_index(RB, kube["rolebindings"])}


async def _load(session: aiohttp.ClientSession, root: str, kube: dict[str, Any], indexed: bool) -> None:
    for mid, src in modules().items():
        async with session.put(f"{root}/v1/policies/bench/{mid}", data=src) as r:
            assert r.status == 200, await r.text()
    async with session.put(f"{root}/v1/data/kubernetes", json=kube) as r:
        assert r.status == 204, await r.text()
    if indexed:
        async with session.put(f"{root}/v1/data/kubernetes_index", json=index_of(kube)) as r:
            assert r.status == 204, await r.text()
    else:
        async with session.delete(f"{root}/v1/data/kubernetes_index") as r:
            assert r.status in (204, 404), await r.text()


async def _decide(session: aiohttp.ClientSession, root: str, path: str, obj: Any) -> Any:
    async with session.post(f"{root}/v1/data/{path}", json={"input": obj}) as r:
        assert r.status == 200, await r.text()
        return (await r.json()).get("result")


async def _timed_posts(session: aiohttp.ClientSession, url: str, body: dict[str, Any], n: int) -> list[float]:
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        async with session.post(url, json=body) as r:
            await r.read()
            assert r.status == 200, r.status
        lat.append((time.perf_counter() - t) * 1000)
    return lat


def _expected(case: str) -> Callable[[Any], bool]:
    return CASES[case][1] if case in CASES else (lambda result: result == "SchedulingPolicy")


async def measure(targets: dict[str, Opa], kube: dict[str, Any], n: int, rounds: int, indexed: bool
                  ) -> dict[str, dict[str, list[float]]]:
    """{server: {decision: latencies}}: every server loaded with the pack and ``kube``, each
    decision checked once, then asked ``n`` times in ``rounds`` blocks alternating between servers."""
    sessions = {who: target.session() for who, target in targets.items()}
    try:
        for who, target in targets.items():
            await _load(sessions[who], target.url, kube, indexed)
        out: dict[str, dict[str, list[float]]] = {who: {} for who in targets}
        asked = [(case, QUERY_PATH, obj) for case, (obj, _) in CASES.items()] + [(FLOOR, FLOOR_PATH, {})]
        for case, path, obj in asked:
            for who, target in targets.items():  # checked, and warm (the first queries after a bulk load are slower)
                result = await _decide(sessions[who], target.url, path, obj)
                assert _expected(case)(result), (who, case, result)
                await _timed_posts(sessions[who], f"{target.url}/v1/data/{path}", {"input": obj}, WARMUP)
            for _ in range(rounds):
                for who, target in targets.items():
                    out[who].setdefault(case, []).extend(await _timed_posts(
                        sessions[who], f"{target.url}/v1/data/{path}", {"input": obj}, max(1, n // rounds)))
        return out
    finally:
        for session in sessions.values():
            await session.close()


async def run(args: argparse.Namespace) -> tuple[list[str], str]:
    """The table's rows, and which servers produced them."""
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        targets: dict[str, Opa] = {"engine": Opa.start(Path(tmp))}
        try:
            if args.opa_url:
                real = Opa(args.opa_url.rstrip("/").removesuffix("/v1"),
                           Path(args.opa_token_file) if args.opa_token_file else None)
                await real.require_scratch()
                real.owns(documents=("kubernetes", "kubernetes_index"), policies=("bench/",))
                targets["real OPA"] = real
            described = "; ".join(f"{who} {t.url}" + ("" if t.external else " (devstack fedplace-engine, started "
                                                                              "by the benchmark)")
                                  for who, t in targets.items())
            for cluster_bindings in (250, BINDINGS) if args.worst_case else (250,):
                shape = f"{cluster_bindings:,} / {BINDINGS - cluster_bindings:,}"
                kube = world(cluster_bindings)
                results = {data: await measure(targets, kube, args.queries, args.rounds, data == INDEXED)
                           for data in (INDEXED, SCAN)}
                for case in [*CASES, FLOOR]:
                    for who in targets:
                        p50 = {data: statistics.median(results[data][who][case]) for data in results}
                        for data, by_server in results.items():
                            lat = by_server[who][case]
                            ratio = "" if data == SCAN else f"{p50[SCAN] / p50[INDEXED]:.2f}x"
                            rows.append(f"| {shape} | {case} | {who} | {data} | {p50[data]:.2f} "
                                        f"| {pct(lat, 99):.2f} | {ratio} |")
        finally:
            for target in targets.values():
                await target.close()
    return rows, described


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500, help="decisions per row (default 500)")
    parser.add_argument("--rounds", type=int, default=10,
                        help="blocks the queries are split into, alternating between the servers (default 10)")
    parser.add_argument("--worst-case", action="store_true", help="also all 5,000 bindings as ClusterRoleBindings")
    add_server_flags(parser, opa=True)
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(f"### SchedulingPolicy pack — {POLICIES} SchedulingPolicies, {BINDINGS:,} RBAC bindings, "
          f"{args.queries} sequential decisions per row, over HTTP\n")
    rows, described = asyncio.run(run(args))
    print(f"Servers: {described}\n")
    print("| bindings (cluster / namespaced) | decision | server | data | p50 (ms) | p99 (ms) | baseline / indexed p50 |")
    print("|---|---|---|---|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\n- bench wall time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
