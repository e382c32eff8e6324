# Unit tests of placement through the cluster selector (selector.rego and the
# decision rules of placement.rego): the format, matching per operator, the
# merge with the developer's selector, the source key and the settings.
package io.k8s.federation.selector_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.placement

name_label := "fedplace.io/cluster-name"

selector_key := "federation.alpha.kubernetes.io/cluster-selector"

source_key := "fedplace.io/cluster-selector-source"

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

labelled(name, region, labels) := {
	"metadata": {"name": name, "labels": object.union({name_label: name}, labels)},
	"status": {"region": region},
}

clusters := {
	"gce-europe-west1": labelled("gce-europe-west1", "europe-west1", {"pci-compliance-level": "2", "tier": "gold"}),
	"aws-eu-central-1": labelled("aws-eu-central-1", "eu-central-1", {"pci-compliance-level": "3", "tier": "silver"}),
	"azure-westeurope": labelled("azure-westeurope", "westeurope", {"pci-compliance-level": "1"}),
	"gce-us-central1": labelled("gce-us-central1", "us-central1", {"pci-compliance-level": "3", "tier": "gold"}),
	# Meets every requirement but cannot be selected: no name label.
	"aws-eu-west-1": {"metadata": {"name": "aws-eu-west-1", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "eu-west-1"}},
	# Its name label names another cluster: not selectable either.
	"impostor": {"metadata": {"name": "impostor", "labels": {name_label: "gce-europe-west1", "pci-compliance-level": "3"}}, "status": {"region": "europe-west4"}},
}

obj(kind, annotations) := {
	"apiVersion": "v1",
	"kind": kind,
	"metadata": {"name": "web", "namespace": "shop", "annotations": annotations},
}

deployment(annotations) := obj("Deployment", annotations)

decide(o) := d if {
	d := admission with input as o with data.kubernetes.clusters as clusters
}

name_in(names) := {"key": name_label, "operator": "In", "values": names}

# -- the decision -------------------------------------------------------------------------

test_constrained_deployment_gets_a_selector_naming_the_eligible_clusters if {
	d := decide(deployment({eu_key: "true", pci_key: "2"}))
	count(d.errors) == 0
	d.annotations[selector_key] == [name_in(["aws-eu-central-1", "gce-europe-west1"])]
	d.annotations[source_key] == "policy"
	not d.annotations["federation.kubernetes.io/replica-set-preferences"]
}

test_every_default_kind_is_placed_by_selector if {
	every kind in ["Deployment", "StatefulSet", "DaemonSet", "Job", "ConfigMap", "Secret", "Service", "Ingress"] {
		d := decide(obj(kind, {pci_key: "3"}))
		d.annotations[selector_key] == [name_in(["aws-eu-central-1", "gce-us-central1"])]
	}
}

test_other_kinds_stay_untouched if {
	every kind in ["Pod", "CronJob", "Namespace"] {
		d := decide(obj(kind, {pci_key: "3"}))
		count(d.annotations) == 0
		count(d.errors) == 0
	}
}

test_unconstrained_objects_are_untouched if {
	d := decide(deployment({"team": "web"}))
	count(d.annotations) == 0
	count(d.errors) == 0
}

test_replicasets_keep_replica_set_preferences if {
	d := decide(obj("ReplicaSet", {pci_key: "3"}))
	not d.annotations[selector_key]
	object.keys(json.unmarshal(d.annotations["federation.kubernetes.io/replica-set-preferences"]).clusters) == {"aws-eu-central-1", "gce-us-central1", "aws-eu-west-1", "impostor"}
}

test_unselectable_clusters_are_not_eligible if {
	# Without requirements every cluster is eligible; only the four named by their label are selectable.
	placement.selector_eligible == {"gce-europe-west1", "aws-eu-central-1", "azure-westeurope", "gce-us-central1"} with data.kubernetes.clusters as clusters
		with input as deployment({})
	d := decide(deployment({eu_key: "true", pci_key: "3"}))
	d.annotations[selector_key] == [name_in(["aws-eu-central-1"])]
}

test_no_eligible_cluster_is_an_error_naming_the_unselectable_ones if {
	d := admission with input as deployment({eu_key: "true", pci_key: "3"})
		with data.kubernetes.clusters as object.remove(clusters, ["aws-eu-central-1"])
	count(d.annotations) == 0
	d.errors == {"no cluster satisfies the placement policy (EU jurisdiction required, PCI compliance level >= 3); aws-eu-west-1, impostor not selectable, the label fedplace.io/cluster-name missing or not the cluster's name"}
}

