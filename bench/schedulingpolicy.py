"""Benchmark the SchedulingPolicy pack's admission decision.

Usage: .venv/bin/python bench/schedulingpolicy.py [--queries 500] [--opa-url URL [--opa-token-file PATH]]

Replicated data: 200 SchedulingPolicies (one per team, each granted by its own
ClusterRole), 300 ClusterRoles in all, and 5,000 RBAC bindings — by default
250 ClusterRoleBindings and 4,750 RoleBindings over 250 namespaces (the usual
shape of a multi-tenant cluster: most grants are namespaced), and as a worst
case all 5,000 as ClusterRoleBindings (every one is read on every request).
The admitted object is a Deployment whose pod template sets all five
components (scheduler, priority class, node selector, tolerations, pod and
node affinities), its service account granted two policies (the cluster-wide
`restricted` one and its team's).

Three decisions are timed, each ``--queries`` times in sequence: the
Deployment admitted unchanged, the same with the components unset (defaults
patched in), and one that is denied (five violations; the denial also
validates the usable policies to name invalid ones). Each by three
evaluators, printed with its name:

* ``engine (HTTP)`` — fedplace-engine (devstack, regorus) over HTTP, as the
  webhook asks it: POST /v1/data/io/k8s/federation/admission (with
  ``--opa-url``: that OPA instead, a scratch one, see bench/common.py);
* ``regorus (in process)`` — the same interpreter without HTTP and JSON;
* ``OPA 1.20 evaluator (in process)`` — OPA's own Go evaluator through the
  opa_bindings wheel (data handed over as Go values at load).

A last row times a constant rule of the pack on the same server and data,
over HTTP and in regorus: the cost of any query there, to subtract from the
others (for regorus, mostly its per-query set-up, which grows with the amount
of Rego loaded, whatever the query evaluates).
Run it as ``make bench`` does, with ``RUST_BACKTRACE=0``: otherwise regorus
captures a backtrace for every internal error value, which costs about a
millisecond per decision here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import regorus
from opa_bindings import OpaEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Opa, add_server_flags, pct, servers  # noqa: E402
from devstack.schedulingpolicy import modules  # noqa: E402

QUERY_PATH = "io/k8s/federation/admission"
RK = "requiredDuringSchedulingIgnoredDuringExecution"
PK = "preferredDuringSchedulingIgnoredDuringExecution"
GROUP = "scheduling.fedplace.io"
POLICIES = 200
NAMESPACES = 250
BINDINGS = 5_000


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


def deployment(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns-7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"serviceAccountName": "web",
                                           "containers": [{"name": "web", "image": "nginx:1.27"}], **pod_spec}}}}


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


def timed(fn: Callable[[], Any], n: int) -> tuple[list[float], Any]:
    out, result = [], None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        out.append((time.perf_counter() - t) * 1000)
    return out, result


BASELINE = "engine (HTTP), baseline --per-query-clone"


async def _load(s: aiohttp.ClientSession, root: str, kube: dict[str, Any]) -> None:
    for mid, src in modules().items():
        async with s.put(f"{root}/v1/policies/bench/{mid}", data=src) as r:
            assert r.status == 200, await r.text()
    async with s.put(f"{root}/v1/data/kubernetes", json=kube) as r:
        assert r.status == 204, await r.text()


async def _timed_posts(s: aiohttp.ClientSession, url: str, body: dict[str, Any], n: int) -> list[float]:
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        async with s.post(url, json=body) as r:
            await r.read()
        lat.append((time.perf_counter() - t) * 1000)
    return lat


async def over_http(args: argparse.Namespace, kube: dict[str, Any], n: int, rounds: int = 10
                    ) -> tuple[str, str, dict[str, dict[str, list[float]]]]:
    """(evaluator name, servers, {evaluator: {case: latencies}}) over HTTP: the devstack engine
    (and, in the same run, a baseline engine started with ``--per-query-clone``, the two asked
    in alternating blocks so both see the same load), or --opa-url."""
    with tempfile.TemporaryDirectory() as tmp:
        async with servers(args, Path(tmp)) as srv:
            opa = srv.opa
            assert opa is not None
            opa.owns(documents=("kubernetes",), policies=("bench/",))
            name = "external OPA (HTTP)" if opa.external else "engine (HTTP)"
            targets = {name: opa}
            base = None if opa.external else Opa.start(Path(tmp), "baseline", "--per-query-clone")
            if base is not None:
                targets[BASELINE] = base
            try:
                out: dict[str, dict[str, list[float]]] = {who: {} for who in targets}
                sessions = {who: await target.session().__aenter__() for who, target in targets.items()}
                try:
                    for who, target in targets.items():
                        await _load(sessions[who], target.url, kube)
                    for case, (obj, ok) in CASES.items():
                        for who, target in targets.items():  # warm (the first query loads the data)
                            async with sessions[who].post(f"{target.url}/v1/data/{QUERY_PATH}",
                                                          json={"input": obj}) as r:
                                result = (await r.json())["result"]
                            assert ok(result), (who, case, result)
                        for _ in range(rounds):
                            for who, target in targets.items():
                                out[who].setdefault(case, []).extend(await _timed_posts(
                                    sessions[who], f"{target.url}/v1/data/{QUERY_PATH}", {"input": obj},
                                    max(1, n // rounds)))
                    # The floor: a constant rule, same server, same data (what any query costs there).
                    for _ in range(rounds):
                        for who, target in targets.items():
                            out[who].setdefault(FLOOR, []).extend(await _timed_posts(
                                sessions[who], f"{target.url}/v1/data/io/k8s/federation/schedulingpolicy/prefix",
                                {"input": {}}, max(1, n // rounds)))
                finally:
                    for session in sessions.values():
                        await session.close()
            finally:
                if base is not None:
                    await base.close()
            return name, srv.describe(), out


def in_regorus(kube: dict[str, Any], n: int) -> dict[str, list[float]]:
    engine = regorus.Engine()
    for mid, src in modules().items():
        engine.add_policy(mid, src)
    engine.add_data_json(json.dumps({"kubernetes": kube}))
    out = {}
    for name, (obj, ok) in CASES.items():
        engine.set_input_json(json.dumps(obj))

        def query() -> Any:
            return json.loads(engine.eval_query_as_json("data.io.k8s.federation.admission"))

        lat, result = timed(query, n)
        value = result["result"][0]["expressions"][0]["value"]
        assert ok(value), (name, value)
        out[name] = lat
    out[FLOOR] = timed(lambda: engine.eval_query_as_json("data.io.k8s.federation.schedulingpolicy.prefix"), n)[0]
    return out


def in_engine(kube: dict[str, Any], n: int) -> dict[str, list[float]]:
    """The devstack engine's decision without HTTP: ``EngineState.read`` as its server calls it."""
    from devstack.engine.state import EngineState

    state = EngineState()
    for mid, src in modules().items():
        state.put_policy(f"bench/{mid}", src)
    state.put_data(("kubernetes",), kube)
    path = tuple(QUERY_PATH.split("/"))
    out = {}
    for name, (obj, ok) in CASES.items():
        lat, result = timed(lambda obj=obj: state.read(path, obj), n)
        assert ok(result), (name, result)
        out[name] = lat
    return out


