"""The reference table: what Kubernetes' LimitRanger does to a Pod, and what the pack does.

Each :class:`Case` is a Pod (as submitted) in namespace ``shop`` with its
LimitRanges. ``kubernetes`` is the built-in plugin's outcome, written down from
its source (plugin/pkg/admission/limitranger/admission.go and the API
defaulting it relies on; see k8s_limitranger.py): the resources the Pod ends
up with, or the error the API server answers. ``fedplace`` is the pack's:
the same resources (its patch, plus the API server's own copying of limits to
missing requests), or its denial messages. ``note`` explains where the two
differ on purpose.

test_reference.py checks every case three ways — Kubernetes' outcome against
the port of the plugin, the pack's under OPA's evaluator and under the
devstack engine — and that docs/policies.md shows :func:`render_table`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def lr(name: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"limits": list(items)}}


def item(type_: str, **fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, **fields}


def container(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
              **extra: Any) -> dict[str, Any]:
    res = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": name, "image": "nginx", **({"resources": res} if res else {}), **extra}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}


@dataclass(frozen=True)
class Outcome:
    """Admitted with ``resources`` ({container: {"requests": …, "limits": …}}, values as
    quantity texts), or denied with ``errors``."""

    resources: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class Case:
    name: str
    limitranges: list[dict[str, Any]]
    pod: dict[str, Any]
    kubernetes: Outcome
    fedplace: Outcome
    note: str = ""


def res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    return {"requests": requests or {}, "limits": limits or {}}


SHOP = 'in "shop"'

CASES = [
    Case("defaults fill a container without resources",
         [lr("defaults", item("Container", default={"cpu": "500m", "memory": "512Mi"},
                              defaultRequest={"cpu": "100m", "memory": "128Mi"}))],
         pod(container("app")),
         Outcome({'container "app"': res({"cpu": "100m", "memory": "128Mi"}, {"cpu": "500m", "memory": "512Mi"})}),
         Outcome({'container "app"': res({"cpu": "100m", "memory": "128Mi"}, {"cpu": "500m", "memory": "512Mi"})})),
    Case("a default only where the container sets none; its limit is its request",
         [lr("defaults", item("Container", default={"cpu": "500m", "memory": "512Mi"},
                              defaultRequest={"cpu": "100m", "memory": "128Mi"}))],
         pod(container("app", limits={"cpu": "2"})),
         Outcome({'container "app"': res({"cpu": "2", "memory": "128Mi"}, {"cpu": "2", "memory": "512Mi"})}),
         Outcome({'container "app"': res({"cpu": "2", "memory": "128Mi"}, {"cpu": "2", "memory": "512Mi"})})),
    Case("a min is the request of a container that sets none",
         [lr("floor", item("Container", min={"cpu": "100m"}))],
         pod(container("app")),
         Outcome({'container "app"': res({"cpu": "100m"})}),
         Outcome({'container "app"': res({"cpu": "100m"})})),
    Case("a max is the default limit, and then the default request",
         [lr("ceiling", item("Container", max={"memory": "1Gi"}, min={"memory": "64Mi"}))],
         pod(container("app")),
         Outcome({'container "app"': res({"memory": "1Gi"}, {"memory": "1Gi"})}),
         Outcome({'container "app"': res({"memory": "1Gi"}, {"memory": "1Gi"})})),
    Case("a limit above max",
         [lr("limits", item("Container", max={"memory": "1Gi"}))],
         pod(container("app", requests={"memory": "512Mi"}, limits={"memory": "2Gi"})),
         Outcome(errors=("maximum memory usage per Container is 1Gi, but limit is 2Gi",)),
         Outcome(errors=(f'container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" {SHOP})',))),
    Case("a request below min",
         [lr("limits", item("Container", min={"cpu": "100m"}))],
         pod(container("app", requests={"cpu": "50m"})),
         Outcome(errors=("minimum cpu usage per Container is 100m, but request is 50m",)),
         Outcome(errors=(f'container "app": cpu request 50m is below min 100m (LimitRange "limits" {SHOP})',))),
    Case("quantities compare exactly across suffixes",
         [lr("limits", item("Container", max={"memory": "1Gi"}))],
         pod(container("a", limits={"memory": "1024Mi"}), container("b", limits={"memory": "1073741825"})),
         Outcome(errors=("maximum memory usage per Container is 1Gi, but limit is 1073741825",)),
         Outcome(errors=(f'container "b": memory limit 1073741825 exceeds max 1Gi (LimitRange "limits" {SHOP})',))),
    Case("milli-units round up, as Kubernetes compares them",
         [lr("limits", item("Container", min={"cpu": "1m"}))],
         pod(container("app", requests={"cpu": "0.5m"})),
         Outcome({'container "app"': res({"cpu": "0.5m"})}),
         Outcome({'container "app"': res({"cpu": "0.5m"})})),
    Case("limit / request above maxLimitRequestRatio",
         [lr("burst", item("Container", maxLimitRequestRatio={"cpu": "2"}))],
         pod(container("app", requests={"cpu": "250m"}, limits={"cpu": "1"})),
         Outcome(errors=("cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000",)),
         Outcome(errors=(f'container "app": cpu limit 1 is 4 times the request 250m, above maxLimitRequestRatio 2 '
                         f'(LimitRange "burst" {SHOP})',))),
    Case("a ratio exactly at the bound",
         [lr("burst", item("Container", maxLimitRequestRatio={"cpu": "4.03"}))],
         pod(container("app", requests={"cpu": "1"}, limits={"cpu": "4030m"})),
         Outcome(errors=("cpu max limit to request ratio per Container is 4030m, but provided ratio is 4.030000",)),
         Outcome({'container "app"': res({"cpu": "1"}, {"cpu": "4030m"})}),
         note="Kubernetes divides in float64: 4030/1000 x 1000 is 4030.0000000000005 > 4030 (rare: a ratio in "
              "tenths never hits it). The pack compares exactly and admits a ratio equal to the bound."),
    Case("pod total: the sum of the containers",
         [lr("pod", item("Pod", max={"memory": "1Gi"}))],
         pod(container("a", limits={"memory": "600Mi"}), container("b", limits={"memory": "600Mi"})),
         Outcome(errors=("maximum memory usage per Pod is 1Gi, but limit is 1200Mi",)),
         Outcome(errors=(f'pod: memory limit total 1200Mi exceeds max 1Gi (LimitRange "pod" {SHOP})',))),
    Case("init containers count as the largest one, not their sum",
         [lr("pod", item("Pod", max={"memory": "1Gi"}))],
         pod(container("app", limits={"memory": "600Mi"}),
             init=(container("migrate", limits={"memory": "900Mi"}), container("warm", limits={"memory": "900Mi"}))),
         Outcome({'container "app"': res({"memory": "600Mi"}, {"memory": "600Mi"}),
                  'init container "migrate"': res({"memory": "900Mi"}, {"memory": "900Mi"}),
                  'init container "warm"': res({"memory": "900Mi"}, {"memory": "900Mi"})}),
         Outcome({'container "app"': res({"memory": "600Mi"}, {"memory": "600Mi"}),
                  'init container "migrate"': res({"memory": "900Mi"}, {"memory": "900Mi"}),
                  'init container "warm"': res({"memory": "900Mi"}, {"memory": "900Mi"})})),
    Case("a sidecar (restartPolicy Always) adds to the app containers",
         [lr("pod", item("Pod", max={"memory": "1Gi"}))],
         pod(container("app", limits={"memory": "600Mi"}),
             init=(container("proxy", limits={"memory": "500Mi"}, restartPolicy="Always"),)),
         Outcome(errors=("maximum memory usage per Pod is 1Gi, but limit is 1100Mi",)),
         Outcome(errors=(f'pod: memory limit total 1100Mi exceeds max 1Gi (LimitRange "pod" {SHOP})',))),
    Case("several LimitRanges: every one applies",
         [lr("team", item("Container", max={"memory": "512Mi"})), lr("zone", item("Container", max={"memory": "1Gi"}))],
         pod(container("app", limits={"memory": "2Gi"})),
         Outcome(errors=("maximum memory usage per Container is 512Mi, but limit is 2Gi",)),
         Outcome(errors=(f'container "app": memory limit 2Gi exceeds max 512Mi (LimitRange "team" {SHOP})',
                         f'container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "zone" {SHOP})')),
         note="Kubernetes stops at the first LimitRange with errors (runLimitFunc); the pack lists every "
              "violated constraint of every LimitRange."),
    Case("a default from one LimitRange, a max in another",
         [lr("a-defaults", item("Container", default={"memory": "2Gi"})),
          lr("b-limits", item("Container", max={"memory": "1Gi"}))],
         pod(container("app", requests={"memory": "256Mi"})),
         Outcome(errors=("maximum memory usage per Container is 1Gi, but limit is 2Gi",)),
         Outcome(errors=(f'container "app": memory limit 2Gi (default from LimitRange "a-defaults") exceeds max 1Gi '
                         f'(LimitRange "b-limits" {SHOP})',)),
         note="Kubernetes takes LimitRanges in informer order, which is unspecified: with b-limits first its max "
              "(1Gi) would be the default and the Pod admitted. The pack always takes them by name."),
]


# -- the table in docs/policies.md ---------------------------------------------------------------

def _quantities(values: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())


def _limitrange(r: dict[str, Any]) -> str:
    parts = []
    for it in r["spec"]["limits"]:
        fields = [f"{f} {_quantities(it[f])}" for f in ("min", "max", "default", "defaultRequest",
                                                       "maxLimitRequestRatio") if f in it]
        parts.append(f"{it['type']}: {'; '.join(fields)}")
    return f"`{r['metadata']['name']}` " + " / ".join(parts)


def _container(c: dict[str, Any], prefix: str) -> str:
    res_ = c.get("resources") or {}
    inside = "; ".join(f"{k} {_quantities(res_[k])}" for k in ("requests", "limits") if k in res_)
    sidecar = " (sidecar)" if c.get("restartPolicy") == "Always" else ""
    return f"{prefix}`{c['name']}`{sidecar}" + (f": {inside}" if inside else ": —")


def _pod(p: dict[str, Any]) -> str:
    parts = [_container(c, "") for c in p["spec"]["containers"]]
    parts += [_container(c, "init ") for c in p["spec"].get("initContainers") or []]
    return "<br>".join(parts)


def _outcome(o: Outcome, pod_: dict[str, Any]) -> str:
    if o.errors:
        return "denied: " + "<br>".join(f"`{e}`" for e in o.errors)
    set_by = []
    for who, values in o.resources.items():
        name = who.split('"')[1]
        before = next((c.get("resources") or {} for c in pod_["spec"]["containers"] + pod_["spec"].get(
            "initContainers", []) if c["name"] == name), {})
        added = {k: {r: v for r, v in values[k].items() if r not in (before.get(k) or {})} for k in values}
        text = "; ".join(f"{k} {_quantities(v)}" for k, v in added.items() if v)
        if text:
            set_by.append(f"`{name}` gets {text}")
    return "admitted" + (": " + "<br>".join(set_by) if set_by else "")


def render_table() -> str:
    rows = ["| case | LimitRanges | Pod | Kubernetes' LimitRanger | fedplace |", "|---|---|---|---|---|"]
    for i, c in enumerate(CASES, 1):
        ours = "same" if c.fedplace == c.kubernetes else _outcome(c.fedplace, c.pod)
        if c.note:
            ours += f" — {c.note}"
        rows.append(f"| {i}. {c.name} | {'<br>'.join(_limitrange(r) for r in c.limitranges)} | {_pod(c.pod)} "
                    f"| {_outcome(c.kubernetes, c.pod)} | {ours} |")
    return "\n".join(rows) + "\n"
