# Unit tests of the placement policy; run by `opa test policies/` and by the
# project's suite (tests/policies) through the engine's REST API.
package io.k8s.federation.admission_test

import data.io.k8s.federation.admission

clusters := {
	"gce-europe-west1": {"metadata": {"name": "gce-europe-west1", "labels": {"pci-compliance-level": "2"}}, "status": {"region": "europe-west1"}},
	"aws-eu-central-1": {"metadata": {"name": "aws-eu-central-1", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "eu-central-1"}},
	"azure-westeurope": {"metadata": {"name": "azure-westeurope", "labels": {"pci-compliance-level": "1"}}, "status": {"region": "westeurope"}},
	"gce-us-central1": {"metadata": {"name": "gce-us-central1", "labels": {"pci-compliance-level": "3"}}, "status": {"region": "us-central1"}},
	"aws-eu-west-1-nolabel": {"metadata": {"name": "aws-eu-west-1-nolabel"}, "status": {"region": "eu-west-1"}},
}

rs(annotations) := {
	"apiVersion": "apps/v1",
	"kind": "ReplicaSet",
	"metadata": {"name": "nginx", "namespace": "default", "annotations": annotations},
	"spec": {"replicas": 3},
}

prefs_key := "federation.kubernetes.io/replica-set-preferences"

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

test_eu_and_pci_selects_matching_clusters if {
	decision := admission with input as rs({eu_key: "true", pci_key: "2"})
		with data.kubernetes.clusters as clusters
	count(decision.errors) == 0

	# The annotation's exact text: canonical JSON (keys sorted, no spaces), as the
	# webhook would write the object.
	decision.annotations[prefs_key] == `{"clusters":{"aws-eu-central-1":{"weight":1},"gce-europe-west1":{"weight":1}},"rebalance":true}`
	json.unmarshal(decision.annotations[prefs_key]) == data.io.k8s.federation.placement.preferences with input as rs({eu_key: "true", pci_key: "2"})
		with data.kubernetes.clusters as clusters
	decision.annotations[source_key] == "policy"
}

# A name JSON must escape (no Kubernetes name has one) makes the annotation the
# value itself, which the webhook writes canonically.
test_names_json_escapes_give_the_preferences_as_a_value if {
	odd := {`quo"te`: {"metadata": {"labels": {"pci-compliance-level": "2"}}, "status": {"region": "europe-west1"}}, `back\slash`: {"status": {"region": "eu-west-1"}}}
	prefs := admission.annotations[prefs_key] with input as rs({eu_key: "true"})
		with data.kubernetes.clusters as odd
	prefs == {"clusters": {`quo"te`: {"weight": 1}, `back\slash`: {"weight": 1}}, "rebalance": true}
}

test_eu_only_includes_every_eu_region if {
	prefs := json.unmarshal(admission.annotations[prefs_key]) with input as rs({eu_key: "true"})
		with data.kubernetes.clusters as clusters
	object.keys(prefs.clusters) == {"gce-europe-west1", "aws-eu-central-1", "azure-westeurope", "aws-eu-west-1-nolabel"}
}

# A region is a string: a Cluster's status.region of another type (false
# included) gives it none, and its spec.region is not read then.
test_a_status_region_that_is_not_a_string_is_no_region if {
	odd := {
		"false": {"status": {"region": false}, "spec": {"region": "eu-west-1"}},
		"number": {"status": {"region": 5}, "spec": {"region": "eu-west-1"}},
		"null": {"status": {"region": null}, "spec": {"region": "eu-west-1"}},
		"spec-only": {"status": {}, "spec": {"region": "eu-west-1"}},
	}
	prefs := json.unmarshal(admission.annotations[prefs_key]) with input as rs({eu_key: "true"})
		with data.kubernetes.clusters as odd
	object.keys(prefs.clusters) == {"spec-only"}
}

test_pci_only_ignores_region if {
	prefs := json.unmarshal(admission.annotations[prefs_key]) with input as rs({pci_key: "3"})
		with data.kubernetes.clusters as clusters
	object.keys(prefs.clusters) == {"aws-eu-central-1", "gce-us-central1"}
}

test_unconstrained_object_is_left_alone if {
	decision := admission with input as rs({"team": "web"})
		with data.kubernetes.clusters as clusters
	count(decision.errors) == 0
	count(decision.annotations) == 0
}

# Kinds outside the setting selector_kinds (ConfigMaps and the like are placed
# through the cluster selector: selector_test.rego).
test_other_kinds_are_left_alone if {
	obj := object.union(rs({eu_key: "true"}), {"kind": "CronJob"})
	decision := admission with input as obj with data.kubernetes.clusters as clusters
	count(decision.errors) == 0
	count(decision.annotations) == 0
}

