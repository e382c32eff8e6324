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

combinations := [[r, l] | some r in region_conditions; some l in label_conditions]

test_each_condition_alone_decides_the_same if {
	every c in array.concat(region_conditions, label_conditions) {
		eligible_indexed([c]) == eligible_scanned([c])
	}
}

test_region_and_label_conditions_decide_the_same if {
	every conditions in combinations {
		eligible_indexed(conditions) == eligible_scanned(conditions)
	}
}

test_two_labels_in_a_region_decide_the_same if {
	every i, l1 in label_conditions {
		every l2 in array.slice(label_conditions, i + 1, count(label_conditions)) {
			conditions := [region_conditions[0], l1, l2]
			eligible_indexed(conditions) == eligible_scanned(conditions)
		}
	}
}

test_eu_and_level_two_is_the_eu_cluster_at_three if {
	eligible_indexed([region_conditions[0], label_conditions[0]]) == {"eu-3"}
}

test_a_region_allowing_none_leaves_none if {
	eligible_indexed([{"property": "region", "in": ["mars-1"]}, label_conditions[1]]) == set()
}
