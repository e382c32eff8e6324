# The LimitRange pack's contribution to the admission decision (Rego v1).
# On while the fedplace-limitrange ConfigMap is in the policy namespace; reads
# the LimitRanges opa-kube-sync replicates with --replicate v1/limitranges.
# The logic is in limitrange.rego (package io.k8s.federation.limitrange).
#
#   errors                     every violated LimitRange constraint, and every
#                              malformed quantity (in the object or a LimitRange)
#   patches["limitrange"]      the defaults, added to the containers' resources
#   annotations                kubernetes.io/limit-ranger on Pods, the record
#                              Kubernetes' LimitRanger keeps of what it defaulted
#
# The helper package is named in full rather than imported: the devstack
# engine (regorus) evaluates a whole package with the imports of the package's
# first loaded module, so an import here could be lost, or could replace
# another pack's (see policies/limitrange/README.md).
package io.k8s.federation.admission

# (In the common case there is nothing to report, and the violations are not
# looked for: ranger.rego, "the common case".)
errors contains msg if {
	not data.io.k8s.federation.limitrange.common_case
	some msg in data.io.k8s.federation.limitrange.violations
}

patches["limitrange"] := ops if {
	ops := data.io.k8s.federation.limitrange.patch
	count(ops) > 0
}

annotations["kubernetes.io/limit-ranger"] := data.io.k8s.federation.limitrange.annotation
