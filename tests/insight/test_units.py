"""Pure parts of the ``fedplace`` command: flags, the proposal, label changes, the page's flags in the sync."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from fedplace.insight import cli
from fedplace.insight.evaluate import Decision
from fedplace.insight.view import excluded_of
from fedplace.insight.whatif import LabelChange, Threshold, apply_labels, bindings_of, compare_bindings, read_proposal
from fedplace.sync.config import parse_args
from tests.insight.conftest import cluster

LIVE = ["ns/cm/a.rego", "ns/cm/b.rego", "ns/other/lib.rego", "opa-kube-sync/replicated-root.rego"]


def test_one_command_with_four_subcommands(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("explain", "what-if", "report", "limits"):
        assert name in out
    parser = cli.build_parser()
    for name in ("explain", "what-if", "report", "limits"):  # the services' OPA flags everywhere
        argv = {"explain": ["-f", "x.yaml"], "limits": ["-n", "shop"]}.get(name, [])
        args = parser.parse_args([name, *argv, "--opa-url", "http://o:8181/v1", "--opa-token-file", "t",
                                  "--opa-ca-file", "ca", "--opa-timeout", "3"])
        assert (args.opa_url, args.opa_token_file, args.opa_ca_file, args.opa_timeout) == \
            ("http://o:8181/v1", "t", "ca", 3.0)


def test_label_changes_and_thresholds():
    assert LabelChange.parse("eu-*:tier=gold") == LabelChange("eu-*", "tier", "gold")
    assert LabelChange.parse("a:pci-compliance-level-") == LabelChange("a", "pci-compliance-level", None)
    assert LabelChange.parse("a:k=") == LabelChange("a", "k", "")
    for bad in ("nocolon", ":k=v", "a:", "a:=v", "a:-"):
        with pytest.raises(argparse.ArgumentTypeError):
            LabelChange.parse(bad)
    assert Threshold.parse("5").limit(1000) == 5 and Threshold.parse("5%").limit(1000) == 50
    for bad in ("-1", "x", "150%"):
        with pytest.raises(argparse.ArgumentTypeError):
            Threshold.parse(bad)


def test_apply_labels_copies_what_it_changes():
    clusters = {"eu-1": cluster("eu-1", "europe-west1", "2"), "eu-2": cluster("eu-2", "eu-west-1", "1"),
                "us-1": cluster("us-1", "us-east1", "3")}
    changed, touched = apply_labels(clusters, [LabelChange("eu-*", "pci-compliance-level", None),
                                               LabelChange("us-1", "tier", "gold")])
    assert touched == ["eu-1", "eu-2", "us-1"]
    assert changed["eu-1"]["metadata"]["labels"] == {}
    assert changed["us-1"]["metadata"]["labels"] == {"pci-compliance-level": "3", "tier": "gold"}
    assert clusters["eu-1"]["metadata"]["labels"] == {"pci-compliance-level": "2"}, "the original is untouched"
    with pytest.raises(ValueError, match="no replicated cluster matches"):
        apply_labels(clusters, [LabelChange("ap-*", "a", "b")])


def test_read_proposal(tmp_path: Path):
    manifest = tmp_path / "cms.yaml"
    manifest.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"},
         "data": {"a.rego": "package a\n", "c.rego": "package c\n"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ignored"}},
    ]))
    rego = tmp_path / "lib.rego"
    rego.write_text("package lib\n")
    new = tmp_path / "new.rego"
    new.write_text("package new\n")
    p = read_proposal([str(manifest), str(rego), str(new), f"explicit/id.rego={new}"], [], LIVE, "ns")
    assert p.puts == {"ns/cm/a.rego": "package a\n", "ns/cm/c.rego": "package c\n",
                      "ns/other/lib.rego": "package lib\n", "what-if/new.rego": "package new\n",
                      "explicit/id.rego": "package new\n"}
    assert p.deletes == ["ns/cm/b.rego"]  # the ConfigMap no longer has it
    with pytest.raises(ValueError, match="no ConfigMap"):
        read_proposal([str(_service_manifest(tmp_path))], [], LIVE, "ns")
    twice = ["ns/a/x.rego", "ns/b/x.rego"]
    (tmp_path / "x.rego").write_text("package x\n")
    with pytest.raises(ValueError, match="say which with ID=FILE"):
        read_proposal([str(tmp_path / "x.rego")], [], twice, "ns")


def _service_manifest(tmp_path: Path) -> Path:
    empty = tmp_path / "svc.yaml"
    empty.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}))
    return empty


def test_the_sync_serves_the_page_only_when_asked():
    base = ["--replicate", "apps/v1/replicasets"]
    assert parse_args(base).placement_page is False
    config = parse_args([*base, "--placement-page", "--placement-page-refresh", "3"])
    assert config.placement_page is True and config.placement_page_refresh == 3.0
    assert parse_args([*base, "--placement-page=false"]).placement_page is False
    with pytest.raises(SystemExit):
        parse_args([*base, "--placement-page-refresh", "0"])


def test_bindings_and_their_exclusion_changes():
    rb = {"kind": "ResourceBinding", "metadata": {"name": "a-deployment", "namespace": "shop"},
          "spec": {"resource": {"kind": "Deployment", "namespace": "shop", "name": "a"}}}
    crb = {"kind": "ClusterResourceBinding", "metadata": {"name": "g"},
           "spec": {"resource": {"kind": "IngressClass", "name": "g"}}}
    data = {"resourcebindings": {"shop": {"a-deployment": rb}}, "clusterresourcebindings": {"g": crb}}
    found = bindings_of(data, "resourcebindings", "clusterresourcebindings")
    assert [(b.resource, b.namespace, b.name, b.title) for b in found] == [
        ("resourcebindings", "shop", "a-deployment", "ResourceBinding shop/a-deployment"),
        ("clusterresourcebindings", "", "g", "ClusterResourceBinding g")]
    assert bindings_of(data, "", "") == []

    def decided(excluded: object) -> Decision:
        return Decision(value={"annotations": {"fedplace.io/excluded-clusters": excluded}})

    changes = compare_bindings(found, [decided(["b"]), decided('["a","b"]')],
                               [decided(["a", "b"]), Decision(error="boom")], ["a", "b"])
    assert [(c["name"], c["before"], c["after"], c["added"], c["removed"], c["every_cluster_before"],
             c["every_cluster"], c["template"]) for c in changes] == [
        ("a-deployment", ["b"], ["a", "b"], ["a"], [], False, True, "Deployment shop/a"),
        ("g", ["a", "b"], None, [], ["a", "b"], True, False, "IngressClass g")]
    assert changes[1]["error"] == "boom"
    assert compare_bindings(found, [decided([])] * 2, [decided("[]")] * 2, []) == []
    # The compact form: every cluster but those named.
    changes = compare_bindings(found, [decided('{"allExcept":["a"]}'), decided(["b"])],
                               [decided({"allExcept": []}), decided({"allExcept": ["a"]})], ["a", "b", "c"])
    assert [(c["name"], c["before"], c["after"], c["every_cluster_before"], c["every_cluster"]) for c in changes] == [
        ("a-deployment", ["b", "c"], ["a", "b", "c"], False, True),
        ("g", ["b"], ["b", "c"], False, False)]


def test_excluded_of_reads_either_form():
    assert excluded_of('["b","a"]', ["a", "b", "c"]) == ["a", "b"]
    assert excluded_of('{"allExcept":["a"]}', ["a", "b", "c"]) == ["b", "c"]
    assert excluded_of({"allExcept": []}, ["a", "b"]) == ["a", "b"]
    assert excluded_of('{"allExcept":"a"}', ["a"]) is None
    assert excluded_of("not json", ["a"]) is None
    assert excluded_of(None, ["a"]) is None


def test_insight_does_not_import_the_sync():
    """Packages depend one way: the sync may use insight's page, insight never the sync's modules
    (what both need lives in fedplace.common)."""
    import ast

    root = Path(__file__).resolve().parents[2] / "insight"
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n == "fedplace.sync" or n.startswith("fedplace.sync.")]
    assert found == []
