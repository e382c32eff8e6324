"""A placement rule set the code has never seen, loaded into OPA as an administrator would (over
HTTP: the devstack, or the real OPA when FEDPLACE_TEST_OPA_URL is set): ``fedplace explain``, the
placement page (``fedplace report``) and ``fedplace what-if`` each show what it decides and why,
for a ReplicaSet and a cluster-selector kind alike.

Two rule sets under fresh package names: one requires the cluster label ``gpu`` to be ``a100``
(an indexed requirement, imposed by the namespace), the other forbids one named cluster (a
``forbid``, imposed by the platform); both only for workloads annotated ``example.com/needs-gpu``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from fedplace.insight import explain, page, whatif
from fedplace.insight import report as report_command
from tests.insight.conftest import NS, POLICY_NS, cluster, rs, run_command

NAME_LABEL = "fedplace.io/cluster-name"
NEEDS = "example.com/needs-gpu"
GPUS = {"gce-europe-west1": "a100", "aws-eu-central-1": "t4", "azure-westeurope": None, "gce-us-central1": "a100"}
FROZEN = "gce-us-central1"


def rule_sets() -> tuple[str, str, dict[str, str]]:
    """Two rule sets under package names no code knows, as policy modules (id -> Rego)."""
    gpu, frozen = f"gpu_{uuid.uuid4().hex[:8]}", f"freeze_{uuid.uuid4().hex[:8]}"
    modules = {
        f"{POLICY_NS}/team-rules/{gpu}.rego": f"""package fedplace.rules.{gpu}

require contains {{
	"id": "gpu-model",
	"requires": "gpu a100",
	"imposed_by": "namespace",
	"source": "the team's hardware rule",
	"cluster": {{"label": "gpu", "in": ["a100"]}},
}} if input.metadata.annotations["{NEEDS}"] == "true"
""",
        f"{POLICY_NS}/team-rules/{frozen}.rego": f"""package fedplace.rules.{frozen}

