"""A seeded fuzz of the ``fedplace`` command line: no traceback is reachable from user input.

One ``random.Random(seed)`` builds every command line — a subcommand (or none, or
a typo), flags of every subcommand in any mix, values that are missing files,
directories, invalid YAML, YAML lists, binary files, ConfigMaps whose ``data``
is a list, kubeconfigs of every kind, numbers such as 0, -1, nan, inf, 1e400,
URLs without a scheme or a port that is closed, names kubectl would refuse, and
standard input of the same kinds — and runs it in process
(:func:`fedplace.insight.cli.execute`) against the devstack OPA (conftest.py's
``small`` world) and API server, over HTTP. Every run must end with an exit code
of 0, 1, 2 or 3 (4 is a bug), no traceback, every stderr line the command's own
(``fedplace…``), and at most one error line — the last one, and there exactly
when the code is 2 or 3.

``FEDPLACE_CLI_FUZZ_SEED`` and ``FEDPLACE_CLI_FUZZ_RUNS`` replay or lengthen a
campaign (default: seed 28, 200 runs, a few seconds).
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedplace.common.kube_client import kube_json
from fedplace.insight import cli
from tests.insight.conftest import SMALL_NS, small_rs
from tests.insight.test_cli import closed_port, contexts_file, kubeconfig_doc

SEED = int(os.environ.get("FEDPLACE_CLI_FUZZ_SEED", "28"))
RUNS = int(os.environ.get("FEDPLACE_CLI_FUZZ_RUNS", "200"))

NUMBERS = ["0", "-1", "nan", "inf", "-inf", "1e400", "1e-9", "0.5", "10", "abc", "", "3s", "2m", "1h", "500ms",
           "%", "5%", "101%", "-5%", "1.5", "NaN%", "1e3", " 7 ", "0x10"]
FORMATS = ["text", "json", "yaml", "table", "xml", "", "html", "placement.html", "JSON", "out/page.html"]
TYPES = ["rs", "replicaset", "ReplicaSets.apps", "replicasets.v1.apps", "RS", "widget", "rb", "crb", "pod",
         "deploy", "cm", "", "rs.nope", "cpp"]
NAMES = ["payments", "web", "absent", "Bad_Name", "", "a/b", "../x", "x" * 300, "-x", "a.b"]
LABELS = ["gold-1:tier-", "plain-1:tier=gold", "*:x=y", "nope:a=b", "nocolon", ":x=y", "a:", "a:=b", "gold-*:tier=",
          "plain-1:needs-", "[:x=y"]
STDIN = ["not: [valid", "", "- a\n- b\n", "kind: ReplicaSet\nmetadata: [x]\n", "a: 1\n---\nb: 2\n",
         "[" * 500 + "]" * 500, "kind: List\nitems: 3\n", "kind: ConfigMap\ndata: [1]\n",
         "kind: Secret\napiVersion: v1\nmetadata: {name: s, namespace: n}\ndata: {k: dg==}\n",
         "metadata: {name: 5, namespace: 7}\nkind: 9\n", "created: 2024-01-01T00:00:00Z\nkind: Pod\n",
         "{\"kind\": \"ReplicaSet\", \"metadata\": {\"name\": \"j\"}}"]


class Campaign:
    """The pools the generator draws from, made once per test (files, kubeconfigs, URLs)."""

    def __init__(self, rng: random.Random, tmp: Path, small: Any, kube: Any, namespace: str) -> None:
        self.rng = rng
        self.opa = small.opa.url
        gone = f"http://127.0.0.1:{closed_port()}"
        self.urls = [self.opa, self.opa + "/v1", self.opa + "/v1/", gone, "ftp://x", "", "http://", "http://[::1",
                     "opa:8181", "https://127.0.0.1:1"]
        files = tmp / "files"
        files.mkdir()
        (files / "dir").mkdir()
        (files / "rego-dir").mkdir()
        (files / "rego-dir" / "extra.rego").write_text("package fuzz\n\nx := 1\n")

        def put(name: str, content: Any) -> str:
            path = files / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content if isinstance(content, str) else yaml.safe_dump_all(content))
            return str(path)

        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzz", "namespace": "small"},
              "data": {"admission.rego": "package io.k8s.federation.admission\n\nerrors contains \"fuzz\" if false\n"}}
        self.files = [
            str(files / "missing.yaml"), str(files / "dir"), str(files / "rego-dir"), put("invalid.yaml", "not: [valid"),
            put("list.yaml", "- a\n- b\n"), put("empty.yaml", ""), put("binary.bin", b"\xff\xfe\x00\x01"),
            put("rs.yaml", [small_rs("web")]), put("rs-other.yaml", [small_rs("x", namespace="other")]),
            put("two.yaml", [small_rs("a"), small_rs("b")]), put("cm.yaml", [cm]),
            put("cm-list.yaml", [{**cm, "data": ["a", "b"]}]), put("cm-int.yaml", [{**cm, "data": {1: 2}}]),
            put("cm-meta.yaml", [{**cm, "metadata": "x"}]), put("lib.rego", "package fuzz.lib\n\ny := 2\n"),
            put("broken.rego", "package fuzz\n\nx := {\n"), put("admission.rego", cm["data"]["admission.rego"]),
            put("deep.yaml", "a: " + "[" * 300 + "]" * 300), put("token", "any-token\n"), put("blank", "\n"),
            put("ca.pem", "not a certificate\n"), put("service.yaml", [{"kind": "Service", "metadata": {"name": "s"}}]),
            put("dates.yaml", "kind: ReplicaSet\nmetadata: {name: d, creationTimestamp: 2024-01-01}\n"),
            "-", "", "x" * 300,
        ]
        kc = files / "kubeconfigs"
        kc.mkdir()
        contexts = contexts_file(kc / "contexts.yaml", kube.kubeconfig, "fuzz", fuzz=namespace, other=SMALL_NS)
        (kc / "unreachable.yaml").write_text(yaml.safe_dump(kubeconfig_doc("u", gone, "shop")))
        (kc / "no-server.yaml").write_text(yaml.safe_dump(
            {"current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k"}}],
             "clusters": [{"name": "k", "cluster": {}}]}))
        (kc / "no-current.yaml").write_text(yaml.safe_dump({**kubeconfig_doc("n", gone), "current-context": ""}))
        self.kubeconfigs = [str(kube.kubeconfig), str(contexts), str(kc / "unreachable.yaml"),
                            str(kc / "no-server.yaml"), str(kc / "no-current.yaml"), *self.files[:7]]
        self.kubeconfig_envs = [None, "", os.pathsep.join([str(contexts), str(kube.kubeconfig)]),
                                os.pathsep.join([str(kc / "absent"), str(kube.kubeconfig)]), str(kc / "absent"),
                                self.files[3], self.files[1]]
        self.contexts = ["fuzz", "other", "nope", ""]
        self.namespaces = [namespace, SMALL_NS, "default", "", "Bad NS", "a" * 70, "-x"]

    def pick(self, pool: list[Any]) -> Any:
        return self.rng.choice(pool)

    def value(self, flag: str) -> str:
        """A value for ``flag``: mostly of its kind, sometimes anything."""
        r = self.rng
        if r.random() < 0.1:
            return self.pick([*NUMBERS, *self.files, *self.urls, "--", "-"])
        if flag in ("--opa-url", "--scratch-opa-url", "--sync-url"):
            return self.pick(self.urls)
        if flag in ("--opa-timeout", "--request-timeout", "--max-moves", "--max-denials", "--max-exclusion-changes"):
            return self.pick(NUMBERS)
        if flag in ("-o", "--output"):
            return self.pick(FORMATS)
        if flag == "--kubeconfig":
            return self.pick(self.kubeconfigs)
        if flag == "--context":
            return self.pick(self.contexts)
        if flag in ("-n", "--namespace", "--policy-namespace"):
            return self.pick(self.namespaces)
        if flag == "--cluster-label":
            return self.pick(LABELS)
        if flag == "--policy":
            return self.pick([*self.files, f"my/id.rego={self.files[14]}", "=x", "id.rego="])
        if flag == "--evaluator":
            return self.pick(["auto", "opa-bindings", "scratch-opa", "nope"])
        if flag in ("--replicate-path", "--decision-path", "--explain-path"):
            return self.pick(["kubernetes", "/", "", "a/b", "io/k8s/federation/admission", "nope",
                              "io/k8s/federation/explain/packs", "kubernetes/clusters"])
        if flag in ("--resources", "--clusters-resource", "--resource-bindings", "--cluster-resource-bindings"):
            return self.pick(["replicasets", "", "clusters", "nope", "replicasets,pods", ",,"])
        return self.pick(self.files)  # files: -f, --opa-token-file, --opa-ca-file, --output-file, …

    def argv(self) -> tuple[list[str], str | None, str | None]:
        """(argv, standard input, KUBECONFIG)."""
        r = self.rng
        opa = ["--opa-url", self.opa] if r.random() < 0.75 else []
        command = self.pick(["explain"] * 4 + ["what-if"] * 3 + ["report"] * 2 + ["limits"] * 2 + ["", "explian"])
        flags = {
            "explain": ["-f", "-n", "--kubeconfig", "--context", "-o", "--fail-on-denial", "--decision-path",
                        "--explain-path", "--request-timeout"],
            "what-if": ["--policy", "--policy", "--cluster-label", "--cluster-label", "--max-moves", "--max-denials",
                        "--max-exclusion-changes", "--evaluator", "--scratch-opa-url", "--scratch-opa-token-file",
                        "--policy-namespace", "--replicate-path", "--resources", "--clusters-resource",
                        "--resource-bindings", "--decision-path", "-o"],
            "report": ["-o", "--output-file", "--sync-url", "--replicate-path", "--resources", "--decision-path"],
            "limits": ["-n", "-A", "--resources", "--fail-on-violations", "--replicate-path", "--kubeconfig",
                       "--context", "-o"],
        }.get(command, ["--version", "--help", "-h"])
        flags = [*flags, "--opa-token-file", "--opa-ca-file", "--opa-timeout", "--opa-url"]
        argv = [command] if command else []
        if command == "explain":
            shape = r.random()
            if shape < 0.4:
                argv += [self.pick(TYPES), self.pick(NAMES)]
            elif shape < 0.6:
                argv += [f"{self.pick(TYPES)}/{self.pick(NAMES)}"]
            elif shape < 0.9:
                argv += ["-f", self.pick(["-", "-", *self.files])]
        if command == "what-if" and r.random() < 0.7:
            argv += ["--cluster-label", self.pick(LABELS)]
        for _ in range(r.choice([0, 1, 1, 2, 2, 3, 5])):
            flag = self.pick(flags)
            if flag in ("--fail-on-denial", "-A", "--fail-on-violations", "--version", "--help", "-h"):
                argv.append(flag)
            elif r.random() < 0.15:
                argv.append(f"{flag}={self.value(flag)}" if flag.startswith("--") else flag + self.value(flag))
            else:
                argv += [flag, self.value(flag)]
        if r.random() < 0.05:
            argv.insert(r.randrange(len(argv) + 1), self.pick(["--", "-", "--unknown", "-Z", "extra"]))
        if r.random() < 0.05 and argv:
            argv.pop(r.randrange(len(argv)))  # a flag without its value, or a value without its flag
        stdin = self.pick(STDIN) if "-" in argv else None
        return argv + opa, stdin, self.pick(self.kubeconfig_envs)


async def test_no_traceback_from_any_command_line(small: Any, kube: Any, kube_api: Any, kube_namespace: str,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    await kube_json(kube_api, "POST", f"/apis/apps/v1/namespaces/{kube_namespace}/replicasets",
                    body=small_rs("payments", namespace=kube_namespace))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE", "FEDPLACE_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # report --output-file with a relative name lands here
    campaign = Campaign(random.Random(SEED), tmp_path, small, kube, kube_namespace)
    codes: Counter[int] = Counter()
    failures: list[str] = []
    for run in range(RUNS):
        argv, stdin, kubeconfig = campaign.argv()
        if kubeconfig is None:
            monkeypatch.delenv("KUBECONFIG", raising=False)
        else:
            monkeypatch.setenv("KUBECONFIG", kubeconfig)
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
        try:
            code = await asyncio.wait_for(cli.execute(argv, out, err), 60)
        except asyncio.TimeoutError:
            code = -1
        codes[code] += 1
        lines = err.getvalue().splitlines()
        errors = [line for line in lines if ": error: " in line or ": internal error: " in line]
        problems = []
        if code not in (0, 1, 2, 3):
            problems.append(f"exit {code}")
        if "Traceback" in err.getvalue():
            problems.append("a traceback")
        if any(not line.startswith("fedplace") for line in lines):
            problems.append("a line that is not the command's")
        if code in (2, 3) and (len(errors) != 1 or lines[-1] != errors[0]):
            problems.append("not exactly one error line, last")
        if code in (0, 1) and errors:
            problems.append("an error line with success")
        if problems:
            failures.append(f"run {run}: {', '.join(problems)}: argv={argv!r} stdin={stdin!r} "
                            f"KUBECONFIG={kubeconfig!r}\n{err.getvalue()}")
    print(f"seed {SEED}: exit codes {dict(codes)}")
    assert not failures, f"seed {SEED}, {len(failures)} of {RUNS} runs:\n" + "\n".join(failures[:8])
    assert codes[0] and codes[2] and codes[3], f"the campaign should reach success, usage and server errors: {codes}"
