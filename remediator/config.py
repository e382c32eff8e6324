"""Remediator settings and their command-line flags (added to opa-kube-sync's parser)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from fedplace.common.kube_client import Resource
from fedplace.remediator.leader import MIN_LEASE_DURATION

__all__ = ["MODES", "RemediatorSettings", "add_arguments", "settings_from_args"]

MODES = ("off", "dry-run", "enforce")
DEFAULT_QUERY = "io/k8s/federation/remediation/notifications"


@dataclass
class RemediatorSettings:
    """How and when the remediator patches drifted objects."""

    mode: str = "off"
    resources: list[Resource] = field(default_factory=lambda: [Resource("apps", "v1", "replicasets", True)])
    query_path: str = DEFAULT_QUERY
    interval: float = 300.0
    debounce: float = 0.5
    max_fraction: float = 0.5
    rate: float = 500.0
    concurrency: int = 16
    chunk: int = 250        # objects in a pass's first query; each next one twice as many ...
    max_chunk: int = 2000   # ... up to this many
    patch_attempts: int = 5
    notifications_token_file: str | None = None
    lease_namespace: str = "opa"
    lease_name: str = "fedplace-remediator"
    lease_duration: float = 15.0
    leader_election: bool = True
    identity: str = ""

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def dry_run(self) -> bool:
        return self.mode == "dry-run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("remediation")
    g.add_argument("--remediate", choices=MODES, default="off",
                   help="patch objects whose desired annotations changed: off, dry-run (Events only) or enforce")
    g.add_argument("--remediate-resource", action="append", default=[], metavar="[GROUP/]VERSION/RESOURCE",
                   help="namespaced resource to remediate (repeatable; default apps/v1/replicasets)")
    g.add_argument("--remediate-resource-cluster", action="append", default=[], metavar="[GROUP/]VERSION/RESOURCE",
                   help="cluster-scoped resource to remediate (repeatable)")
    g.add_argument("--remediate-interval", type=float, default=300.0, metavar="SECONDS",
                   help="period of the full remediation pass")
    g.add_argument("--remediate-debounce", type=float, default=0.5, metavar="SECONDS",
                   help="wait this long after a change before a pass, folding bursts into one")
    g.add_argument("--remediate-max-fraction", type=float, default=0.5, metavar="FRACTION",
                   help="abort a pass that would patch more than this share of the objects")
    g.add_argument("--remediate-rate", type=float, default=500.0, metavar="PATCHES_PER_SECOND",
                   help="upper bound on patches sent per second")
    g.add_argument("--remediate-concurrency", type=int, default=16, metavar="PATCHES",
                   help="patches of a pass in flight at once")
    g.add_argument("--remediate-chunk", type=int, default=250, metavar="OBJECTS",
                   help="objects evaluated by a pass's first query; patches start once it is answered, and "
                        "each next query asks for twice as many, up to --remediate-max-chunk")
    g.add_argument("--remediate-max-chunk", type=int, default=2000, metavar="OBJECTS",
                   help="most objects evaluated by one query of a pass")
    g.add_argument("--remediate-query", default=DEFAULT_QUERY, metavar="PATH",
                   help="OPA document (under /v1/data) listing the notifications")
    g.add_argument("--notifications-token-file", metavar="FILE",
                   help="bearer token required by POST /v1/notifications (endpoint disabled without it)")
    g.add_argument("--leader-election", default="true", choices=["true", "false"],
                   help="elect one remediating replica through a coordination.k8s.io Lease")
    g.add_argument("--leader-election-namespace", default="opa", metavar="NAMESPACE")
    g.add_argument("--leader-election-name", default="fedplace-remediator", metavar="NAME")
    g.add_argument("--leader-election-identity", default="", metavar="ID",
                   help="this replica's identity in the Lease (default: hostname-pid)")
    g.add_argument("--leader-election-lease-duration", type=float, default=15.0, metavar="SECONDS",
                   help="the Lease's duration: a dead leader is replaced this long after its last renewal; "
                        "the leader renews every third of it and stops patching two thirds after its last "
                        "successful renewal (at least 1; whole seconds in the Lease, rounded up)")


def settings_from_args(args: argparse.Namespace) -> RemediatorSettings:
    """Build settings from parsed flags; raises ValueError naming the bad flag."""
    resources = [Resource.parse(s, True) for s in args.remediate_resource]
    resources += [Resource.parse(s, False) for s in args.remediate_resource_cluster]
    if not resources:
        resources = [Resource("apps", "v1", "replicasets", True)]
    if not 0.0 < args.remediate_max_fraction <= 1.0:
        raise ValueError("--remediate-max-fraction must be in (0, 1]")
    if args.remediate_rate <= 0:
        raise ValueError("--remediate-rate must be positive")
    if args.remediate_interval <= 0:
        raise ValueError("--remediate-interval must be positive")
    if args.remediate_debounce < 0:
        raise ValueError("--remediate-debounce must not be negative")
    if args.remediate_concurrency < 1:
        raise ValueError("--remediate-concurrency must be at least 1")
    if args.remediate_chunk < 1:
        raise ValueError("--remediate-chunk must be at least 1")
    if args.remediate_max_chunk < args.remediate_chunk:
        raise ValueError("--remediate-max-chunk must not be below --remediate-chunk")
    duration = args.leader_election_lease_duration
    if not duration > 0:  # also NaN
        raise ValueError(f"--leader-election-lease-duration must be positive, not {duration:g}")
    if duration == float("inf"):
        raise ValueError("--leader-election-lease-duration must be a finite number of seconds")
    if duration < MIN_LEASE_DURATION:
        raise ValueError(f"--leader-election-lease-duration must be at least {MIN_LEASE_DURATION:g} s "
                         f"(the Lease's leaseDurationSeconds is a whole number >= 1), not {duration:g}")
    return RemediatorSettings(
        mode=args.remediate,
        resources=resources,
        query_path=args.remediate_query.strip("/"),
        interval=args.remediate_interval,
        debounce=args.remediate_debounce,
        max_fraction=args.remediate_max_fraction,
        rate=args.remediate_rate,
        concurrency=args.remediate_concurrency,
        chunk=args.remediate_chunk,
        max_chunk=args.remediate_max_chunk,
        notifications_token_file=args.notifications_token_file,
        leader_election=args.leader_election == "true",
        lease_namespace=args.leader_election_namespace,
        lease_name=args.leader_election_name,
        lease_duration=duration,
        identity=args.leader_election_identity,
    )
