"""opa-kube-sync's pure parts: flags, layout, strip, policy status, change signal."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedplace.common.informer import CompactObjects
from fedplace.common.kube_client import Resource
from fedplace.common.opa_client import OpaRequestError, OpaUnavailable
from fedplace.common.rego_scan import RegoScanError, package_clause
from fedplace.sync.config import DEFAULT_POLICY_NAMESPACE, parse_args
from fedplace.sync.policy_check import data_hash, module_ids, normalize_errors, reserved_package_error
from fedplace.sync.policy_status import status_value
from fedplace.sync.replicate import (
    LAST_APPLIED,
    batch_ops,
    collection_json,
    layout,
    namespace_field_selector,
    object_path,
    retryable,
    strip,
)
from fedplace.sync.signal import ChangeSignal

ROOT = Path(__file__).resolve().parents[2]
RS = Resource("apps", "v1", "replicasets", True)
CLUSTERS = Resource("federation.fedplace.io", "v1beta1", "clusters", False)


# -- strip / layout --------------------------------------------------------------------


@pytest.mark.parametrize("resource", [RS, CLUSTERS])
@pytest.mark.parametrize("chunk_bytes", [1, 200, 1 << 20])
def test_collection_json_is_the_layout_of_a_compact_cache(resource, chunk_bytes):
    """The collection written from a compact cache's JSON is exactly ``layout``'s document,
    in pieces of about ``chunk_bytes`` (streamed), ignored namespaces left out."""
    cache, objs = CompactObjects(), []
    for i in range(40):
        meta = {"name": f"o{i}", **({"namespace": f"ns{i % 4}"} if resource.namespaced else {})}
        obj = {"metadata": meta, "text": "é \u2028 \"q\"", "big": 2 ** 70 + i, "n": [1.5, None, True]}
        objs.append(obj)
        cache[resource.key(obj)] = obj
    ignore = frozenset({"ns1"})
    keys, chunks = collection_json(resource, cache, ignore, chunk_bytes=chunk_bytes)
    pieces = list(chunks)
    assert json.loads(b"".join(pieces)) == layout(resource, objs, ignore)
    assert sorted(keys) == sorted(k for k in cache if not k.startswith("ns1/"))
    if chunk_bytes == 1:
        assert len(pieces) > len(keys)  # never the whole body in one piece
    assert json.loads(b"".join(collection_json(resource, CompactObjects())[1])) == {}


def test_strip_removes_noise_only():
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [{}],
                                             "annotations": {LAST_APPLIED: "{}", "keep": "1"}}, "data": {"k": "v"}}
    out = strip(obj)
    assert out == {"kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"keep": "1"}}, "data": {"k": "v"}}
    assert obj["metadata"]["managedFields"] == [{}]  # the input is not modified
    clean = {"metadata": {"name": "b", "annotations": {"keep": "1"}}}
    assert strip(clean) is clean  # nothing to strip: no copy


def test_strip_drops_the_content_of_secrets_only():
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "s", "namespace": "x", "annotations": {LAST_APPLIED: '{"data": {"k": "c2VjcmV0"}}',
                                                                          "keep": "1"}, "managedFields": [{}]},
              "data": {"k": "c2VjcmV0"}, "stringData": {"p": "secret"}, "immutable": True}
    out = strip(secret)
    assert out == {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "immutable": True,
                   "metadata": {"name": "s", "namespace": "x", "annotations": {"keep": "1"}}}
    assert secret["data"] == {"k": "c2VjcmV0"} and secret["stringData"] == {"p": "secret"}  # input untouched
    assert "secret" not in json.dumps(out) and "c2VjcmV0" not in json.dumps(out)
    bare = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}, "data": {"k": "dg=="}}
    assert strip(bare) == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}}
    empty = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "e"}, "type": "Opaque"}
    assert strip(empty) is empty  # nothing to strip: no copy
    # Other kinds keep their data: ConfigMaps, and a custom resource that happens to be called Secret.
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    assert strip(cm) is cm
    custom = {"apiVersion": "example.com/v1", "kind": "Secret", "metadata": {"name": "c"}, "data": {"k": "v"}}
    assert strip(custom) is custom
    assert layout(Resource("", "v1", "secrets", True), [secret])["x"]["s"] == out
    ops = batch_ops(Resource("", "v1", "secrets", True), [("ADDED", secret)])
    assert ops == [{"op": "add", "path": "/x/s", "value": out}]


def test_layout_namespaced_cluster_scoped_and_ignored():
    objs = [{"metadata": {"name": "a", "namespace": "x"}}, {"metadata": {"name": "b", "namespace": "y"}},
            {"metadata": {"name": "c", "namespace": "x", "managedFields": []}}]
    assert layout(RS, objs, frozenset({"y"})) == {"x": {"a": objs[0], "c": {"metadata": {"name": "c", "namespace": "x"}}}}
    assert layout(CLUSTERS, [{"metadata": {"name": "c"}}]) == {"c": {"metadata": {"name": "c"}}}
    assert layout(RS, []) == {}


def test_object_path():
    assert object_path(RS, "kubernetes", {"metadata": {"name": "a", "namespace": "x"}}) == \
        ["kubernetes", "replicasets", "x", "a"]
    assert object_path(CLUSTERS, "k8s", {"metadata": {"name": "c"}}) == ["k8s", "clusters", "c"]


def test_namespace_field_selector_excludes_each_ignored_namespace():
    assert namespace_field_selector(frozenset()) is None
    assert namespace_field_selector(["b", "a", "b"]) == "metadata.namespace!=a,metadata.namespace!=b"


def test_batch_ops_add_stripped_objects_and_remove_deleted_ones():
    noisy = {"metadata": {"name": "a~b", "namespace": "x", "managedFields": [{}]}, "spec": {}}
    gone = {"metadata": {"name": "c", "namespace": "y"}}
    assert batch_ops(RS, [("MODIFIED", noisy), ("DELETED", gone)]) == [
        {"op": "add", "path": "/x/a~0b", "value": {"metadata": {"name": "a~b", "namespace": "x"}, "spec": {}}},
        {"op": "remove", "path": "/y/c"}]
    assert batch_ops(CLUSTERS, [("ADDED", {"metadata": {"name": "eu/1"}})]) == [
        {"op": "add", "path": "/eu~11", "value": {"metadata": {"name": "eu/1"}}}]
    assert noisy["metadata"]["managedFields"] == [{}]  # the cached object is not modified


def test_retryable_writes():
    assert retryable(OpaUnavailable("down", status=503))
    assert retryable(OpaRequestError("who", status=401))
    assert not retryable(OpaRequestError("bad path", status=404))
    assert not retryable(ValueError())


# -- policy status ---------------------------------------------------------------------


def test_module_ids_and_data_hash():
    assert module_ids("ns", "cm", {"b.rego": "B", "a.rego": "A"}) == {"ns/cm/a.rego": "A", "ns/cm/b.rego": "B"}
    assert module_ids("ns", "cm", None) == {}
    assert data_hash({"a": "1", "b": "2"}) == data_hash({"b": "2", "a": "1"}) != data_hash({"a": "1"})
    assert data_hash(None) == data_hash({})


def test_status_value_is_canonical():
    assert status_value({}) == '{"status":"ok"}'
    errs = {"ns/cm/b": [{"code": "rego_parse_error", "message": "m2", "location": {"file": "ns/cm/b", "row": 1, "col": 2}}],
            "ns/cm/a": [{"code": "rego_type_error", "message": "m1", "location": {"file": "ns/cm/a", "row": 3, "col": 1}}]}
    value = status_value(errs)
    assert " " not in value
    doc = json.loads(value)
    assert doc["status"] == "error" and [e["message"] for e in doc["errors"]] == ["m1", "m2"]
    assert status_value(errs) == status_value(dict(reversed(list(errs.items()))))  # stable: no flapping


def test_normalize_errors_fills_code_message_location():
    out = normalize_errors("ns/cm/k", [{"message": "x"}, "plain"])
    assert out == [{"message": "x", "code": "invalid_parameter", "location": {"file": "ns/cm/k"}},
                   {"message": "plain", "code": "invalid_parameter", "location": {"file": "ns/cm/k"}}]
    kept = {"code": "rego_parse_error", "message": "m", "location": {"file": "f", "row": 2, "col": 5}}
    assert normalize_errors("f", [kept]) == [kept]
    assert normalize_errors("f", [])[0]["location"] == {"file": "f"}


# -- change signal -----------------------------------------------------------------------


async def test_change_signal_wait_and_kinds():
    sig = ChangeSignal()
    waiter = asyncio.create_task(sig.wait(0))
    await asyncio.sleep(0)
    assert not waiter.done()
    sig.notify("data:replicasets")
    sig.notify("policy")
    sig.notify("data:replicasets")
    assert await asyncio.wait_for(waiter, 1) >= 1
    assert sig.generation == 3
    assert sig.kinds_since(0) == ["policy", "data:replicasets"]
    assert sig.kinds_since(2) == ["data:replicasets"]
    assert sig.kinds_since(3) == []
    assert await asyncio.wait_for(sig.wait(2), 1) == 3  # already past: returns at once


# -- flags ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--replicate", "replicasets"], "--replicate"),
        (["--replicate-cluster", "a/b/c/d"], "--replicate-cluster"),
        (["--listen", "nowhere"], "--listen"),
        (["--listen", "127.0.0.1:99999"], "--listen"),
        (["--enable-data=maybe"], "--enable-data"),
        (["--opa-check-interval", "0"], "--opa-check-interval"),
        (["--replicate-path", "a/b"], "--replicate-path"),
        (["--admission-package", "io/k8s/federation/admission"], "--admission-package"),
        (["--remediate", "enforce", "--replicate", "v1/configmaps"], "--remediate-resource"),
        (["--replicate", "v1/configmaps", "--replicate-cluster", "x/v1/configmaps"], "more than once"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_kube_mgmt_style_flags():
    c = parse_args(["--opa-url", "http://opa:8181/v1", "--replicate", "apps/v1/replicasets",
                    "--replicate-cluster", "federation.fedplace.io/v1beta1/clusters",
                    "--enable-policies=false", "--replicate-ignore-namespaces", "kube-system,opa"])
    assert [str(r) for r in c.resources] == ["apps/v1/replicasets", "federation.fedplace.io/v1beta1/clusters"]
    assert [r.namespaced for r in c.resources] == [True, False]
    assert not c.enable_policies and c.enable_data
    assert c.ignore_namespaces == {"kube-system", "opa"}
    assert c.policy_namespaces == [DEFAULT_POLICY_NAMESPACE]
    assert c.listen == ("127.0.0.1", 8182) and c.opa_check_interval == 1.0
    assert c.replicate_path == "kubernetes" and c.remediate == "off"


def test_defaults_and_remediation():
    c = parse_args(["--replicate", "apps/v1/replicasets", "--policy-namespace", "p1", "--policy-namespace", "p2",
                    "--remediate", "enforce", "--replicate-path", "k8s", "--listen", ":9000"])
    assert c.policy_namespaces == ["p1", "p2"]
    assert c.remediate == "enforce" and c.remediator.enabled
    assert c.listen == ("0.0.0.0", 9000)
    assert c.replicate_path == "k8s"


def test_python_m_sync_exits_2_on_a_bad_flag():
    proc = subprocess.run([sys.executable, "-m", "fedplace.sync", "--listen", "nowhere"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--listen" in proc.stderr


# -- reserved packages -----------------------------------------------------------------


@pytest.mark.parametrize("raw,package,row", [
    ("package system.authz\n", ("system", "authz"), 1),
    ("# OPA's API\n\npackage system  # comment\n", ("system",), 3),
    # OPA puts `package data.x` at data.data.x: not reserved.
    ('package data.system["authz"]\n', ("data", "system", "authz"), 1),
    ('package io.k8s["a-b"].c\n', ("io", "k8s", "a-b", "c"), 1),
    ("package systemd.units\n", ("systemd", "units"), 1),
])
def test_declared_package(raw, package, row):
    clause = package_clause(raw)
    assert (clause.path, clause.row) == (package, row)


def test_unreadable_package_raises_instead_of_guessing():
    for raw in ("x := 1\npackage system\n", "# only a comment\n", 'package system["\\q"]\n'):
        with pytest.raises(RegoScanError):
            package_clause(raw)


def test_reserved_package_error_only_for_system():
    err = reserved_package_error("ns/cm/authz.rego", "# x\npackage system.authz\n\nallow := true\n")
    assert err is not None and err["code"] == "fedplace_reserved_package"
    assert "package system.authz is data.system.authz, reserved" in err["message"]
    assert err["location"] == {"file": "ns/cm/authz.rego", "row": 2, "col": 1}
    assert reserved_package_error("m", "package systemd.units\n") is None
    assert reserved_package_error("m", "package io.k8s.federation.admission\n") is None


def test_allow_system_packages_flag():
    assert parse_args(["--opa-url", "http://o/v1"]).allow_system_packages is False
    assert parse_args(["--opa-url", "http://o/v1", "--allow-system-packages"]).allow_system_packages is True


def test_gc_threshold_flag_sets_the_youngest_generation_only():
    from fedplace.sync.__main__ import tune_gc

    before = gc.get_threshold()
    try:
        tune_gc(parse_args(["--opa-url", "http://o/v1"]))
        assert gc.get_threshold() == (50_000, *before[1:])
        tune_gc(parse_args(["--opa-url", "http://o/v1", "--gc-threshold", "700"]))
        assert gc.get_threshold() == (700, *before[1:])
    finally:
        gc.set_threshold(*before)


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_gc_threshold_must_be_a_positive_whole_number(value, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--opa-url", "http://o/v1", "--gc-threshold", value])
    assert exc.value.code == 2 and "--gc-threshold" in capsys.readouterr().err
