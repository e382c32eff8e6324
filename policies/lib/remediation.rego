# Remediation library (Rego v1): the desired annotations of every replicated
# object of the remediated kinds, computed in one query by evaluating the
# admission rules with each object as input.
#
# Query: POST /v1/data/io/k8s/federation/remediation/notifications with
#   {"input": {"root": "kubernetes",
#              "resources": [{"plural": "replicasets", "namespaced": true}]}}
# (both optional; these are the defaults). Each notification is
#   {"resource", "namespace" ("" when cluster-scoped), "name",
#    "annotations": {key: value}, "errors": [string]}
# for every object whose admission decision has annotations or errors. The
# remediator compares "annotations" with the live object after canonical
# serialisation and patches only what differs.
package io.k8s.federation.remediation

default_resources := [{"plural": "replicasets", "namespaced": true}]

# Without input (or without these keys) the defaults apply.
resources := input.resources if input.resources

else := default_resources

root := input.root if input.root

else := "kubernetes"

notifications contains n if {
	some r in resources
	object.get(r, "namespaced", true)
	some namespace, objects in data[root][r.plural]
	some name, obj in objects
	n := notification(r.plural, namespace, name, obj)
}

notifications contains n if {
	some r in resources
	not object.get(r, "namespaced", true)
	some name, obj in data[root][r.plural]
	n := notification(r.plural, "", name, obj)
}

notification(plural, namespace, name, obj) := n if {
	decision := data.io.k8s.federation.admission with input as obj
	desired := object.get(decision, "annotations", {})
	errs := [e | some e in object.get(decision, "errors", [])]
	count(desired) + count(errs) > 0
	n := {"resource": plural, "namespace": namespace, "name": name, "annotations": desired, "errors": sort(errs)}
}
