# The SchedulingPolicy pack's contribution to the admission decision (Rego v1).
#
# * errors: a pod-bearing object outside the usable policies (pods.rego), or
#   a SchedulingPolicy the validation refuses (validate.rego);
# * patches["schedulingpolicy"]: the defaults injected into the pod spec —
#   only scheduling fields (schedulerName, priorityClassName, nodeSelector,
#   tolerations, affinity), written against the object as submitted.
#
# The helpers live in io.k8s.federation.schedulingpolicy[.*]; this pack reads
# only input and replicated data, and imports no other pack.
package io.k8s.federation.admission

import data.io.k8s.federation.schedulingpolicy
import data.io.k8s.federation.schedulingpolicy.validate

errors contains msg if some msg in schedulingpolicy.errors

errors contains msg if some msg in validate.errors

patches["schedulingpolicy"] := schedulingpolicy.patch if {
	schedulingpolicy.applies
	count(schedulingpolicy.patch) > 0
}
