"""opa-kube-sync: a policy ConfigMap can neither open OPA nor jam it.

Over HTTP against OPA and the API server (devstack or real; faults from the
proxies of tests/fixtures/proxy.py), with the sync in-process: the ``system.*`` guard reads the package as OPA's
parser does; size and rule limits hold before OPA sees a module; one write
per module id is ever outstanding and ``/readyz``, a metric and an Event say
when OPA stops answering in time; the status annotation is bounded and always
written; conflicts across ConfigMaps are named on both; ``binaryData``-only
ConfigMaps are reported.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import aiohttp
import pytest

from fedplace.common.kube_client import KubeApiError, kube_json
from fedplace.sync.app import SyncApp
from fedplace.sync.policy_status import STATUS_ANNOTATION
from tests.fixtures.kube import ScratchNamespaces
from tests.sync.test_sync import start_sync as sync_starter  # noqa: F401 - a fixture

REPO = Path(__file__).resolve().parents[2]
MAX_STATUS_BYTES = 32 * 1024  # fedplace.sync.policy_status.MAX_STATUS_BYTES: far below the API server's 256 KiB


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await check()
            if last:
                return last
        except (AssertionError, KubeApiError, aiohttp.ClientError) as exc:
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


class Policies:
    """The test's policy namespace on the API server, and reads of what the sync made of it."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.api = api
        self.ns = namespace

    def path(self, name: str = "") -> str:
        return f"/api/v1/namespaces/{self.ns}/configmaps" + (f"/{name}" if name else "")

    async def put(self, name: str, data: dict[str, str] | None = None,
                  binary: dict[str, str] | None = None) -> None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        if data is not None:
            body["data"] = data
        if binary is not None:
            body["binaryData"] = binary
        try:
            await kube_json(self.api, "POST", self.path(), body=body)
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            cm = await kube_json(self.api, "GET", self.path(name))  # PUT: PATCH faults hit only the sync
            cm["data"] = data
            await kube_json(self.api, "PUT", self.path(name), body=cm)

    async def raw_status(self, name: str) -> str | None:
        cm = await kube_json(self.api, "GET", self.path(name))
        return (cm["metadata"].get("annotations") or {}).get(STATUS_ANNOTATION)

    async def status(self, name: str) -> dict[str, Any] | None:
        raw = await self.raw_status(name)
        return json.loads(raw) if raw else None

    async def status_is(self, name: str, value: str) -> dict[str, Any] | None:
        status = await self.status(name)
        return status if status is not None and status["status"] == value else None

    async def events(self, reason: str, name: str | None = None) -> list[dict[str, Any]]:
        doc = await kube_json(self.api, "GET", f"/api/v1/namespaces/{self.ns}/events")
        return [e for e in doc["items"] if e["reason"] == reason
                and (name is None or e["involvedObject"]["name"] == name)]


@pytest.fixture
async def policies(kube, kube_api, kube_namespaces: ScratchNamespaces) -> Policies:
    return Policies(kube_api, await kube_namespaces.create("policy"))


@pytest.fixture
async def start_sync(sync_starter, policies: Policies) -> Callable[..., Awaitable[SyncApp]]:  # noqa: F811 - fixture
    """test_sync's starter, for the policy namespace alone."""

    async def start(*extra: str, ready: bool = True, **servers: Any) -> SyncApp:
        return await sync_starter("--enable-data", "false", "--policy-namespace", policies.ns, *extra,
                                  wait_ready=ready, **servers)

    return start


async def _true(value: bool) -> bool:
    return value


async def policy_ids(opa: Any) -> list[str]:
    _, body = await opa.request("GET", "/v1/policies")
    return sorted(p["id"] for p in body["result"])


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s:
        async with s.get(url) as r:
            return r.status, await r.text()


# -- 1, 5: the system.* guard reads the package as OPA does ------------------------------------------


