"""A small client for OPA's REST API (v1), with typed errors.

Modelled on kube-mgmt's ``pkg/opa``: one method per operation the services
need, and every failure mapped onto one of a few exception types so callers
decide by type, never by parsing messages:

* :class:`OpaUnavailable` — no usable answer this time: connection refused or
  reset, timeout, 5xx, 429. Worth retrying; carries ``retry_after`` when the
  server sent one.
* :class:`OpaEvaluationError` — a 500 whose ``errors`` are all evaluation
  errors (``eval_builtin_error``, ``eval_type_error``, ``eval_conflict_error``…):
  the policy fails on this input, the same way every time. Not retried;
  ``errors`` is OPA's list, each with its ``location`` (module id and row).
* :class:`OpaMalformedResponse` — the server answered 2xx with a body that is
  not the JSON document the API promises. Not retried.
* :class:`OpaRequestError` — a 4xx other than 429 (bad request, not found,
  unauthorized…). Not retried. :class:`OpaCompileError` is the 400 a policy
  PUT/DELETE gets when modules don't compile; ``errors`` is OPA's list.
* :class:`OpaUndefined` — a query whose document is undefined (200 without
  ``result``); raised only by :meth:`OpaClient.query` with ``undefined_ok=False``.

Bearer tokens come from a literal or a file that is re-read when it changes
(so rotated tokens are picked up); tokens are never logged.

Transport: aiohttp's client, or with ``OpaSettings(lean_http=True)`` (the
webhook) the lean keep-alive pool of :mod:`fedplace.common.opa_http`, cheaper per
request; requests, answers and errors are the same either way.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Sequence
from urllib.parse import quote

import aiohttp

from fedplace.common import jsonsafe
from fedplace.common.opa_http import OpaConnectionPool

__all__ = [
    "OpaClient",
    "OpaCompileError",
    "OpaError",
    "OpaEvaluationError",
    "OpaMalformedResponse",
    "OpaRequestError",
    "OpaSettings",
    "OpaTimeout",
    "OpaUnavailable",
    "OpaUndefined",
    "TokenSource",
    "data_path",
    "normalise_base_url",
]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class OpaError(Exception):
    """Base of every error this client raises."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class OpaUnavailable(OpaError):
    """Transient: connection error, timeout, 5xx or 429. Retry with backoff."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 retry_after: float | None = None, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after
        self.errors = errors or []  # OPA's errors[], if any

    @property
    def answered(self) -> bool:
        """OPA answered (5xx, 429); False when no answer came (timeout, connection error)."""
        return self.status is not None


class OpaTimeout(OpaUnavailable):
    """No answer within the request's timeout (transient, as every :class:`OpaUnavailable`)."""


class OpaEvaluationError(OpaError):
    """OPA evaluated the query and failed (a 500 carrying only ``eval_*`` errors): deterministic
    for this policy set and input, so not retried. ``errors`` is OPA's list."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, status=status, code=code)
        self.errors = errors or []

    @property
    def modules(self) -> tuple[str, ...]:
        """The ids of the policy modules OPA located the errors in, in order, each once."""
        return tuple(dict.fromkeys(str(loc["file"]) for loc in map(_location, self.errors) if loc.get("file")))


def _location(error: dict[str, Any]) -> dict[str, Any]:
    location = error.get("location")
    return location if isinstance(location, dict) else {}


def is_evaluation_failure(status: int, errors: Any) -> bool:
    """Whether an answer is an evaluation failure: 500 with a non-empty ``errors`` list whose
    every code starts with ``eval_`` (anything else in a 5xx is treated as transient)."""
    return (status == 500 and isinstance(errors, list) and bool(errors)
            and all(isinstance(e, dict) and str(e.get("code", "")).startswith("eval_") for e in errors))


def evaluation_error_text(error: dict[str, Any]) -> str:
    """One of OPA's evaluation errors as ``file:row: code: message`` (the location first, as
    ``opa eval`` prints it)."""
    location = _location(error)
    where = f"{location.get('file', '')}:{location.get('row', '')}: " if location.get("file") else ""
    return f"{where}{error.get('code', '')}: {error.get('message', '')}"


class OpaMalformedResponse(OpaError):
    """A 2xx answer whose body is not the JSON the API promises."""


class OpaRequestError(OpaError):
    """A 4xx answer (other than 429): the request itself was refused."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, status=status, code=code)
        self.errors = errors or []


