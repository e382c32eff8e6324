"""Item 6, at random: the pack against the port of Kubernetes' LimitRanger on generated Pods.

Each case (fixed seed, so every run sees the same ones) is one to three
LimitRanges that the API server would accept (k8s_limitranger validates the
order min <= defaultRequest <= default <= max and ratio >= 1, as
ValidateLimitRange does) and a Pod of one to three containers, maybe init
containers and sidecars, whose quantities come from pools mixing suffixes,
decimals and exponents. Kubernetes' outcome (the port, with the pack's two
documented choices: every LimitRange's errors, exact ratios) and the pack's
must agree on:

* the resources every container ends with (the pack's patch, then the API
  server's copying of limits to requests), compared as exact values;
* the violations, as (who, resource, what, LimitRange);
* the pack's answer for the Pod as submitted and as a real API server sends it
  (limits already copied to requests, ``resources: {}`` on every container) —
  the same;
* on the Pod as Kubernetes' own LimitRanger has already defaulted it (what a
  webhook on a real federation API server receives): nothing added, the same
  violations.

Each under OPA's evaluator in process and under the ``opa`` fixture's server
(the devstack engine, or a real OPA).
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any

from tests.packs.limitrange import harness
from tests.packs.limitrange.harness import Evaluator
from tests.packs.limitrange.k8s_limitranger import admit, set_defaults_pod
from tests.packs.limitrange.k8s_quantity import parse

SEED = 20240613
CASES = 120

POOLS = {
    "cpu": ["0", "1m", "0.5m", "10m", "50m", "100m", "0.1", "250m", "500m", "0.5", "1", "1000m", "1.5", "2",
            "2500m", "4", "1e-1", "3"],
    "memory": ["0", "1Ki", "32Mi", "64Mi", "100M", "128Mi", "0.125Gi", "256Mi", "500M", "512Mi", "1G", "1Gi",
               "1073741825", "1.5Gi", "2Gi", "129e6", "4Gi"],
}
RATIOS = ["1", "1.5", "2", "4", "10"]


def _ordered(rng: random.Random, resource: str, n: int, pools: dict[str, list[str]] = POOLS) -> list[str]:
    """n values of the pool in increasing order (ties allowed)."""
    values = sorted((rng.choice(pools[resource]) for _ in range(n)), key=parse)
    return values


def limit_item(rng: random.Random, pools: dict[str, list[str]] = POOLS) -> dict[str, Any]:
    type_ = rng.choice(["Container", "Container", "Container", "Pod"])
    item: dict[str, Any] = {"type": type_}
    for r in rng.sample(sorted(POOLS), rng.randint(1, 2)):
        fields = [f for f in ("min", "defaultRequest", "default", "max") if rng.random() < 0.3
                  and (type_ == "Container" or f in ("min", "max"))]
        # ValidateLimitRange: min <= defaultRequest <= default <= max, as stored (defaults applied)
        for f, v in zip(fields, _ordered(rng, r, len(fields), pools), strict=True):
            item.setdefault(f, {})[r] = v
        if rng.random() < 0.25 and r == "cpu":
            item.setdefault("maxLimitRequestRatio", {})[r] = rng.choice(RATIOS)
    return item


def valid(item: dict[str, Any]) -> bool:
    """What ValidateLimitRange checks, on the item as the API server stores it."""
    from tests.packs.limitrange.k8s_limitranger import set_defaults_limit_range_item

    stored = set_defaults_limit_range_item(item)
    for r in {r for f in ("min", "max", "default", "defaultRequest") for r in stored.get(f) or {}}:
        chain = [stored.get(f, {}).get(r) for f in ("min", "defaultRequest", "default", "max")]
        values = [parse(v) for v in chain if v is not None]
        if values != sorted(values):
            return False
    for r, ratio in (stored.get("maxLimitRequestRatio") or {}).items():
        if parse(ratio) < (1, 0):
            return False
        lo, hi = (stored.get("min") or {}).get(r), (stored.get("max") or {}).get(r)
        if lo and hi and parse(lo) > (0, 0):
            lo_n, hi_n, ratio_n = (x[0] * 10**9 + x[1] for x in (parse(lo), parse(hi), parse(ratio)))
            if ratio_n * lo_n > hi_n * 10**9:
                return False
    return True


def limitranges(rng: random.Random, pools: dict[str, list[str]] = POOLS) -> list[dict[str, Any]]:
    out = []
    for i in range(rng.choice([1, 1, 2, 3])):
        items = [it for it in (limit_item(rng, pools) for _ in range(rng.randint(1, 2))) if valid(it)]
        out.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": f"lr-{i}", "namespace": "shop"},
                    "spec": {"limits": items}})
    return out


def container(rng: random.Random, name: str, sidecar: bool = False,
              pools: dict[str, list[str]] = POOLS) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "x"}
    if sidecar:
        c["restartPolicy"] = "Always"
    resources: dict[str, dict[str, str]] = {}
    for r in POOLS:
        has = [k for k in ("requests", "limits") if rng.random() < 0.5]
        for k, v in zip(has, _ordered(rng, r, len(has), pools), strict=True):  # request <= limit, as validation demands
            resources.setdefault(k, {})[r] = v
    if resources or rng.random() < 0.3:
        c["resources"] = resources
    return c


def pod(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container(rng, f"c{i}") for i in range(rng.randint(1, 3))]}
    if rng.random() < 0.4:
        spec["initContainers"] = [container(rng, f"i{i}", sidecar=rng.random() < 0.4)
                                  for i in range(rng.randint(1, 2))]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": spec}


def generated() -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    rng = random.Random(SEED)
    return [(limitranges(rng), pod(rng)) for _ in range(CASES)]


GENERATED = generated()


def exact(resources: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, tuple[int, int]]]]:
    return {who: {k: {r: parse(str(v)) for r, v in vals.items()} for k, vals in kinds.items()}
            for who, kinds in resources.items()}


def test_cases_are_varied():
    """The generator covers what it should: denials and admissions, defaults, every kind of violation."""
    kinds, allowed, defaulted = set(), 0, 0
    for lrs, p in GENERATED:
        out = admit(p, lrs)
        kinds |= {v.what for v in out.violations}
        allowed += out.allowed
        defaulted += bool(out.defaulted)
    assert 20 <= allowed <= CASES - 20 and defaulted > 30
    assert {"min-request", "max-limit", "max-no-limit", "ratio", "ratio-no-request", "min-no-request",
            "request-above-limit"} <= kinds


async def differs(evaluator: Evaluator, submitted: dict[str, Any], lrs: list[dict[str, Any]], expected: Any
                  ) -> tuple[set[tuple[str, str, str, str]], set[tuple[str, str, str, str]]] | None:
    """None when the pack's decision on ``submitted`` is Kubernetes' outcome ``expected``
    (the same violations; when admitted, the same resources), else (wanted, got) violations."""
    want = {(v.who, v.resource, v.what, v.limitrange) for v in expected.violations}
    decision = await evaluator.decide(submitted, lrs)
    got = {harness.read(e) for e in decision.get("errors") or []}
    got = {(who, r, what, "" if what == "request-above-limit" else lr) for who, r, what, lr in got}
    resources = exact(harness.resources_of(set_defaults_pod(harness.patched(submitted, decision))))
    if got != want or (not want and resources != exact(harness.resources_of(expected.pod))):
        return want, got
    return None


def as_sent(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """A Pod as a webhook may receive it: as written; with limits copied to requests (a real API
    server's Pod defaulting, SetDefaults_Pod); with ``resources: {}`` on every container that has
    none (its defaulting of Pods and pod templates alike)."""
    copied = set_defaults_pod(pod)
    filled = copy.deepcopy(copied)
    for key in ("containers", "initContainers"):
        for c in filled["spec"].get(key) or []:
            c.setdefault("resources", {})
    return [pod, copied, filled]


async def test_pack_agrees_with_kubernetes(evaluator: Evaluator):
    mismatches = []
    for i, (lrs, p) in enumerate(GENERATED):
        expected = admit(p, lrs)
        for submitted in as_sent(p):
            found = await differs(evaluator, submitted, lrs, expected)
            if found:
                want, got = found
                mismatches.append((i, lrs, submitted, sorted(want), sorted(got)))
    assert not mismatches, f"{len(mismatches)} of {3 * CASES} differ; first: {mismatches[0]}"


async def test_a_pod_defaulted_by_kubernetes_is_left_as_it_is(evaluator: Evaluator):
    """On a real federation API server, Kubernetes' own LimitRanger has defaulted a Pod before any
    webhook sees it: the pack adds nothing more (no patch, no annotation) and finds the same
    violations — bar a request above its limit, which API validation refuses after admission."""
    changed, mismatches, denied = [], [], 0
    for i, (lrs, p) in enumerate(GENERATED):
        expected = admit(p, lrs)
        decision = await evaluator.decide(expected.pod, lrs)
        if (decision.get("patches") or {}).get("limitrange") or decision.get("annotations"):
            changed.append((i, lrs, expected.pod, decision))
        want = {(v.who, v.resource, v.what, v.limitrange) for v in expected.violations
                if v.what != "request-above-limit"}
        got = {harness.read(e) for e in decision.get("errors") or []}
        denied += bool(got)
        if got != want:
            mismatches.append((i, lrs, expected.pod, sorted(want), sorted(got)))
    assert not changed, f"{len(changed)} patched again; first: {changed[0]}"
    assert not mismatches, f"{len(mismatches)} of {CASES} differ; first: {mismatches[0]}"
    assert denied > 20, denied


async def test_the_common_case_answers_as_the_rules_do(evaluator: Evaluator):
    """ranger.rego's common case stands in for the rules only where it may: whenever it holds,
    the rules find no violation and add the same defaults; on these cases it holds often enough
    to matter, and is left to the rules otherwise (init containers, odd values, violations)."""
    taken = 0
    for i, (lrs, p) in enumerate(GENERATED):
        for submitted in as_sent(p):
            rules = await evaluator.rules(submitted, lrs, "common_case", "violations", "added", "common_added")
            if rules.get("common_case") is not True:
                continue
            taken += 1
            assert not rules["violations"] and rules["common_added"] == rules["added"], (i, lrs, submitted, rules)
    assert 15 <= taken <= 3 * CASES - 90, taken


# Plain values only (the short form, whole milli-units) and no init containers: the cases the
# common case is for (about a fifth of them admitted and taking it: the bounds are random).
PLAIN = {r: [v for v in values if re.fullmatch(r"(0|[1-9][0-9]*)(\.[0-9]+)?(m|k|M|G|Ki|Mi|Gi|)", v)
             and parse(v)[1] % 10**6 == 0] for r, values in POOLS.items()}


def plain_generated() -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    rng = random.Random(SEED + 1)
    out = []
    for _ in range(CASES):
        lrs = limitranges(rng, PLAIN)
        containers = [container(rng, f"c{i}", pools=PLAIN) for i in range(rng.randint(1, 5))]
        out.append((lrs, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"},
                          "spec": {"containers": containers}}))
    return out


async def test_plain_objects_take_the_common_case_and_agree_with_kubernetes(evaluator: Evaluator):
    taken = mismatches = 0
    for i, (lrs, p) in enumerate(plain_generated()):
        expected = admit(p, lrs)
        rules = await evaluator.rules(p, lrs, "common_case", "added", "common_added")
        common = rules.get("common_case") is True
        taken += common
        assert common <= expected.allowed, (i, lrs, p)  # never stands in for a denial
        if common:
            assert rules["common_added"] == rules["added"], (i, lrs, p)
        mismatches += await differs(evaluator, p, lrs, expected) is not None
    assert mismatches == 0
    assert taken >= CASES // 6, taken  # 25 of 120 with this seed
