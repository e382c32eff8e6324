# Helpers of the federation placement policy: a ReplicaSet's
# replica-set-preferences from the clusters the placement rules allow
# (contract.rego: eligible_clusters, constraint_errors).
package io.k8s.federation.placement

preferences_key := "federation.kubernetes.io/replica-set-preferences"

# Who wrote the preferences: "policy" when this policy computed them (so a
# later decision recomputes them from scratch), "developer" otherwise (so the
# developer's choice is kept, restricted to eligible clusters).
source_key := "fedplace.io/replica-set-preferences-source"

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

# A ReplicaSet asks for placement when a placement rule set requires or
# forbids something of its clusters (contract.rego).
constrained if {
	applies
	asks_placement
}

# Malformed requests (every placed kind: contract.rego's constraint_errors) and
# the replica-set-preferences ones (ReplicaSets).
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
