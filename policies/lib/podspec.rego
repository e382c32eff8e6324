# Where an admitted object carries its pod spec (Rego v1), for packs that read or
# default pod-level settings (SchedulingPolicy, LimitRange, …) without knowing the
# kind. In a federation control plane most workloads are pod templates.
#
#   kind                                         pod spec at
#   Pod                                          /spec
#   ReplicaSet, Deployment, StatefulSet,
#   DaemonSet, Job                               /spec/template/spec
#   CronJob                                      /spec/jobTemplate/spec/template/spec
#
# path / pointer / spec are undefined for any other kind, and spec is undefined
# when the object has no pod spec at that path.
package io.k8s.federation.podspec

template_kinds := {"ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job"}

# The pod spec's path as a list of keys.
path := ["spec"] if input.kind == "Pod"

path := ["spec", "template", "spec"] if input.kind in template_kinds

path := ["spec", "jobTemplate", "spec", "template", "spec"] if input.kind == "CronJob"

# The same path as an RFC 6901 JSON pointer, for patches ("/spec/template/spec").
pointer := concat("", [sprintf("/%s", [p]) | some p in path]) if path

# The pod spec itself (an object).
spec := s if {
	s := object.get(input, path, null)
	is_object(s)
}

# Whether the admitted object carries a pod spec.
applies if spec

# Whether the object is a Pod that already exists: the API server sets
# status.phase when it creates a Pod, after the admission webhooks, so only an
# update of a Pod carries it. A Pod's spec is then immutable but for a few
# fields, and packs decide a Pod once, at its creation.
existing_pod if {
	input.kind == "Pod"
	input.status.phase
}
