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
	{r.name | some r in doc.requirements} == {"eu-jurisdiction", "pci-compliance-level"}
	aws := doc.clusters["aws-eu-central-1"]
	check(aws, "eu-jurisdiction") == {
		"requirement": "eu-jurisdiction", "label": "region", "value": "eu-central-1",
		"required": "EU jurisdiction required", "ok": true, "imposed_by": "workload", "set": "eu_pci",
	}
	check(aws, "pci-compliance-level") == {
		"requirement": "pci-compliance-level", "label": "label pci-compliance-level", "value": "1",
		"required": "PCI compliance level >= 2", "ok": false, "imposed_by": "workload", "set": "eu_pci",
	}
	some eu in doc.requirements
	eu.name == "eu-jurisdiction"
	eu == {
		"name": "eu-jurisdiction", "label": "region", "required": "EU jurisdiction required",
		"source": `annotation policy.federation.alpha.kubernetes.io/eu-jurisdiction-required: "true"`,
		"imposed_by": "workload", "set": "eu_pci",
	}
	aws.eligible == false
	aws.selected == false
	us := doc.clusters["gce-us-central1"]
	check(us, "eu-jurisdiction").ok == false
	check(us, "pci-compliance-level").ok == true
	doc.clusters["gce-europe-west1"].eligible == true
	doc.clusters["gce-europe-west1"].selected == true
	contains(doc.summary, "2 of 5 clusters eligible")
}

# A label that is not a whole number counts as 0 against a minimum; the check
# shows the label as the cluster has it.
test_a_label_that_is_not_a_number_fails_a_minimum if {
	packs := explain.packs with input as rs({pci_key: "1"}) with data.kubernetes.clusters as clusters
	c := check(packs.placement.clusters["aws-eu-west-1-odd"], "pci-compliance-level")
	c.ok == false
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
		selected == object.keys(annotation_value(decision.annotations[prefs_key]).clusters)
	}
}

# The policy's own preferences come as the annotation's text, the developer's as a value.
annotation_value(v) := json.unmarshal(v) if is_string(v)

else := v

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
	check(packs.placement.clusters.a, "eu-jurisdiction").value == null
	check(packs.placement.clusters.a, "pci-compliance-level").value == null
	check(packs.placement.clusters.c, "pci-compliance-level").value == null
	check(packs.placement.clusters.c, "pci-compliance-level").ok == false
	count(packs.placement.clusters) == 2
}

# A Karmada Cluster has its region in spec.region: read as lib.rego reads it.
test_a_spec_region_is_read_as_the_decision_reads_it if {
	karmada_clusters := {"k-eu": {"metadata": {"labels": {"pci-compliance-level": "2"}}, "spec": {"region": "eu-west-1"}}}
	packs := explain.packs with input as rs({eu_key: "true"}) with data.kubernetes.clusters as karmada_clusters
	c := check(packs.placement.clusters["k-eu"], "eu-jurisdiction")
	c.value == "eu-west-1"
	c.ok == true
	packs.placement.clusters["k-eu"].eligible == true
}

# -- kinds placed through the cluster selector -----------------------------------------

name_label := "fedplace.io/cluster-name"

selector_key := "federation.alpha.kubernetes.io/cluster-selector"

# Every cluster but aws-eu-west-1-odd carries the name label.
named_clusters := object.union(clusters, {name: {"metadata": {"labels": {name_label: name}}} |
	some name, _ in clusters
	name != "aws-eu-west-1-odd"
})

deployment(annotations) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "web", "namespace": "default", "annotations": annotations},
}

