"""check_loaded() and loading(): whether a decision comes from the whole policy set (pure),
and the webhook failing closed on a partial one (over HTTP, against the session's OPA)."""

from __future__ import annotations

from typing import Any

import pytest

from fedplace.admission.decision import REASON_ENGINE, decide, loading
from fedplace.admission.loading import LOADED_KEY, check_loaded
from fedplace.common.kube_client import kube_json
from fedplace.common.opa_query import OpaOutcome
from fedplace.sync import loaded as sync_loaded
from tests.admission.conftest import Harness, eventually, replicaset
from tests.admission.test_decide import request
from tests.metrics import metric

NS = "policies"
FULL = {"errors": [], "annotations": {"a": "1"}, LOADED_KEY: {"configmaps": {NS: ["lib", "placement"]},
                                                              "resources": ["clusters"]}}


def test_the_sync_writes_what_the_webhook_reads() -> None:
    assert sync_loaded.LOADED_KEY == LOADED_KEY
    doc = sync_loaded.record_document({NS: {"placement", "lib"}, "other": set()}, {"clusters"})
    assert doc == {"configmaps": {NS: ["lib", "placement"], "other": []}, "resources": ["clusters"]}
    check = check_loaded(OpaOutcome.ok({"errors": [], LOADED_KEY: doc}), NS, ["lib", "placement"])
    assert check.loading == ""


def test_a_complete_record_passes_the_decision_on_without_it() -> None:
    check = check_loaded(OpaOutcome.ok(FULL, attempts=2, query_path="p"), NS, ["placement", "lib"])
    assert check.loading == ""
    assert check.outcome == OpaOutcome.ok({"errors": [], "annotations": {"a": "1"}}, attempts=2, query_path="p")
    # a ConfigMap the record names but the webhook no longer sees (deleted) is fine
    assert check_loaded(OpaOutcome.ok(FULL), NS, ["lib"]).loading == ""


@pytest.mark.parametrize("result, names, words", [
    ({"errors": [], "annotations": {}}, ["lib"], "carries no record of a complete load"),
    ({"errors": [], LOADED_KEY: {"configmaps": {NS: ["lib"]}}}, ["lib", "placement"],
     "policy ConfigMap(s) placement of policies not loaded yet"),
    ({"errors": [], LOADED_KEY: {"configmaps": {"elsewhere": ["lib"]}}}, ["lib"], "ConfigMap(s) lib of policies"),
    ({"errors": [], LOADED_KEY: {"configmaps": {NS: [f"c{i}" for i in range(3)]}}}, [f"c{i}" for i in range(12)],
     "c10, c11, c3, c4, c5 and 4 more"),
    ({"errors": [], LOADED_KEY: "yes"}, ["lib"], "record of a complete load is malformed"),
    ({"errors": [], LOADED_KEY: {"configmaps": {NS: "lib"}}}, ["lib"], "malformed"),
    # a partial set that already denies: still "loading", not the partial verdict
    ({"errors": ["no cluster satisfies"]}, ["lib"], "carries no record"),
])
def test_a_missing_or_short_record_is_loading(result: dict[str, Any], names: list[str], words: str) -> None:
    check = check_loaded(OpaOutcome.ok(result), NS, names)
    assert check.loading.startswith("policies are loading into OPA: ")
    assert words in check.loading
    decision = loading(check.loading)
    assert not decision.allowed and decision.outcome == "fail_closed" and decision.cause == "loading"
    assert decision.code == 403 and decision.event_reason == REASON_ENGINE
    assert decision.message == f"placement policy could not be evaluated (failing closed): {check.loading}"


def test_errors_undefined_and_non_objects_are_left_to_decide() -> None:
    for outcome in (OpaOutcome.failed("unavailable", "refused"), OpaOutcome.undefined(), OpaOutcome.ok([1])):
        assert check_loaded(outcome, NS, ["lib"]).outcome is outcome
        assert check_loaded(outcome, NS, ["lib"]).loading == ""


def test_a_decision_holding_only_the_record_is_undefined() -> None:
    """No policy defines the package, only the sync's rule: as before the rule existed."""
    check = check_loaded(OpaOutcome.ok({LOADED_KEY: FULL[LOADED_KEY]}, attempts=3, query_path="p"), NS, ["lib"])
    assert check.loading == "" and check.outcome == OpaOutcome.undefined(3, "p")
    decision = decide(request(), True, check.outcome)
    assert decision.cause == "undefined" and not decision.allowed


# -- the webhook, over HTTP -----------------------------------------------------------------


async def test_the_webhook_fails_closed_until_the_record_names_every_configmap(harness: Harness) -> None:
    h = harness
    await h.put_policy('annotations := {"fedplace.io/placed": "yes"}\n')
    await h.add_policy_configmap("placement")

    async def admit() -> dict[str, Any]:
        return await h.admit(replicaset())

    assert (await admit())["allowed"] is True

    # A ConfigMap the webhook sees and the record does not name (the sync has not loaded it): loading.
    before = metric("fedplace_admission_fail_closed_total", cause="loading")
    await kube_json(h.api, "POST", f"/api/v1/namespaces/{h.policy_namespace}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}, "data": {}})

    async def seen() -> bool:
        return h.webhook.policies is not None and "late" in h.webhook.policies.names()
    await eventually(seen, 5, "the webhook to see ConfigMap late")
    resp = await admit()
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert resp["status"]["message"] == ("placement policy could not be evaluated (failing closed): policies are "
                                         f"loading into OPA: policy ConfigMap(s) late of {h.policy_namespace} not "
                                         "loaded yet")
    assert metric("fedplace_admission_fail_closed_total", cause="loading") == before + 1

    # The record gone (what an OPA restart does): loading, whatever the decision says.
    await h.opa_client.delete_data(["fedplace_sync"])
    resp = await admit()
    assert resp["allowed"] is False and "carries no record of a complete load" in resp["status"]["message"]

    # Written again, naming both: the decision is applied.
    h.configmaps.add("late")
    await h.mark_loaded()
    resp = await admit()
    assert resp["allowed"] is True and "patch" in resp