forbid contains {{
	"cluster": name,
	"id": "frozen",
	"requires": "a cluster open for new work",
	"imposed_by": "platform",
	"value": "frozen",
}} if {{
	input.metadata.annotations["{NEEDS}"] == "true"
	some name, _ in data.kubernetes.clusters
	name == "{FROZEN}"
}}
""",
    }
    return gpu, frozen, modules


def gpu_cluster(name: str, region: str, pci: str) -> dict[str, Any]:
    c = cluster(name, region, pci)
    c["metadata"]["labels"][NAME_LABEL] = name
    if GPUS[name]:
        c["metadata"]["labels"]["gpu"] = GPUS[name]
    return c


def deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "annotations": {NEEDS: "true"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


async def load(federation: Any) -> tuple[str, str]:
    """The rule sets loaded, GPU labels on the clusters, a ReplicaSet and a Deployment asking for
    them (as the webhook admitted them) replicated."""
    gpu, frozen, modules = rule_sets()
    for module_id, source in modules.items():
        status, body = await federation.opa.put_policy(module_id, source)
        assert status == 200, body
    clusters = await federation.client.get_data(["kubernetes", "clusters"])
    await federation.client.put_data(["kubernetes", "clusters"], {
        n: gpu_cluster(n, c["status"]["region"], c["metadata"]["labels"]["pci-compliance-level"])
        for n, c in clusters.items()})
    trainer = await federation.admitted(rs("trainer", {NEEDS: "true"}))
    await federation.client.put_data(["kubernetes", "replicasets", NS, "trainer"], trainer)
    await federation.client.put_data(["kubernetes", "deployments", NS],
                                     {"inference": await federation.admitted(deployment("inference"))})
    return gpu, frozen


async def test_explain_the_page_and_what_if_read_a_rule_set_never_seen(federation: Any, tmp_path: Any):
    gpu, frozen = await load(federation)

    # fedplace explain: per cluster each forbidding rule with its values
    f = tmp_path / "trainer.json"
    f.write_text(json.dumps(rs("trainer", {NEEDS: "true"})))
    code, out, err = await run_command(explain, ["-f", str(f), *federation.flags()])
    assert code == 0, err
    assert "placement: a cluster open for new work, gpu a100: 1 of 4 clusters eligible" in out
    rows = {line.split()[1]: line for line in out.splitlines() if line.strip()[:1] in ("✓", "✗")}
    assert rows["gce-europe-west1"].lstrip().startswith("✓ gce-europe-west1  selected")
    assert f"label gpu t4 ✗ gpu a100 [gpu-model: rule set {gpu}, imposed by namespace]" in rows["aws-eu-central-1"]
    assert f"label gpu (none) ✗ gpu a100 [gpu-model: rule set {gpu}, imposed by namespace]" in rows["azure-westeurope"]
    assert (f"rule frozen ✗ a cluster open for new work [frozen: rule set {frozen}, imposed by platform]"
            in rows[FROZEN])

    # the placement page, from OPA (fedplace report): each cell's reason from the rule sets
    code, out, err = await run_command(report_command, ["-o", "json", *federation.flags()])
    assert code == 0, err
    view = json.loads(out)
    kinds = {w["name"]: w for w in view["workloads"]}
    assert {"trainer", "inference"} <= set(kinds), "the cluster-selector kind is shown by default"
    assert kinds["trainer"]["requires"] == kinds["inference"]["requires"] == "a cluster open for new work, gpu a100"
    assert kinds["trainer"]["placement"] == kinds["inference"]["placement"] == ["gce-europe-west1"]
    html = page.render(view)
    reasons = json.loads(html.split('id="matrix-reasons">')[1].split("</script>")[0])
    texts = reasons["texts"]
    assert any(t.startswith("not allowed — gpu-model ✗ gpu a100 (the cluster has t4; rule set "
                            f"{gpu}, imposed by namespace)") for t in texts)
    assert any(f"frozen ✗ a cluster open for new work (the cluster has frozen; rule set {frozen}, imposed by "
               "platform)" in t for t in texts)
    assert any(t.startswith("runs here — placement rules ✓ (a cluster open for new work, gpu a100)") for t in texts)

    # fedplace what-if: a GPU label change moves the ReplicaSet and the Deployment, counted by --max-moves
    code, doc, err = await whatif_json(federation, "--cluster-label", "aws-eu-central-1:gpu=a100")
    assert code == 1, err
    moves = {m["name"]: (m["kind"], m["before"], m["after"]) for m in doc["moves"]}
    assert moves == {
        "trainer": ("ReplicaSet", ["gce-europe-west1"], ["aws-eu-central-1", "gce-europe-west1"]),
        "inference": ("Deployment", ["gce-europe-west1"], ["aws-eu-central-1", "gce-europe-west1"]),
    }
    assert "2 moves > --max-moves 0" in doc["summary"]["over_threshold"]
    code, doc, err = await whatif_json(federation, "--cluster-label", "aws-eu-central-1:gpu=a100", "--max-moves", "2")
    assert code == 0, err


async def whatif_json(federation: Any, *argv: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = await run_command(whatif, [*argv, "-o", "json", *federation.flags()])
    return code, json.loads(out) if out.strip() else {}, err


async def test_explain_names_a_rule_that_fails_on_the_object(federation: Any, tmp_path: Any):
    """A rule set whose builtin fails on this object: ``fedplace explain`` says the policy fails
    (the webhook denies it), naming the module and row, instead of explaining a decision without
    the rule; exit code 2."""
    name = f"sizes_{uuid.uuid4().hex[:8]}"
    module = f"{POLICY_NS}/team-rules/{name}.rego"
    source = f"""package fedplace.rules.{name}

forbid contains {{"cluster": c, "id": "size", "requires": "room"}} if {{
	some c, _ in data.kubernetes.clusters
	to_number(input.metadata.annotations["example.com/size"]) > 4
}}
"""
    status, body = await federation.opa.put_policy(module, source)
    assert status == 200, body
    f = tmp_path / "odd.json"
    f.write_text(json.dumps(rs("odd", {"example.com/size": "huge"})))
    code, out, err = await run_command(explain, ["-f", str(f), *federation.flags()])
    assert code == 2, (out, err)
    assert "the placement policy fails on this object (the webhook denies it)" in err, err
    assert f"{module}:5: eval_builtin_error: to_number" in err, err
    f.write_text(json.dumps(rs("small", {"example.com/size": "3"})))
    code, out, err = await run_command(explain, ["-f", str(f), *federation.flags()])
    assert code == 0, err
