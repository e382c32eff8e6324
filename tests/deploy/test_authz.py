"""OPA's system.authz policy (deploy/base/opa/authz.rego) — what OPA evaluates for every
API request under ``--authentication=token --authorization=basic``.

Evaluated by a real OPA server when ``REAL_OPA_BIN`` is set (the policy loaded
as a plain module, each decision asked through ``POST /v1/query``), else by
OPA's own evaluator in process (``opa_bindings``). OPA's environment, which
the policy reads with ``opa.runtime().env``, is given per decision by mocking
that builtin (``with opa.runtime as {"env": …}``).
"""

from __future__ import annotations

import itertools
import json
import os
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from devstack.launch import ServerProcess
from fedplace.common.indexes import index_path
from fedplace.common.kube_client import Resource
from tests.deploy.conftest import DEPLOY, SCRIPTS, container, expand_env, flag, run

AUTHZ = DEPLOY / "base" / "opa" / "authz.rego"
SYNC = "s" * 20 + "0123456789abcdef0123456789abcdef"
ADMISSION = "a" * 20 + "0123456789abcdef0123456789abcdef"
READER = "r" * 20 + "0123456789abcdef0123456789abcdef"
ENV = {"FEDPLACE_SYNC_TOKEN": SYNC, "FEDPLACE_ADMISSION_TOKEN": ADMISSION, "FEDPLACE_READER_TOKEN": READER, "HOME": "/"}
POLICY = ["v1", "policies", "kube-federation-scheduling-policy", "fedplace-federation", "placement.rego"]
DECISION = ["v1", "data", "io", "k8s", "federation", "admission"]
QUERY = 'x := data.system.authz.{rule} with input as input.request with opa.runtime as {{"env": input.env}}'
# ServerProcess runs ``python <args>``: this replaces that interpreter with the binary.
_EXEC = "import os, sys; os.execv(sys.argv[1], sys.argv[1:])"

Rule = Callable[[str, Any, dict[str, str]], Any]  # (rule name, input, OPA's environment) -> value, None if undefined


