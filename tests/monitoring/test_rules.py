"""fedplace's alerting rules and dashboard, checked offline.

* ``promtool check rules`` (Prometheus' own parser) accepts the shipped rule file
  (deploy/components/monitoring/fedplace.rules.yml), and ``promtool test rules``
  runs its unit tests (fedplace.rules.test.yml beside this file);
* every alert has a unit test in which it fires and then clears;
* every metric the rules and the dashboard name is one the code exports (its
  series come with the suffixes Prometheus gives counters and histograms).

The promtool checks are skipped, saying so, where Debian's ``prometheus``
package is not installed; the others always run. The end-to-end check against a
running stack is test_e2e.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import yaml
from prometheus_client import REGISTRY

from tests.monitoring.conftest import DASHBOARD, ROOT, RULE_TESTS, RULES

METRIC = re.compile(r"\b(fedplace_[a-z0-9_]+)")


def alerts() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def exported_series() -> set[str]:
    """Every series name the webhook, the sync and the remediator export."""
    import fedplace.admission.lifecycle  # noqa: F401 - registers the metrics
    import fedplace.sync.app  # noqa: F401

    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
            names.add(family.name + suffix)
    return names


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_promtool_accepts_the_rules(promtool: str):
    proc = run(promtool, "check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in proc.stdout


def test_promtool_unit_tests_pass(promtool: str):
    proc = run(promtool, "test", "rules", str(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_fires_and_then_clears_in_a_unit_test():
    doc = yaml.safe_load(RULE_TESTS.read_text())
    assert [(RULE_TESTS.parent / f).resolve() for f in doc["rule_files"]] == [RULES]  # the shipped file itself
    covered = set()
    for test in doc["tests"]:
        checks: dict[str, list[tuple[str, bool]]] = {}
        for check in test.get("alert_rule_test", []):
            checks.setdefault(check["alertname"], []).append((check["eval_time"], bool(check.get("exp_alerts"))))
        for name, seq in checks.items():
            fired = [i for i, (_, firing) in enumerate(seq) if firing]
            if fired and any(not firing for _, firing in seq[fired[0] + 1:]) and not seq[0][1]:
                covered.add(name)  # quiet, then firing, then cleared
    assert sorted(set(alerts()) - covered) == []


def test_every_alert_says_what_and_how_bad():
    for name, rule in alerts().items():
        assert name.startswith("Fedplace"), name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name


def test_rules_and_dashboard_name_only_exported_metrics():
    exported = exported_series()
    named = {m for rule in alerts().values() for m in METRIC.findall(rule["expr"])}
    named |= {m for expr in dashboard_exprs() for m in METRIC.findall(expr)}
    assert named, "no metric found"
    assert sorted(named - exported) == []


def test_dashboard_is_well_formed():
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] == "fedplace" and doc["title"]
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in doc["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["targets"], panel
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            # only Grafana's rate interval is templated: test_e2e substitutes it
            assert not re.findall(r"\$(?!__rate_interval\b)\w+", target["expr"]), target["expr"]
