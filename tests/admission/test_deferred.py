"""The bookkeeping of an answer (its metrics and log line) runs after the answer: while the
next request waits for OPA, at a /metrics scrape, at shutdown, or after ``max_delay``."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from fedplace.admission.deferred import Deferred
from fedplace.admission.handler import build_app
from fedplace.common.opa_client import OpaClient, OpaSettings
from tests.admission.conftest import Harness, make_config, replicaset, review
from tests.admission.test_webhook import ALLOW_WITH_ANNOTATION, Delta

# -- the queue ---------------------------------------------------------------------------------


async def test_queued_work_runs_in_order_after_max_delay() -> None:
    deferred = Deferred(max_delay=0.05)
    ran: list[int] = []
    deferred.add(ran.append, 1)
    deferred.add(ran.append, 2)
    await asyncio.sleep(0)
    assert ran == [] and len(deferred) == 2
    await asyncio.sleep(0.3)
    assert ran == [1, 2] and len(deferred) == 0


async def test_a_full_queue_runs_at_the_next_turn_of_the_loop() -> None:
    deferred = Deferred(max_delay=3600, max_items=3)
    ran: list[int] = []
    deferred.add(ran.append, 1)
    deferred.add(ran.append, 2)
    await asyncio.sleep(0)
    assert ran == []
    deferred.add(ran.append, 3)
    await asyncio.sleep(0)
    assert ran == [1, 2, 3] and len(deferred) == 0


async def test_run_while_waiting_runs_the_queue_once_the_current_task_suspends() -> None:
    deferred = Deferred(max_delay=60)
    ran: list[str] = []
    deferred.add(ran.append, "earlier answer")
    deferred.run_while_waiting()
    deferred.run_while_waiting()  # scheduled once
    ran.append("query sent")  # the rest of this task's step runs first
    await asyncio.sleep(0)  # the task suspends: waiting for OPA
    assert ran == ["query sent", "earlier answer"]
    deferred.run_while_waiting()  # nothing queued: nothing to schedule
    await asyncio.sleep(0)
    assert ran == ["query sent", "earlier answer"]


async def test_flush_runs_everything_now_and_one_failure_loses_nothing_else(caplog: pytest.LogCaptureFixture) -> None:
    deferred = Deferred(max_delay=0.05)
    ran: list[int] = []

    def broken() -> None:
        raise RuntimeError("boom")

    deferred.add(ran.append, 1)
    deferred.add(broken)
    deferred.add(ran.append, 3)
    deferred.flush()
    assert ran == [1, 3]
    failed = [r for r in caplog.records if r.getMessage() == "deferred bookkeeping failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None
    await asyncio.sleep(0.2)  # the timer was cancelled with the flush: nothing runs twice
    assert ran == [1, 3]


# -- in the webhook, over HTTP --------------------------------------------------------------------


class PoliciesExist:
    synced = True

    def policies_exist(self) -> bool:
        return True


async def test_an_answers_metrics_and_log_line_wait_for_the_next_query_a_scrape_or_shutdown(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """With a ``max_delay`` longer than the test, only the three other triggers can run the
    bookkeeping, so each is seen on its own."""
    h = harness
    await h.put_policy(ALLOW_WITH_ANNOTATION)
    caplog.set_level(logging.INFO, logger="fedplace.admission.handler")
    config = make_config(h.opa_url, h.opa_client.settings.token, h.policy_namespace)
    opa = OpaClient(OpaSettings(url=h.opa_url, token=h.opa_client.settings.token, lean_http=True))
    app = build_app(config, opa, PoliciesExist(), deferred=Deferred(max_delay=3600))
    server = TestServer(app)
    await server.start_server()
    d = Delta()
    uids: list[str] = []

    def decision_lines() -> list[str]:
        return [r.uid for r in caplog.records if r.getMessage() == "admission decision"]  # type: ignore[attr-defined]

    async def admit(name: str) -> None:
        doc = review(replicaset(name))
        uids.append(doc["request"]["uid"])
        async with h.session.post(server.make_url("/mutate"), data=json.dumps(doc),
                                  headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
            body: dict[str, Any] = await resp.json()
        assert body["response"]["allowed"] is True and "patch" in body["response"]

    try:
        await admit("first")
        assert d("fedplace_admission_requests_total", outcome="patched") == 0  # queued
        assert decision_lines() == []
        await admit("second")  # while it waited for OPA, the first one's bookkeeping ran
        assert d("fedplace_admission_requests_total", outcome="patched") == 1
        assert decision_lines() == uids[:1]
        async with h.session.get(server.make_url("/metrics")) as resp:  # a scrape counts both
            text = await resp.text()
        assert d("fedplace_admission_requests_total", outcome="patched") == 2
        assert 'fedplace_admission_requests_total{outcome="patched"}' in text
        assert decision_lines() == uids[:2]
        await admit("third")
    finally:
        await server.close()  # shutdown: what is still queued runs
        await opa.close()
    assert d("fedplace_admission_requests_total", outcome="patched") == 3
    assert decision_lines() == uids
