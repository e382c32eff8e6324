# Remediation library (Rego v1): the desired annotations of every replicated
# object of the remediated kinds, computed in one query by evaluating the
# placement decision (data.io.k8s.federation.placement.decision) with each
# object as input — or once for objects a pack declares alike ("shared
# decisions" below). Placement alone: another pack's errors (a LimitRange
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

# The objects of the query, each as [plural, namespace ("" when cluster-scoped), name]
# (a set of references: the objects themselves are read where they are needed,
# object_at, never copied into a rule's value).
refs contains [r.plural, namespace, name] if {
	not input.objects
	some r in resources
	object.get(r, "namespaced", true)
	some namespace, objects in replicated.collection(r.plural)
	some name, _ in objects
}

refs contains [r.plural, "", name] if {
	not input.objects
	some r in resources
	not object.get(r, "namespaced", true)
	some name, _ in replicated.collection(r.plural)
}

refs contains [r.plural, namespace, o.name] if {
	some o in input.objects
	some r in resources
	r.plural == o.resource
	namespace := object.get(o, "namespace", "")
	stored(r, namespace, o.name)
}

stored(r, namespace, name) := replicated.namespaced_object(r.plural, namespace, name) if object.get(r, "namespaced", true)

stored(r, _, name) := replicated.cluster_object(r.plural, name) if not object.get(r, "namespaced", true)

object_at([plural, "", name]) := replicated.cluster_object(plural, name)

object_at([plural, namespace, name]) := replicated.namespaced_object(plural, namespace, name) if namespace != ""

# -- shared decisions -------------------------------------------------------------
#
# Every object's decision is evaluated with the object as input, and OPA keeps
# nothing between two evaluations under different inputs: whatever the decision
# derives from data alone (the clusters, the settings, a template's
# requirements) is derived again for each object. A pack may name objects that
# are decided alike: decision_key(plural, obj) returns a value (not null) such
# that any two objects of the query with the same value have the same decision
# annotations and errors (every pack's, not only its own). The decision is then
# evaluated once per value, with one of its objects (the first by
# [plural, namespace, name]) as input, and shared by the others. Each pack
# defines decision_key in this package for its own objects only (two
# definitions answering differently for one object are an evaluation error);
# null, the default, means "decided alone".
default decision_key(_, _) := null

# [key, reference] of every object of the query.
keyed_refs := [[decision_key(ref[0], object_at(ref)), ref] | some ref in refs]

# One object per key (the first by [plural, namespace, name]): the keyed objects
# sorted by key, each first of its key.
keyed := sort([x | some x in keyed_refs; x[0] != null])

# The shared decisions by key, as one object (a complete document, computed
# once): each lookup below is then a hash lookup, where a partial rule looked
# up by key would compare the key with every keyed object's.
shared := {key: decide(object_at(ref)) |
	some i, [key, ref] in keyed
	first_of_key(i, key)
}

first_of_key(0, _)

first_of_key(i, key) if keyed[i - 1][0] != key

notifications contains n if {
	some [key, ref] in keyed_refs
	n := notification(ref, decision_of(ref, key))
}

decision_of(ref, null) := decide(object_at(ref))

decision_of(_, key) := shared[key] if key != null

# Only the decision's annotations and errors, in one evaluation: what it would
# patch or record (its patches and events, the webhook's business) is never
# computed here. A placement policy may define either alone.
default decision_annotations := {}

decision_annotations := data.io.k8s.federation.placement.decision.annotations

default decision_errors := []

decision_errors := data.io.k8s.federation.placement.decision.errors

default decision_stuck := null

decision_stuck := data.io.k8s.federation.placement.decision.stuck

decide(obj) := d if {
	d := {"annotations": decision_annotations, "errors": decision_errors, "stuck": decision_stuck} with input as obj
}

notification([plural, namespace, name], decision) := n if {
	desired := decision.annotations
	errs := [e | some e in decision.errors]
	count(desired) + count(errs) > 0
	n := object.union(
		{"resource": plural, "namespace": namespace, "name": name, "annotations": desired, "errors": sort(errs)},
		{"stuck": decision.stuck | decision.stuck != null},
	)
}