class OpaCompileError(OpaRequestError):
    """A policy write or delete that OPA refused to compile (400 + errors[])."""


class OpaUndefined(OpaError):
    """The queried document is undefined (200 without ``result``)."""


def normalise_base_url(url: str) -> str:
    """Return OPA's server root for ``url``.

    Accepts the server root (``http://opa:8181``), kube-mgmt's API root
    (``http://opa:8181/v1``) or either with a trailing slash.
    """
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


def data_path(segments: Iterable[str]) -> str:
    """URL path under ``/v1/data`` for a sequence of document keys.

    Each key is escaped on its own (``/`` inside a key becomes ``%2F``), so a
    key never splits into two levels.
    """
    return "/".join(quote(str(s), safe="") for s in segments)


class TokenSource:
    """A bearer token from a literal or from a file re-read when it changes."""

    def __init__(self, token: str | None = None, token_file: str | None = None) -> None:
        self._literal = token or None
        self._file = token_file or None
        self._cached: str | None = None
        self._stamp: tuple[float, int] | None = None

    def __repr__(self) -> str:  # never show the token
        return f"TokenSource(file={self._file!r}, literal={'set' if self._literal else 'unset'})"

    def get(self) -> str | None:
        if self._file is None:
            return self._literal
        try:
            st = os.stat(self._file)
        except OSError:
            return self._cached
        stamp = (st.st_mtime, st.st_size)
        if stamp != self._stamp:
            with open(self._file, encoding="utf-8") as fh:
                self._cached = fh.read().strip() or None
            self._stamp = stamp
        return self._cached


@dataclass
class OpaSettings:
    """How to reach OPA. ``url`` is the server root or kube-mgmt's ``…/v1`` form."""

    url: str = "http://127.0.0.1:8181"
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    timeout: float = 5.0
    # The lean keep-alive transport of common.opa_http instead of aiohttp's client (the webhook's:
    # ~0.1 ms less CPU per request). Same requests, answers and errors.
    lean_http: bool = False

    def __repr__(self) -> str:  # never show the token
        return (f"OpaSettings(url={self.url!r}, token={'set' if self.token else 'unset'}, "
                f"token_file={self.token_file!r}, ca_file={self.ca_file!r}, timeout={self.timeout}, "
                f"lean_http={self.lean_http})")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: treat as absent


