"""The ``fedplace`` command line as kubectl users expect it.

Every error a user can cause is one line on stderr and an exit code — 2 usage or
input, 3 a server that cannot be reached — never a traceback; 1 stays what-if's
"found changes". The kubeconfig is found as kubectl finds it (``--kubeconfig``,
``KUBECONFIG`` with several files, ``~/.kube/config``, in-cluster), ``--context``
and ``-n`` (default: the context's namespace) are kubectl's, objects are named
``TYPE NAME`` or ``TYPE/NAME``, ``-o text|json|yaml`` everywhere. The commands run
in process (:func:`fedplace.insight.cli.execute`) against the devstack servers
(OPA: the ``small`` world of conftest.py; the API server: ``kube``), over HTTP;
one test runs the console script to see a closed pipe.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from fedplace.common import kube_client
from fedplace.common.kube_client import KubeConfigError, kube_json, load_client_config
from fedplace.insight import cli, explain, limits
from fedplace.insight.command import Parser
from fedplace.insight.options import seconds
from tests.insight.conftest import SMALL_NS, small_rs


@pytest.fixture(autouse=True)
def no_ambient_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No KUBECONFIG, an empty home (no ~/.kube/config), not in a pod: each test says what it has."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
                 "FEDPLACE_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return home


async def fedplace(*argv: str, stdin: str | None = None, out: io.StringIO | None = None) -> tuple[int, str, str]:
    """``fedplace ARGV`` in process: (exit code, stdout, stderr)."""
    out = out or io.StringIO()
    err = io.StringIO()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = await cli.execute(list(argv), out, err)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def one_error(err: str, *needles: str) -> str:
    """stderr is one error line (warnings aside), without a traceback, holding ``needles``."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    for needle in needles:
        assert needle in errors[0], err
    return errors[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kube_names(kubeconfig: Path) -> tuple[str, str]:
    """The cluster and user names of a kubeconfig's current context."""
    doc = yaml.safe_load(kubeconfig.read_text())
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    return ctx["cluster"], ctx.get("user", "")


def contexts_file(path: Path, kubeconfig: Path, current: str, **namespaces: str) -> Path:
    """A kubeconfig holding only contexts (name -> namespace) on the cluster and user of
    ``kubeconfig``: merged with it through KUBECONFIG, as kubectl users split them."""
    cluster, user = kube_names(kubeconfig)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "contexts": [{"name": name, "context": {"cluster": cluster, "user": user, "namespace": ns}}
                     for name, ns in namespaces.items()]}))
    return path


# -- the parser: --version, help, one-line errors, validated numbers ------------------------------------


async def test_version_and_plain_help():
    code, out, err = await fedplace("--version")
    assert code == 0 and out.startswith("fedplace ") and out.strip() != "fedplace" and err == ""
    for argv in ([], ["explain"], ["what-if"], ["report"], ["limits"]):
        code, out, err = await fedplace(*argv, "--help")
        assert code == 0 and err == "", argv
        assert "``" not in out and ".py" not in out and ":mod:" not in out and ":func:" not in out, out
        assert "exit status: 0" in out, argv


def test_fedplace_limits_is_the_same_command(capsys: pytest.CaptureFixture[str]):
    assert limits.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("fedplace-limits ")
    assert limits.main(["--help"]) == 0
    assert "exit status: 0" in capsys.readouterr().out
    assert limits.main(["--opa-timeout", "nan"]) == 2
    assert capsys.readouterr().err.startswith("fedplace-limits: error: argument --opa-timeout: expected seconds > 0")


@pytest.mark.parametrize("argv, needle", [
    ([], "the following arguments are required: COMMAND"),
    (["explain", "--bogus"], "unrecognized arguments: --bogus"),
    (["explain", "--opa-url"], "expected one argument"),
    (["explain", "-o", "xml"], "expected one of text, json, yaml, got 'xml'"),
    (["explain", "--opa-timeout", "0"], "expected seconds > 0"),
    (["explain", "--opa-timeout", "-1"], "expected seconds > 0"),
    (["explain", "--opa-timeout", "nan"], "expected seconds > 0"),
    (["limits", "--opa-timeout", "inf"], "expected seconds > 0"),
    (["report", "--opa-timeout", "1e400"], "expected seconds > 0"),
    (["what-if", "--opa-timeout", "abc"], "expected seconds > 0"),
    (["explain", "--request-timeout", "0s"], "expected seconds > 0"),
    (["explain", "--opa-url", "opa:8181"], "expected an http:// or https:// URL"),
    (["what-if", "--max-moves", "nan%"], "expected a count or a percentage"),
    (["what-if", "--max-denials", "-1"], "expected a count or a percentage"),
    (["what-if", "--cluster-label", "nocolon"], "expected CLUSTER:KEY=VALUE"),
    (["report", "-o", "placement.html"], "use --output-file placement.html"),
    (["report", "--replicate-path", "/"], "expected one path segment"),
    (["explain", "--opa-tim", "3"], "unrecognized arguments: --opa-tim"),  # no abbreviations, as kubectl
])
async def test_usage_errors_are_one_line_and_exit_2(argv: list[str], needle: str):
    code, out, err = await fedplace(*argv)
    assert code == 2 and out == ""
    one_error(err, needle)