@pytest.mark.parametrize("clause", [
    "package\nsystem.authz",  # newline after `package`
    "package\r\nsystem.authz",  # CRLF
    "\ufeffpackage system.authz",  # byte-order mark
    "package # OPA's API\n  system.authz",  # a comment in between
    'package system["authz"]',
    "package\tsystem.authz",
], ids=["newline", "crlf", "bom", "comment", "quoted", "tab"])
async def test_system_package_refused_however_it_is_written(opa, policies, start_sync, clause):
    """``package\\nsystem.authz`` is a system module: refused (status error), never loaded into OPA."""
    await policies.put("p", {"ok.rego": "package fedtest.ok\n\nx := 1\n",
                             "authz.rego": clause + "\n\nallow if true\n"})
    await start_sync()
    status = await eventually(lambda: policies.status_is("p", "error"), what="the system module refused")
    assert [e["code"] for e in status["errors"]] == ["fedplace_reserved_package"]
    assert status["errors"][0]["location"]["file"] == f"{policies.ns}/p/authz.rego"
    assert "data.system.authz" in status["errors"][0]["message"]
    assert await policy_ids(opa) == sorted([f"{policies.ns}/p/ok.rego", "opa-kube-sync/loaded.rego", "opa-kube-sync/replicated-root.rego"])
    _, body = await opa.query("system/authz/allow")
    assert "result" not in body, "data.system.authz must stay undefined"


async def test_unreadable_package_is_not_sent_to_opa(opa, policies, start_sync):
    """A package clause the lexer cannot read with certainty is refused rather than guessed."""
    await policies.put("p", {"odd.rego": 'package data["sys\\x74em"]\n\nallow if true\n'})
    await start_sync()
    status = await eventually(lambda: policies.status_is("p", "error"), what="refused")
    assert status["errors"][0]["code"] == "fedplace_unreadable_package"
    assert f"{policies.ns}/p/odd.rego" not in await policy_ids(opa)


async def test_package_data_system_is_data_data_system_and_loads(opa, policies, start_sync):
    """``package data.system.x`` is ``data.data.system.x`` for OPA — not reserved."""
    await policies.put("p", {"x.rego": "package data.system.x\n\ny := 1\n"})
    await start_sync()
    assert await eventually(lambda: policies.status_is("p", "ok"), what="loaded")
    _, body = await opa.query("data/system/x/y")
    assert body["result"] == 1
    _, body = await opa.query("system/x/y")
    assert "result" not in body


# -- 2: limits before OPA sees a module; one outstanding write; OPA answering in time --------------------


def rules(n: int, prefix: str = "r") -> str:
    return "".join(f"{prefix}{i} := {i}\n" for i in range(n))


async def test_limits_are_checked_before_opa_sees_the_module(opa, policies, start_sync):
    await policies.put("small", {"a.rego": "package fedtest.a\n\n" + rules(30)})
    await policies.put("many", {"m.rego": "package fedtest.m\n\n" + rules(60)})
    await policies.put("big", {"b.rego": "package fedtest.b\n\n# " + "x" * 5000 + "\nx := 1\n"})
    await start_sync("--policy-max-module-rules", "50", "--policy-max-module-bytes", "4096",
                     "--policy-max-total-rules", "70")
    many = await eventually(lambda: policies.status_is("many", "error"), what="too many rules")
    assert many["errors"][0]["code"] == "fedplace_too_many_rules" and "60 rules" in many["errors"][0]["message"]
    big = await eventually(lambda: policies.status_is("big", "error"), what="too large")
    assert big["errors"][0]["code"] == "fedplace_module_too_large"
    assert await eventually(lambda: policies.status_is("small", "ok"), what="small loaded")
    # 30 loaded + 45 more would exceed the namespace's 70.
    await policies.put("more", {"c.rego": "package fedtest.c\n\n" + rules(45)})
    more = await eventually(lambda: policies.status_is("more", "error"), what="total exceeded")
    assert more["errors"][0]["code"] == "fedplace_too_many_rules_total"
    ids = await policy_ids(opa)
    assert f"{policies.ns}/small/a.rego" in ids
    assert not {f"{policies.ns}/many/m.rego", f"{policies.ns}/big/b.rego", f"{policies.ns}/more/c.rego"} & set(ids)
    # Room again once the small module goes: the total is re-checked.
    await kube_json(policies.api, "DELETE", policies.path("small"))
    assert await eventually(lambda: policies.status_is("more", "ok"), 15, "loaded once there is room")


