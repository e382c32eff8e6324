# Federation placement policy (Rego v1).
#
# A ReplicaSet may ask for constraints with two annotations:
#   policy.federation.alpha.kubernetes.io/eu-jurisdiction-required: "true"
#   policy.federation.alpha.kubernetes.io/pci-compliance-level: "N"
# It may then only be placed on replicated Cluster objects
# (data.kubernetes.clusters) whose region is in the EU and whose
# pci-compliance-level label is >= N.
#
# The decision (data.io.k8s.federation.admission) carries
#   annotations: federation.kubernetes.io/replica-set-preferences naming the
#                eligible clusters with their weights;
#   errors:      why the object cannot be admitted — no eligible cluster, or the
#                developer's own preferences name clusters the policy forbids
#                (the proposal's intersection semantics: the policy says which
#                clusters MAY be used, the developer chooses among them).
package io.k8s.federation.admission

import data.io.k8s.federation.placement

annotations[placement.preferences_key] := prefs if {
	placement.constrained
	count(placement.eligible_clusters) > 0
	prefs := placement.preferences
}

annotations[placement.source_key] := placement.preferences_source if {
	placement.constrained
	count(placement.eligible_clusters) > 0
}

errors contains msg if {
	placement.constrained
	count(placement.eligible_clusters) == 0
	msg := sprintf("no cluster satisfies the placement policy (%s)", [placement.requirements_text])
}

errors contains msg if {
	placement.constrained
	forbidden := placement.developer_clusters - placement.eligible_clusters
	count(forbidden) > 0
	msg := sprintf(
		"replica-set-preferences requests clusters the placement policy forbids: %s (%s)",
		[concat(", ", sort(forbidden)), placement.requirements_text],
	)
}

errors contains msg if {
	placement.applies
	some msg in placement.annotation_errors
}