def test_timeouts_take_seconds_or_durations():
    assert [seconds(v) for v in ("10", "2.5", "30s", "2m", "500ms", "1h")] == [10, 2.5, 30, 120, 0.5, 3600]
    parser = Parser(prog="x")
    parser.add_argument("--t", type=seconds)
    assert parser.parse_args(["--t", "1m"]).t == 60


# -- kubeconfig resolution, as kubectl does it ----------------------------------------------------------


def write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def kubeconfig_doc(name: str, server: str, namespace: str | None = None, current: bool = True,
                   **cluster: Any) -> dict[str, Any]:
    ctx = {"cluster": name, "user": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "Config", **({"current-context": name} if current else {}),
            "clusters": [{"name": name, "cluster": {"server": server, **cluster}}],
            "users": [{"name": name, "user": {"token": f"token-{name}"}}],
            "contexts": [{"name": name, "context": ctx}]}


async def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path: Path, no_ambient_kubeconfig: Path):
    a = write(tmp_path / "a.yaml", kubeconfig_doc("a", "https://a.example:6443", "team-a"))
    b = write(tmp_path / "b.yaml", kubeconfig_doc("b", "https://b.example:6443", "team-b"))
    clash = kubeconfig_doc("a", "https://other.example", "ignored")  # name a again: the first file wins
    write(tmp_path / "c.yaml", clash)
    environ = {"KUBECONFIG": os.pathsep.join([str(a), str(tmp_path / "missing.yaml"), str(b),
                                              str(tmp_path / "c.yaml")])}
    found = load_client_config(environ=environ)
    assert (found.context, found.namespace) == ("a", "team-a"), "current-context: the first file setting it"
    api = await found.api_client()
    try:
        assert api.configuration.host == "https://a.example:6443"
        assert api.configuration.api_key["BearerToken"] == "Bearer token-a"
    finally:
        await api.close()
    other = load_client_config(context="b", environ=environ)
    assert (other.context, other.namespace) == ("b", "team-b")
    with pytest.raises(KubeConfigError, match="--context 'nope': no such context .* \\(contexts: a, b\\)"):
        load_client_config(context="nope", environ=environ)
    # --kubeconfig is that file alone, and must exist
    assert load_client_config(str(b), environ=environ).context == "b"
    with pytest.raises(KubeConfigError, match="--kubeconfig .*/absent.yaml: no such file"):
        load_client_config(str(tmp_path / "absent.yaml"), environ=environ)
    # no KUBECONFIG (or an empty one): ~/.kube/config
    (no_ambient_kubeconfig / ".kube").mkdir()
    write(no_ambient_kubeconfig / ".kube/config", kubeconfig_doc("home", "https://home.example", "mine"))
    for env in ({}, {"KUBECONFIG": ""}):
        assert (load_client_config(environ=env).context, load_client_config(environ=env).namespace) == \
            ("home", "mine")


async def test_kubeconfig_paths_are_relative_to_their_file(tmp_path: Path):
    (tmp_path / "certs").mkdir()
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "certs/ca.crt"))
    doc = kubeconfig_doc("k", "https://k.example")
    doc["clusters"][0]["cluster"]["certificate-authority"] = "certs/ca.crt"
    kc = write(tmp_path / "kc.yaml", doc)
    api = await load_client_config(str(kc), environ={}).api_client()
    try:
        assert api.configuration.ssl_ca_cert == str(tmp_path / "certs/ca.crt")
    finally:
        await api.close()
    # a certificate that is not one, or is missing: one line, not the ssl module's traceback
    (tmp_path / "certs/ca.crt").write_text("not a certificate\n")
    with pytest.raises(KubeConfigError, match="the certificates cannot be loaded"):
        await load_client_config(str(kc), environ={}).api_client()
    (tmp_path / "certs/ca.crt").unlink()
    with pytest.raises(KubeConfigError, match="File does not exists: .*/certs/ca.crt"):
        await load_client_config(str(kc), environ={}).api_client()


