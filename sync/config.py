"""opa-kube-sync's flags (kube-mgmt compatible where they overlap) and its configuration.

:func:`parse_args` is pure: argv in, :class:`SyncConfig` out, or
``SystemExit(2)`` with a message naming the bad flag (argparse's convention).
The remediator's flags are added by :func:`fedplace.remediator.config.add_arguments`
and turned into :class:`RemediatorSettings` here; every remediated resource
must also be replicated (the remediator reads live objects from the
replication informers' caches).
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass, field

from fedplace.common.kube_client import Resource
from fedplace.common.opa_client import OpaSettings
from fedplace.insight.view import group_by
from fedplace.remediator.config import RemediatorSettings
from fedplace.remediator.config import add_arguments as add_remediator_arguments
from fedplace.remediator.config import settings_from_args as remediator_settings
from fedplace.sync.loaded import render as render_loaded
from fedplace.sync.policy_check import Limits

__all__ = ["DEFAULT_POLICY_NAMESPACE", "SyncConfig", "build_parser", "parse_args"]

DEFAULT_POLICY_NAMESPACE = "kube-federation-scheduling-policy"
GC_THRESHOLD = 50_000  # allocations between two collections of the youngest generation (Python's: 700)


@dataclass
class SyncConfig:
    """Everything the sync needs to run; built by :func:`parse_args`."""

    opa: OpaSettings
    kubeconfig: str | None = None
    resources: list[Resource] = field(default_factory=list)
    replicate_path: str = "kubernetes"
    ignore_namespaces: frozenset[str] = frozenset()
    policy_namespaces: list[str] = field(default_factory=lambda: [DEFAULT_POLICY_NAMESPACE])
    enable_policies: bool = True
    allow_system_packages: bool = False
    policy_limits: Limits = field(default_factory=Limits)
    opa_policy_timeout: float = 600.0
    enable_data: bool = True
    listen: tuple[str, int] = ("127.0.0.1", 8182)
    opa_check_interval: float = 1.0
    admission_package: str = "io.k8s.federation.admission"
    log_level: str = "info"
    remediator: RemediatorSettings = field(default_factory=RemediatorSettings)
    placement_page: bool = False
    placement_page_refresh: float = 10.0
    placement_page_token_file: str | None = None
    placement_page_group_by: str = "region"
    gc_threshold: int = GC_THRESHOLD

    @property
    def remediate(self) -> str:
        """The remediation mode: ``off``, ``dry-run`` or ``enforce``."""
        return self.remediator.mode


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def _loopback(host: str) -> bool:
    """``host`` (of --listen) reaches this machine only: 127.0.0.0/8, ::1 or localhost."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _positive(value: str) -> float:
    f = float(value)
    if f <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value!r}")
    return f


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opa-kube-sync",
                                description="Replicate Kubernetes resources and policy ConfigMaps into OPA.")
    p.add_argument("--opa-url", default="http://localhost:8181/v1",
                   help="OPA's API root (kube-mgmt form http://host:8181/v1; the server root works too)")
    p.add_argument("--opa-token-file", help="bearer token for OPA (re-read when it changes)")
    p.add_argument("--opa-ca-file", help="CA bundle verifying OPA's certificate")
    p.add_argument("--opa-timeout", type=_positive, default=10.0, help="per-request timeout towards OPA (s)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else in-cluster)")
    p.add_argument("--replicate", action="append", default=[], metavar="[GROUP/]VERSION/RESOURCE",
                   help="replicate a namespaced resource (repeatable)")
    p.add_argument("--replicate-cluster", action="append", default=[], metavar="[GROUP/]VERSION/RESOURCE",
                   help="replicate a cluster-scoped resource (repeatable)")
    p.add_argument("--replicate-path", default="kubernetes", help="root of replicated data in OPA")
    p.add_argument("--replicate-ignore-namespaces", default="", metavar="NS[,NS…]",
                   help="namespaces whose objects are not replicated")
    p.add_argument("--policy-namespace", action="append", default=[], metavar="NAMESPACE",
                   help=f"namespace of policy ConfigMaps (repeatable; default {DEFAULT_POLICY_NAMESPACE})")
    p.add_argument("--enable-policies", type=_bool, nargs="?", const=True, default=True, metavar="BOOL")
    p.add_argument("--allow-system-packages", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                   help="load modules declaring package system.* (OPA's own authorization and log masking) "
                        "from policy ConfigMaps; refused by default")
    p.add_argument("--policy-max-module-bytes", type=_positive_int, default=Limits.max_module_bytes, metavar="BYTES",
                   help="largest policy module sent to OPA (refused before OPA sees it)")
    p.add_argument("--policy-max-module-rules", type=_positive_int, default=Limits.max_module_rules, metavar="N",
                   help="most rules in one policy module")
    p.add_argument("--policy-max-total-rules", type=_positive_int, default=Limits.max_total_rules, metavar="N",
                   help="most rules in all modules of a policy namespace together")
    p.add_argument("--opa-policy-timeout", type=_positive, default=600.0, metavar="SECONDS",
                   help="how long to wait for OPA's answer to a policy write; the sync never sends another "
                        "request for that module while it waits (OPA keeps compiling an abandoned one)")
    p.add_argument("--enable-data", type=_bool, nargs="?", const=True, default=True, metavar="BOOL")
    p.add_argument("--listen", type=_listen, default=("127.0.0.1", 8182), metavar="HOST:PORT",
                   help="health, metrics and notifications")
    p.add_argument("--opa-check-interval", type=_positive, default=1.0, metavar="SECONDS",
                   help="how often to check that OPA still holds our state (restart detection)")
    p.add_argument("--admission-package", default="io.k8s.federation.admission", metavar="PACKAGE",
                   help="package of the admission decision (the webhook's decision path, dotted) into which the "
                        "sync loads its record of a complete load (docs/sync.md); \"\" loads none")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--placement-page", type=_bool, nargs="?", const=True, default=False, metavar="BOOL",
                   help="serve the placement page at /placement (and its model at /placement.json) on --listen")
    p.add_argument("--placement-page-refresh", type=_positive, default=10.0, metavar="SECONDS",
                   help="how often the placement page refreshes itself in the browser")
    p.add_argument("--placement-page-token-file", metavar="PATH",
                   help="the placement page and its model answer only requests carrying this file's token "
                        "(Authorization: Bearer, or as the password of HTTP Basic authentication; re-read when "
                        "it changes); required when --listen is not a loopback address")
    p.add_argument("--placement-page-group-by", type=group_by, default="region", metavar="region|provider|label:KEY",
                   help="the cluster property the placement page groups its columns by: region (default), provider, "
                        "or a cluster label (label:KEY)")
    p.add_argument("--gc-threshold", type=_positive_int, default=GC_THRESHOLD, metavar="N",
                   help="allocations between two collections of Python's youngest garbage generation (Python's own "
                        "default: 700). Parsing a large list allocates ~100 containers per object, and the "
                        "default collects every few objects: a third of the sync's CPU at start-up")
    add_remediator_arguments(p)
    return p


