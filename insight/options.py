"""Flags the ``fedplace`` subcommands share, spelled as the services spell them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from fedplace.common.opa_client import OpaSettings

__all__ = ["DECISION", "DEFAULT_POLICY_NAMESPACE", "add_data_arguments", "add_kube_arguments",
           "add_opa_arguments", "decision_path", "dump", "opa_settings", "read_documents", "split_list"]

DECISION = "io/k8s/federation/admission"
DEFAULT_POLICY_NAMESPACE = "kube-federation-scheduling-policy"


def add_opa_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OPA (the same flags as opa-kube-sync and fedplace-admission)")
    group.add_argument("--opa-url", default="http://127.0.0.1:8181",
                       help="OPA's server root (…/v1 accepted too)")
    group.add_argument("--opa-token-file", help="file holding the bearer token for OPA")
    group.add_argument("--opa-ca-file", help="CA bundle verifying OPA's certificate")
    group.add_argument("--opa-timeout", type=float, default=10.0, help="seconds for OPA's answer")


def opa_settings(args: argparse.Namespace) -> OpaSettings:
    return OpaSettings(url=args.opa_url, token_file=args.opa_token_file, ca_file=args.opa_ca_file,
                       timeout=args.opa_timeout)


def add_kube_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kubernetes API (the same flag as the services)")
    group.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else in-cluster)")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Where opa-kube-sync puts the replicated objects, and which decision to ask."""
    group = parser.add_argument_group("replicated data and the decision")
    group.add_argument("--replicate-path", default="kubernetes",
                       help="root of the replicated data in OPA (opa-kube-sync's --replicate-path)")
    group.add_argument("--clusters-resource", default="clusters", metavar="PLURAL",
                       help="the replicated cluster-scoped resource holding the clusters")
    group.add_argument("--resources", default="replicasets", metavar="PLURAL[,PLURAL…]",
                       help="the replicated namespaced kinds whose placement is shown (default: replicasets)")
    group.add_argument("--resource-bindings", default="resourcebindings", metavar="PLURAL",
                       help="the replicated namespaced Karmada bindings (ResourceBindings; '' for none)")
    group.add_argument("--cluster-resource-bindings", default="clusterresourcebindings", metavar="PLURAL",
                       help="the replicated cluster-scoped Karmada bindings (ClusterResourceBindings; '' for none)")
    group.add_argument("--decision-path", default=DECISION, metavar="PATH",
                       help="the admission decision under /v1/data (the webhook's)")


def decision_path(args: argparse.Namespace) -> list[str]:
    return [p for p in args.decision_path.strip("/").split("/") if p]


def read_documents(path: str) -> Iterator[Any]:
    """Every YAML/JSON document of a file (``-`` is standard input); ``kind: List`` is unrolled."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from doc["items"]
        elif doc is not None:
            yield doc


def dump(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)


def split_list(value: str) -> Sequence[str]:
    return [v.strip() for v in value.split(",") if v.strip()]
