# Stuck placements (Rego v1): a binding whose spec.clusters still holds a
# cluster the placement policy forbids.
#
# Karmada's scheduler reschedules a binding when its placement changes. When
# that fails because no cluster fits, it clears spec.clusters; when it fails
# for another reason (a spread constraint the remaining clusters cannot meet,
# capacity, an estimator error) it keeps its previous result, which may hold a
# cluster fedplace now excludes: the workload keeps running there. Nothing in
# the binding's placement can change that; an operator must (relax the spread
# constraint, add capacity, fix the cluster). This module says which clusters
# are stuck; remediation reports them (a gauge, Warning PlacementStuck Events
# on the binding and on its template), and so do `fedplace explain` and the
# placement page.
package io.k8s.federation.karmada

# The scheduled clusters (spec.clusters) the decision forbids.
stuck_clusters := {name |
	decided
	some target in object.get(input, ["spec", "clusters"], [])
	name := target.name
	name in forbidden
}

stuck if count(stuck_clusters) > 0

stuck_message := sprintf("%s %s: Karmada's scheduler kept clusters the placement policy forbids: %s (%s); it could not reschedule the binding, whose placement excludes them: check its ScheduleBindingFailed events (spread constraints, capacity)", [
	input.kind,
	binding_name,
	names_text(stuck_clusters),
	why,
]) if stuck

binding_name := sprintf("%s/%s", [input.metadata.namespace, input.metadata.name]) if input.metadata.namespace

else := input.metadata.name

# The template's reference, for Events about it.
template_ref := {
	"apiVersion": object.get(resource, "apiVersion", ""),
	"kind": resource.kind,
	"namespace": resource_namespace,
	"name": resource.name,
	"uid": object.get(resource, "uid", ""),
}

# What remediation reports about a stuck binding (the decision's "stuck").
stuck_report := {
	"targets": sort(stuck_clusters),
	"reason": "PlacementStuck",
	"message": stuck_message,
	"related": [template_ref],
} if stuck