async def test_rules_whose_reference_goes_on_after_a_variable_count_too(opa, policies, start_sync):
    """``q.r[x].t := …`` is a rule to OPA (defining ``q.r.<x>.t``): the rule limit counts
    it, so a module of such rules cannot slip past the limit and jam OPA."""
    many = "".join(f'q{i}.r[x].t := {i} if x := "k"\n' for i in range(60))
    await policies.put("refs", {"r.rego": "package fedtest.refs\n\n" + many})
    await policies.put("few", {"f.rego": "package fedtest.few\n\n" + many.split("\n", 1)[0] + "\n"})
    await start_sync("--policy-max-module-rules", "50")
    status = await eventually(lambda: policies.status_is("refs", "error"), what="too many rules")
    assert status["errors"][0]["code"] == "fedplace_too_many_rules" and "60 rules" in status["errors"][0]["message"]
    assert await eventually(lambda: policies.status_is("few", "ok"), what="one such rule loaded")
    assert (await result(opa, "fedtest/few/q0/r/k/t")) == 0  # what OPA makes of it


async def test_the_issues_jamming_configmap_is_refused_by_default(opa, policies, start_sync):
    """One valid 858 KB ConfigMap of 55,000 rules must not jam OPA for good (the same
    size and rule count here; an API server stores at most 1 MiB per object)."""
    jam = "package fedtest.jam\n\n" + rules(55_000)
    assert 850_000 < len(jam.encode()) < 860_000
    await policies.put("jam", {"jam.rego": jam})
    await start_sync()
    status = await eventually(lambda: policies.status_is("jam", "error"), what="refused by default")
    assert status["errors"][0]["code"] == "fedplace_module_too_large"
    assert f"{policies.ns}/jam/jam.rego" not in await policy_ids(opa)


async def test_slow_opa_one_write_per_module_not_ready_metric_and_event(opa, opa_proxy, policies, start_sync):
    """A write OPA takes longer than the timeout for is never sent again while OPA
    works on it; /readyz, fedplace_sync_opa_responsive and an Event say OPA is not answering."""
    await policies.put("p", {"a.rego": "package fedtest.slow\n\nx := 1\n"})
    svc = await start_sync("--opa-timeout", "0.5", opa=opa_proxy)
    assert await eventually(lambda: policies.status_is("p", "ok"), what="loaded")
    await opa_proxy.clear_faults()  # forget the request counts of the start
    await opa_proxy.set_faults({"latency": 2.5})
    await policies.put("p", {"a.rego": "package fedtest.slow\n\nx := 2\n"})

    async def not_ready() -> bool:
        status, text = await get(f"http://127.0.0.1:{svc.port}/readyz")
        return status == 503 and "not answering in time" in text

    await eventually(not_ready, 10, "/readyz to say OPA is not answering in time")
    _, metrics = await get(f"http://127.0.0.1:{svc.port}/metrics")
    assert "fedplace_sync_opa_responsive 0.0" in metrics
    assert await eventually(lambda: policies.events("PolicyEngineNotResponding", "p"), 10, "an Event on the ConfigMap")
    await asyncio.sleep(4)  # several timeouts' worth: a client that re-sends would have sent again by now
    faults = await opa_proxy.faults()
    puts = {k: v for k, v in faults["max_in_flight"].items() if k.startswith("PUT /v1/policies/")}
    assert puts == {f"PUT /v1/policies/{policies.ns}/p/a.rego": 1}, puts

    await opa_proxy.set_faults({"latency": 0})
    await eventually(lambda: _eq(result(opa, "fedtest/slow/x"), 2), 15, "the new version loaded")
    await eventually(lambda: _true(svc.is_ready()), 15, "ready again once OPA answers in time")
    _, metrics = await get(f"http://127.0.0.1:{svc.port}/metrics")
    assert "fedplace_sync_opa_responsive 1.0" in metrics
    assert (await policies.status("p")) == {"status": "ok"}


