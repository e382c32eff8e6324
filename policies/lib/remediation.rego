# Remediation library (Rego v1): the desired annotations of every replicated
# object of the remediated kinds, computed in one query by evaluating the
# placement decision (data.io.k8s.federation.placement.decision) with each
# object as input. Placement alone: another pack's errors (a LimitRange
# violation, say) neither block an object's re-placement nor make it
# "unsatisfiable".
#
# Query: POST /v1/data/io/k8s/federation/remediation/notifications with
#   {"input": {"resources": [{"plural": "replicasets", "namespaced": true}],
#              "objects": [{"resource": "replicasets", "namespace": "web", "name": "a"}]}}
# (both optional; the first is the default). With "objects", only those
# objects are evaluated (a targeted pass: cost ∝ the objects, not the whole
# collection); objects that do not exist (any more) are skipped. Each
# notification is
#   {"resource", "namespace" ("" when cluster-scoped), "name",
#    "annotations": {key: value}, "errors": [string]}
# plus "stuck" when the decision has one: the object's current placement
# still uses targets the policy forbids, {"targets": [string], "reason",
# "message", "related": [involved objects]}, which remediation reports
# (Events, a gauge) but cannot patch away. Notifications are emitted
# for every object whose placement decision has annotations or errors. The
# remediator compares "annotations" with the live object after canonical
# serialisation and patches only what differs.
#
# The objects are read through data.io.k8s.federation.replicated, the module
# opa-kube-sync generates for its --replicate-path (policies/lib/generated/ holds
# it for the default root): a dynamic data[root] reference here could reach this
# package's own rules, which OPA's compiler refuses (rego_recursion_error).
package io.k8s.federation.remediation

import data.io.k8s.federation.replicated

default_resources := [{"plural": "replicasets", "namespaced": true}]

# Without input (or without this key) the default applies.
resources := input.resources if input.resources

else := default_resources

notifications contains n if {
	not input.objects
	some r in resources
	object.get(r, "namespaced", true)
	some namespace, objects in replicated.collection(r.plural)
	some name, obj in objects
	n := notification(r.plural, namespace, name, obj)
}

notifications contains n if {
	not input.objects
	some r in resources
	not object.get(r, "namespaced", true)
	some name, obj in replicated.collection(r.plural)
	n := notification(r.plural, "", name, obj)
}

notifications contains n if {
	some o in input.objects
	some r in resources
	r.plural == o.resource
	namespace := object.get(o, "namespace", "")
	obj := stored(r, namespace, o.name)
	n := notification(r.plural, namespace, o.name, obj)
}

stored(r, namespace, name) := replicated.namespaced_object(r.plural, namespace, name) if object.get(r, "namespaced", true)

stored(r, _, name) := replicated.cluster_object(r.plural, name) if not object.get(r, "namespaced", true)

# Only the decision's annotations and errors, in one evaluation: what it would
# patch or record (its patches and events, the webhook's business) is never
# computed here. A placement policy may define either alone.
default decision_annotations := {}

decision_annotations := data.io.k8s.federation.placement.decision.annotations

default decision_errors := []

decision_errors := data.io.k8s.federation.placement.decision.errors

default decision_stuck := null

decision_stuck := data.io.k8s.federation.placement.decision.stuck

notification(plural, namespace, name, obj) := n if {
	decision := {"annotations": decision_annotations, "errors": decision_errors, "stuck": decision_stuck} with input as obj
	desired := decision.annotations
	errs := [e | some e in decision.errors]
	count(desired) + count(errs) > 0
	n := object.union(
		{"resource": plural, "namespace": namespace, "name": name, "annotations": desired, "errors": sort(errs)},
		{"stuck": decision.stuck | decision.stuck != null},
	)
}