def in_opa(kube: dict[str, Any], n: int) -> dict[str, list[float]]:
    engine = OpaEngine()
    for mid, src in modules().items():
        engine.add_policy(mid, src)
    engine.add_data({"kubernetes": kube})
    out = {}
    for name, (obj, ok) in CASES.items():
        lat, result = timed(lambda obj=obj: engine.eval_query("x := data.io.k8s.federation.admission", obj), n)
        assert ok(result[0]["x"]), (name, result)
        out[name] = lat
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    add_server_flags(parser, opa=True)
    args = parser.parse_args()
    n = args.queries
    t0 = time.perf_counter()
    print(f"### SchedulingPolicy pack — {POLICIES} SchedulingPolicies, {BINDINGS:,} RBAC bindings, {n} sequential "
          "decisions per row\n")
    rows, described = [], ""
    for cluster_bindings in (250, BINDINGS):
        kube = world(cluster_bindings)
        shape = f"{cluster_bindings:,} / {BINDINGS - cluster_bindings:,}"
        _, described, http = asyncio.run(over_http(args, kube, n))
        results = {
            **http,
            "devstack engine, in process (no HTTP)": in_engine(kube, n),
            "regorus (in process)": in_regorus(kube, n),
            "OPA 1.20 evaluator (in process)": in_opa(kube, n),
        }
        for case in [*CASES, FLOOR]:
            for evaluator, lat in results.items():
                if case not in lat:
                    continue
                rows.append(f"| {shape} | {case} | {evaluator} | {statistics.median(lat[case]):.2f} "
                            f"| {pct(lat[case], 99):.2f} |")
    print(f"{described}; regorus and OPA's evaluator in this process\n")
    print("| bindings (cluster / namespaced) | decision | evaluator | p50 (ms) | p99 (ms) |")
    print("|---|---|---|---:|---:|")
    print("\n".join(rows))
    print(f"\n- bench wall time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