async def _eq(awaitable: Awaitable[Any], value: Any) -> bool:
    return (await awaitable) == value


async def result(opa: Any, path: str) -> Any:
    _, body = await opa.query(path, {})
    return (body or {}).get("result")


# -- 3: the status annotation is bounded and always written --------------------------------------------


async def test_huge_opa_error_still_gives_a_bounded_status_and_the_full_first_error_in_an_event(
        opa, policies, start_sync):
    """OPA quotes the offending line: a long one must not push the status annotation past the
    API server's 256 KiB (422), which would leave a ConfigMap that was ok saying ok."""
    await policies.put("p", {"a.rego": "package fedtest.long\n\nx := 1\n"})
    await start_sync("--policy-max-module-bytes", "1000000")
    assert await eventually(lambda: policies.status_is("p", "ok"), what="ok first")
    long_line = "x := [" + ", ".join(f'"{i:06d}"' for i in range(40_000)) + " ]]"  # ~400 KB, a parse error
    await policies.put("p", {"a.rego": "package fedtest.long\n\n" + long_line + "\n"})
    status = await eventually(lambda: policies.status_is("p", "error"), 15, "the error status written")
    raw = await policies.raw_status("p")
    assert raw is not None and len(raw.encode()) <= MAX_STATUS_BYTES
    err = status["errors"][0]
    assert err["code"] == "rego_parse_error"
    assert err["location"]["file"] == f"{policies.ns}/p/a.rego" and err["location"]["row"] == 3
    events = await eventually(lambda: policies.events("PolicyLoadFailed", "p"), what="a PolicyLoadFailed Event")
    assert "rego_parse_error at " + f"{policies.ns}/p/a.rego:3" in events[0]["message"]


async def test_status_write_refused_by_the_api_server_is_retried(kube_proxy, opa, policies, start_sync):
    """Always written: a status PATCH the API server fails (503) is repeated, not forgotten."""
    await policies.put("p", {"a.rego": "package fedtest.st\n\nx := 1\n"})
    await start_sync(kube=kube_proxy)
    assert await eventually(lambda: policies.status_is("p", "ok"), what="ok")
    await kube_proxy.set_faults({"fail": {"path": policies.path("p"), "method": "PATCH", "status": 503, "count": 3}})
    await policies.put("p", {"a.rego": "package fedtest.st\n\nx := \n"})
    assert await eventually(lambda: policies.status_is("p", "error"), 15, "the status written after the 503s")
    assert (await kube_proxy.admin("GET", "faults"))["rules"][0]["count"] == 0  # after every 503


# -- 4: conflicts across ConfigMaps ------------------------------------------------------------------------


async def test_evaluation_conflict_names_the_other_configmap_in_both_statuses(opa, policies, start_sync):
    """``allow := true`` and ``allow := false`` in two ConfigMaps are not both ok: a conflict is reported."""
    await policies.put("team-a", {"a.rego": "package fedtest.shared\n\nallow := true\n"})
    await start_sync()
    assert await eventually(lambda: policies.status_is("team-a", "ok"), what="team-a ok")
    await policies.put("team-b", {"b.rego": "package fedtest.shared\n\nallow := false\n"})
    a = await eventually(lambda: policies.status_is("team-a", "error"), what="team-a names the conflict")
    b = await eventually(lambda: policies.status_is("team-b", "error"), what="team-b names the conflict")
    assert a["errors"][0]["code"] == b["errors"][0]["code"] == "fedplace_rule_conflict"
    assert a["errors"][0]["conflicts_with"] == ["team-b"] and b["errors"][0]["conflicts_with"] == ["team-a"]
    assert "data.fedtest.shared.allow" in a["errors"][0]["message"]
    assert await eventually(lambda: policies.events("PolicyConflict", "team-a"), what="an Event on team-a")
    await policies.put("team-b", {"b.rego": "package fedtest.shared\n\nallow := true\n"})
    assert await eventually(lambda: policies.status_is("team-a", "ok"), what="team-a ok once they agree")
    assert await eventually(lambda: policies.status_is("team-b", "ok"), what="team-b ok once they agree")


