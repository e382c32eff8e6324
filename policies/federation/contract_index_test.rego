# The contract decides the same from opa-kube-sync's cluster index as by
# reading every cluster, for every condition form alone and for region and
# label conditions together (the index path confines label conditions to the
# regions a region condition allows).
package io.k8s.federation.contract_index_test

import data.io.k8s.federation.placement
import data.io.k8s.federation.placement_index_test.index_of

clusters := {
	"eu-3": {"metadata": {"name": "eu-3", "labels": {"level": "3", "tier": "gold"}}, "status": {"region": "europe-west1"}},
	"eu-1": {"metadata": {"name": "eu-1", "labels": {"level": "1"}}, "spec": {"region": "eu-west-1"}},
	"eu-none": {"metadata": {"name": "eu-none"}, "status": {"region": "europe-west4"}},
	"eu-odd": {"metadata": {"name": "eu-odd", "labels": {"level": "x", "tier": "silver"}}, "spec": {"region": "westeurope"}},
	"us-2": {"metadata": {"name": "us-2", "labels": {"level": "2", "tier": "gold"}}, "status": {"region": "us-east1"}},
	"us-0": {"metadata": {"name": "us-0", "labels": {"level": "0"}}, "status": {"region": "us-central1"}},
	"nowhere": {"metadata": {"name": "nowhere", "labels": {"level": "5"}}},
	"bare": {"metadata": {"name": "bare"}},
}

region_conditions := [
	{"property": "region", "matches": `(?i)^(europe-|eu-)|europe$`},
	{"property": "region", "in": ["us-east1", "europe-west1"]},
	{"property": "region", "not_in": ["us-east1"]},
	{"property": "region", "exists": true},
	{"property": "region", "exists": false},
]

label_conditions := [
	{"label": "level", "min": 2},
	{"label": "level", "min": 0},
	{"label": "level", "max": 1},
	{"label": "level", "max": -1},
	{"label": "level", "in": ["1", "3"]},
	{"label": "level", "not_in": ["3", "x"]},
	{"label": "tier", "matches": "^g"},
	{"label": "tier", "exists": true},
	{"label": "tier", "exists": false},
]

index := index_of(clusters)

rule_set(conditions) := {"t": {"require": {{"id": sprintf("r%d", [i]), "cluster": c} | some i, c in conditions}}}

eligible_indexed(conditions) := e if {
	e := placement.eligible_clusters with data.fedplace.rules as rule_set(conditions)
		with data.kubernetes.clusters as clusters
		with data.kubernetes_index.clusters as index
}

eligible_scanned(conditions) := e if {
	e := placement.eligible_clusters with data.fedplace.rules as rule_set(conditions)
		with data.kubernetes.clusters as clusters
		with data.kubernetes_index as {}
}

# Every label condition beside region condition i (a test per region
# condition: each stays well within opa test's time limit).
agrees_beside_region(i) if {
	every l in label_conditions {
		conditions := [region_conditions[i], l]
		eligible_indexed(conditions) == eligible_scanned(conditions)
	}
}

test_labels_beside_a_region_pattern_decide_the_same if agrees_beside_region(0)

test_labels_beside_a_region_list_decide_the_same if agrees_beside_region(1)

test_labels_beside_a_region_exclusion_decide_the_same if agrees_beside_region(2)

test_labels_beside_a_region_required_decide_the_same if agrees_beside_region(3)

test_labels_beside_no_region_decide_the_same if agrees_beside_region(4)

# Two label conditions of different forms in the EU regions.
label_pairs := [[label_conditions[i], label_conditions[j]] | some [i, j] in [[0, 5], [0, 8], [2, 6], [4, 7], [5, 8], [1, 3]]]

test_two_labels_in_a_region_decide_the_same if {
	every pair in label_pairs {
		conditions := array.concat([region_conditions[0]], pair)
		eligible_indexed(conditions) == eligible_scanned(conditions)
	}
}

test_eu_and_level_two_is_the_eu_cluster_at_three if {
	eligible_indexed([region_conditions[0], label_conditions[0]]) == {"eu-3"}
}

test_a_region_allowing_none_leaves_none if {
	eligible_indexed([{"property": "region", "in": ["mars-1"]}, label_conditions[1]]) == set()
}

requirement(c) := {"id": "r", "imposed_by": "platform", "requires": "", "source": "", "set": "t", "cluster": c}

test_every_condition_form_is_well_formed if {
	every c in array.concat(region_conditions, label_conditions) {
		placement.rule_requirement_problem(requirement(c)) == ""
	}
}

test_a_malformed_condition_is_named_not_admitted if {
	malformed := [
		{"label": "", "min": 1},
		{"label": "level", "property": "region"},
		{"property": "zones", "min": 1},
		{"property": "country", "in": ["de"]},
		{"label": "level", "in": "de"},
		{"label": "level", "in": [1]},
		{"label": "level", "matches": "("},
		{"label": "level", "min": "2"},
		{"label": "level", "exists": "yes"},
		{"label": "level", "min": 1, "max": 2},
		{"label": "level", "above": 1},
	]
	every c in malformed {
		placement.rule_requirement_problem(requirement(c)) != ""
	}
	placement.rule_requirement_problem(object.union(requirement(label_conditions[0]), {"imposed_by": "nobody"})) != ""
	placement.rule_requirement_problem(object.union(requirement(label_conditions[0]), {"id": ""})) != ""
}
