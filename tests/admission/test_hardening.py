"""fedplace-admission: bad requests never get a 500, and reading one is bounded.

Over real HTTP (raw sockets where the client must misbehave) against the
webhook in-process, the devstack engine and API server. Every case would have
given a 500 with a traceback, an open connection for good, or a fail-closed
403 with a PolicyEngineUnavailable Event before the fix.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import time
from typing import Any

import pytest

from tests.admission.conftest import Harness, eventually, replicaset, review
from tests.admission.test_webhook import Delta

ANNOTATE = 'annotations := {"fedplace.io/placed": "yes"}\n'


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


def host_port(h: Harness) -> tuple[str, int]:
    return "127.0.0.1", h.webhook.port


async def policies_on(h: Harness) -> None:
    await h.put_policy(ANNOTATE)
    await h.add_policy_configmap()


# -- 6: 500 with a traceback instead of 400 ----------------------------------------------------------------


@pytest.mark.parametrize("depth", [150, 995, 5000])
async def test_deeply_nested_json_is_400(harness: Harness, depth: int, caplog: pytest.LogCaptureFixture) -> None:
    """~1,000 levels made json.loads recurse out (500); the depth is now bounded before parsing."""
    await policies_on(harness)
    d = Delta()
    body = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":' + b"[" * depth + b"]" * depth + b"}"
    status, doc = await harness.post(None, raw=body)
    assert status == 400 and "nested deeper than 100 levels" in doc["error"]
    assert d("fedplace_admission_requests_total", outcome="error") == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("depth", [300, 600, 900])
async def test_deep_object_when_a_patch_is_built_is_400(harness: Harness, depth: int) -> None:
    """Objects nested 500–990 levels passed json.loads and blew the JSON Patch copy (500)."""
    await policies_on(harness)
    obj = replicaset("deep")
    obj["spec"]["template"]["metadata"]["annotations"] = {"x": "y"}
    obj["spec"]["extra"] = nested(depth)
    status, doc = await harness.post(review(obj))
    assert status == 400 and "nested deeper" in doc["error"], doc


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"])
async def test_non_finite_numbers_are_400_not_a_fail_closed_403(harness: Harness, literal: bytes) -> None:
    """NaN/Infinity went to OPA, which refused the input: 403 "policy engine unavailable" + Event."""
    await policies_on(harness)
    d = Delta()
    body = json.dumps(review(replicaset("nan"))).encode().replace(b'"replicas": 2', b'"replicas": ' + literal)
    assert literal in body
    status, doc = await harness.post(None, raw=body)
    assert status == 400 and ("not a JSON number" in doc["error"] or "too large" in doc["error"]), doc
    assert d("fedplace_admission_fail_closed_total", cause="request") == 0


async def test_gzip_content_encoding_with_a_body_that_is_not_gzip_is_400(harness: Harness,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    await policies_on(harness)
    status, doc = await harness.post(None, raw=json.dumps(review(replicaset())).encode(),
                                     headers={"Content-Encoding": "gzip"})
    assert status == 400 and "cannot be read" in doc["error"], doc
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # A real gzip body still works.
    status, doc = await harness.post(None, raw=gzip.compress(json.dumps(review(replicaset())).encode()),
                                     headers={"Content-Encoding": "gzip"})
    assert status == 200 and doc["response"]["allowed"] is True


@pytest.mark.parametrize("encoding", ["compress", "x-gzip", "bogus", "identity, gzip", "gzip, identity", "br", "zstd"])
async def test_a_content_encoding_not_decoded_is_a_json_400(harness: Harness, encoding: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Read as plain before (200); br and zstd got aiohttp's plain-text 400. Now the documented
    JSON error, whichever layer refuses it."""
    await policies_on(harness)
    d = Delta()
    status, doc = await harness.post(None, raw=json.dumps(review(replicaset())).encode(),
                                     headers={"Content-Encoding": encoding})
    assert status == 400 and isinstance(doc, dict) and doc["code"] == 400, doc
    assert "Content-Encoding" in doc["error"] or "content-encoding" in doc["error"], doc
    assert d("fedplace_admission_fail_closed_total", cause="request") == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_identity_content_encoding_is_plain(harness: Harness) -> None:
    await policies_on(harness)
    status, doc = await harness.post(None, raw=json.dumps(review(replicaset())).encode(),
                                     headers={"Content-Encoding": "Identity"})
    assert status == 200 and doc["response"]["allowed"] is True


@pytest.mark.parametrize("limit,pad", [(2048, 4096), (3 * 1024 * 1024, 3 * 1024 * 1024)], ids=["small", "3MiB"])
async def test_a_gzip_body_larger_than_the_limit_once_decoded_is_413(harness: Harness, limit: int, pad: int) -> None:
    """The limit is on the decoded body. A few KiB decoded arrive whole with the head (read
    without arming a timer); 3 MiB decoded from a few KiB of gzip are read in pieces."""
    await policies_on(harness)
    hook = await harness.start_webhook(max_body_bytes=limit) if limit != 3 * 1024 * 1024 else harness.webhook
    doc = review(replicaset())
    doc["request"]["object"]["metadata"]["annotations"] = {"pad": " " * pad}
    raw = gzip.compress(json.dumps(doc).encode())
    assert len(raw) < min(limit, 64 * 1024)
    status, answer = await harness.post(None, raw=raw, url=hook.url, headers={"Content-Encoding": "gzip"})
    assert status == 413 and "exceeds the limit" in answer["error"], answer