async def test_compile_time_conflict_is_refused_and_names_the_other_configmap(opa, policies, start_sync):
    """Where OPA's compiler can tell (a function and a rule of one name), the module is refused
    before it loads and its status names the ConfigMap it conflicts with."""
    await policies.put("team-a", {"a.rego": "package fedtest.fn\n\nf(x) := 1 if x\n"})
    await start_sync()
    assert await eventually(lambda: policies.status_is("team-a", "ok"), what="team-a ok")
    await policies.put("team-b", {"b.rego": "package fedtest.fn\n\nf := 2\n"})
    b = await eventually(lambda: policies.status_is("team-b", "error"), what="team-b refused")
    assert b["errors"][0]["conflicts_with"] == ["team-a"]
    assert "ConfigMap team-a" in b["errors"][0]["message"]
    assert (await policies.status("team-a")) == {"status": "ok"}
    assert f"{policies.ns}/team-b/b.rego" not in await policy_ids(opa)


async def test_a_rule_set_breaking_the_placement_contract_is_named_on_its_status(opa, policies, start_sync):
    """A placement rule set of the wrong shape stays loaded (the placement library denies the
    objects it applies to) and its ConfigMap's status warns, naming the rule and its row: a
    rule that is not a partial set (from the text), and a requirement of the wrong shape for
    every object (from the library, evaluated without input)."""
    library = (REPO / "policies" / "federation" / "contract.rego").read_text()
    await policies.put("placement-library", {"contract.rego": library})
    await policies.put("rules-odd", {"odd.rego": "package fedplace.rules.odd\n\n# one rule\nrequire := {\"id\": 1}\n"})
    await policies.put("rules-shape", {"shape.rego": "package fedplace.rules.shape\n\n"
                                                     "require contains {\"id\": \"gpu\", \"cluster\": {\"label\": \"gpu\"}}\n"})
    await start_sync()

    async def warned(name: str) -> dict[str, Any] | None:
        status = await policies.status(name)
        return status if status is not None and status.get("warnings") else None

    odd = await eventually(lambda: warned("rules-odd"), what="rules-odd warned")
    assert odd["status"] == "ok"
    found = [w for w in odd["warnings"] if w["code"] == "fedplace_rules_contract"]
    assert {"location": {"file": f"{policies.ns}/rules-odd/odd.rego", "row": 4, "col": 1},
            "message": "require must be a partial set rule (`require contains ... if { ... }`), not a complete rule",
            "code": "fedplace_rules_contract"} in found
    assert all(w["location"]["file"] == f"{policies.ns}/rules-odd/odd.rego" for w in found)
    shape = await eventually(lambda: warned("rules-shape"), what="rules-shape warned")
    (w,) = [w for w in shape["warnings"] if w["code"] == "fedplace_rules_contract"]
    assert "placement rule set shape" in w["message"] and "exactly one operator" in w["message"]
    assert f"{policies.ns}/rules-shape/shape.rego" in await policy_ids(opa)
    assert (await policies.status("placement-library")) == {"status": "ok"}
    await policies.put("rules-shape", {"shape.rego": "package fedplace.rules.shape\n\n"
                                                     "require contains {\"id\": \"gpu\", "
                                                     "\"cluster\": {\"label\": \"gpu\", \"exists\": true}}\n"})

    async def mended() -> bool:
        return await policies.status("rules-shape") == {"status": "ok"}

    assert await eventually(mended, what="rules-shape without warnings once mended")


# -- 5: binaryData -----------------------------------------------------------------------------------------


async def test_binary_data_only_configmap_is_an_error_not_ok(opa, policies, start_sync):
    """A binaryData-only ConfigMap loads nothing (yet the webhook counts it as "policies exist"
    and fails closed): its status is an error saying why nothing is loaded."""
    await policies.put("bin", binary={"policy.rego": "cGFja2FnZSB4"})
    await start_sync()
    status = await eventually(lambda: policies.status_is("bin", "error"), what="binaryData reported")
    assert status["errors"][0]["code"] == "fedplace_binary_data"
    assert status["errors"][0]["location"]["file"] == f"{policies.ns}/bin/policy.rego"
