# Test fixture (tests/policies/test_eu_pci_differential.py): policies/federation/lib.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# Helpers of the federation placement policy: which clusters an object may use.
package pre_contract.io.k8s.federation.placement

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

preferences_key := "federation.kubernetes.io/replica-set-preferences"

# Who wrote the preferences: "policy" when this policy computed them (so a
# later decision recomputes them from scratch), "developer" otherwise (so the
# developer's choice is kept, restricted to eligible clusters).
source_key := "fedplace.io/replica-set-preferences-source"

# The cluster label that carries a cluster's PCI compliance level.
pci_label := "pci-compliance-level"

# A whole number written in at most 15 decimal digits ("0", "02", "12"): exact
# as a Rego number, and safe to convert — number() is only called on such
# strings, so to_number cannot fail (a failing builtin makes the rule undefined
# on an OPA server, silently changing the decision).
whole_number(s) if {
	is_string(s)
	regex.match(`^[0-9]{1,15}$`, s)
}

# The value of a whole_number string.
number(s) := to_number(s)

requested := object.get(input, ["metadata", "annotations"], {})

# The federation control plane this policy serves (setting control_plane, module
# io.k8s.federation.placement.settings): "federation-v1" (the default: the
# annotations Federation v1's controllers read) or "karmada" (Karmada's
# bindings, policies/karmada/; templates are then judged by that pack, and the
# ReplicaSet and cluster-selector rules below stand down).
default control_plane := "federation-v1"

control_plane := data.io.k8s.federation.placement.settings.control_plane

control_planes := {"federation-v1", "karmada"}

karmada if control_plane == "karmada"

applies if {
	input.kind == "ReplicaSet"
	not karmada
}

eu_required if requested[eu_key] == "true"

pci_required if requested[pci_key]

constrained if {
	applies
	eu_required
}

constrained if {
	applies
	pci_required
}

required_pci := number(requested[pci_key]) if whole_number(requested[pci_key])

else := 0

# Malformed constraint annotations (every placed kind); annotation_errors adds
# the replica-set-preferences ones (ReplicaSets).
constraint_errors contains msg if {
	value := requested[pci_key]
	not whole_number(value)
	msg := sprintf("annotation %s must be a whole number (at most 15 digits), got %q", [pci_key, value])
}

constraint_errors contains msg if {
	value := requested[eu_key]
	not value in {"true", "false"}
	msg := sprintf("annotation %s must be \"true\" or \"false\", got %q", [eu_key, value])
}

annotation_errors contains msg if some msg in constraint_errors

annotation_errors contains msg if {
	raw := requested[preferences_key]
	not json.is_valid(raw)
	msg := sprintf("annotation %s is not valid JSON", [preferences_key])
}

annotation_errors contains msg if {
	parsed := developer_document
	not is_object(parsed)
	msg := sprintf("annotation %s must be a JSON object, got %s", [preferences_key, type_name(parsed)])
}

annotation_errors contains msg if {
	value := object.get(developer_preferences, "clusters", {})
	not is_object(value)
	msg := sprintf("annotation %s: clusters must be an object of cluster name to preferences, got %s", [preferences_key, type_name(value)])
}

clusters := data.kubernetes.clusters

# -- the clusters, through opa-kube-sync's index when it is there ---------------------
#
# opa-kube-sync keeps the clusters grouped by label value and by region beside
# the mirror, at data.kubernetes_index.clusters (docs/sync.md, "Indexes"):
#   {"layout": 2, "names": {name: true}, "labels": {key: {value: {name: true}}},
#    "regions": {region: {name: true}},
#    "region_labels": {region: {key: {value: {name: true}}}},
#    "named_by": {key: {name: true}}}
# With it, which clusters an object may use is a union of the groups whose
# region and label value qualify, which together hold exactly the answer: the
# cost grows with the answer, not with the federation (intersecting two groups
# would cost time in the clusters on both sides). Without it
# (opa test, OPA fed by another sync, an index of a layout these rules do not
# know) the rules read every cluster. Same decision either way
# (placement_index_test.rego). The index is read where it is, never passed to a
# function: a real OPA server converts a stored document passed whole.

cluster_index_ready if data.kubernetes_index.clusters.layout == 2

