# The SchedulingPolicy pack's contribution to the admission decision (Rego v1).
#
# * errors: a pod-bearing object outside the usable policies (pods.rego), or
#   a SchedulingPolicy the validation refuses (validate.rego);
# * patches["schedulingpolicy"]: the defaults injected into the pod spec —
#   only scheduling fields (schedulerName, priorityClassName, nodeSelector,
#   tolerations, affinity), written against the object as submitted.
#
# The helpers live in io.k8s.federation.schedulingpolicy[.*]; this pack reads
# only input and replicated data, and imports no other pack. Rules are
# referenced by their full path, rule by rule, not through imports: this
# package has a module per pack, and regorus (the devstack engine) resolves
# the imports of a whole-package query in one module's context only; through
# a package alias it would also evaluate every rule of that package.
package io.k8s.federation.admission

errors contains msg if {
	some msg in data.io.k8s.federation.schedulingpolicy.errors
}

errors contains msg if {
	some msg in data.io.k8s.federation.schedulingpolicy.validate.errors
}

patches["schedulingpolicy"] := data.io.k8s.federation.schedulingpolicy.patch if {
	data.io.k8s.federation.schedulingpolicy.applies
	count(data.io.k8s.federation.schedulingpolicy.patch) > 0
}