test_no_cluster_at_all_is_an_error if {
	d := admission with input as deployment({pci_key: "1"}) with data.kubernetes.clusters as {}
	d.errors == {"no cluster satisfies the placement policy (PCI compliance level >= 1)"}
}

test_malformed_constraint_annotations_are_errors if {
	d := decide(deployment({eu_key: "yes", pci_key: "high"}))
	count({msg | some msg in d.errors; contains(msg, "must be")}) == 2
}

# -- merge with the developer's selector ------------------------------------------------------

test_developer_requirements_on_other_labels_are_kept_first if {
	mine := json.marshal([{"key": "tier", "operator": "In", "values": ["gold"]}])
	d := decide(deployment({pci_key: "2", selector_key: mine}))
	count(d.errors) == 0
	d.annotations[selector_key] == [
		{"key": "tier", "operator": "In", "values": ["gold"]},
		name_in(["aws-eu-central-1", "gce-europe-west1", "gce-us-central1"]),
	]
	d.annotations[source_key] == "policy"
}

test_developer_name_requirements_narrow_the_choice if {
	mine := json.marshal([name_in(["gce-us-central1", "aws-eu-central-1"])])
	d := decide(deployment({eu_key: "true", selector_key: mine}))
	count(d.errors) == 0
	d.annotations[selector_key] == [name_in(["aws-eu-central-1"])]
	d.annotations[source_key] == "developer"
}

test_developer_not_in_on_names_narrows_too if {
	mine := json.marshal([{"key": name_label, "operator": "NotIn", "values": ["gce-europe-west1"]}])
	d := decide(deployment({eu_key: "true", pci_key: "2", selector_key: mine}))
	d.annotations[selector_key] == [name_in(["aws-eu-central-1"])]
	d.annotations[source_key] == "developer"
}

test_a_contradiction_is_an_error_naming_requirements_and_eligible_clusters if {
	mine := json.marshal([{"key": "tier", "operator": "In", "values": ["gold"]}, name_in(["gce-us-central1"])])
	d := decide(deployment({eu_key: "true", selector_key: mine}))
	count(d.annotations) == 0
	d.errors == {concat("", [
		"federation.alpha.kubernetes.io/cluster-selector admits none of the clusters the placement policy allows: ",
		`[tier In ["gold"], fedplace.io/cluster-name In ["gce-us-central1"]] admits gce-us-central1; `,
		"eligible: aws-eu-central-1, azure-westeurope, gce-europe-west1 ",
		"(EU jurisdiction required)",
	])}
}

test_other_label_requirements_alone_can_contradict if {
	mine := json.marshal([{"key": "tier", "operator": "In", "values": ["silver"]}])
	d := decide(deployment({pci_key: "2", eu_key: "true", selector_key: mine}))
	count(d.errors) == 0
	d2 := decide(deployment({pci_key: "3", eu_key: "false", selector_key: json.marshal([{"key": "tier", "operator": "DoesNotExist"}])}))
	count(d2.errors) == 1
}

test_policy_written_name_requirements_are_recomputed if {
	earlier := json.marshal([{"key": "tier", "operator": "Exists"}, name_in(["gce-us-central1"])])
	d := decide(deployment({eu_key: "true", selector_key: earlier, source_key: "policy"}))
	count(d.errors) == 0
	d.annotations[selector_key] == [
		{"key": "tier", "operator": "Exists"},
		name_in(["aws-eu-central-1", "azure-westeurope", "gce-europe-west1"]),
	]
	d.annotations[source_key] == "policy"
}

test_the_decision_is_idempotent if {
	first := decide(deployment({pci_key: "2", selector_key: json.marshal([{"key": "tier", "operator": "Exists", "values": []}])}))
	again := decide(deployment({
		pci_key: "2",
		selector_key: json.marshal(first.annotations[selector_key]),
		source_key: first.annotations[source_key],
	}))
	again.annotations == first.annotations
	first.annotations[selector_key][0] == {"key": "tier", "operator": "Exists"}
}

test_developer_selection_is_idempotent if {
	first := decide(deployment({pci_key: "2", selector_key: json.marshal([name_in(["gce-europe-west1", "nowhere"])])}))
	again := decide(deployment({pci_key: "2", selector_key: json.marshal(first.annotations[selector_key]), source_key: "developer"}))
	again.annotations == first.annotations
	first.annotations[selector_key] == [name_in(["gce-europe-west1"])]
}

