# Hardware decided through the contract: eligible clusters, reasons and errors.
# (Not under fedplace.rules: every package there is a rule set.)
package fedplace.rules_test.hardware

import data.io.k8s.federation.admission
import data.io.k8s.federation.placement

labels_key := "hardware.fedplace.io/cluster-labels"

minimums_key := "hardware.fedplace.io/cluster-minimums"

clusters := {
	"a100x8": {"metadata": {"name": "a100x8", "labels": {"gpu": "a100", "gpu-count": "8", "network": "infiniband"}}},
	"a100x1": {"metadata": {"name": "a100x1", "labels": {"gpu": "a100", "gpu-count": "1"}}},
	"h100x02": {"metadata": {"name": "h100x02", "labels": {"gpu": "h100", "gpu-count": "02"}}},
	"t4-odd": {"metadata": {"name": "t4-odd", "labels": {"gpu": "t4", "gpu-count": "many"}}},
	"cpu": {"metadata": {"name": "cpu", "labels": {"network": "infiniband"}}},
}

deploy(annotations) := {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "train", "namespace": "ml", "annotations": annotations}}

eligible(annotations) := v if {
	v := placement.eligible_clusters with input as deploy(annotations) with data.kubernetes.clusters as clusters
}

reasons(annotations) := v if {
	v := placement.cluster_reasons with input as deploy(annotations) with data.kubernetes.clusters as clusters
}

errors(annotations) := v if {
	v := placement.constraint_errors with input as deploy(annotations) with data.kubernetes.clusters as clusters
}

test_label_values if {
	eligible({labels_key: "gpu=a100"}) == {"a100x8", "a100x1"}
	eligible({labels_key: "gpu=a100|h100"}) == {"a100x8", "a100x1", "h100x02"}
	eligible({labels_key: " gpu = a100 | h100 , network=infiniband "}) == {"a100x8"}
}

test_minimums_read_whole_numbers_missing_and_other_count_as_zero if {
	eligible({minimums_key: "gpu-count=2"}) == {"a100x8", "h100x02"}
	eligible({minimums_key: "gpu-count=0"}) == {"a100x8", "a100x1", "h100x02", "t4-odd", "cpu"}
	eligible({minimums_key: "gpu-count=9"}) == set()
}

test_both_annotations_intersect if {
	eligible({labels_key: "gpu=a100|h100", minimums_key: "gpu-count=2"}) == {"a100x8", "h100x02"}
}

test_no_annotation_no_requirement if {
	eligible({}) == {"a100x8", "a100x1", "h100x02", "t4-odd", "cpu"}
	not placement.asks_placement with input as deploy({}) with data.kubernetes.clusters as clusters
}

test_the_reasons_name_the_label_and_the_value if {
	r := reasons({labels_key: "gpu=a100|h100", minimums_key: "gpu-count=2"})
	r.a100x1 == [{
		"set": "hardware", "id": "hardware-minimum", "requires": "label gpu-count >= 2", "imposed_by": "workload",
		"source": "annotation hardware.fedplace.io/cluster-minimums: \"gpu-count=2\"", "value": "1",
	}]
	{x.id: x.value | some x in r.cpu} == {"hardware-label": null, "hardware-minimum": null}
	r.a100x8 == []
}

test_the_admission_decision_denies_with_the_requirement if {
	msgs := admission.errors with input as deploy({labels_key: "gpu=v100"}) with data.kubernetes.clusters as clusters
	some msg in msgs
	contains(msg, "label gpu in [v100]")
}

test_malformed_entries_deny if {
	errors({labels_key: "gpu"}) == {"annotation hardware.fedplace.io/cluster-labels: \"gpu\" is not KEY=VALUE"}
	errors({labels_key: "=a100"}) == {"annotation hardware.fedplace.io/cluster-labels: \"=a100\" is not KEY=VALUE"}
	errors({labels_key: "gpu=a100||h100"}) == {"annotation hardware.fedplace.io/cluster-labels: \"gpu\" needs label values (a|b), got \"a100||h100\""}
	errors({labels_key: "bad key=x"}) == {"annotation hardware.fedplace.io/cluster-labels: \"bad key\" is not a label key"}
	errors({minimums_key: "gpu-count=two"}) == {"annotation hardware.fedplace.io/cluster-minimums: \"gpu-count\" needs a whole number (at most 15 digits), got \"two\""}
	errors({minimums_key: "gpu-count=-1"}) == {"annotation hardware.fedplace.io/cluster-minimums: \"gpu-count\" needs a whole number (at most 15 digits), got \"-1\""}
	errors({minimums_key: " , "}) == {"annotation hardware.fedplace.io/cluster-minimums lists nothing"}
	errors({labels_key: 3}) == {"annotation hardware.fedplace.io/cluster-labels must be a string listing KEY=VALUE entries, got 3"}
}

test_a_malformed_entry_is_not_dropped_silently if {
	# The well-formed entry still decides, and the malformed one denies the workload.
	eligible({labels_key: "gpu=a100, network"}) == {"a100x8", "a100x1"}
	msgs := admission.errors with input as deploy({labels_key: "gpu=a100, network"}) with data.kubernetes.clusters as clusters
	some msg in msgs
	contains(msg, "\"network\" is not KEY=VALUE")
}