# -- 7: reading a request is bounded in time -----------------------------------------------------------------


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> tuple[float, bytes]:
    start = time.monotonic()
    data = b""
    async with asyncio.timeout(seconds):
        while chunk := await reader.read(65536):
            data += chunk
    return time.monotonic() - start, data


async def test_half_sent_request_heads_and_bodies_are_closed(harness: Harness) -> None:
    """200 half-sent requests stayed open 300 s (open files 10 → 210)."""
    hook = await harness.start_webhook(read_timeout=1.0)
    conns = []
    for i in range(20):
        reader, writer = await asyncio.open_connection("127.0.0.1", hook.port)
        if i % 2:
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")  # no end
        else:
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"apiVer")
        await writer.drain()
        conns.append((reader, writer))
    await eventually(lambda: _true(len(hook.runner.server.connections) >= 20), 5, "the connections accepted")
    answers = await asyncio.gather(*(_closed_within(r, 6) for r, _ in conns))
    for i, (took, data) in enumerate(answers):
        assert took < 5
        if i % 2 == 0:
            assert data.startswith(b"HTTP/1.1 408"), data[:80]
    await eventually(lambda: _true(not hook.runner.server.connections), 5, "no connection left open")
    for _, w in conns:
        w.close()


async def test_a_slow_but_steady_head_is_still_cut_off(harness: Harness) -> None:
    """The head deadline runs from its first byte: trickling bytes does not extend it."""
    hook = await harness.start_webhook(read_timeout=1.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", hook.port)
    start = time.monotonic()
    try:
        for ch in b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            writer.write(bytes([ch]))
            await writer.drain()
            await asyncio.sleep(0.1)
            if reader.at_eof():
                break
        else:
            raise AssertionError("the connection was not closed")
    except ConnectionError:
        pass
    assert time.monotonic() - start < 4
    writer.close()


async def test_idle_keep_alive_connection_is_closed_after_the_idle_timeout(harness: Harness) -> None:
    hook = await harness.start_webhook(idle_timeout=1.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", hook.port)
    took, _ = await _closed_within(reader, 6)
    assert took < 5
    writer.close()


async def _true(value: bool) -> bool:
    return value


# -- 9: client errors logged once at WARNING, without a traceback -----------------------------------------


async def test_malformed_http_and_disconnects_are_one_warning_each(harness: Harness,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    d = Delta()
    # A malformed header line: aiohttp answers 400 itself.
    reader, writer = await asyncio.open_connection(*host_port(harness))
    writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nthis is not a header\r\n\r\n")
    await writer.drain()
    _, data = await _closed_within(reader, 5)
    assert data.startswith((b"HTTP/1.1 400", b"HTTP/1.0 400"))
    writer.close()
    # A client that goes away in the middle of its body.
    reader, writer = await asyncio.open_connection(*host_port(harness))
    writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"apiVersion\":")
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.close()
    await eventually(lambda: _true(d("fedplace_admission_requests_total", outcome="aborted") == 1), 5,
                     "the disconnect counted as aborted")
    await asyncio.sleep(0.2)
    assert d("fedplace_admission_bad_http_total") == 1
    assert d("fedplace_admission_requests_total", outcome="error") == 0
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR or (r.exc_info and r.levelno >= logging.INFO)]
    assert not loud, [(r.name, r.getMessage()) for r in loud]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings.count("bad HTTP request") == 1, warnings
    assert warnings.count("client went away before its request was read") == 1, warnings


async def test_a_client_gone_before_the_answer_is_decided_counted_and_quiet(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A client that hangs up while OPA decides still gets its decision counted and logged,
    without an error; the webhook goes on serving."""
    await harness.put_policy(ANNOTATE + "slow if { some i in numbers.range(1, 50000); i < 0 }\n")
    await harness.add_policy_configmap()
    caplog.set_level(logging.INFO)
    d = Delta()
    body = json.dumps(review(replicaset())).encode()
    reader, writer = await asyncio.open_connection(*host_port(harness))
    writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                 % len(body) + body)
    await writer.drain()
    writer.close()  # before the answer: OPA is still evaluating
    await eventually(lambda: _true(d("fedplace_admission_requests_total", outcome="patched") == 1), 5,
                     "the decision counted")
    assert [r for r in caplog.records if r.getMessage() == "admission decision"]
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not loud, [(r.name, r.getMessage()) for r in loud]
    assert d("fedplace_admission_requests_total", outcome="error") == 0
    assert (await harness.admit(replicaset()))["allowed"] is True
