"""The HTTP side of the webhook: ``POST /mutate`` plus the ops routes.

:class:`MutateHandler` reads the body (bounded), parses the AdmissionReview,
asks :class:`~fedplace.admission.presence.PolicyPresence` whether policies exist,
queries OPA when needed, checks that the decision comes from the whole policy set
(:mod:`~fedplace.admission.loading`), calls the pure :func:`~fedplace.admission.decision.decide`
and carries the decision out: a Warning Event (off the request path; none on
dry runs), metrics, one log line and the AdmissionReview answer.

Bad input is answered 400 (413 for an oversized body, 408 for one not sent
within ``read_timeout``) with a JSON ``{"error": …}``, logged once at WARNING
without a traceback; a client that goes away mid-request is logged the same
way and counted as ``aborted``. An unexpected exception becomes a generic 500
through :func:`error_middleware` — never a traceback on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from aiohttp import http_exceptions, web

from fedplace.admission import metrics
from fedplace.admission.config import AdmissionConfig
from fedplace.admission.decision import (
    REASON_EVALUATION,
    Decision,
    OpaOutcome,
    decide,
    failing_configmaps,
    loading,
    needs_old_query,
    needs_query,
)
from fedplace.admission.listener import timing_middleware
from fedplace.admission.loading import check_loaded
from fedplace.admission.query import query_decision
from fedplace.admission.review import AdmissionRequest, BadReview, parse_review, review_response
from fedplace.common.events import EventRecorder, InvolvedObject, involved_object
from fedplace.common.jsonsafe import dumps
from fedplace.common.opa_client import OpaClient
from fedplace.common.ops_http import add_ops_routes
from fedplace.common.retry import Deadline
from fedplace.common.secrets import without_secret_content

__all__ = ["MutateHandler", "PolicyState", "build_app", "error_middleware"]

log = logging.getLogger(__name__)


class PolicyState(Protocol):
    synced: bool
    namespace: str

    def policies_exist(self) -> bool: ...

    def names(self) -> list[str]: ...


def json_answer(doc: Any, status: int = 200) -> web.Response:
    """``web.json_response``, serialised by ``orjson`` (:func:`fedplace.common.jsonsafe.dumps`)."""
    return web.Response(body=dumps(doc), status=status, content_type="application/json", charset="utf-8")


def _error(status: int, message: str) -> web.Response:
    return json_answer({"error": message, "code": status}, status=status)


@web.middleware
async def error_middleware(request: web.Request,
                           handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Last resort: any unexpected exception → 500 with a generic JSON message."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400 and exc.content_type != "application/json":
            return _error(exc.status, exc.reason)
        raise
    except Exception:  # noqa: BLE001
        metrics.REQUESTS.labels("error").inc()
        log.exception("unexpected error handling request", extra={"path": request.path})
        return _error(500, "internal error in the admission webhook")


# What aiohttp decodes (gzip, deflate) or need not (identity, none): one coding, no list.
DECODED_ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})


class ClientGone(Exception):
    """The client closed the connection before its request was read."""


async def read_bounded(request: web.Request, limit: int, timeout: float | None = None) -> bytes:
    """The request body (decoded per ``Content-Encoding``), or :class:`BadReview`: 413 when it
    exceeds ``limit`` bytes (decoded), 408 when it takes longer than ``timeout`` seconds, 400
    when it does not decode (e.g. ``Content-Encoding: gzip`` on a body that is not gzip) or its
    framing is broken; 400 too for a ``Content-Encoding`` other than the ones decoded
    (:data:`DECODED_ENCODINGS`), which the HTTP layer would hand over undecoded;
    :class:`ClientGone` when the client went away."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in DECODED_ENCODINGS:
        raise BadReview(f"Content-Encoding {request.headers['Content-Encoding']!r:.60} is not supported "
                        "(gzip, deflate or identity)", 400)
    if request.content_length is not None and request.content_length > limit:
        raise BadReview(f"request body of {request.content_length} bytes exceeds the limit of {limit} bytes", 413)
    content = request.content
    if content.is_eof() and content.exception() is None:
        # The whole body (decoded) is already here, as an AdmissionReview usually is when its head
        # is read: nothing to wait for, so no timer to arm.
        body = content.read_nowait()
        if len(body) > limit:
            raise BadReview(f"request body exceeds the limit of {limit} bytes", 413)
        return body
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                chunk = await request.content.read(64 * 1024)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise BadReview(f"request body exceeds the limit of {limit} bytes", 413)
                chunks.append(chunk)
    except TimeoutError as exc:
        raise BadReview(f"request body not received within {timeout:g} s", 408) from exc
    except (http_exceptions.HttpProcessingError, web.RequestPayloadError) as exc:
        cause = exc.__cause__ if isinstance(exc, web.RequestPayloadError) and exc.__cause__ else exc
        text = getattr(cause, "message", "") or str(cause) or type(cause).__name__
        raise BadReview(f"request body cannot be read: {text}", 400) from exc
    except ConnectionError as exc:
        raise ClientGone(str(exc) or type(exc).__name__) from exc
    return b"".join(chunks)


