# Test fixture (tests/policies/test_eu_pci_differential.py): policies/karmada/karmada_stuck.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# Stuck placements (Rego v1): a binding whose spec.clusters still holds a
# cluster the placement policy forbids.
#
# Karmada's scheduler reschedules a binding when its placement changes. When
# that fails because no cluster fits, it clears spec.clusters; when it fails
# for another reason (a spread constraint the remaining clusters cannot meet,
# capacity, an estimator error) it keeps its previous result, which may hold a
# cluster fedplace now excludes, and says so in its condition Scheduled
# (False): the workload keeps running there. Nothing in
# the binding's placement can change that; an operator must (relax the spread
# constraint, add capacity, fix the cluster). This module says which clusters
# are stuck; remediation reports them (a gauge, Warning PlacementStuck Events
# on the binding and on its template), and so do `fedplace explain` and the
# placement page.
package pre_contract.io.k8s.federation.karmada

import data.io.k8s.federation.replicated

# The scheduled clusters (spec.clusters) the decision forbids although the
# binding's placement already excludes them (every exclude list holds them),
# while the scheduler says its last attempt failed (condition Scheduled
# False): it kept its previous result. Right after a decision changes the
# scheduler has not tried yet (Scheduled is still True): not stuck.
stuck_clusters := {name |
	decided
	schedule_failed
	some name in scheduled_names
	name in forbidden
	excluded_now(name)
}

stuck if count(stuck_clusters) > 0

scheduled_names := {t.name |
	some t in object.get(input, ["spec", "clusters"], [])
	is_object(t)
	is_string(t.name)
}

excluded_now(name) if {
	count(locations) > 0
	every _, loc in locations {
		name in loc.current
	}
}

schedule_condition := c if {
	some c in object.get(input, ["status", "conditions"], [])
	is_object(c)
	c.type == "Scheduled"
}

schedule_failed if schedule_condition.status == "False"

schedule_failure_text := sprintf("%s: %s", [object.get(schedule_condition, "reason", ""), object.get(schedule_condition, "message", "")])

stuck_message := sprintf("%s %s: Karmada's scheduler kept clusters the placement policy forbids: %s; its placement excludes them but rescheduling failed (%s), so the workload still runs there. %s", [
	input.kind,
	binding_name,
	names_text(stuck_clusters),
	schedule_failure_text,
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

# With a template as input: the stuck message of its binding (the replicated
# binding the detector names <name>-<lowercase kind>), for `fedplace explain`.
template_stuck_message := msg if {
	not binding
	is_string(input.kind)
	b := template_binding
	msg := stuck_message with input as b
}

template_binding := replicated.namespaced_object("resourcebindings", input.metadata.namespace, template_binding_name) if {
	input.metadata.namespace
}

template_binding := replicated.cluster_object("clusterresourcebindings", template_binding_name) if {
	not input.metadata.namespace
}

template_binding_name := sprintf("%s-%s", [replace(input.metadata.name, ":", "."), lower(input.kind)])