# Every replicated cluster's name.
cluster_names := object.keys(data.kubernetes_index.clusters.names) if {
	cluster_index_ready
} else := object.keys(clusters) if {
	is_object(clusters)
} else := set()

# The clusters whose region is in the EU and whose PCI level meets the
# requirement (when EU jurisdiction is required), else whose PCI level does.
eligible_clusters := indexed_eligible if cluster_index_ready

else := scanned_eligible

indexed_eligible := pci_indexed if not eu_required

indexed_eligible := eu_indexed if {
	eu_required
	required_pci == 0
}

indexed_eligible := union({object.keys(names) |
	some region, by_label in data.kubernetes_index.clusters.region_labels
	regex.match(eu_region_pattern, lower(region))
	some value, names in by_label[pci_label]
	whole_number(value)
	number(value) >= required_pci
}) if {
	eu_required
	required_pci > 0
}

pci_indexed := cluster_names if required_pci == 0

pci_indexed := union({object.keys(names) |
	some value, names in data.kubernetes_index.clusters.labels[pci_label]
	whole_number(value)
	number(value) >= required_pci
}) if {
	required_pci > 0
}

eu_indexed := union({object.keys(names) |
	some region, names in data.kubernetes_index.clusters.regions
	regex.match(eu_region_pattern, lower(region))
})

scanned_eligible contains name if {
	not eu_required
	some name, cluster in clusters
	pci_ok(object.get(cluster, ["metadata", "labels", pci_label], "0"))
}

# EU jurisdiction by region: provider prefix (GCE europe-*, AWS eu-*) or name
# (Azure *europe), matched against the lower-cased region: a Federation v1
# Cluster's status.region, else a Karmada Cluster's spec.region.
eu_region_pattern := `^(europe-|eu-)|europe$`

scanned_eligible contains name if {
	eu_required
	some name, cluster in clusters
	region := object.get(cluster, ["status", "region"], object.get(cluster, ["spec", "region"], ""))
	is_string(region)
	regex.match(eu_region_pattern, lower(region))
	pci_ok(object.get(cluster, ["metadata", "labels", pci_label], "0"))
}

# A cluster's PCI level label satisfies the requirement; labels that are not
# whole numbers count as level 0.
pci_ok(_) if required_pci == 0

pci_ok(label) if {
	whole_number(label)
	number(label) >= required_pci
}

developer_set_preferences if {
	requested[preferences_key]
	not requested[source_key] == "policy"
}

# The developer's replica-set-preferences, parsed once (undefined when there are
# none, when the policy wrote them, or when they are not JSON).
developer_document := json.unmarshal(requested[preferences_key]) if {
	developer_set_preferences
	json.is_valid(requested[preferences_key])
}

developer_preferences := developer_document if is_object(developer_document)

preferences_source := "developer" if count(developer_clusters) > 0

else := "policy"

developer_clusters := object.keys(value) if {
	value := object.get(developer_preferences, "clusters", {})
	is_object(value)
} else := set()

# The developer's preferences restricted to eligible clusters, or, when the
# developer gave none, every eligible cluster with weight 1.
preferences := object.union(developer_preferences, {"clusters": clusters}) if {
	count(developer_clusters) > 0
	clusters := object.filter(developer_preferences.clusters, eligible_clusters)
} else := {"clusters": {name: {"weight": 1} | some name in eligible_clusters}, "rebalance": true}

# The annotation's value. The policy's own preferences go as the exact text the
# annotation holds (canonical JSON: keys sorted, no spaces; what the webhook
# would write for `preferences`), joined from the sorted names: an object would
# cost OPA's server a serialisation per eligible cluster (about 2 ms of a
# decision naming 1,250, docs/benchmarks.md). The developer's, restricted to
# eligible clusters, and names JSON must escape, go as the value itself.
preferences_annotation := preferences_text if {
	count(developer_clusters) == 0
	not regex.match(`["\\\x00-\x1f]`, concat("", eligible_clusters))
} else := preferences

preferences_text := concat("", [
	`{"clusters":{"`,
	concat(`":{"weight":1},"`, sort(eligible_clusters)),
	`":{"weight":1}},"rebalance":true}`,
])

requirements_text := sprintf("EU jurisdiction required: %v, PCI compliance level >= %d", [eu_required_bool, required_pci])

eu_required_bool if eu_required

else := false