def parse_args(argv: list[str] | None = None) -> SyncConfig:
    """Parse flags; exits 2 with a message naming the flag when one is invalid."""
    parser = build_parser()
    args = parser.parse_args(argv)
    resources: list[Resource] = []
    for flag, specs, namespaced in (("--replicate", args.replicate, True),
                                    ("--replicate-cluster", args.replicate_cluster, False)):
        for spec in specs:
            try:
                resources.append(Resource.parse(spec, namespaced))
            except ValueError as exc:
                parser.error(f"{flag}: {exc}")
    plurals = [r.plural for r in resources]
    dupes = sorted({p for p in plurals if plurals.count(p) > 1})
    if dupes:
        parser.error(f"--replicate: {', '.join(dupes)} given more than once (data paths would collide)")
    if not args.replicate_path.strip("/") or "/" in args.replicate_path.strip("/"):
        parser.error("--replicate-path: expected one path segment, e.g. kubernetes")
    if args.admission_package:
        try:
            render_loaded(args.admission_package)
        except ValueError as exc:
            parser.error(f"--admission-package: {exc}")
    if args.placement_page and not args.placement_page_token_file and not _loopback(args.listen[0]):
        parser.error(f"--placement-page on --listen {args.listen[0]}:{args.listen[1]} (not a loopback address) needs "
                     "--placement-page-token-file: the page lists every workload and cluster to anyone reaching it")
    if args.placement_page_token_file is not None and not args.placement_page:
        parser.error("--placement-page-token-file: the placement page is off (add --placement-page)")
    if args.placement_page_token_file is not None and not args.placement_page_token_file.strip():
        parser.error("--placement-page-token-file: expected a file name")
    try:
        remediation = remediator_settings(args)
    except ValueError as exc:
        parser.error(str(exc))
    if remediation.enabled:
        replicated = {(r.group, r.version, r.plural, r.namespaced) for r in resources}
        for r in remediation.resources:
            if (r.group, r.version, r.plural, r.namespaced) not in replicated:
                parser.error(f"--remediate-resource: {r} is not replicated (add it to --replicate/--replicate-cluster)")
    return SyncConfig(
        opa=OpaSettings(url=args.opa_url, token_file=args.opa_token_file, ca_file=args.opa_ca_file,
                        timeout=args.opa_timeout),
        kubeconfig=args.kubeconfig,
        resources=resources,
        replicate_path=args.replicate_path.strip("/"),
        ignore_namespaces=frozenset(n.strip() for n in args.replicate_ignore_namespaces.split(",") if n.strip()),
        policy_namespaces=args.policy_namespace or [DEFAULT_POLICY_NAMESPACE],
        enable_policies=args.enable_policies,
        allow_system_packages=args.allow_system_packages,
        policy_limits=Limits(max_module_bytes=args.policy_max_module_bytes,
                             max_module_rules=args.policy_max_module_rules,
                             max_total_rules=args.policy_max_total_rules),
        opa_policy_timeout=args.opa_policy_timeout,
        enable_data=args.enable_data,
        listen=args.listen,
        opa_check_interval=args.opa_check_interval,
        admission_package=args.admission_package,
        log_level=args.log_level,
        remediator=remediation,
        placement_page=args.placement_page,
        placement_page_refresh=args.placement_page_refresh,
        placement_page_token_file=args.placement_page_token_file,
        placement_page_group_by=args.placement_page_group_by,
        gc_threshold=args.gc_threshold,
    )