test_a_deployment_is_explained_with_the_name_label if {
	packs := explain.packs with input as deployment({eu_key: "true", pci_key: "2"}) with data.kubernetes.clusters as named_clusters
	doc := packs.placement
	doc.applies == true
	{r.name | some r in array.slice(doc.requirements, 0, 2)} == {"eu-jurisdiction", "pci-compliance-level"}
	doc.requirements[2].name == "cluster-name-label"
	gce := doc.clusters["gce-europe-west1"]
	check(gce, "cluster-name-label") == {"requirement": "cluster-name-label", "label": name_label, "value": "gce-europe-west1", "required": "gce-europe-west1", "ok": true}
	gce.eligible == true
	gce.selected == true
	odd := doc.clusters["aws-eu-west-1-odd"]
	check(odd, "cluster-name-label").ok == false
	check(odd, "cluster-name-label").note == "label missing: the policy cannot select this cluster"
	odd.eligible == false
	contains(doc.summary, "2 of 5 clusters eligible (selectable through label fedplace.io/cluster-name)")
}

test_a_label_naming_another_cluster_says_so if {
	impostor := json.patch(named_clusters, [{"op": "replace", "path": "/azure-westeurope/metadata/labels/fedplace.io~1cluster-name", "value": "gce-europe-west1"}])
	packs := explain.packs with input as deployment({pci_key: "3"}) with data.kubernetes.clusters as impostor
	c := check(packs.placement.clusters["azure-westeurope"], "cluster-name-label")
	c.ok == false
	c.value == "gce-europe-west1"
	c.note == "names another cluster: the policy cannot select this one"
}

test_the_developer_selector_is_checked_per_cluster if {
	mine := json.marshal([{"key": "pci-compliance-level", "operator": "Gt", "values": ["2"]}, {"key": "tier", "operator": "DoesNotExist"}])
	packs := explain.packs with input as deployment({eu_key: "true", selector_key: mine}) with data.kubernetes.clusters as named_clusters
	doc := packs.placement
	[r.name | some r in doc.requirements] == ["eu-jurisdiction", "cluster-name-label", "cluster-selector"]
	azure := doc.clusters["azure-westeurope"]
	[c | some c in azure.checks; c.requirement == "cluster-selector"] == [
		{"requirement": "cluster-selector", "label": "pci-compliance-level", "value": "3", "required": `Gt ["2"]`, "ok": true},
		{"requirement": "cluster-selector", "label": "tier", "value": "", "required": "DoesNotExist", "ok": true, "note": "label absent"},
	]
	azure.requested == true
	azure.selected == true
	gce := doc.clusters["gce-europe-west1"]
	gce.requested == false
	gce.eligible == true
	gce.selected == false
	contains(doc.summary, "the developer's cluster selector admits 1 of them")
}

test_the_selector_explanation_agrees_with_the_decision if {
	every annotations in [
		{eu_key: "true"},
		{pci_key: "3"},
		{eu_key: "true", pci_key: "2", selector_key: json.marshal([{"key": name_label, "operator": "NotIn", "values": ["azure-westeurope"]}])},
		{pci_key: "1", selector_key: json.marshal([{"key": "pci-compliance-level", "operator": "Lt", "values": ["3"]}])},
	] {
		packs := explain.packs with input as deployment(annotations) with data.kubernetes.clusters as named_clusters
		decision := admission with input as deployment(annotations) with data.kubernetes.clusters as named_clusters
		selected := {name | some name, entry in packs.placement.clusters; entry.selected}
		named := {v | some r in decision.annotations[selector_key]; r.key == name_label; some v in r.values}
		admitted := data.io.k8s.federation.placement.matching_clusters(decision.annotations[selector_key]) with data.kubernetes.clusters as named_clusters
		selected == named & admitted
	}
}

test_unconstrained_deployment if {
	packs := explain.packs with input as deployment({"team": "web"}) with data.kubernetes.clusters as named_clusters
	packs.placement.applies == true
	packs.placement.clusters == {}
}

test_other_kinds_name_the_selector_kinds if {
	packs := explain.packs with input as {"kind": "Pod", "metadata": {}} with data.kubernetes.clusters as clusters
	contains(packs.placement.summary, "and the kinds ConfigMap, DaemonSet, Deployment, Ingress, Job, Secret, Service, StatefulSet through the cluster selector")
}

test_malformed_settings_are_named if {
	packs := explain.packs with input as {"kind": "Pod", "metadata": {}} with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings.selector_kinds as 5
	contains(packs.placement.summary, "its settings are malformed")
	packs.placement.applies == false
}