test_a_downgrade_recomputes_a_policy_selector if {
	first := decide(deployment({pci_key: "2"}))
	downgraded := json.patch(clusters, [{"op": "replace", "path": "/aws-eu-central-1/metadata/labels/pci-compliance-level", "value": "1"}])
	again := admission with input as deployment({pci_key: "2", selector_key: json.marshal(first.annotations[selector_key]), source_key: "policy"})
		with data.kubernetes.clusters as downgraded
	again.annotations[selector_key] == [name_in(["gce-europe-west1", "gce-us-central1"])]
}

# -- the format ------------------------------------------------------------------------------

selector_errors(raw) := decide(deployment({selector_key: raw})).errors

test_a_malformed_selector_is_an_error_even_without_constraints if {
	selector_errors("{not json") == {"annotation federation.alpha.kubernetes.io/cluster-selector is not valid JSON"}
	selector_errors(`{"key": "a"}`) == {`annotation federation.alpha.kubernetes.io/cluster-selector must be a JSON list of requirements {"key", "operator", "values"}, got object`}
	count(selector_errors(`[]`)) == 0
}

test_each_malformed_requirement_is_named if {
	raw := json.marshal([
		5,
		{"operator": "Exists"},
		{"key": "a", "operator": "Equals", "values": ["x"]},
		{"key": "a", "operator": "In", "values": "x"},
		{"key": "a", "operator": "In", "values": [1]},
		{"key": "a", "operator": "In"},
		{"key": "a", "operator": "NotIn", "values": []},
		{"key": "a", "operator": "Exists", "values": ["x"]},
		{"key": "a", "operator": "DoesNotExist", "values": ["x"]},
		{"key": "a", "operator": "Gt", "values": ["1", "2"]},
		{"key": "a", "operator": "Lt", "values": ["-1"]},
		{"key": "a", "operator": "Gt", "values": ["1000000000000000"]},
		{"key": "a", "operator": "In", "values": ["-bad-"]},
		{"key": "Bad Key", "operator": "Exists"},
	])
	errs := selector_errors(raw)
	prefix := "annotation federation.alpha.kubernetes.io/cluster-selector: requirement"
	errs == {
		sprintf(`%s 1: must be an object {"key", "operator", "values"}, got number`, [prefix]),
		sprintf("%s 2: key must be a label key (optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ .), got null", [prefix]),
		sprintf(`%s 3 (key "a"): operator must be one of DoesNotExist, Exists, Gt, In, Lt, NotIn, got "Equals"`, [prefix]),
		sprintf(`%s 4 (key "a"): values must be a list of strings`, [prefix]),
		sprintf(`%s 5 (key "a"): values must be a list of strings`, [prefix]),
		sprintf(`%s 6 (key "a"): operator In needs at least one value`, [prefix]),
		sprintf(`%s 7 (key "a"): operator NotIn needs at least one value`, [prefix]),
		sprintf(`%s 8 (key "a"): operator Exists takes no values, got 1`, [prefix]),
		sprintf(`%s 9 (key "a"): operator DoesNotExist takes no values, got 1`, [prefix]),
		sprintf(`%s 10 (key "a"): operator Gt needs exactly one value, got 2`, [prefix]),
		sprintf(`%s 11 (key "a"): operator Lt needs a whole number (at most 15 digits), got "-1"`, [prefix]),
		sprintf(`%s 12 (key "a"): operator Gt needs a whole number (at most 15 digits), got "1000000000000000"`, [prefix]),
		sprintf(`%s 13 (key "a"): value "-bad-" is not a label value (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)`, [prefix]),
		sprintf(`%s 14 (key "Bad Key"): key must be a label key (optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ .), got "Bad Key"`, [prefix]),
	}
}

test_well_formed_requirements_pass if {
	raw := json.marshal([
		{"key": "example.com/tier", "operator": "In", "values": ["gold", "silver"]},
		{"key": "a", "operator": "NotIn", "values": [""]},
		{"key": "a", "operator": "Exists"},
		{"key": "a", "operator": "DoesNotExist", "values": null},
		{"key": "a", "operator": "Gt", "values": ["007"]},
		{"key": "a", "operator": "Lt", "values": ["0"]},
	])
	count(selector_errors(raw)) == 0
}

test_label_keys if {
	placement.valid_label_key("a")
	placement.valid_label_key("fedplace.io/cluster-name")
	placement.valid_label_key(concat("", ["a" | some _ in numbers.range(1, 63)]))
	not placement.valid_label_key(concat("", ["a" | some _ in numbers.range(1, 64)]))
	not placement.valid_label_key("Example.com/a")
	not placement.valid_label_key("/a")
	not placement.valid_label_key("a/")
	not placement.valid_label_key("")
	not placement.valid_label_key(5)
}

