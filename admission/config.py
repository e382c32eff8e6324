"""Configuration of ``fedplace-admission``: a file (YAML or JSON) plus flags.

Pure parsing and validation: :func:`load_config` turns ``argv`` (and the file
named by ``--config``) into an :class:`AdmissionConfig`, or raises
:class:`ConfigError` naming the offending field. Flags override the file.

File format (every key optional; YAML or JSON)::

    listen: 127.0.0.1:8443
    tls:
      cert_file: /tls/tls.crt
      private_key_file: /tls/tls.key
      client_ca_file: /tls/apiserver-ca.crt   # require client certs signed by it
      reload_interval: 10                     # seconds between mtime checks
    kubeconfig: /etc/kubeconfig               # absent: in-cluster config
    policy_namespace: kube-federation-scheduling-policy
    opa:
      url: https://opa.opa.svc:8181           # server root, …/v1, or a full decision URL
      decision_path: /v1/data/io/k8s/federation/admission
      token_file: /var/run/secrets/opa/token  # or token: … (not both)
      ca_file: /tls/opa-ca.crt
      timeout: 2                              # seconds, per attempt
    deadline: 5                               # seconds, for the whole decision
    retry: {initial: 0.05, max: 1.0, jitter: 0.05}
    max_body_bytes: 3145728
    events: {burst: 10, refill_seconds: 10}
    log_level: info
    workers: 1                                # processes on the one port (SO_REUSEPORT)
    event_loop: auto                          # uvloop when installed (it is a dependency), else asyncio
    speedups: [lean-http, first-attempt]      # or none: the library way for each

Speed-ups (each replaces a library's way on the request path; docs/benchmarks.md
has the same-run A/B that keeps it): ``lean-http`` asks OPA through
:mod:`fedplace.common.opa_http` instead of aiohttp's client; ``first-attempt``
makes the first OPA attempt outside tenacity's retry loop
(:func:`fedplace.common.opa_query.query_within_deadline`).

The original proposal's format is accepted too: ``{"EnforceSchedulingPolicy":
{"url": "<full decision URL>", "token": "…"}}``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from fedplace.common.config import (
    ConfigError,
    OpaEndpoint,
    integer,
    opa_section,
    read_config_file,
    retry_section,
    split_opa_url,
)
from fedplace.common.config import number as _number
from fedplace.common.config import only as _only
from fedplace.common.config import readable as _readable
from fedplace.common.config import section as _section
from fedplace.common.config import string as _string
from fedplace.common.eventloop import EVENT_LOOPS
from fedplace.common.retry import Backoff

__all__ = [
    "AdmissionConfig",
    "ConfigError",
    "SPEEDUPS",
    "DEFAULT_DECISION_PATH",
    "DEFAULT_POLICY_NAMESPACE",
    "build_parser",
    "config_from_mapping",
    "load_config",
    "split_opa_url",
]

DEFAULT_DECISION_PATH = "/v1/data/io/k8s/federation/admission"
DEFAULT_POLICY_NAMESPACE = "kube-federation-scheduling-policy"
DEFAULT_LISTEN = "127.0.0.1:8443"
MAX_WEBHOOK_TIMEOUT = 30.0  # admissionregistration's timeoutSeconds upper bound
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
MAX_WORKERS = 64
SPEEDUPS = ("lean-http", "first-attempt")


@dataclass(frozen=True)
class TlsConfig:
    cert_file: str | None = None
    private_key_file: str | None = None
    client_ca_file: str | None = None
    reload_interval: float = 10.0

    @property
    def enabled(self) -> bool:
        return bool(self.cert_file)


@dataclass(frozen=True)
class OpaConfig(OpaEndpoint):
    """The ``opa`` section (:func:`fedplace.common.config.opa_section`), the federation decision by default."""

    decision_path: str = DEFAULT_DECISION_PATH


@dataclass(frozen=True)
class EventsConfig:
    burst: int = 10
    refill_seconds: float = 10.0


@dataclass(frozen=True)
class AdmissionConfig:
    """Every setting of the webhook, validated."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 8443
    tls: TlsConfig = TlsConfig()
    kubeconfig: str | None = None
    policy_namespace: str = DEFAULT_POLICY_NAMESPACE
    opa: OpaConfig = OpaConfig()
    deadline: float = 5.0
    retry: Backoff = Backoff()
    max_body_bytes: int = 3 * 1024 * 1024
    max_json_depth: int = 100
    read_timeout: float = 10.0
    idle_timeout: float = 120.0
    events: EventsConfig = EventsConfig()
    log_level: str = "info"
    shutdown_timeout: float = 15.0
    workers: int = 1
    # "auto" (uvloop when importable, else asyncio's own loop), "uvloop" or "asyncio".
    event_loop: str = "auto"
    # The speed-ups in use (SPEEDUPS); each one left out is done the library's way.
    speedups: frozenset[str] = frozenset(SPEEDUPS)
    # Set for the processes of --workers: several listen on the one port (SO_REUSEPORT).
    reuse_port: bool = False

    @property
    def listen(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"


# -- helpers -------------------------------------------------------------------


def _parse_listen(value: Any) -> tuple[str, int]:
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError("listen", f"{value!r}: expected HOST:PORT")
    host, _, port_s = value.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_s)
    except ValueError as exc:
        raise ConfigError("listen", f"{value!r}: port is not a number") from exc
    if not 0 <= port <= 65535:
        raise ConfigError("listen", f"{value!r}: port out of range")
    return host or "0.0.0.0", port


