"""Flags the ``fedplace`` subcommands share, spelled as kubectl and the services spell them.

* OPA: ``--opa-url``, ``--opa-token-file``, ``--opa-ca-file``, ``--opa-timeout`` (the
  services' flags); the files are checked before anything is asked, the timeout is a
  number of seconds > 0 and finite, as the webhook's configuration wants it.
* The API server: ``--kubeconfig``, ``--context``, ``-n/--namespace`` (default: the
  context's namespace), resolved as kubectl does (:func:`fedplace.common.kube_client.load_client_config`).
* ``-o/--output text|json|yaml`` (``table`` is an old spelling of ``text``).

Help texts here are what users read: plain words, no file names.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import math
import re
import ssl
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO
from urllib.parse import urlsplit

import yaml

from fedplace.common.kube_client import ClientConfig, load_client_config
from fedplace.common.opa_client import OpaSettings
from fedplace.insight.command import UsageError, warn

__all__ = ["DECISION", "DEFAULT_POLICY_NAMESPACE", "MAX_SECONDS", "add_data_arguments", "add_kube_arguments",
           "add_opa_arguments", "add_output_argument", "check_name", "check_namespace", "client_config",
           "decision_path", "dump", "http_url", "namespace_of", "opa_settings", "prepare", "read_documents",
           "read_text", "seconds", "split_list"]

DECISION = "io/k8s/federation/admission"
DEFAULT_POLICY_NAMESPACE = "kube-federation-scheduling-policy"
MAX_SECONDS = 86400.0  # a day: more is a typo, and a loop's timer would not care
FORMATS = ("text", "json", "yaml")

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DURATION = re.compile(r"(?P<number>[0-9.eE+-]+?)(?P<unit>ms|s|m|h)?")
_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


# -- values -----------------------------------------------------------------------------------


def seconds(text: str) -> float:
    """A timeout: seconds (``10``, ``2.5``) or a duration (``500ms``, ``30s``, ``2m``, ``1h``),
    > 0, finite and at most a day (an argparse type)."""
    found = _DURATION.fullmatch(text.strip())
    try:
        value = float(found["number"]) * _UNITS[found["unit"]] if found else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected seconds > 0 and at most {MAX_SECONDS:g} (e.g. 10, 2.5, 30s, 2m), got {text!r}")
    return value


def http_url(text: str) -> str:
    """An http:// or https:// URL with a host (an argparse type)."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 — raises ValueError on a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {text!r}")
    return text


def segment(text: str) -> str:
    """One path segment of OPA's data (an argparse type)."""
    value = text.strip("/")
    if not value or "/" in value:
        raise argparse.ArgumentTypeError(f"expected one path segment such as kubernetes, got {text!r}")
    return value


def data_path(text: str) -> str:
    """A document path under /v1/data, ``a/b/c`` (an argparse type)."""
    if not [p for p in text.strip().strip("/").split("/") if p]:
        raise argparse.ArgumentTypeError(f"expected a path such as io/k8s/federation/admission, got {text!r}")
    return text


def check_namespace(value: str, flag: str = "-n/--namespace") -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise UsageError(f"{flag} {value!r}: not a namespace name (lower-case letters, digits and '-', "
                         "at most 63)")
    return value


def check_name(value: str, what: str = "name") -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise UsageError(f"{what} {value!r}: not an object name (lower-case letters, digits, '-' and '.', "
                         "at most 253)")
    return value


def _output_type(formats: Sequence[str], hint: Callable[[str], str | None] | None = None) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value in formats or (value == "table" and "text" in formats):
            return value
        extra = hint(text) if hint else None
        raise argparse.ArgumentTypeError(extra or f"expected one of {', '.join(formats)}, got {text!r}")
    return parse


def add_output_argument(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS, default: str = "text",
                        hint: Callable[[str], str | None] | None = None, help: str | None = None) -> None:
    parser.add_argument("-o", "--output", type=_output_type(formats, hint), default=default, metavar="FORMAT",
                        help=help or f"output format: {', '.join(formats)} (default {default})")


def split_list(value: str) -> Sequence[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


# -- OPA ----------------------------------------------------------------------------------------


def add_opa_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OPA (the same flags as opa-kube-sync and fedplace-admission)")
    group.add_argument("--opa-url", type=http_url, default="http://127.0.0.1:8181", metavar="URL",
                       help="OPA's address, e.g. https://opa.example:8181 (…/v1 accepted too; "
                            "default http://127.0.0.1:8181)")
    group.add_argument("--opa-token-file", metavar="FILE", help="file holding the bearer token for OPA")
    group.add_argument("--opa-ca-file", metavar="FILE", help="CA certificates to verify OPA's certificate with")
    group.add_argument("--opa-timeout", type=seconds, default=10.0, metavar="SECONDS",
                       help="how long to wait for each answer from OPA (default 10)")


def opa_settings(args: argparse.Namespace) -> OpaSettings:
    return OpaSettings(url=args.opa_url, token_file=args.opa_token_file, ca_file=args.opa_ca_file,
                       timeout=args.opa_timeout)


def read_text(path: str, flag: str = "") -> str:
    """A text file's content; a one-line :class:`UsageError` naming ``flag`` and ``path`` otherwise."""
    name = f"{flag} {path}".strip()
    try:
        return Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise UsageError(f"{name}: is a directory, not a file") from None
    except FileNotFoundError:
        raise UsageError(f"{name}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{name}: not a text file (UTF-8)") from None


def check_token_file(path: str | None, flag: str) -> None:
    if path is None:
        return
    if not path:
        raise UsageError(f"{flag}: empty file name")
    if not read_text(path, flag).strip():
        raise UsageError(f"{flag} {path}: the file is empty (a bearer token is expected)")


def check_ca_file(path: str | None, flag: str) -> None:
    if path is None:
        return
    read_text(path, flag)
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, ValueError) as exc:
        raise UsageError(f"{flag} {path}: no usable CA certificate in it ({exc.__class__.__name__})") from None


