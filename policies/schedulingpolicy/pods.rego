# The SchedulingPolicy decision for a pod-bearing object (Rego v1).
#
# For a Pod, or the pod template of a ReplicaSet, Deployment, StatefulSet,
# DaemonSet, Job or CronJob (data.io.k8s.federation.podspec):
#
# 1. the policies the pod's service account may `use` (rbac.rego) among the
#    replicated SchedulingPolicies, in alphabetical order of name;
# 2. merged with the configured option (merge.rego);
# 3. default values injected for the components the pod leaves unset
#    (`patch`, RFC 6902 operations at the pod spec's path for the kind);
# 4. the pod spec with those defaults checked (match.rego): each violation is
#    an error naming the component, the offending value and the policies
#    considered (and the usable ones the validation refuses).
#
# What the API server fills in itself counts as not set: the pod spec arrives
# defaulted (schedulerName default-scheduler; on a Pod, the global default
# PriorityClass and the DefaultTolerationSeconds tolerations), and a pod that
# sets nothing needs no policy. So schedulerName default-scheduler and a
# priorityClassName naming a replicated PriorityClass with globalDefault are
# neither checked against what is allowed nor kept over a policy's default;
# the exempt tolerations are not checked, and defaults go beside them.
#
# Off until SchedulingPolicies are replicated (data.kubernetes.schedulingpolicies
# exists): policies/ ships every pack in the base ConfigMaps, and deny-all-except
# without any policy would refuse every pod that names a scheduler.
#
# Settings (optional module, package io.k8s.federation.schedulingpolicy.settings,
# shipped as its own ConfigMap by deploy/components/schedulingpolicy):
#   merge               "smart" (default) | "first" | "simple"
#   exempt_tolerations  tolerations never checked nor counted as "set", each
#                       matched exactly (key, operator, value, effect,
#                       tolerationSeconds); default: the two the API server's
#                       DefaultTolerationSeconds plugin adds to every Pod
package io.k8s.federation.schedulingpolicy

import data.io.k8s.federation.podspec
import data.io.k8s.federation.replicated
import data.io.k8s.federation.schedulingpolicy.match
import data.io.k8s.federation.schedulingpolicy.merge
import data.io.k8s.federation.schedulingpolicy.rbac
import data.io.k8s.federation.schedulingpolicy.validate

prefix := "SchedulingPolicy"

# ---- settings --------------------------------------------------------------

default merge_option := "smart"

merge_option := data.io.k8s.federation.schedulingpolicy.settings.merge