async def _stream(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` as an asynchronous iterator (aiohttp sends each and waits for the socket to drain)."""
    for chunk in chunks:
        yield chunk


class OpaClient:
    """Asynchronous OPA REST client. Use as an async context manager or call :meth:`close`.

    Answers are asked for uncompressed (no ``Accept-Encoding``, as the lean transport of
    :mod:`fedplace.common.opa_http`): OPA gzips any answer over 1 KiB for a client that accepts
    it, which costs OPA's CPU and the caller's on a sidecar connection where bytes are free."""

    def __init__(self, settings: OpaSettings, session: aiohttp.ClientSession | None = None) -> None:
        self.settings = settings
        self.base_url = normalise_base_url(settings.url)
        self._tokens = TokenSource(settings.token, settings.token_file)
        self._session = session
        self._own_session = session is None
        self._pool: OpaConnectionPool | None = None

    async def __aenter__(self) -> "OpaClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            ssl_ctx: ssl.SSLContext | bool = True
            if self.settings.ca_file:
                ssl_ctx = ssl.create_default_context(cafile=self.settings.ca_file)
            connector = aiohttp.TCPConnector(ssl=ssl_ctx, limit=64)
            self._session = aiohttp.ClientSession(connector=connector, skip_auto_headers=("Accept-Encoding",))
            self._own_session = True
        return self._session

    def _ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.settings.ca_file or None)

    def _get_pool(self) -> OpaConnectionPool:
        loop = asyncio.get_running_loop()
        if self._pool is None or (self._pool.loop is not None and self._pool.loop is not loop):
            if self._pool is not None:
                self._pool.close()
            self._pool = OpaConnectionPool(self.base_url, self._ssl_context(), limit=64)
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._own_session and self._session is not None and not self._session.closed:
            await self._session.close()

    # -- transport -------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        text_body: str | None = None,
        body_chunks: Iterable[bytes] | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        expect: Sequence[int] = (200, 204),
    ) -> tuple[int, Any]:
        """Send one request to ``path`` (starting with ``/v1``); return (status, parsed body).

        Raises the typed errors described in the module docstring. A status in
        ``expect`` is success; its JSON body is parsed (None when empty).
        ``body_chunks`` (an iterable of bytes, consumed once) is sent as it is produced,
        with chunked transfer encoding, so a large body never exists whole.
        """
        hdrs = dict(headers or {})
        token = self._tokens.get()
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        data: Any = None
        if body_chunks is not None:  # streamed (chunked transfer encoding): never whole in memory
            hdrs.setdefault("Content-Type", content_type or "application/json")
            if self.settings.lean_http:  # the lean pool sends bytes only
                data = b"".join(body_chunks)
            else:
                data = _stream(body_chunks)
        elif json_body is not None:
            data = jsonsafe.dumps(json_body)
            hdrs.setdefault("Content-Type", content_type or "application/json")
        elif text_body is not None:
            data = text_body.encode()
            hdrs.setdefault("Content-Type", content_type or "text/plain")
        seconds = timeout if timeout is not None else self.settings.timeout
        try:
            if self.settings.lean_http:
                answer = await self._get_pool().request(method, path, data, hdrs, timeout=seconds)
                raw, status, retry_after = answer.body, answer.status, _retry_after(answer.headers.get("retry-after"))
            else:
                to = aiohttp.ClientTimeout(total=seconds)
                async with self._get_session().request(method, self.base_url + path, data=data, headers=hdrs,
                                                       timeout=to) as resp:
                    raw = await resp.read()
                    status = resp.status
                    retry_after = _retry_after(resp.headers.get("Retry-After"))
        except asyncio.TimeoutError as exc:
            raise OpaTimeout(f"OPA {method} {path}: timed out") from exc
        except (aiohttp.ClientError, OSError) as exc:  # OSError (ConnectionError, ssl.SSLError): lean_http's
            raise OpaUnavailable(f"OPA {method} {path}: {exc.__class__.__name__}: {exc}") from exc

        if status in expect:
            if not raw.strip():
                return status, None
            try:
                return status, jsonsafe.loads(raw)
            except (ValueError, RecursionError) as exc:  # RecursionError: nested beyond Python's parser
                raise OpaMalformedResponse(
                    f"OPA {method} {path}: answer {status} is not JSON", status=status) from exc
        body: Any = None
        try:
            body = json.loads(raw) if raw.strip() else None
        except (ValueError, RecursionError):
            body = None
        code = body.get("code") if isinstance(body, dict) else None
        message = body.get("message") if isinstance(body, dict) else None
        text = f"OPA {method} {path}: {status}" + (f" {code}: {message}" if code or message else "")
        errors = body.get("errors") if isinstance(body, dict) else None
        if is_evaluation_failure(status, errors):
            where = "; ".join(evaluation_error_text(e) for e in errors)
            raise OpaEvaluationError(f"OPA {method} {path.split('?')[0]}: {status} {where}", status=status, code=code,
                                     errors=errors)
        if status in RETRYABLE_STATUS:
            raise OpaUnavailable(text, status=status, code=code, retry_after=retry_after,
                                 errors=errors if isinstance(errors, list) else None)
        if status >= 500 or status < 400:
            raise OpaUnavailable(text, status=status, code=code, errors=errors if isinstance(errors, list) else None)
        cls = OpaCompileError if status == 400 and errors and path.startswith("/v1/policies") else OpaRequestError
        raise cls(text, status=status, code=code, errors=errors if isinstance(errors, list) else None)

    # -- data ------------------------------------------------------------------

    async def query(self, path: str, input: Any = None, *, undefined_ok: bool = True,
                    timeout: float | None = None, strict: bool = False) -> Any:
        """POST ``/v1/data/<path>`` with ``{"input": input}``; return ``result``.

        ``path`` uses ``/`` separators (``io/k8s/federation/admission``). An
        undefined document returns None, or raises :class:`OpaUndefined` when
        ``undefined_ok`` is False. ``strict`` asks with ``?strict-builtin-errors=true``:
        a builtin that fails (``to_number("x")``, an invalid regex) makes the query
        fail (:class:`OpaEvaluationError`) instead of making its expression undefined,
        which would silently change the answer.
        """
        body = {"input": input} if input is not None else {}
        url = "/v1/data/" + path.strip("/") + ("?strict-builtin-errors=true" if strict else "")
        _, doc = await self.request("POST", url, json_body=body, timeout=timeout, expect=(200,))
        if not isinstance(doc, dict):
            raise OpaMalformedResponse(f"OPA query {path}: answer is not a JSON object", status=200)
        if "result" not in doc:
            if undefined_ok:
                return None
            raise OpaUndefined(f"OPA query {path}: undefined", status=200)
        return doc["result"]

    async def get_data(self, segments: Sequence[str]) -> Any:
        """GET a document (None when undefined)."""
        _, doc = await self.request("GET", "/v1/data/" + data_path(segments), expect=(200,))
        if not isinstance(doc, dict):
            raise OpaMalformedResponse("OPA get data: answer is not a JSON object", status=200)
        return doc.get("result")

    async def put_data(self, segments: Sequence[str], value: Any) -> None:
        """PUT a document at ``segments`` (parents are created)."""
        await self.request("PUT", "/v1/data/" + data_path(segments), json_body=value, expect=(200, 204))

    async def put_data_json(self, segments: Sequence[str], chunks: Iterable[bytes]) -> None:
        """PUT the document whose JSON text is the concatenation of ``chunks`` (consumed as
        sent: the body never exists whole in memory)."""
        await self.request("PUT", "/v1/data/" + data_path(segments), body_chunks=chunks, expect=(200, 204))

    async def patch_data(self, segments: Sequence[str], ops: list[dict[str, Any]]) -> None:
        """PATCH with RFC 6902 ops relative to ``segments``."""
        await self.request("PATCH", "/v1/data/" + data_path(segments), json_body=ops,
                           content_type="application/json-patch+json", expect=(200, 204))

    async def delete_data(self, segments: Sequence[str], *, missing_ok: bool = True) -> bool:
        """DELETE a document; returns False when it did not exist (and ``missing_ok``)."""
        try:
            await self.request("DELETE", "/v1/data/" + data_path(segments), expect=(200, 204))
        except OpaRequestError as exc:
            if exc.status == 404 and missing_ok:
                return False
            raise
        return True

    # -- policies --------------------------------------------------------------

    async def put_policy(self, policy_id: str, raw: str, *, timeout: float | None = None) -> None:
        """Create or replace a module; raises :class:`OpaCompileError` on compile errors."""
        await self.request("PUT", "/v1/policies/" + quote(policy_id, safe="/"), text_body=raw,
                           content_type="text/plain", timeout=timeout, expect=(200,))

    async def get_policy(self, policy_id: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """One module (``id``, ``raw``, ``ast``), None when absent."""
        try:
            _, doc = await self.request("GET", "/v1/policies/" + quote(policy_id, safe="/"), timeout=timeout,
                                        expect=(200,))
        except OpaRequestError as exc:
            if exc.status == 404:
                return None
            raise
        result = doc.get("result") if isinstance(doc, dict) else None
        if not isinstance(result, dict):
            raise OpaMalformedResponse("OPA get policy: no result object", status=200)
        return result

    async def delete_policy(self, policy_id: str, *, missing_ok: bool = True, timeout: float | None = None) -> bool:
        """Delete a module; False when absent (and ``missing_ok``)."""
        try:
            await self.request("DELETE", "/v1/policies/" + quote(policy_id, safe="/"), timeout=timeout,
                               expect=(200,))
        except OpaRequestError as exc:
            if exc.status == 404 and missing_ok and not isinstance(exc, OpaCompileError):
                return False
            raise
        return True

    async def list_policies(self) -> list[dict[str, Any]]:
        """Every loaded module (``id``, ``raw``, …)."""
        _, doc = await self.request("GET", "/v1/policies", expect=(200,))
        result = doc.get("result") if isinstance(doc, dict) else None
        if not isinstance(result, list):
            raise OpaMalformedResponse("OPA list policies: no result list", status=200)
        return result

    async def health(self) -> bool:
        """True when ``GET /health`` answers 200."""
        try:
            await self.request("GET", "/health", expect=(200,))
        except OpaError:
            return False
        return True