@pytest.fixture(scope="module")
def authz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rule]:
    """``data.system.authz.<rule>`` for an input and an environment (see the module docstring)."""
    opa_bin = os.environ.get("REAL_OPA_BIN")
    if opa_bin:
        server = ServerProcess("opa-authz", ["-c", _EXEC, opa_bin, "run", "--server", "--addr", "127.0.0.1:{port}",
                                             "--disable-telemetry", "--log-level", "error", str(AUTHZ)],
                               "/health", tmp_path_factory.mktemp("opa-authz")).start()

        def over_http(rule: str, request: Any, env: dict[str, str]) -> Any:
            body = json.dumps({"query": QUERY.format(rule=rule), "input": {"request": request, "env": env}})
            req = urllib.request.Request(server.url + "/v1/query", data=body.encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                rows = json.load(resp).get("result") or []
            return rows[0]["x"] if rows else None

        try:
            yield over_http
        finally:
            server.stop()
        return
    from opa_bindings import OpaEngine

    with OpaEngine() as engine:
        engine.add_policy("authz.rego", AUTHZ.read_text())

        def in_process(rule: str, request: Any, env: dict[str, str]) -> Any:
            rows = engine.eval_query(QUERY.format(rule=rule), input={"request": request, "env": env})
            return rows[0]["x"] if rows else None

        yield in_process


def allowed(authz: Rule, method: str, path: list[str], identity: str | None, env: dict[str, str] | None = None) -> bool:
    request: dict[str, Any] = {"method": method, "path": path, "params": {}, "headers": {}}
    if identity is not None:
        request["identity"] = identity
    return authz("allow", request, ENV if env is None else env) is True


CASES = [
    # (who, method, path, allowed)
    (None, "GET", ["health"], True),
    (None, "GET", ["v1", "data"], False),
    (None, "POST", DECISION, False),
    (None, "GET", ["metrics"], True),
    (None, "POST", ["health"], False),
    (None, "GET", ["v1", "status"], False),
    ("admission", "POST", DECISION, True),
    ("admission", "GET", DECISION, False),
    ("admission", "GET", ["v1", "data", "kubernetes"], False),
    ("admission", "PUT", ["v1", "data", "kubernetes", "replicasets"], False),
    ("admission", "PUT", POLICY, False),
    ("admission", "POST", ["v1", "data", "io", "k8s", "federation", "remediation", "notifications"], False),
    ("sync", "GET", ["v1", "policies"], True),
    ("sync", "PUT", POLICY, True),
    ("sync", "DELETE", POLICY, True),
    ("sync", "PUT", ["v1", "policies", "authz", "authz.rego"], False),
    ("sync", "DELETE", ["v1", "policies", "", "authz", "authz.rego"], False),  # the file-loaded module
    ("sync", "PUT", ["v1", "policies", "kube-federation-scheduling-policy"], False),
    ("sync", "PUT", ["v1", "policies", "opa-kube-sync", "replicated-root.rego"], True),
    ("sync", "PUT", ["v1", "policies", "opa-kube-sync", "loaded.rego"], True),
    ("sync", "PUT", ["v1", "policies", "opa-kube-sync"], False),
    ("admission", "PUT", ["v1", "policies", "opa-kube-sync", "loaded.rego"], False),
    ("reader", "PUT", ["v1", "policies", "opa-kube-sync", "loaded.rego"], False),
    ("sync", "PATCH", ["v1", "data", "fedplace_sync"], True),
    ("sync", "PUT", ["v1", "data", "kubernetes", "replicasets"], True),
    ("sync", "PATCH", ["v1", "data", "kubernetes", "replicasets", "default", "web"], True),
    ("sync", "DELETE", ["v1", "data", "kubernetes", "clusters", "gce-europe-west1"], True),
    ("sync", "PUT", ["v1", "data", "kubernetes_index", "clusterrolebindings"], True),
    ("admission", "PUT", ["v1", "data", "kubernetes_index", "clusterrolebindings"], False),
    ("sync", "PUT", ["v1", "data", "kubernetes_indexes"], False),
    ("sync", "GET", ["v1", "data", "fedplace_sync"], True),
    ("sync", "PUT", ["v1", "data", "fedplace_sync"], True),
    ("sync", "POST", ["v1", "data", "io", "k8s", "federation", "remediation", "notifications"], True),
    ("sync", "PUT", ["v1", "data", "system", "authz"], False),
    ("sync", "POST", ["v1", "data", "system", "authz", "allow"], False),
    ("sync", "PUT", ["v1", "data"], False),
    ("sync", "GET", ["v1", "config"], False),
    # The reader: read policies and data, ask decisions; never write, never the system package.
    ("reader", "GET", ["v1", "policies"], True),
    ("reader", "GET", POLICY, True),
    ("reader", "PUT", POLICY, False),
    ("reader", "DELETE", POLICY, False),
    ("reader", "POST", DECISION, True),
    ("reader", "POST", ["v1", "data", "io", "k8s", "federation", "explain", "packs"], True),
    ("reader", "GET", ["v1", "data", "kubernetes", "replicasets"], True),
    ("reader", "GET", ["v1", "data", "kubernetes_index"], True),
    ("reader", "PUT", ["v1", "data", "kubernetes", "replicasets"], False),
    ("reader", "PATCH", ["v1", "data", "kubernetes"], False),
    ("reader", "DELETE", ["v1", "data", "kubernetes", "clusters", "c"], False),
    ("reader", "GET", ["v1", "data"], False),  # the root holds data.system
    ("reader", "GET", ["v1", "data", "system", "authz"], False),  # its env holds the tokens
    ("reader", "POST", ["v1", "data", "system", "authz", "env"], False),
    ("reader", "POST", ["v1", "query"], False),
    ("reader", "GET", ["v1", "config"], False),
    ("admission", "GET", ["v1", "policies"], False),
    ("wrong", "POST", DECISION, False),
    ("wrong", "GET", ["v1", "policies"], False),
]


@pytest.mark.parametrize("who, method, path, expected", CASES,
                         ids=[f"{w}-{m}-{'/'.join(p)}" for w, m, p, _ in CASES])
def test_authz_matrix(authz: Rule, who: str | None, method: str, path: list[str], expected: bool):
    identity = {"sync": SYNC, "admission": ADMISSION, "reader": READER, "wrong": "x" * 64, None: None}[who]
    assert allowed(authz, method, path, identity) is expected


@pytest.mark.parametrize("value", ["", "changeme", "REPLACE-ME", "short-token-1234567890"])
def test_short_or_placeholder_tokens_never_match(authz: Rule, value: str):
    env = {"FEDPLACE_SYNC_TOKEN": value, "FEDPLACE_ADMISSION_TOKEN": value, "FEDPLACE_READER_TOKEN": value}
    assert not allowed(authz, "POST", DECISION, value, env)
    assert not allowed(authz, "GET", ["v1", "policies"], value, env)


def test_missing_tokens_lock_opa(authz: Rule):
    assert not allowed(authz, "GET", ["v1", "policies"], "", {})
    assert not allowed(authz, "POST", DECISION, SYNC, {})
    assert allowed(authz, "GET", ["health"], None, {})


def test_token_secret_with_trailing_newline_still_matches(authz: Rule):
    """The clients strip their token files; the environment copy is stripped too."""
    env = {"FEDPLACE_SYNC_TOKEN": SYNC + "\n", "FEDPLACE_ADMISSION_TOKEN": " " + ADMISSION + "\n"}
    assert allowed(authz, "POST", DECISION, ADMISSION, env)
    assert allowed(authz, "GET", ["v1", "policies"], SYNC, env)




def test_authz_constants_match_the_components_flags(authz: Rule, rendered):
    r = rendered["cert-manager"]
    w = r.get("Deployment", "opa", "opa")
    sync = container(w, "opa-kube-sync")
    env = {e["name"]: e["value"] for e in sync.get("env", []) if "value" in e}
    args = expand_env(sync["args"], {**env, "POD_NAMESPACE": "opa", "POD_NAME": "opa-0"})
    policy_namespaces = [a.split("=", 1)[1] for a in args if a.startswith("--policy-namespace=")]
    assert sorted(authz("policy_namespaces", {}, ENV)) == sorted(policy_namespaces)
    assert authz("replicate_root", {}, ENV) == flag(sync, "--replicate-path", "kubernetes")
    crb = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)
    assert authz("index_root", {}, ENV) == index_path(flag(sync, "--replicate-path", "kubernetes"), crb)[0]
    try:
        from fedplace.sync.sentinel import SENTINEL_PATH
    except ImportError:
        SENTINEL_PATH = ["fedplace_sync"]
    assert [authz("sentinel_root", {}, ENV)] == list(SENTINEL_PATH)
    from fedplace.admission.config import DEFAULT_DECISION_PATH

    adm = container(r.get("Deployment", "fedplace-admission", "opa"), "admission")
    decision = flag(adm, "--opa-decision-path", DEFAULT_DECISION_PATH)
    assert authz("admission_decision", {}, ENV) == decision.strip("/").split("/")
    # OPA gets every token from the environment variables the policy reads.
    opa_env = {e["name"] for e in container(w, "opa")["env"]}
    assert {"FEDPLACE_SYNC_TOKEN", "FEDPLACE_ADMISSION_TOKEN", "FEDPLACE_READER_TOKEN"} <= opa_env


