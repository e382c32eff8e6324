# Unit tests of the placement explanation (placement_explain.rego); run by `opa test policies/`
# and by the project's suite (tests/policies) under OPA's evaluator and the engine.
package io.k8s.federation.explain_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.explain

clusters := {
	"gce-europe-west1": {"metadata": {"name": "gce-europe-west1", "labels": {"pci-compliance-level": "2"}}, "status": {"region": "europe-west1"}},
	"aws-eu-central-1": {"metadata": {"name": "aws-eu-central-1", "labels": {"pci-compliance-level": "1"}}, "status": {"region": "eu-central-1"}},
	"azure-westeurope": {"metadata": {"name": "azure-westeurope", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "westeurope"}},
	"gce-us-central1": {"metadata": {"name": "gce-us-central1", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "us-central1"}},
	"aws-eu-west-1-odd": {"metadata": {"name": "aws-eu-west-1-odd", "labels": {"pci-compliance-level": "high"}}, "status": {"region": "eu-west-1"}},
}

rs(annotations) := {
	"apiVersion": "apps/v1",
	"kind": "ReplicaSet",
	"metadata": {"name": "nginx", "namespace": "default", "annotations": annotations},
}

prefs_key := "federation.kubernetes.io/replica-set-preferences"

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

check(entry, requirement) := c if {
	some c in entry.checks
	c.requirement == requirement
}

test_each_requirement_with_the_cluster_value_and_the_required_one if {
	packs := explain.packs with input as rs({eu_key: "true", pci_key: "2"}) with data.kubernetes.clusters as clusters
	doc := packs.placement
	doc.applies == true
	[r.name | some r in doc.requirements] == ["eu-jurisdiction", "pci-compliance-level"]
	aws := doc.clusters["aws-eu-central-1"]
	check(aws, "eu-jurisdiction") == {"requirement": "eu-jurisdiction", "label": "region", "value": "eu-central-1", "required": "EU", "ok": true}
	check(aws, "pci-compliance-level") == {"requirement": "pci-compliance-level", "label": "PCI", "value": "1", "required": ">= 2", "ok": false}
	aws.eligible == false
	aws.selected == false
	us := doc.clusters["gce-us-central1"]
	check(us, "eu-jurisdiction").ok == false
	check(us, "pci-compliance-level").ok == true
	doc.clusters["gce-europe-west1"].eligible == true
	doc.clusters["gce-europe-west1"].selected == true
	contains(doc.summary, "2 of 5 clusters eligible")
}

test_a_label_that_is_not_a_number_says_so if {
	packs := explain.packs with input as rs({pci_key: "1"}) with data.kubernetes.clusters as clusters
	c := check(packs.placement.clusters["aws-eu-west-1-odd"], "pci-compliance-level")
	c.ok == false
	c.note == "not a whole number: counts as level 0"
	c.value == "high"
}

# The explanation agrees with the decision: eligible is the policy's set, and
# selected is what the decision's replica-set-preferences lists.
test_the_explanation_agrees_with_the_decision if {
	every annotations in [
		{eu_key: "true"},
		{pci_key: "3"},
		{eu_key: "true", pci_key: "2"},
		{eu_key: "false", pci_key: "0"},
		{pci_key: "2", prefs_key: json.marshal({"clusters": {"gce-us-central1": {"weight": 2}}})},
	] {
		packs := explain.packs with input as rs(annotations) with data.kubernetes.clusters as clusters
		decision := admission with input as rs(annotations) with data.kubernetes.clusters as clusters
		eligible := {name | some name, entry in packs.placement.clusters; entry.eligible}
		selected := {name | some name, entry in packs.placement.clusters; entry.selected}
		policy_eligible := data.io.k8s.federation.placement.eligible_clusters with input as rs(annotations)
			with data.kubernetes.clusters as clusters
		eligible == policy_eligible
		selected == object.keys(decision.annotations[prefs_key].clusters)
	}
}

test_no_eligible_cluster_selects_none if {
	packs := explain.packs with input as rs({eu_key: "true", pci_key: "4"}) with data.kubernetes.clusters as clusters
	count({name | some name, entry in packs.placement.clusters; entry.eligible}) == 0
	count({name | some name, entry in packs.placement.clusters; entry.selected}) == 0
	contains(packs.placement.summary, "0 of 5 clusters eligible")
}

test_developer_preferences_naming_a_forbidden_cluster if {
	mine := json.marshal({"clusters": {"gce-us-central1": {"weight": 1}, "gce-europe-west1": {"weight": 1}}})
	packs := explain.packs with input as rs({eu_key: "true", prefs_key: mine}) with data.kubernetes.clusters as clusters
	doc := packs.placement
	doc.clusters["gce-us-central1"].requested == true
	doc.clusters["gce-us-central1"].eligible == false
	doc.clusters["azure-westeurope"].requested == false
	count({name | some name, entry in doc.clusters; entry.selected}) == 0
	contains(doc.summary, "names 2, 1 of them forbidden")
}

test_unconstrained_replicaset if {
	packs := explain.packs with input as rs({"team": "web"}) with data.kubernetes.clusters as clusters
	packs.placement.applies == true
	packs.placement.clusters == {}
	packs.placement.requirements == []
}

test_other_kinds_do_not_apply if {
	packs := explain.packs with input as {"kind": "Pod", "metadata": {"annotations": {eu_key: "true"}}}
		with data.kubernetes.clusters as clusters
	packs.placement.applies == false
	contains(packs.placement.summary, "this is a Pod")
}

test_no_clusters_replicated if {
	packs := explain.packs with input as rs({pci_key: "1"}) with data.kubernetes.clusters as {}
	packs.placement.clusters == {}
	contains(packs.placement.summary, "0 of 0 clusters eligible")
}

# Malformed data never makes the explanation fail (a builtin error would be an
# evaluation error in the engine and an undefined document in OPA).
test_odd_cluster_data_is_tolerated if {
	odd := {
		"a": {"status": {"region": 5}, "metadata": {"labels": {"pci-compliance-level": 7}}},
		"c": {},
	}
	packs := explain.packs with input as rs({eu_key: "true", pci_key: "1"}) with data.kubernetes.clusters as odd
	check(packs.placement.clusters.a, "eu-jurisdiction").ok == false
	check(packs.placement.clusters.c, "pci-compliance-level").value == "0"
	count(packs.placement.clusters) == 2
}
