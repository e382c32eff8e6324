"""Mutating admission webhook dispatch (admission.k8s.io/v1), as kube-apiserver does it.

Contracts
* Configurations are taken from the store (MutatingWebhookConfiguration objects),
  in name order; webhooks in list order; each sees the object as mutated by the
  previous ones. Webhook configuration objects themselves are never sent to webhooks.
* A webhook applies when a rule matches (operations, apiGroups, apiVersions,
  resources incl. ``*``, ``*/*``, ``res/sub``, scope), its namespaceSelector matches
  the labels of the object's namespace (the object itself for a Namespace; always
  for other cluster-scoped objects) and its objectSelector matches the object's
  or the old object's labels.
* Transport: HTTPS, verified against ``clientConfig.caBundle`` (system roots when
  absent). ``clientConfig.url`` is called as is; ``clientConfig.service`` is sent
  to the address configured for it (``ServiceResolver``) with TLS server name
  ``<svc>.<ns>.svc``.
* Call failures (connect error, timeout after ``timeoutSeconds``, non-200, bad
  JSON, uid/apiVersion/kind mismatch, patch without patchType) obey
  failurePolicy: Fail → 500 InternalError ``failed calling webhook "<name>": …``;
  Ignore → skip that webhook.
* Denial → ``admission webhook "<name>" denied the request: <message>`` with the
  response's code (raised to ≥ 400, 400 when absent) and reason.
* ``response.warnings`` (of every webhook called, allowing or denying) reach the client
  as ``Warning: 299 - "<text>"`` headers, in order (:data:`WARNINGS`, collected per request
  by the server's middleware; ``"`` and ``\\`` escaped, control characters as spaces).
* A patched object is decoded and defaulted again before the next webhook sees it.
* Reinvocation as in kube-apiserver: when a webhook changed the object, the
  in-tree mutating plugins run again, then the webhooks with
  ``reinvocationPolicy: IfNeeded`` that saw an older version (once).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import ssl
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp

from . import patching
from .resources import ResourceType
from .selectors import SelectorError, label_selector_from_object, labels_match
from .status import REASONS, ApiError, internal

log = logging.getLogger("devstack.kube.webhooks")


@dataclass
class ServiceResolver:
    """Where to send a ``clientConfig.service`` call: per-service overrides, then a default."""

    default: tuple[str, int] | None = None
    services: dict[str, tuple[str, int]] = field(default_factory=dict)  # "svc.ns" -> (host, port)

    @classmethod
    def parse(cls, specs: list[str]) -> "ServiceResolver":
        """``HOST:PORT`` (every service) or ``svc.ns=HOST:PORT``; raises ValueError."""
        r = cls()
        for spec in specs:
            for item in filter(None, (s.strip() for s in spec.split(","))):
                target = item
                name = None
                if "=" in item:
                    name, target = item.split("=", 1)
                host, sep, port = target.rpartition(":")
                if not sep or not host or not port.isdigit():
                    raise ValueError(f"bad service address {item!r}: want HOST:PORT or svc.ns=HOST:PORT")
                addr = (host.strip("[]"), int(port))
                if name:
                    r.services[name.strip()] = addr
                else:
                    r.default = addr
        return r

    def resolve(self, namespace: str, name: str) -> tuple[str, int] | None:
        return self.services.get(f"{name}.{namespace}") or self.default


@dataclass
class Attributes:
    """What is being admitted."""

    rt: ResourceType
    operation: str  # CREATE | UPDATE | DELETE
    name: str
    namespace: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    dry_run: bool
    sub_resource: str = ""
    options: dict[str, Any] | None = None
    user: dict[str, Any] = field(default_factory=lambda: {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]})


def rule_matches(rule: dict[str, Any], a: Attributes) -> bool:
    ops = rule.get("operations") or []
    if "*" not in ops and a.operation not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a.rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and a.rt.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster" and a.rt.namespaced or scope == "Namespaced" and not a.rt.namespaced:
        return False
    want = f"{a.rt.plural}/{a.sub_resource}" if a.sub_resource else a.rt.plural
    for res in rule.get("resources") or []:
        if res == "*/*" or res == want:
            return True
        r, _, sub = res.partition("/")
        if not a.sub_resource and res == "*":
            return True
        if a.sub_resource and sub and (r in ("*", a.rt.plural)) and (sub in ("*", a.sub_resource)):
            return True
    return False


def webhook_applies(hook: dict[str, Any], a: Attributes, namespace_labels: dict[str, str] | None) -> bool:
    """Rules + namespaceSelector + objectSelector. ``namespace_labels`` None = not namespaced."""
    if not any(rule_matches(r, a) for r in hook.get("rules") or []):
        return False
    try:
        ns_sel = label_selector_from_object(hook.get("namespaceSelector"))
        obj_sel = label_selector_from_object(hook.get("objectSelector"))
    except SelectorError:
        return False
    if ns_sel:
        if a.rt.group == "" and a.rt.plural == "namespaces":
            target = a.obj or a.old or {}
            if not labels_match(ns_sel, (target.get("metadata") or {}).get("labels")):
                return False
        elif a.rt.namespaced and not labels_match(ns_sel, namespace_labels or {}):
            return False
    if obj_sel:
        new_l = ((a.obj or {}).get("metadata") or {}).get("labels")
        old_l = ((a.old or {}).get("metadata") or {}).get("labels")
        if not (labels_match(obj_sel, new_l or {}) and a.obj is not None
                or a.old is not None and labels_match(obj_sel, old_l or {})):
            return False
    return True


# The webhooks' warnings for the request being served (None outside one).
WARNINGS: ContextVar[list[str] | None] = ContextVar("devstack_webhook_warnings", default=None)


def record_warnings(result: dict[str, Any]) -> None:
    """Keep the non-empty string warnings of a webhook's response for the request's answer."""
    sink = WARNINGS.get()
    warnings = result.get("warnings")
    if sink is not None and isinstance(warnings, list):
        sink.extend(w for w in warnings if isinstance(w, str) and w.strip())


def warning_header(text: str) -> str:
    """The ``Warning`` header value kube-apiserver sends for a webhook's warning."""
    clean = "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)
    escaped = clean.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