test_no_eligible_cluster_is_an_error if {
	errs := admission.errors with input as rs({eu_key: "true", pci_key: "4"})
		with data.kubernetes.clusters as clusters
	count(errs) == 1
	some msg in errs
	startswith(msg, "no cluster satisfies the placement policy")
	contains(msg, "PCI compliance level >= 4")
}

test_no_clusters_at_all_is_an_error if {
	errs := admission.errors with input as rs({pci_key: "1"})
		with data.kubernetes.clusters as {}
	count(errs) == 1
}

test_developer_preferences_within_policy_are_kept if {
	mine := json.marshal({"clusters": {"aws-eu-central-1": {"weight": 3, "minReplicas": 1}}, "rebalance": false})
	decision := admission with input as rs({eu_key: "true", pci_key: "2", prefs_key: mine})
		with data.kubernetes.clusters as clusters
	count(decision.errors) == 0
	decision.annotations[prefs_key] == {"clusters": {"aws-eu-central-1": {"weight": 3, "minReplicas": 1}}, "rebalance": false}
}

test_developer_preferences_outside_policy_are_denied if {
	mine := json.marshal({"clusters": {"gce-us-central1": {"weight": 1}, "aws-eu-central-1": {"weight": 1}}})
	errs := admission.errors with input as rs({eu_key: "true", prefs_key: mine})
		with data.kubernetes.clusters as clusters
	count(errs) == 1
	some msg in errs
	contains(msg, "forbids: gce-us-central1")
}

test_malformed_annotations_are_errors if {
	errs := admission.errors with input as rs({eu_key: "yes", pci_key: "high", prefs_key: "{not json"})
		with data.kubernetes.clusters as clusters
	count({msg | some msg in errs; contains(msg, "must be")}) == 2
	count({msg | some msg in errs; contains(msg, "not valid JSON")}) == 1
}

test_preferences_that_are_not_an_object_are_errors if {
	every raw in ["5", "null", "[1]", "\"str\"", "true"] {
		errs := admission.errors with input as rs({pci_key: "1", prefs_key: raw})
			with data.kubernetes.clusters as clusters
		count({msg | some msg in errs; contains(msg, "must be a JSON object")}) == 1
	}
}

test_preferences_clusters_not_an_object_are_errors if {
	every raw in [`{"clusters": ["gce-europe-west1"]}`, `{"clusters": null}`, `{"clusters": "ab"}`] {
		errs := admission.errors with input as rs({pci_key: "1", prefs_key: raw})
			with data.kubernetes.clusters as clusters
		count({msg | some msg in errs; contains(msg, "clusters must be an object")}) == 1
	}
}

# A level too long to be a number is refused, never silently dropped to 0.
test_oversized_pci_level_is_an_error if {
	errs := admission.errors with input as rs({pci_key: "1000000000000000"})
		with data.kubernetes.clusters as clusters
	count({msg | some msg in errs; contains(msg, "at most 15 digits")}) == 1
}

test_leading_zeros_are_whole_numbers if {
	decision := admission with input as rs({pci_key: "003"})
		with data.kubernetes.clusters as json.patch(clusters, [{"op": "replace", "path": "/gce-us-central1/metadata/labels/pci-compliance-level", "value": "0003"}])
	count(decision.errors) == 0
	object.keys(json.unmarshal(decision.annotations[prefs_key]).clusters) == {"aws-eu-central-1", "gce-us-central1"}
}

test_unlabelled_cluster_counts_as_level_zero if {
	prefs := json.unmarshal(admission.annotations[prefs_key]) with input as rs({eu_key: "true", pci_key: "0"})
		with data.kubernetes.clusters as clusters
	prefs.clusters["aws-eu-west-1-nolabel"] == {"weight": 1}
}

source_key := "fedplace.io/replica-set-preferences-source"

test_preferences_set_by_the_policy_are_recomputed if {
	earlier := json.marshal({"clusters": {"gce-us-central1": {"weight": 1}, "aws-eu-central-1": {"weight": 1}}})
	decision := admission with input as rs({pci_key: "3", prefs_key: earlier, source_key: "policy"})
		with data.kubernetes.clusters as json.patch(clusters, [{"op": "replace", "path": "/gce-us-central1/metadata/labels/pci-compliance-level", "value": "1"}])
	count(decision.errors) == 0
	object.keys(json.unmarshal(decision.annotations[prefs_key]).clusters) == {"aws-eu-central-1"}
	decision.annotations[source_key] == "policy"
}

test_developer_preferences_are_marked_as_such if {
	mine := json.marshal({"clusters": {"aws-eu-central-1": {"weight": 1}}})
	decision := admission with input as rs({pci_key: "3", prefs_key: mine})
		with data.kubernetes.clusters as clusters
	decision.annotations[source_key] == "developer"
}