_TOP = ("listen", "tls", "kubeconfig", "policy_namespace", "opa", "deadline", "retry", "max_body_bytes",
        "max_json_depth", "read_timeout", "idle_timeout", "events", "log_level", "shutdown_timeout",
        "workers", "event_loop", "speedups", "EnforceSchedulingPolicy")


def _from_proposal(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite ``{"EnforceSchedulingPolicy": {"url", "token"}}`` into the ``opa`` section."""
    esp = doc.get("EnforceSchedulingPolicy")
    if not isinstance(esp, Mapping):
        raise ConfigError("EnforceSchedulingPolicy", "must be a mapping with url (and token)")
    _only(esp, ("url", "token"), "EnforceSchedulingPolicy")
    if "opa" in doc:
        raise ConfigError("EnforceSchedulingPolicy", "cannot be combined with an opa section")
    if "url" not in esp:
        raise ConfigError("EnforceSchedulingPolicy.url", "required")
    out = {k: v for k, v in doc.items() if k != "EnforceSchedulingPolicy"}
    out["opa"] = {"url": esp["url"], **({"token": esp["token"]} if esp.get("token") is not None else {})}
    return out


def config_from_mapping(doc: Mapping[str, Any]) -> AdmissionConfig:
    """Validate a configuration document (the file's contents, flags merged in)."""
    if not isinstance(doc, Mapping):
        raise ConfigError("config", "the configuration must be a mapping")
    _only(doc, _TOP, "")
    if "EnforceSchedulingPolicy" in doc:
        doc = _from_proposal(doc)

    host, port = _parse_listen(doc.get("listen", DEFAULT_LISTEN))

    tls_doc = _section(doc, "tls")
    _only(tls_doc, ("cert_file", "private_key_file", "client_ca_file", "reload_interval"), "tls")
    cert = _readable(_string(tls_doc, "cert_file", "tls.cert_file"), "tls.cert_file")
    key = _readable(_string(tls_doc, "private_key_file", "tls.private_key_file"), "tls.private_key_file")
    client_ca = _readable(_string(tls_doc, "client_ca_file", "tls.client_ca_file"), "tls.client_ca_file")
    if bool(cert) != bool(key):
        raise ConfigError("tls.private_key_file" if cert else "tls.cert_file",
                          "tls.cert_file and tls.private_key_file go together")
    if client_ca and not cert:
        raise ConfigError("tls.client_ca_file", "needs tls.cert_file and tls.private_key_file")
    tls = TlsConfig(cert, key, client_ca,
                    _number(tls_doc, "reload_interval", "tls.reload_interval", TlsConfig.reload_interval))

    opa = opa_section(doc, OpaConfig, default_decision_path=DEFAULT_DECISION_PATH,
                      max_timeout=MAX_WEBHOOK_TIMEOUT)

    deadline = _number(doc, "deadline", "deadline", 5.0, maximum=MAX_WEBHOOK_TIMEOUT - 1)

    retry = retry_section(doc)

    max_body = integer(doc, "max_body_bytes", "max_body_bytes", AdmissionConfig.max_body_bytes, minimum=1024)
    max_depth = integer(doc, "max_json_depth", "max_json_depth", AdmissionConfig.max_json_depth, minimum=10, maximum=200)

    events_doc = _section(doc, "events")
    _only(events_doc, ("burst", "refill_seconds"), "events")
    burst = integer(events_doc, "burst", "events.burst", EventsConfig.burst, minimum=1)
    events = EventsConfig(burst, _number(events_doc, "refill_seconds", "events.refill_seconds",
                                         EventsConfig.refill_seconds))

    log_level = doc.get("log_level", "info")
    if not isinstance(log_level, str) or log_level.lower() not in LOG_LEVELS:
        raise ConfigError("log_level", f"{log_level!r}: expected one of {', '.join(LOG_LEVELS)}")

    workers = integer(doc, "workers", "workers", AdmissionConfig.workers, minimum=1, maximum=MAX_WORKERS)

    event_loop = doc.get("event_loop", AdmissionConfig.event_loop)
    if event_loop not in EVENT_LOOPS:
        raise ConfigError("event_loop", f"{event_loop!r}: expected one of {', '.join(EVENT_LOOPS)}")

    speedups = _speedups(doc.get("speedups", list(SPEEDUPS)))

    namespace = _string(doc, "policy_namespace", "policy_namespace", DEFAULT_POLICY_NAMESPACE)
    if not namespace:
        raise ConfigError("policy_namespace", "must not be empty")

    return AdmissionConfig(
        listen_host=host,
        listen_port=port,
        tls=tls,
        kubeconfig=_string(doc, "kubeconfig", "kubeconfig"),
        policy_namespace=namespace,
        opa=opa,
        deadline=deadline,
        retry=retry,
        max_body_bytes=max_body,
        max_json_depth=max_depth,
        read_timeout=_number(doc, "read_timeout", "read_timeout", AdmissionConfig.read_timeout, maximum=60),
        idle_timeout=_number(doc, "idle_timeout", "idle_timeout", AdmissionConfig.idle_timeout),
        events=events,
        log_level=log_level.lower(),
        shutdown_timeout=_number(doc, "shutdown_timeout", "shutdown_timeout", AdmissionConfig.shutdown_timeout),
        workers=workers,
        event_loop=event_loop,
        speedups=speedups,
    )


def _speedups(value: Any) -> frozenset[str]:
    """``speedups``: a list of SPEEDUPS (or a comma-separated string, the flag's form); "none" or []: none."""
    if isinstance(value, str):
        value = [] if value.strip() == "none" else [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("speedups", f"{value!r}: expected a list of {', '.join(SPEEDUPS)} (or none)")
    unknown = sorted(set(value) - set(SPEEDUPS))
    if unknown:
        raise ConfigError("speedups", f"{', '.join(unknown)}: not a speed-up (expected {', '.join(SPEEDUPS)} or none)")
    return frozenset(value)


# -- command line ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fedplace-admission",
        description="Mutating admission webhook: placement decided by OPA (fail closed when policies exist).",
    )
    p.add_argument("--config", help="YAML/JSON configuration file; flags override it")
    p.add_argument("--listen", help=f"HOST:PORT to serve on (default {DEFAULT_LISTEN})")
    p.add_argument("--tls-cert-file", help="serving certificate (PEM); without it: plain HTTP, local use only")
    p.add_argument("--tls-private-key-file", help="serving key (PEM)")
    p.add_argument("--client-ca-file", help="require client certificates signed by this CA (the API server's)")
    p.add_argument("--kubeconfig", help="kubeconfig of the federation API server (default: $KUBECONFIG, in-cluster)")
    p.add_argument("--policy-namespace", help=f"namespace of the policy ConfigMaps (default {DEFAULT_POLICY_NAMESPACE})")
    p.add_argument("--opa-url", help="OPA server root, or a full decision URL (…/v1/data/…)")
    p.add_argument("--opa-decision-path", help=f"decision document (default {DEFAULT_DECISION_PATH})")
    p.add_argument("--opa-token-file", help="file holding OPA's bearer token (re-read when it changes)")
    p.add_argument("--opa-ca-file", help="CA bundle verifying OPA's certificate")
    p.add_argument("--opa-timeout", type=float, help="seconds per OPA attempt (default 2)")
    p.add_argument("--deadline", type=float, help="seconds for the whole decision, retries included (default 5)")
    p.add_argument("--log-level", help="debug, info, warning, error (default info)")
    p.add_argument("--workers", type=int, help="processes serving the one port with SO_REUSEPORT (default 1; "
                                                "for pods with more than one core)")
    p.add_argument("--event-loop", choices=EVENT_LOOPS,
                   help="auto (default: uvloop when installed, else asyncio), uvloop, asyncio")
    p.add_argument("--speedups", help=f"comma-separated speed-ups to use (default {','.join(SPEEDUPS)}); "
                                      "none: the library way for each")
    return p


_FLAG_TARGETS: dict[str, tuple[str, ...]] = {
    "listen": ("listen",),
    "tls_cert_file": ("tls", "cert_file"),
    "tls_private_key_file": ("tls", "private_key_file"),
    "client_ca_file": ("tls", "client_ca_file"),
    "kubeconfig": ("kubeconfig",),
    "policy_namespace": ("policy_namespace",),
    "opa_url": ("opa", "url"),
    "opa_decision_path": ("opa", "decision_path"),
    "opa_token_file": ("opa", "token_file"),
    "opa_ca_file": ("opa", "ca_file"),
    "opa_timeout": ("opa", "timeout"),
    "deadline": ("deadline",),
    "log_level": ("log_level",),
    "workers": ("workers",),
    "event_loop": ("event_loop",),
    "speedups": ("speedups",),
}


def load_config(argv: Sequence[str] | None = None) -> AdmissionConfig:
    """Parse flags (and the ``--config`` file they name) into a validated config.

    Raises :class:`ConfigError`; argparse itself exits 2 on unknown flags.
    """
    args = build_parser().parse_args(argv)
    doc: dict[str, Any] = read_config_file(args.config) if args.config else {}
    if "EnforceSchedulingPolicy" in doc:
        doc = _from_proposal(doc)
    for attr, target in _FLAG_TARGETS.items():
        value = getattr(args, attr)
        if value is None:
            continue
        if len(target) == 1:
            doc[target[0]] = value
            continue
        section = doc.get(target[0])
        if section is None:
            section = {}
        if not isinstance(section, dict):
            raise ConfigError(target[0], "must be a mapping")
        section = dict(section)
        if target == ("opa", "token_file"):
            section.pop("token", None)  # the flag replaces a literal token from the file
        if target == ("opa", "url") and "decision_path" in section and split_opa_url(value, "--opa-url")[1]:
            section.pop("decision_path")  # a full decision URL on the command line wins
        section[target[1]] = value
        doc[target[0]] = section
    return config_from_mapping(doc)
