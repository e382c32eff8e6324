# The LimitRange pack's contribution to the admission decision (Rego v1).
# On while the fedplace-limitrange ConfigMap is in the policy namespace; reads
# the LimitRanges opa-kube-sync replicates with --replicate v1/limitranges.
# The logic is in ranger.rego (package io.k8s.federation.limitrange).
#
#   errors                     every violated LimitRange constraint, and every
#                              malformed quantity (in the object or a LimitRange)
#   patches["limitrange"]      the defaults, added to the containers' resources
#   annotations                kubernetes.io/limit-ranger on Pods, the record
#                              Kubernetes' LimitRanger keeps of what it defaulted
package io.k8s.federation.admission

import data.io.k8s.federation.limitrange

# (In the common case there is nothing to report, and the rules that find
# violations are not evaluated: ranger.rego, "the common case".)
errors contains msg if {
	not limitrange.common_case
	some msg in limitrange.violations
}

patches["limitrange"] := limitrange.patch if count(limitrange.patch) > 0

annotations["kubernetes.io/limit-ranger"] := limitrange.annotation