# -- matching per operator ----------------------------------------------------------------------

sample_labels := {"tier": "gold", "level": "3", "odd": "x3", "empty": ""}

matches(op, key, values) := placement.requirement_matches({"key": key, "operator": op, "values": values}, sample_labels)

test_in_and_not_in if {
	matches("In", "tier", ["gold", "silver"])
	not matches("In", "tier", ["silver"])
	not matches("In", "missing", ["gold"])
	matches("In", "empty", [""])
	matches("NotIn", "tier", ["silver"])
	not matches("NotIn", "tier", ["gold"])
	matches("NotIn", "missing", ["gold"]) # a cluster lacking the label matches NotIn
}

test_exists_and_does_not_exist if {
	matches("Exists", "tier", [])
	matches("Exists", "empty", [])
	not matches("Exists", "missing", [])
	matches("DoesNotExist", "missing", []) # and DoesNotExist
	not matches("DoesNotExist", "empty", [])
}

test_gt_and_lt_need_an_integer_label if {
	matches("Gt", "level", ["2"])
	not matches("Gt", "level", ["3"])
	matches("Lt", "level", ["4"])
	not matches("Lt", "level", ["3"])
	matches("Gt", "level", ["02"])
	not matches("Gt", "odd", ["0"])
	not matches("Lt", "odd", ["9"])
	not matches("Gt", "missing", ["0"])
	not matches("Lt", "missing", ["9"])
}

test_requirements_are_anded if {
	reqs := [{"key": "tier", "operator": "In", "values": ["gold"]}, {"key": "pci-compliance-level", "operator": "Gt", "values": ["2"]}]
	placement.matching_clusters(reqs) == {"gce-us-central1"} with data.kubernetes.clusters as clusters
	every_cluster := object.keys(clusters)
	placement.matching_clusters([]) == every_cluster with data.kubernetes.clusters as clusters
}

# -- settings ---------------------------------------------------------------------------------------

test_settings_choose_the_kinds if {
	d := decide(obj("ConfigMap", {pci_key: "3"})) with data.io.k8s.federation.placement.settings.selector_kinds as ["Deployment"]
	count(d.annotations) == 0
	count(d.errors) == 0
	d2 := decide(obj("CronJob", {pci_key: "3"})) with data.io.k8s.federation.placement.settings.selector_kinds as {"CronJob"}
	d2.annotations[selector_key] == [name_in(["aws-eu-central-1", "gce-us-central1"])]
}

test_settings_choose_the_name_label if {
	relabelled := {name: c |
		some name, original in clusters
		c := object.union(original, {"metadata": {"labels": {"example.com/name": name}}})
	}
	d := admission with input as deployment({pci_key: "3"})
		with data.kubernetes.clusters as relabelled
		with data.io.k8s.federation.placement.settings.cluster_name_label as "example.com/name"
	d.annotations[selector_key] == [{"key": "example.com/name", "operator": "In", "values": ["aws-eu-central-1", "aws-eu-west-1", "gce-us-central1", "impostor"]}]
}

errs(kinds, label) := d if {
	d := decide(deployment({pci_key: "3"})) with data.io.k8s.federation.placement.settings.selector_kinds as kinds
		with data.io.k8s.federation.placement.settings.cluster_name_label as label
}

test_malformed_settings_are_errors_not_defaults if {
	module := "(module io.k8s.federation.placement.settings)"
	errs("Deployment", name_label).errors == {sprintf("placement setting selector_kinds must be a list of kinds, got string %s", [module])}
	errs(["Deployment", 5], name_label).errors == {sprintf("placement setting selector_kinds: 5 is not a kind %s", [module])}
	errs(["Deployment", "ReplicaSet"], name_label).errors == {sprintf("placement setting selector_kinds must not name ReplicaSet, placed through federation.kubernetes.io/replica-set-preferences %s", [module])}
	errs(["Deployment"], "").errors == {sprintf(`placement setting cluster_name_label must be a label key (optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ .), got "" %s`, [module])}
	count(errs(["Deployment"], "").annotations) == 0
}

test_malformed_settings_leave_replicasets_and_unconstrained_objects_alone if {
	d := decide(obj("ReplicaSet", {pci_key: "3"})) with data.io.k8s.federation.placement.settings.selector_kinds as "oops"
	count(d.errors) == 0
	d2 := decide(deployment({"team": "web"})) with data.io.k8s.federation.placement.settings.selector_kinds as "oops"
	count(d2.errors) == 0
}