# -- token rotation ----------------------------------------------------------------


def test_alternate_tokens_accepted_and_empty_alternates_match_nothing(authz: Rule):
    env = {**ENV, "FEDPLACE_SYNC_TOKEN_ALT": "n" * 64, "FEDPLACE_ADMISSION_TOKEN_ALT": "m" * 64}
    assert allowed(authz, "GET", ["v1", "policies"], "n" * 64, env)
    assert allowed(authz, "GET", ["v1", "policies"], SYNC, env)
    assert allowed(authz, "POST", DECISION, "m" * 64, env)
    assert not allowed(authz, "GET", ["v1", "policies"], "m" * 64, env)  # an alternate has its client's rights only
    env = {**ENV, "FEDPLACE_SYNC_TOKEN_ALT": "", "FEDPLACE_ADMISSION_TOKEN_ALT": ""}
    assert not allowed(authz, "POST", DECISION, "", env)
    assert not allowed(authz, "GET", ["v1", "policies"], "", env)


def _phase(out: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(OPA's environment, the clients' tokens) as the Secret holds them now."""
    secret = {p.name: p.read_text() for p in out.iterdir()}
    env = {"FEDPLACE_SYNC_TOKEN": secret["sync-token"], "FEDPLACE_SYNC_TOKEN_ALT": secret["sync-token-alt"],
           "FEDPLACE_ADMISSION_TOKEN": secret["admission-token"],
           "FEDPLACE_ADMISSION_TOKEN_ALT": secret["admission-token-alt"],
           "FEDPLACE_READER_TOKEN": secret["reader-token"], "FEDPLACE_READER_TOKEN_ALT": secret["reader-token-alt"]}
    return env, {"sync": secret["sync-token"], "admission": secret["admission-token"], "reader": secret["reader-token"]}


def test_rotation_never_makes_two_pod_generations_refuse_each_other(authz: Rule, tmp_path: Path):
    """Each step of gen-tokens.sh rolls the pods; during a rollout OPA pods and
    clients of the step before and the step after coexist: every pair must agree."""
    out = tmp_path / "secrets"
    script = ["bash", str(SCRIPTS / "gen-tokens.sh"), "--out", str(out)]
    run(script)
    phases = [_phase(out)]
    for step in ("--stage", "--promote", "--retire"):
        run([*script, step])
        phases.append(_phase(out))
    for before, after in itertools.pairwise(phases):
        for opa_env, _ in (before, after):
            for _, clients in (before, after):
                assert allowed(authz, "GET", ["v1", "policies"], clients["sync"], opa_env)
                assert allowed(authz, "POST", DECISION, clients["admission"], opa_env)
                assert allowed(authz, "GET", ["v1", "data", "kubernetes"], clients["reader"], opa_env)
    first_env, first_clients = phases[0]
    last_env, last_clients = phases[-1]
    assert last_clients["sync"] != first_clients["sync"]
    assert not allowed(authz, "GET", ["v1", "policies"], first_clients["sync"], last_env)  # the old token retired
    assert not allowed(authz, "POST", DECISION, first_clients["admission"], last_env)


def test_one_step_rotation_has_a_window(authz: Rule, tmp_path: Path):
    """--force swaps tokens at once: a new client and an old OPA pod refuse each other."""
    out = tmp_path / "secrets"
    script = ["bash", str(SCRIPTS / "gen-tokens.sh"), "--out", str(out)]
    run(script)
    old_env, _ = _phase(out)
    run([*script, "--force"])
    _, new_clients = _phase(out)
    assert not allowed(authz, "POST", DECISION, new_clients["admission"], old_env)