@pytest.mark.parametrize("content, needle", [
    ("not: [valid", "not valid YAML"),
    ("- a\n- b\n", "not a kubeconfig"),
    ({"contexts": {"a": 1}}, "contexts must be a list"),
    ({"clusters": [{"cluster": {}}]}, "clusters[0] must be a mapping with a name"),
    ({"users": [{"name": "u", "user": "x"}]}, "user must be a mapping"),
    (b"\xff\xfe", "not text"),
])
def test_kubeconfig_that_is_not_one(tmp_path: Path, content: Any, needle: str):
    path = tmp_path / "kc"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        write(path, content)
    with pytest.raises(KubeConfigError) as exc:
        load_client_config(str(path), environ={})
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(KubeConfigError, match="is a directory"):
        load_client_config(environ={"KUBECONFIG": str(tmp_path)})


async def test_without_any_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    found = load_client_config(environ={"KUBECONFIG": str(tmp_path / "gone.yaml")})
    assert found.namespace == "default"  # as kubectl: a namespace, and an error once a server is needed
    with pytest.raises(KubeConfigError, match="KUBECONFIG names no existing file"):
        await found.api_client()
    with pytest.raises(KubeConfigError, match="no kubeconfig: .*/.kube/config does not exist"):
        await load_client_config(environ={}).api_client()
    # In a pod: the service account's namespace ($POD_NAMESPACE first).
    token, ns = tmp_path / "token", tmp_path / "namespace"
    token.write_text("t")
    ns.write_text("from-the-pod\n")
    monkeypatch.setattr(kube_client, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(kube_client, "SERVICE_NAMESPACE_FILENAME", str(ns))
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_client_config(environ=pod).in_cluster
    assert load_client_config(environ=pod).namespace == "from-the-pod"
    assert load_client_config(environ={**pod, "POD_NAMESPACE": "env-ns"}).namespace == "env-ns"
    with pytest.raises(KubeConfigError, match="--context x"):
        load_client_config(context="x", environ=pod)


# -- the cases, each with its exit code --------------------------------------------------------------


async def test_explain_without_a_kubeconfig_or_with_a_missing_one(small: Any, tmp_path: Path):
    code, out, err = await fedplace("explain", "rs", "web", *small.flags())
    assert code == 2 and out == ""
    one_error(err, "no kubeconfig", "give --kubeconfig FILE or set KUBECONFIG")
    code, _, err = await fedplace("explain", "rs/web", "--kubeconfig", str(tmp_path / "gone"), *small.flags())
    assert code == 2
    one_error(err, f"--kubeconfig {tmp_path / 'gone'}: no such file")
    (tmp_path / "kc.yaml").write_text("- not\n- a kubeconfig\n")
    code, _, err = await fedplace("explain", "rs/web", "--kubeconfig", str(tmp_path / "kc.yaml"), *small.flags())
    assert code == 2
    one_error(err, "not a kubeconfig")


@pytest.mark.parametrize("stdin, needle", [
    ("not: [valid", "standard input: not valid YAML or JSON"),
    ("", "expected one object (a YAML or JSON mapping), found 0 objects"),
    ("- a\n- b\n", "expected one object"),
    ("a: 1\n---\nb: 2\n", "found 2 objects"),
    ("kind: ReplicaSet\nmetadata: [x]\n", "metadata must be a mapping"),
])
async def test_explain_invalid_input_on_stdin(small: Any, stdin: str, needle: str):
    code, out, err = await fedplace("explain", "-f", "-", *small.flags(), stdin=stdin)
    assert code == 2 and out == ""
    one_error(err, needle)


async def test_explain_from_stdin_with_yaml_timestamps_and_namespace(small: Any):
    body = yaml.safe_dump(small_rs("api", namespace="")).replace("namespace: ''", "creationTimestamp: 2024-05-01")
    code, out, err = await fedplace("explain", "-f", "-", "-n", "team-x", "-o", "json", *small.flags(), stdin=body)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["object"] == {"kind": "ReplicaSet", "namespace": "team-x", "name": "api"}
    assert doc["decision"]["annotations"] == {
        "federation.kubernetes.io/replica-set-preferences": {"clusters": {"gold-1": {"weight": 1}}}}
    code, _, err = await fedplace("explain", "-f", "-", "-n", "other", *small.flags(),
                                  stdin=yaml.safe_dump(small_rs("api")))
    assert code == 2
    one_error(err, f"the object's namespace '{SMALL_NS}' does not match -n other")


async def test_opa_token_file_missing_or_a_directory(small: Any, tmp_path: Path):
    rs_file = tmp_path / "rs.yaml"
    rs_file.write_text(yaml.safe_dump(small_rs("web")))
    (tmp_path / "empty").write_text("\n")
    for argv in (["explain", "-f", str(rs_file)], ["limits", "-n", "shop"], ["report", "-o", "text"],
                 ["what-if", "--cluster-label", "gold-1:tier-"]):
        for token, needle in ((tmp_path / "absent", "no such file"), (tmp_path, "is a directory"),
                              (tmp_path / "empty", "the file is empty")):
            code, out, err = await fedplace(*argv, "--opa-url", small.opa.url, "--opa-token-file", str(token))
            assert code == 2 and out == "", (argv, err)
            one_error(err, f"--opa-token-file {token}", needle)
    code, _, err = await fedplace("explain", "-f", str(rs_file), "--opa-url", small.opa.url,
                                  "--opa-ca-file", str(rs_file))
    assert code == 2
    one_error(err, "--opa-ca-file", "no usable CA certificate")


@pytest.mark.parametrize("manifest, needle", [
    ("not: [valid", "not valid YAML or JSON"),
    ({"kind": "Service", "metadata": {"name": "s"}}, "no ConfigMap in it"),
    ({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": ["a.rego", "b.rego"]},
     "data must be a mapping of module names to Rego, found a list"),
    ({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a.rego": 3}}, "data.a.rego must be a string"),
    ({"kind": "ConfigMap", "metadata": ["x"]}, "a ConfigMap without metadata.name"),
])
async def test_what_if_policy_that_is_not_a_policy(small: Any, tmp_path: Path, manifest: Any, needle: str):
    bad = write(tmp_path / "bad.yaml", manifest)
    code, out, err = await fedplace("what-if", "--policy", str(bad), *small.flags())
    assert code == 2 and out == ""
    one_error(err, f"--policy {bad}", needle)


async def test_what_if_policy_files_that_cannot_be_read(small: Any, tmp_path: Path):
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "bin.rego").write_bytes(b"\xff\xfe\x00")
    for spec, needle in ((str(tmp_path / "gone.yaml"), "no such file"),
                         (str(tmp_path / "empty-dir"), "no .rego files"),
                         (str(tmp_path / "bin.rego"), "not a text file"),
                         (f"my/id.rego={tmp_path / 'gone.rego'}", "no such file")):
        code, _, err = await fedplace("what-if", "--policy", spec, *small.flags())
        assert code == 2, err
        one_error(err, needle)
    # read before OPA is asked: a bad file is 2 even with OPA out of reach
    code, _, err = await fedplace("what-if", "--policy", str(tmp_path / "gone.yaml"),
                                  "--opa-url", f"http://127.0.0.1:{closed_port()}")
    assert code == 2
    one_error(err, "no such file")


async def test_what_if_with_nothing_proposed(small: Any):
    code, out, err = await fedplace("what-if", *small.flags())
    assert code == 2 and out == ""
    one_error(err, "nothing proposed: give --policy FILE and/or --cluster-label")


async def test_what_if_exit_1_is_only_found_changes(small: Any):
    code, out, err = await fedplace("what-if", "--cluster-label", "plain-1:tier=gold", *small.flags())
    assert code == 1, err
    assert "Would move (1):" in out and "Result: 1 moves > --max-moves 0" in out
    code, out, err = await fedplace("what-if", "--cluster-label", "plain-1:other=x", "-o", "yaml", *small.flags())
    assert code == 0, err
    assert yaml.safe_load(out)["summary"]["over_threshold"] == []


async def test_unreachable_servers_exit_3(small: Any, tmp_path: Path):
    gone = f"http://127.0.0.1:{closed_port()}"
    rs_file = write(tmp_path / "rs.yaml", small_rs("web"))
    for argv in (["explain", "-f", str(rs_file)], ["limits", "-n", "shop"], ["report", "-o", "text"],
                 ["what-if", "--cluster-label", "a:b=c"]):
        code, out, err = await fedplace(*argv, "--opa-url", gone)
        assert code == 3 and out == "", (argv, err)
        one_error(err, "127.0.0.1")
    code, _, err = await fedplace("report", "--sync-url", gone, *small.flags())
    assert code == 3
    one_error(err, f"cannot get {gone}/placement.json")
    # the API server out of reach
    kc = write(tmp_path / "kc.yaml", kubeconfig_doc("k", gone, "shop"))
    code, _, err = await fedplace("explain", "rs", "web", "--kubeconfig", str(kc), *small.flags())
    assert code == 3
    one_error(err, f"cannot reach the Kubernetes API server {gone}")


async def test_a_silent_opa_times_out_with_exit_3(tmp_path: Path):
    """A server that accepts and never answers: --opa-timeout ends the wait (0 used to switch it off)."""
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        rs_file = write(tmp_path / "rs.yaml", small_rs("web"))
        started = asyncio.get_running_loop().time()
        code, _, err = await fedplace("explain", "-f", str(rs_file), "--opa-url", url, "--opa-timeout", "300ms")
        assert code == 3
        one_error(err, "timed out")
        assert asyncio.get_running_loop().time() - started < 5
    finally:
        server.close()


# -- kubectl's conventions: TYPE NAME, -n from the context, --context, -o yaml ---------------------------


async def test_type_name_context_and_its_namespace(small: Any, kube: Any, kube_api: Any, kube_namespaces: Any,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    first, second = await kube_namespaces.create("cli-a"), await kube_namespaces.create("cli-b")
    for ns, needs in ((first, "gold"), (second, None)):
        await kube_json(kube_api, "POST", f"/apis/apps/v1/namespaces/{ns}/replicasets",
                        body=small_rs("payments", needs, namespace=ns))
    contexts = contexts_file(tmp_path / "contexts.yaml", kube.kubeconfig, "team-a", **{"team-a": first,
                                                                                      "team-b": second})
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(contexts), str(kube.kubeconfig)]))
    for words in (["replicaset", "payments"], ["rs/payments"], ["ReplicaSets.apps", "payments"],
                  ["replicasets.v1.apps/payments"]):
        code, out, err = await fedplace("explain", *words, *small.flags())
        assert code == 0, err
        assert out.startswith(f"ReplicaSet {first}/payments: admitted\n"), out  # the context's namespace
        assert "gold: 1 of 2 clusters gold" in out and "✓ gold-1" in out
    code, out, err = await fedplace("explain", "rs", "payments", "--context", "team-b", "-o", "yaml", *small.flags())
    assert code == 0, err
    assert yaml.safe_load(out)["object"] == {"kind": "ReplicaSet", "namespace": second, "name": "payments"}
    code, out, _ = await fedplace("explain", "rs", "payments", "-n", second, *small.flags())
    assert out.startswith(f"ReplicaSet {second}/payments")  # -n over the context's
    for argv, needle in ((["rs", "absent"], f"cannot read rs/absent in namespace {first}: not found"),
                         (["widget", "x"], "unknown TYPE 'widget'"),
                         (["rs/a", "rs/b"], "explain takes one object"),
                         (["rs", "a", "b"], "explain takes one object"),
                         (["rs"], "expected TYPE NAME or TYPE/NAME"),
                         (["rs", "Bad_Name"], "not an object name"),
                         (["rs/x", "-n", "Bad NS"], "not a namespace name"),
                         (["rs/x", "--context", "nope"], "--context 'nope': no such context"),
                         (["rs/x", "-f", "-"], "give either -f FILE or TYPE NAME, not both")):
        code, out, err = await fedplace("explain", *argv, *small.flags())
        assert code == 2 and out == "", (argv, err)
        one_error(err, needle)


async def test_limits_namespace_from_the_context_and_yaml(small: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    """limits reads only the kubeconfig for its namespace (never the cluster); with none at all,
    ``default``, as kubectl. The small world has no LimitRange pack: exit 2, saying so."""
    kc = write(tmp_path / "kc.yaml", kubeconfig_doc("k", f"http://127.0.0.1:{closed_port()}", "team-z"))
    monkeypatch.setenv("KUBECONFIG", str(kc))
    code, out, err = await fedplace("limits", *small.flags())
    assert code == 2 and out == ""
    one_error(err, "cannot get the report from OPA", "fedplace-limitrange")
    code, _, err = await fedplace("limits", "-n", "x", "-A", *small.flags())
    assert code == 2
    one_error(err, "give -n NAMESPACE or -A, not both")


async def test_output_formats_everywhere(small: Any, tmp_path: Path):
    rs_file = write(tmp_path / "rs.yaml", small_rs("web"))
    label = ["--cluster-label", "plain-1:other=x"]
    for argv in (["explain", "-f", str(rs_file)], ["what-if", *label], ["report"]):
        code, as_json, err = await fedplace(*argv, "-o", "json", *small.flags())
        assert code == 0, err
        code, as_yaml, err = await fedplace(*argv, "-o", "yaml", *small.flags())
        assert code == 0, err
        a, b = json.loads(as_json), yaml.safe_load(as_yaml)
        for volatile in ("summary", "generated"):  # timings, the time
            a.pop(volatile, None), b.pop(volatile, None)
        assert a == b, argv
    code, out, err = await fedplace("what-if", *label, "-o", "table", *small.flags())
    assert code == 0 and out.startswith("What-if: 0 policy change(s), 1 cluster label change(s)")
    assert err == "fedplace what-if: warning: -o table is the old spelling of -o text; use -o text\n"
    code, out, err = await fedplace("report", "-o", "text", *small.flags())
    assert code == 0, err
    assert out.startswith("Placement at ") and "2 clusters, 2 workloads, 0 denied" in out


async def test_report_writes_to_stdout_or_output_file(small: Any, tmp_path: Path):
    code, out, err = await fedplace("report", *small.flags())
    assert code == 0 and err == "" and out.startswith("<!DOCTYPE html>")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    code, out, err = await fedplace("report", *small.flags(), out=Terminal())
    assert code == 2 and out == ""
    one_error(err, "the page is HTML: redirect it (> placement.html) or give --output-file FILE")
    page = tmp_path / "page.html"
    code, out, err = await fedplace("report", "--output-file", str(page), *small.flags(), out=Terminal())
    assert code == 0, err
    assert out == f"wrote {page}: 2 clusters, 2 workloads, 0 denied\n" and page.read_text().startswith("<!DOCTYPE")
    for target, needle in ((tmp_path, "not a file name"), (tmp_path / "no/such/dir.html", "no such directory")):
        code, _, err = await fedplace("report", "--output-file", str(target), *small.flags())
        assert code == 2
        one_error(err, needle)


async def test_a_bug_is_one_line_and_exit_4(small: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(explain, "explain", broken)
    rs_file = write(tmp_path / "rs.yaml", small_rs("web"))
    code, out, err = await fedplace("explain", "-f", str(rs_file), *small.flags())
    assert code == 4 and out == "" and "Traceback" not in err
    assert err == ("fedplace explain: internal error: RuntimeError: boom (a bug: please report it; "
                   "FEDPLACE_DEBUG=1 shows where)\n")


def test_clean_on_a_closed_pipe(small: Any, tmp_path: Path):
    """``fedplace explain … | head -3``: the reader is gone before the command writes; the command
    still ends with its own exit code, and says nothing (no BrokenPipeError)."""
    script = Path(sys.executable).parent / "fedplace"
    rs_file = write(tmp_path / "rs.yaml", small_rs("web"))
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}
    for argv in (["explain", "-f", str(rs_file), *small.flags()], ["--help"]):
        proc = subprocess.Popen([str(script), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the command has started: every write meets a closed pipe
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
        assert err == "", err


async def test_what_if_names_a_rule_set_breaking_the_contract_before_asking_any_server(tmp_path: Path):
    """No server is given: the proposed rule set is refused from its text, with file and line."""
    odd = tmp_path / "gpu.rego"
    odd.write_text("package fedplace.rules.gpu\n\n# the rule\nrequire := {\"id\": \"gpu\"}\n")
    code, out, err = await fedplace("what-if", "--policy", str(odd))
    assert code == 2 and out == ""
    one_error(err, f"{odd}:4: require must be a partial set rule")
    manifest = tmp_path / "rules.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rules-gpu, namespace: policy}\n"
                        "data:\n  gpu.rego: |\n    package fedplace.rules\n\n    require contains 1 if true\n")
    code, out, err = await fedplace("what-if", "--policy", str(manifest))
    assert code == 2 and out == ""
    one_error(err, f"{manifest} (policy/rules-gpu/gpu.rego):1: package fedplace.rules holds no rule set")
