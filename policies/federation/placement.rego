# Federation placement policy (Rego v1).
#
# ReplicaSets are placed through replica-set-preferences (below, lib.rego);
# every kind of the setting selector_kinds (Deployments, StatefulSets,
# DaemonSets, Jobs, ConfigMaps, Secrets, Services, Ingresses by default)
# through the cluster selector (the rules at the end, selector.rego).
#
# Which clusters an object may use is the placement rule sets' answer
# (contract.rego: packages fedplace.rules.<name>, each in a policy ConfigMap;
# policies/rules-* ship some): an object asks for
# placement when some rule set requires or forbids something of its clusters,
# and may then only be placed on the replicated Cluster objects
# (data.kubernetes.clusters) no rule set forbids.
#
# The placement decision (data.io.k8s.federation.placement.decision, which
# admission.rego hands on to the admission decision, and which remediation
# evaluates alone) carries
#   annotations: federation.kubernetes.io/replica-set-preferences naming the
#                eligible clusters with their weights (the policy's own as the
#                annotation's text, lib.rego);
#   errors:      why the object cannot be admitted — no eligible cluster, or the
#                developer's own preferences name clusters the policy forbids
#                (the proposal's intersection semantics: the policy says which
#                clusters MAY be used, the developer chooses among them).
# Other placement packs (policies/karmada/) add to the same document.
package io.k8s.federation.placement.decision

import data.io.k8s.federation.placement

annotations[placement.preferences_key] := prefs if {
	placement.constrained
	count(placement.eligible_clusters) > 0
	prefs := placement.preferences_annotation
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

# -- every other kind: federation.alpha.kubernetes.io/cluster-selector ------------
#
# annotations: the developer's requirements on other labels, then the name
#              label In the eligible clusters the developer's name requirements
#              admit; and who wrote those (fedplace.io/cluster-selector-source).
# errors:      a malformed selector, no eligible cluster, or a selector that
#              admits none of the eligible clusters (a contradiction).

annotations[placement.selector_key] := placement.selector if {
	placement.selector_constrained
	placement.selector_placeable
}

annotations[placement.selector_source_key] := placement.selector_source if {
	placement.selector_constrained
	placement.selector_placeable
}

# (Each error first, then the kind: most objects have none, and then the
# settings are never checked.)
errors contains msg if {
	some msg in placement.constraint_errors
	placement.selector_kind
}

errors contains msg if {
	some msg in placement.selector_errors
	placement.selector_kind
}

errors contains msg if {
	placement.selector_constrained
	count(placement.selector_errors) == 0
	count(placement.selector_eligible) == 0
	msg := sprintf("no cluster satisfies the placement policy (%s)%s", [placement.requirements_text, placement.unselectable_text])
}

errors contains msg if {
	placement.selector_constrained
	count(placement.selector_errors) == 0
	count(placement.selector_eligible) > 0
	count(placement.selector_admitted) == 0
	msg := placement.selector_contradiction_text
}

# Unsound settings: no kind but ReplicaSet can be placed, so every other
# object asking for placement is refused, naming the setting.
errors contains msg if {
	not placement.applies
	placement.asks_placement
	some msg in placement.settings_errors
}