default_exempt_tolerations := [
	{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
	{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]

exempt_tolerations := v if {
	v := data.io.k8s.federation.schedulingpolicy.settings.exempt_tolerations
	is_array(v)
} else := default_exempt_tolerations

# ---- what the API server fills in itself -------------------------------------

# The scheduler the API server names in every pod spec that names none.
kubernetes_scheduler := "default-scheduler"

# The fields of the pod spec holding the value the API server would have put
# there had the pod set nothing.
kubernetes_defaulted contains "schedulerName" if spec.schedulerName == kubernetes_scheduler

kubernetes_defaulted contains "priorityClassName" if {
	name := spec.priorityClassName
	is_string(name)
	replicated.collection("priorityclasses")[name].globalDefault == true
}

# ---- when the pack decides ---------------------------------------------------

policies := replicated.collection("schedulingpolicies")

enabled if is_object(policies)

# A pod spec is decided when the pack is on: every Pod and pod template, on
# every create and update. On an update the webhook denies only the errors the
# update introduces (it evaluates the old object too, docs/admission.md), so a
# Pod that exists is denied only for what an update may still change and
# changed: tolerations added, and, on a Pod with scheduling gates (Kubernetes
# 1.27+), its node selector, affinity and tolerations. The other scheduling
# fields are immutable: the old Pod has the same errors for them.
decides if {
	enabled
	podspec.spec
}

# Defaults are injected only into a Pod being created (or a pod template): a
# Pod that exists (it carries status.phase, set by the API server after
# admission) is never patched, as the API server refuses an update that
# changes its immutable fields. Such a Pod is checked as it stands.
injects if not podspec.existing_pod

# A pod spec is checked when it is decided, the settings are sound and the
# RBAC the decision reads is replicated (otherwise `errors` says why not).
applies if {
	decides
	merge_option in merge.options
	count(rbac.missing) == 0
}

# ---- whose policies ----------------------------------------------------------

spec := podspec.spec

namespace := rbac.namespace

service_account := rbac.service_account

# Granted policies that exist, in alphabetical order.
usable := sort([name | some name, _ in policies]) if "*" in rbac.granted

usable := sort([name | some name in rbac.granted; policies[name]]) if not "*" in rbac.granted

# Policies are validated at their own admission (validate.rego) and by the
# CRD schema, not here on every request: the merge and the checks read a
# wrongly typed component as absent.
merged := merge.merged([merge.normalize(object.get(policies[name], "spec", {})) | some name in usable], merge_option)

# ---- defaults ------------------------------------------------------------------

# The components defaulted one value each (tolerations are appended to: below)
# that the pod spec sets: a non-empty string or object, other than what the API
# server fills in itself.
specified_fields := {field |
	some field in ["schedulerName", "priorityClassName", "nodeSelector", "affinity"]
	specified(spec[field])
} - kubernetes_defaulted

specified(x) if {
	is_string(x)
	x != ""
}

specified(x) if {
	is_object(x)
	count(x) > 0
}

# The default of each component the pod leaves unset: {field: value}.
defaults[field] := value if {
	injects
	some field in ["schedulerName", "priorityClassName"]
	not field in specified_fields
	value := merged["default"][field]
	is_string(value)
	value != ""
	value != object.get(spec, field, "") # already there (the API server's default)
}

defaults[field] := value if {
	injects
	some field in ["nodeSelector", "affinity"]
	not field in specified_fields
	value := merged["default"][field]
	is_object(value)
	count(value) > 0
}

# Tolerations the API server added itself (exempt) do not count as set: the
# defaults are appended to them.
defaults["tolerations"] := array.concat(match.tolerations(spec), value) if {
	injects
	value := merged["default"].tolerations
	is_array(value)
	count(value) > 0
	every t in match.tolerations(spec) {
		match.exempt_toleration(t, exempt_tolerations)
	}
}

# The pod spec as it will be admitted.
effective := object.union(spec, defaults)

patch := array.concat(
	[{"op": "add", "path": sprintf("%s/%s", [podspec.pointer, field]), "value": defaults[field]} |
		some field in merge.components["default"]
		defaults[field]
	],
	resolved_priority_removed,
)

# A Pod given a default priority class loses the priority (and preemption
# policy) the API server's Priority plugin resolved from the class it had, or
# from none: the plugin, run again after the webhook, resolves them from the new
# class, and refuses a Pod whose priority differs from its class'.
resolved_priority_removed := [{"op": "remove", "path": sprintf("/spec/%s", [field])} |
	input.kind == "Pod"
	defaults.priorityClassName
	some field in ["priority", "preemptionPolicy"]
	field in object.keys(spec)
]

# ---- decision --------------------------------------------------------------------

violations := match.violations(merged, effective, exempt_tolerations, kubernetes_defaulted - object.keys(defaults))

errors contains msg if {
	applies
	some v in violations
	msg := sprintf("%s: %s %s: %s; %s", [prefix, v.component, v.value, v.reason, considered])
}

errors contains msg if {
	decides
	not merge_option in merge.options
	msg := sprintf("%s: setting merge %s is not one of %s (module io.k8s.federation.schedulingpolicy.settings)", [prefix, json.marshal(merge_option), concat(", ", sort(merge.options))])
}

errors contains msg if {
	decides
	count(rbac.missing) > 0
	msg := sprintf(
		"%s: cannot tell which policies service account %s/%s may use: %s not replicated (opa-kube-sync --replicate-cluster for clusterroles and clusterrolebindings, --replicate for roles and rolebindings, group rbac.authorization.k8s.io/v1)",
		[prefix, namespace, service_account, concat(", ", sort(rbac.missing))],
	)
}

# What every denial says about the policies behind it (usable policies the
# validation refuses are named: computed only for a denial).
considered := sprintf("policies considered for service account %s/%s: %s (merge: %s)%s", [namespace, service_account, names_or_none(usable), merge_option, invalid_text])

names_or_none(names) := "none" if count(names) == 0

else := concat(", ", names)

invalid_text := "" if count(invalid) == 0

else := sprintf("; invalid, fix them: %s", [concat(", ", invalid)])

invalid := [name |
	some name in usable
	problems := validate.problems with input as policies[name]
	count(problems) > 0
]
