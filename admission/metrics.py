"""Prometheus metrics of the webhook (module level, default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from fedplace.admission.decision import RATCHET_DELETING, RATCHET_PREEXISTING

__all__ = ["BAD_HTTP", "CERT_EXPIRY", "DECISION_SECONDS", "FAIL_CLOSED", "FAIL_OPEN", "OPA_ATTEMPTS", "OPA_RESULTS",
           "OPA_SECONDS", "OPA_SECONDS_BY_RESULT", "OPA_RETRIES", "OUTCOMES", "REQUESTS", "REQUESTS_BY_OUTCOME",
           "TLS_RELOADS", "UPDATE_ERRORS_NOT_ENFORCED"]

OUTCOMES = ("allowed", "patched", "denied", "fail_open", "fail_closed", "error", "aborted")
OPA_RESULTS = ("ok", "undefined", "unavailable", "evaluation", "malformed", "request")

REQUESTS = Counter(
    "fedplace_admission_requests_total",
    "Admission requests by outcome (allowed, patched, denied, fail_open, fail_closed, error: bad input or "
    "internal, aborted: the client went away or was too slow to send its request).",
    ["outcome"],
)
# Each labelled series, resolved once: what every request counts skips the label lookup
# (~1 µs each on the request path).
REQUESTS_BY_OUTCOME = {o: REQUESTS.labels(o) for o in OUTCOMES}

DECISION_SECONDS = Histogram(
    "fedplace_admission_decision_duration_seconds",
    "Time to answer one AdmissionReview, retries included.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
)

OPA_SECONDS = Histogram(
    "fedplace_admission_opa_request_duration_seconds",
    "Latency of one OPA decision attempt, by result (ok, undefined, unavailable, malformed, request).",
    ["result"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
)
OPA_SECONDS_BY_RESULT = {r: OPA_SECONDS.labels(r) for r in OPA_RESULTS}

BAD_HTTP = Counter("fedplace_admission_bad_http_total",
                   "Malformed HTTP requests answered 400 by the HTTP layer before reaching the webhook.")

OPA_ATTEMPTS = Counter("fedplace_admission_opa_attempts_total", "OPA decision attempts (first tries and retries).")
OPA_RETRIES = Counter("fedplace_admission_opa_retries_total", "OPA decision attempts that were retries.")

UPDATE_ERRORS_NOT_ENFORCED = Counter(
    "fedplace_admission_update_errors_not_enforced_total",
    "UPDATEs admitted although the policy reported errors for the new object, by reason: "
    "preexisting_errors (the old object has every one of them), being_deleted (metadata.deletionTimestamp set). "
    "Each error is returned to the client as an AdmissionReview warning.",
    ["reason"],
)
for _r in (RATCHET_PREEXISTING, RATCHET_DELETING):
    UPDATE_ERRORS_NOT_ENFORCED.labels(_r)

FAIL_OPEN = Counter(
    "fedplace_admission_fail_open_total",
    "Requests admitted unchanged without asking OPA because no policy ConfigMaps exist.",
)
FAIL_CLOSED = Counter(
    "fedplace_admission_fail_closed_total",
    "Requests denied because policies exist but no valid decision was obtained, by cause.",
    ["cause"],
)
for _c in ("unavailable", "evaluation", "malformed", "request", "undefined", "invalid_decision", "loading"):
    FAIL_CLOSED.labels(_c)

TLS_RELOADS = Counter("fedplace_admission_tls_reloads_total",
                      "Times the serving certificate, key or client CA was reloaded after its files changed.")

# The notAfter of the serving certificate in use (admission/tls.py; 0 when serving plain HTTP).
# With --workers, the processes share a multiprocess directory: the highest of their values (they
# all serve the same files; max keeps a worker that has not built its context yet from showing 0).
CERT_EXPIRY = Gauge(
    "fedplace_admission_certificate_expiry_timestamp_seconds",
    "Expiry (notAfter, Unix seconds) of the serving certificate in use; 0 without TLS.",
    multiprocess_mode="max",
)