class CallError(Exception):
    """A webhook call failed; subject to failurePolicy."""


def _review(a: Attributes, obj: dict[str, Any] | None) -> dict[str, Any]:
    gvk = {"group": a.rt.group, "version": a.rt.version, "kind": a.rt.kind}
    gvr = {"group": a.rt.group, "version": a.rt.version, "resource": a.rt.plural}
    req: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "operation": a.operation, "userInfo": a.user,
        "object": obj, "oldObject": a.old, "dryRun": a.dry_run, "options": a.options,
    }
    if a.name:  # omitted when empty (a create with generateName), as kube-apiserver encodes it
        req["name"] = a.name
    if a.sub_resource:
        req["subResource"] = a.sub_resource
        req["requestSubResource"] = a.sub_resource
    if a.namespace:
        req["namespace"] = a.namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


class Dispatcher:
    def __init__(self, resolver: ServiceResolver | None = None) -> None:
        self.resolver = resolver or ServiceResolver()
        self._session: aiohttp.ClientSession | None = None
        self._ssl: dict[str, ssl.SSLContext] = {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _context(self, ca_bundle: str | None) -> ssl.SSLContext:
        key = ca_bundle or ""
        ctx = self._ssl.get(key)
        if ctx is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle).decode()
                except (binascii.Error, UnicodeDecodeError) as exc:
                    raise CallError(f"invalid caBundle: {exc}") from exc
                ctx = ssl.create_default_context(cadata=pem)
            else:
                ctx = ssl.create_default_context()
            self._ssl[key] = ctx
        return ctx

    def _target(self, cc: dict[str, Any]) -> tuple[str, str | None]:
        """(URL to connect to, TLS server name override)."""
        if cc.get("url"):
            return cc["url"], None
        svc = cc.get("service") or {}
        ns, name = svc.get("namespace", ""), svc.get("name", "")
        addr = self.resolver.resolve(ns, name)
        if addr is None:
            raise CallError(f'failed to call webhook: service "{name}.{ns}" has no address configured '
                            "(use --service-address)")
        host = f"[{addr[0]}]" if ":" in addr[0] else addr[0]
        path = svc.get("path") or "/"
        return f"https://{host}:{addr[1]}{path}", f"{name}.{ns}.svc"

    async def _call(self, hook: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
        cc = hook.get("clientConfig") or {}
        url, server_name = self._target(cc)
        ctx = self._context(cc.get("caBundle"))
        timeout = float(hook.get("timeoutSeconds") or 10)
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=False)
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(url, json=review, ssl=ctx, server_hostname=server_name,
                                              headers={"Accept": "application/json"}) as resp:
                    raw = await resp.read()
                    if resp.status != 200:
                        raise CallError(f"failed to call webhook: the server responded with status {resp.status}")
        except TimeoutError as exc:
            raise CallError(f'failed to call webhook: Post "{url}": context deadline exceeded') from exc
        except aiohttp.ClientError as exc:
            raise CallError(f'failed to call webhook: Post "{url}": {exc}') from exc
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise CallError(f"received invalid webhook response: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("response"), dict):
            raise CallError("webhook response was absent")
        if doc.get("apiVersion") != "admission.k8s.io/v1" or doc.get("kind") != "AdmissionReview":
            raise CallError(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
                            f"{doc.get('apiVersion')}, Kind={doc.get('kind')}")
        resp_doc = doc["response"]
        if resp_doc.get("uid") != review["request"]["uid"]:
            raise CallError(f"expected response.uid=\"{review['request']['uid']}\", got \"{resp_doc.get('uid')}\"")
        if resp_doc.get("patch") and resp_doc.get("patchType") != "JSONPatch":
            raise CallError(f"webhook returned response.patch but not response.patchType "
                            f"(got {resp_doc.get('patchType')!r}, want \"JSONPatch\")")
        return resp_doc

    async def admit(self, a: Attributes, configs: list[dict[str, Any]],
                    namespace_labels: Callable[[str], dict[str, str] | None],
                    defaulter: Callable[[dict[str, Any]], None] | None = None,
                    builtin: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """Run matching webhooks; returns the (possibly mutated) object or raises ApiError.

        A patched object is decoded afresh and ``defaulter`` applied to it, as kube-apiserver
        decodes and defaults each webhook's result. When a webhook changed the object,
        ``builtin`` (the in-tree mutating plugins) runs again, then the ``IfNeeded`` webhooks
        whose view is out of date (kube-apiserver's reinvocation)."""
        if a.rt.group == "admissionregistration.k8s.io":
            return a.obj
        state = _Reinvocation()
        obj = await self._pass(a, a.obj, configs, namespace_labels, defaulter, state)
        if state.should_reinvoke and obj is not None:
            if builtin is not None:
                obj = builtin(obj)
            state.reinvoking = True
            obj = await self._pass(a, obj, configs, namespace_labels, defaulter, state)
        return obj

    async def _pass(self, a: Attributes, obj: dict[str, Any] | None, configs: list[dict[str, Any]],
                    namespace_labels: Callable[[str], dict[str, str] | None],
                    defaulter: Callable[[dict[str, Any]], None] | None, state: "_Reinvocation") -> dict[str, Any] | None:
        """One run over the webhooks (``dispatcher.Dispatch``)."""
        if state.reinvoking and obj != state.last_output:
            state.require_reinvoking_previously_invoked()  # the in-tree plugins changed it
        ns_labels = namespace_labels(a.namespace) if a.rt.namespaced and a.namespace else None
        for config in sorted(configs, key=lambda c: c["metadata"]["name"]):
            for hook in config.get("webhooks") or []:
                current = Attributes(a.rt, a.operation, a.name,
                                     a.namespace, obj, a.old, a.dry_run, a.sub_resource, a.options, a.user)
                if not webhook_applies(hook, current, ns_labels):
                    continue
                name = hook.get("name", "")
                uid = (config["metadata"]["name"], name)
                if state.reinvoking and uid not in state.to_reinvoke:
                    continue
                if a.dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
                    raise ApiError(400, f'admission webhook "{name}" does not support dry run', "BadRequest")
                review = _review(current, obj)
                try:
                    result = await self._call(hook, review)
                except CallError as exc:
                    if hook.get("failurePolicy", "Fail") == "Ignore":
                        log.warning("webhook failed, ignored", extra={"webhook": name, "error": str(exc)})
                        continue
                    log.warning("webhook failed", extra={"webhook": name, "error": str(exc)})
                    raise internal(f'failed calling webhook "{name}": {exc}') from exc
                record_warnings(result)
                if not result.get("allowed"):
                    raise denial(name, result.get("status") or {})
                patch = result.get("patch")
                if patch and obj is not None:
                    try:
                        ops = json.loads(base64.b64decode(patch))
                        patched = patching.json_patch(obj, ops)
                    except (ValueError, binascii.Error, patching.PatchDecodeError, patching.PatchApplyError) as exc:
                        raise internal(f'failed calling webhook "{name}": JSON patch failed: {exc}') from exc
                    if not isinstance(patched, dict):
                        raise internal(f'webhook "{name}" patch produced a non-object')
                    patched = json.loads(json.dumps(patched))
                    if defaulter is not None:
                        defaulter(patched)
                    if patched != obj:
                        state.require_reinvoking_previously_invoked()
                        state.should_reinvoke = True
                    obj = patched
                if hook.get("reinvocationPolicy") == "IfNeeded":
                    state.previously_invoked.add(uid)
        state.last_output = obj
        return obj


@dataclass
class _Reinvocation:
    """kube-apiserver's reinvocation context for one request."""

    should_reinvoke: bool = False
    reinvoking: bool = False
    previously_invoked: set[tuple[str, str]] = field(default_factory=set)
    to_reinvoke: set[tuple[str, str]] = field(default_factory=set)
    last_output: Any = None

    def require_reinvoking_previously_invoked(self) -> None:
        self.to_reinvoke |= self.previously_invoked
        self.previously_invoked = set()


def denial(name: str, status: dict[str, Any]) -> ApiError:
    """What the API server answers when webhook ``name`` rejects (webhookerrors.ToStatusErr)."""
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    if code < 400:
        code = 400
    denied = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    reason = status.get("reason") or REASONS.get(code, "BadRequest")
    err = ApiError(code, message, reason, status.get("details"))
    return err