async def discard_rest(request: web.Request, max_bytes: int, seconds: float) -> None:
    """Before a 413: read and drop what is left of the body (bounded in bytes and
    time) so the client can read the answer; the answer then closes the connection.

    Closing with unread data would reset the connection under the client's feet;
    leaving it unread on a keep-alive connection would hold up shutdown.
    """
    if request.content_length is None or request.content_length <= max_bytes:
        try:
            async with asyncio.timeout(seconds):
                dropped = 0
                while dropped < max_bytes:
                    chunk = await request.content.read(64 * 1024)
                    if not chunk:
                        break
                    dropped += len(chunk)
        except (asyncio.TimeoutError, ConnectionError):
            pass


@dataclass
class MutateHandler:
    config: AdmissionConfig
    opa: OpaClient
    policies: PolicyState
    recorder: EventRecorder | None = None

    async def handle(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        deadline = Deadline(self.config.deadline)
        try:
            body = await read_bounded(request, self.config.max_body_bytes, self.config.read_timeout)
            review = parse_review(body, self.config.max_json_depth)
        except ClientGone as exc:
            metrics.REQUESTS.labels("aborted").inc()
            log.warning("client went away before its request was read",
                        extra={"remote": request.remote, "error": str(exc)})
            return _error(400, "request not received")
        except BadReview as exc:
            if exc.status == 413:
                await discard_rest(request, 4 * self.config.max_body_bytes, 1.0)
            metrics.REQUESTS.labels("error").inc()
            log.warning("bad admission request", extra={"status": exc.status, "error": exc.message[:500],
                                                         "remote": request.remote})
            resp = _error(exc.status, exc.message)
            if exc.status in (408, 413) or exc.message.startswith("request body cannot be read"):
                resp.force_close()  # Connection: close — the rest of the stream is not a request
            return resp

        policies_exist = self.policies.policies_exist()
        outcome: OpaOutcome | None = None
        old_outcome: OpaOutcome | None = None
        still_loading = ""  # why OPA holds only part of the policy set, if it does
        if needs_query(review, policies_exist):
            assert review.object is not None
            outcome, still_loading = await self._query(review.object, deadline)
            if not still_loading and needs_old_query(review, outcome):  # which errors this update introduced
                assert review.old_object is not None
                old_outcome, still_loading = await self._query(review.old_object, deadline)
        decision = loading(still_loading) if still_loading else decide(review, policies_exist, outcome, old_outcome)
        elapsed = time.monotonic() - started
        self._record_event(review, decision)
        self._report_failing_policies(review, outcome, old_outcome)
        answer = json_answer(review_response(
            review, allowed=decision.allowed, patch=decision.patch, code=decision.code, message=decision.message,
            warnings=list(decision.warnings),
        ))
        self._account(review, decision, outcome, elapsed, old_outcome)
        return answer

    async def _query(self, obj: dict[str, Any], deadline: Deadline) -> tuple[OpaOutcome, str]:
        """The policy's decision for ``obj`` (a Secret without its content: common/secrets.py),
        without the record of a complete load, and why OPA holds only part of the policy set
        ("" when it holds all of it: :mod:`fedplace.admission.loading`)."""
        outcome = await query_decision(
            self.opa, self.config.opa.query_path, without_secret_content(obj),
            deadline=deadline, attempt_timeout=self.config.opa.timeout, backoff=self.config.retry,
            first_attempt_outside="first-attempt" in self.config.speedups,
        )
        check = check_loaded(outcome, self.policies.namespace, self.policies.names())
        return check.outcome, check.loading

    def _account(self, review: AdmissionRequest, decision: Decision, outcome: OpaOutcome | None,
                 elapsed: float, old_outcome: OpaOutcome | None = None) -> None:
        metrics.REQUESTS_BY_OUTCOME[decision.outcome].inc()
        if decision.ratchet:
            metrics.UPDATE_ERRORS_NOT_ENFORCED.labels(decision.ratchet).inc()
        metrics.DECISION_SECONDS.observe(elapsed)
        if decision.outcome == "fail_open":
            metrics.FAIL_OPEN.inc()
        elif decision.outcome == "fail_closed":
            metrics.FAIL_CLOSED.labels(decision.cause or "unavailable").inc()
        fields: dict[str, Any] = {
            "uid": review.uid, "operation": review.operation, "object": review.describe(),
            "outcome": decision.outcome, "allowed": decision.allowed, "dry_run": review.dry_run,
            "patch_ops": len(decision.patch), "elapsed_ms": round(elapsed * 1000, 1),
        }
        if outcome is not None:
            fields["opa_attempts"] = outcome.attempts + (old_outcome.attempts if old_outcome is not None else 0)
        if old_outcome is not None:
            fields["old_object_evaluated"] = old_outcome.error is None and old_outcome.defined
        if decision.ratchet:
            fields["errors_not_enforced"] = decision.ratchet
            fields["warnings"] = len(decision.warnings)
        if not decision.allowed:
            fields["reason"] = decision.message
        level = logging.WARNING if decision.outcome == "fail_closed" else logging.INFO
        log.log(level, "admission decision", extra=fields)

    def _report_failing_policies(self, review: AdmissionRequest, *outcomes: OpaOutcome | None) -> None:
        """A Warning ``PolicyEvaluationError`` on each policy ConfigMap whose module failed to
        evaluate (OPA located the error there), naming the object and OPA's error."""
        if self.recorder is None:
            return
        for outcome in outcomes:
            for name in failing_configmaps(outcome, self.policies.namespace, self.policies.names()):
                assert outcome is not None and outcome.error is not None
                ref = InvolvedObject(api_version="v1", kind="ConfigMap", name=name,
                                     namespace=self.policies.namespace, uid="")
                self.recorder.record(ref, "Warning", REASON_EVALUATION,
                                     f"evaluating {review.describe()} failed (the request was denied): "
                                     f"{outcome.error}")

    def _record_event(self, review: AdmissionRequest, decision: Decision) -> None:
        if self.recorder is None or review.dry_run:
            return
        for event in decision.events:
            self.recorder.record(event.involved, event.type, event.reason, event.message)
        if decision.event_reason is None:
            return
        obj = dict(review.object or review.old_object or {})
        meta = dict(obj.get("metadata") or {})
        if not (meta.get("name") or meta.get("generateName")) and review.name:
            meta["name"] = review.name
        obj["metadata"] = meta
        obj.setdefault("kind", review.kind.get("kind", ""))
        if not obj.get("apiVersion"):
            group, version = review.kind.get("group", ""), review.kind.get("version", "")
            obj["apiVersion"] = f"{group}/{version}" if group else version
        self.recorder.record(involved_object(obj, namespace=review.namespace), "Warning",
                             decision.event_reason, decision.message)


def build_app(config: AdmissionConfig, opa: OpaClient, policies: PolicyState,
              recorder: EventRecorder | None = None) -> web.Application:
    """The aiohttp application: POST /mutate, /healthz, /readyz, /metrics."""
    # The body is read (bounded) by the handler, so the framework limit only guards other routes.
    app = web.Application(middlewares=[timing_middleware, error_middleware], client_max_size=config.max_body_bytes + 1)
    handler = MutateHandler(config, opa, policies, recorder)
    app.router.add_post("/mutate", handler.handle)

    def ready() -> tuple[bool, str]:
        if policies.synced:
            return True, ""
        return False, "policy ConfigMap informer has not synced yet"

    add_ops_routes(app, ready)
    return app