# -- the API server -------------------------------------------------------------------------------


def add_kube_arguments(parser: argparse.ArgumentParser, *, all_namespaces: bool = False,
                       namespace_help: str = "the namespace (default: the kubeconfig context's namespace)") -> None:
    group = parser.add_argument_group("Kubernetes (as kubectl finds the cluster)")
    group.add_argument("-n", "--namespace", metavar="NAMESPACE", help=namespace_help)
    if all_namespaces:
        group.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    group.add_argument("--kubeconfig", metavar="FILE",
                       help="kubeconfig file (default: the files in $KUBECONFIG, else ~/.kube/config, "
                            "else the pod's service account)")
    group.add_argument("--context", metavar="NAME", help="the kubeconfig context to use (default: its current one)")


def client_config(args: argparse.Namespace) -> ClientConfig:
    """The API server as kubectl would find it with these flags (read once)."""
    cached = getattr(args, "_client_config", None)
    if cached is None:
        cached = load_client_config(getattr(args, "kubeconfig", None), getattr(args, "context", None))
        args._client_config = cached
    return cached


def namespace_of(args: argparse.Namespace) -> str:
    """``-n``, else the context's namespace (``default`` without one), checked."""
    if args.namespace is not None:
        return check_namespace(args.namespace)
    return check_namespace(client_config(args).namespace, "the kubeconfig context's namespace")


# -- replicated data and the decision ----------------------------------------------------------------


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Where opa-kube-sync puts the replicated objects, and which decision to ask."""
    group = parser.add_argument_group("replicated data and the decision (as opa-kube-sync and the webhook have them)")
    group.add_argument("--replicate-path", type=segment, default="kubernetes", metavar="ROOT",
                       help="where opa-kube-sync puts the replicated objects in OPA (its --replicate-path; "
                            "default kubernetes)")
    group.add_argument("--clusters-resource", default="clusters", metavar="PLURAL",
                       help="the replicated cluster-scoped resource holding the clusters (default clusters)")
    group.add_argument("--resources", default=None, metavar="PLURAL[,PLURAL…]",
                       help="the replicated kinds whose placement is shown (default: replicasets and every "
                            "replicated kind the policy places through the cluster selector)")
    group.add_argument("--resource-bindings", default="resourcebindings", metavar="PLURAL",
                       help="the replicated Karmada ResourceBindings (default resourcebindings; '' for none)")
    group.add_argument("--cluster-resource-bindings", default="clusterresourcebindings", metavar="PLURAL",
                       help="the replicated Karmada ClusterResourceBindings (default clusterresourcebindings; "
                            "'' for none)")
    group.add_argument("--decision-path", type=data_path, default=DECISION, metavar="PATH",
                       help=f"the webhook's decision in OPA (default {DECISION})")


def decision_path(args: argparse.Namespace) -> list[str]:
    return [p for p in args.decision_path.strip("/").split("/") if p]


# -- before a command runs ---------------------------------------------------------------------------


def prepare(args: argparse.Namespace, prog: str, err: TextIO) -> None:
    """What every command checks before it asks anything: the output format's old spelling,
    OPA's token and CA files (a missing token file is an error, not a request without a
    token). Raises :class:`UsageError`."""
    if getattr(args, "output", None) == "table":
        warn(err, prog, "-o table is the old spelling of -o text; use -o text")
        args.output = "text"
    if hasattr(args, "opa_url"):
        check_token_file(args.opa_token_file, "--opa-token-file")
        check_ca_file(args.opa_ca_file, "--opa-ca-file")


# -- input and output -----------------------------------------------------------------------------------


def read_documents(path: str, flag: str = "-f") -> Iterator[Any]:
    """Every YAML/JSON document of a file (``-`` is standard input); ``kind: List`` is unrolled.
    Raises a one-line :class:`UsageError` for a file that cannot be read or is not YAML."""
    name = "standard input" if path == "-" else f"{flag} {path}"
    if path == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError:
            raise UsageError(f"{name}: not text (UTF-8)") from None
        except (OSError, ValueError) as exc:  # stdin closed
            raise UsageError(f"{name}: cannot be read ({exc})") from None
    else:
        text = read_text(path, flag)
    try:
        docs = [_plain(doc) for doc in yaml.safe_load_all(text)]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise UsageError(f"{name}: not valid YAML or JSON: {getattr(exc, 'problem', None) or exc}{where}") from None
    except RecursionError:
        raise UsageError(f"{name}: nested too deeply") from None
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from doc["items"]
        elif doc is not None:
            yield doc


def _plain(value: Any) -> Any:
    """YAML's value as JSON has it, as kubectl converts YAML: timestamps and other scalars JSON
    lacks become strings (bytes base64), keys strings, sets lists."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _scalar_text(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return _scalar_text(value)


def _scalar_text(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def dump(doc: Any, fmt: str = "json") -> str:
    """``doc`` as JSON (indented, keys sorted) or YAML, without a final newline."""
    if fmt == "yaml":
        return yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=True, allow_unicode=True,
                              default_flow_style=False).rstrip("\n")
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
