# The decision for pod-bearing objects: which policies, merged how, what is
# injected where, what is denied and what the denial says.
package io.k8s.federation.schedulingpolicy.pods_test

import data.io.k8s.federation.schedulingpolicy.applies
import data.io.k8s.federation.schedulingpolicy.errors
import data.io.k8s.federation.schedulingpolicy.patch
import data.io.k8s.federation.schedulingpolicy.seed_test
import data.io.k8s.federation.schedulingpolicy.usable

arch := seed_test.arch

os := seed_test.os

containers := [{"name": "app", "image": "nginx"}]

pod(spec) := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}, "spec": object.union({"containers": containers}, spec)}

use_all := {"apiGroups": ["scheduling.fedplace.io"], "resources": ["schedulingpolicies"], "verbs": ["use"]}

# The replicated world: these policies ({name: spec}), all usable by every
# service account (a ClusterRoleBinding to system:authenticated of a
# ClusterRole granting `use` on every SchedulingPolicy).
world(specs) := rbac_world(
	specs, {"sp:all": {"metadata": {"name": "sp:all"}, "rules": [use_all]}}, {"sp:all": {
		"metadata": {"name": "sp:all"},
		"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sp:all"},
		"subjects": [{"kind": "Group", "name": "system:authenticated"}],
	}},
	{},
)

rbac_world(specs, clusterroles, clusterrolebindings, rolebindings) := {
	"schedulingpolicies": {name: seed_test.policy(name, spec) | some name, spec in specs},
	"clusterroles": clusterroles,
	"clusterrolebindings": clusterrolebindings,
	"roles": {},
	"rolebindings": rolebindings,
}

seed_world(names) := world({name: seed_test.specs[name] | some name in names})

decide(kube, obj) := {"errors": e, "patch": p} if {
	e := errors with data.kubernetes as kube with input as obj
	p := patch with data.kubernetes as kube with input as obj
}

decide_merged(kube, obj, option) := {"errors": e, "patch": p} if {
	e := errors with data.kubernetes as kube with input as obj with data.io.k8s.federation.schedulingpolicy.settings.merge as option
	p := patch with data.kubernetes as kube with input as obj with data.io.k8s.federation.schedulingpolicy.settings.merge as option
}

# ---- defaults are injected only when the pod sets none -----------------------

test_defaults_injected_for_unset_components if {
	d := decide(seed_world(["complete-node-selector", "default-scheduler", "single-priority", "default-tolerations", "basic-affinity"]), pod({}))
	d.errors == set()
	{op.path | some op in d.patch} == {"/spec/schedulerName", "/spec/priorityClassName", "/spec/nodeSelector", "/spec/tolerations", "/spec/affinity"}
	some op in d.patch
	op == {"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64"}}
	some t in d.patch
	t.path == "/spec/tolerations"
	count(t.value) == 3 # values ["value", "other_value"] became two tolerations
}

test_no_default_for_a_component_the_pod_sets if {
	d := decide(seed_world(["complete-node-selector", "single-priority"]), pod({"nodeSelector": {arch: "arm64"}}))
	d.errors == set()
	d.patch == [{"op": "add", "path": "/spec/priorityClassName", "value": "high-priority"}]

	# an empty value counts as unset
	d2 := decide(seed_world(["complete-node-selector"]), pod({"nodeSelector": {}}))
	d2.patch == [{"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64"}}]
}

test_a_set_component_is_not_completed_from_the_default if {
	# the pod set a node selector without the required key: denied, not patched
	d := decide(seed_world(["complete-node-selector"]), pod({"nodeSelector": {"disk": "ssd"}}))
	d.patch == []
	count(d.errors) == 1
}

test_defaults_at_the_pod_spec_of_every_kind if {
	kube := seed_world(["single-priority"])
	template := {"template": {"spec": {"containers": containers}}}
	paths := {
		"Pod": ["v1", {"containers": containers}, "/spec/priorityClassName"],
		"ReplicaSet": ["apps/v1", template, "/spec/template/spec/priorityClassName"],
		"Deployment": ["apps/v1", template, "/spec/template/spec/priorityClassName"],
		"StatefulSet": ["apps/v1", template, "/spec/template/spec/priorityClassName"],
		"DaemonSet": ["apps/v1", template, "/spec/template/spec/priorityClassName"],
		"Job": ["batch/v1", template, "/spec/template/spec/priorityClassName"],
		"CronJob": ["batch/v1", {"jobTemplate": {"spec": template}}, "/spec/jobTemplate/spec/template/spec/priorityClassName"],
	}
	every kind, x in paths {
		obj := {"apiVersion": x[0], "kind": kind, "metadata": {"name": "w", "namespace": "team-a"}, "spec": x[1]}
		d := decide(kube, obj)
		d.patch == [{"op": "add", "path": x[2], "value": "high-priority"}]
	}
}

test_other_kinds_are_left_alone if {
	d := decide(seed_world(["single-priority"]), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team-a"}, "data": {}})
	d == {"errors": set(), "patch": []}
}

# A Pod that exists (an update: it carries status.phase) is checked as it
# stands and never patched; the webhook denies an update only for the errors
# the old Pod does not have. Each violation is its own error, so what an update
# adds is told apart from what the Pod already had. A workload's template is
# decided (and defaulted) on every update.
test_a_pod_that_exists_is_checked_as_it_stands_and_never_patched if {
	kube := seed_world(["complete-node-selector", "default-scheduler", "single-priority"])
	running := object.union(pod({"schedulerName": "other", "nodeSelector": {"x": "y"}}), {"status": {"phase": "Running"}})
	pending := object.union(pod({}), {"status": {"phase": "Pending"}})
	every obj in [running, pending] {
		applies with data.kubernetes as kube with input as obj
		decide(kube, obj).patch == []
		count(decide(kube, obj).errors) > 0 # what the policies require is not there
	}
	count(decide(kube, pod({})).patch) > 0 # the same Pod being created is defaulted
	template := {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "team-a"}, "spec": {"template": {"spec": {"containers": containers}}}, "status": {"replicas": 1}}
	applies with data.kubernetes as kube with input as template
	count(decide(kube, template).patch) > 0
}

# Forging status.phase on a create (the API server shows it to webhooks before
# it resets the status) only loses the defaults: the spec is still checked.
test_a_forged_status_phase_does_not_escape_the_check if {
	kube := seed_world(["allowed-only-node-selector"])
	forged := object.union(pod({"tolerations": [{"key": "x", "operator": "Exists", "effect": "NoSchedule"}]}), {"status": {"phase": "Running"}})
	some msg in decide(kube, forged).errors
	contains(msg, `toleration {"effect":"NoSchedule","key":"x","operator":"Exists"}: not allowed`)
}

# One error per toleration: an added toleration's error is not among the old
# Pod's; a label change leaves the errors as they were.
test_an_added_toleration_is_an_error_of_its_own if {
	kube := seed_world(["allowed-only-node-selector"])
	had := {"key": "old", "operator": "Exists", "effect": "NoSchedule"}
	added := {"key": "x", "operator": "Exists", "effect": "NoExecute"}
	old := object.union(pod({"tolerations": [had]}), {"status": {"phase": "Running"}})
	new := object.union(pod({"tolerations": [had, added]}), {"status": {"phase": "Running"}})
	labelled := object.union(old, {"metadata": {"labels": {"tier": "web"}}})
	before := decide(kube, old).errors
	count(before) == 1
	introduced := decide(kube, new).errors - before
	count(introduced) == 1
	some msg in introduced
	startswith(msg, `SchedulingPolicy: toleration {"effect":"NoExecute","key":"x","operator":"Exists"}: not allowed`)
	decide(kube, labelled).errors == before
	decide(kube, new).patch == []
}

test_api_server_tolerations_do_not_count_as_set if {
	api_server := [
		{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
		{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
	]
	d := decide(seed_world(["default-tolerations"]), pod({"tolerations": api_server}))
	d.errors == set()
	some op in d.patch
	op.path == "/spec/tolerations"
	count(op.value) == 5
	array.slice(op.value, 0, 2) == api_server

	# with the exemption switched off they are checked like any other
	d2 := errors with data.kubernetes as seed_world(["restricted"]) with input as pod({"tolerations": api_server}) with data.io.k8s.federation.schedulingpolicy.settings.exempt_tolerations as []
	count(d2) == 2
}

# ---- what the API server fills in itself counts as not set ---------------------------

api_server_tolerations := [
	{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
	{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]

# A Pod as a Kubernetes 1.24 API server sends it when the pod sets nothing
# (its defaulting, then the Priority and DefaultTolerationSeconds plugins).
api_server_pod(spec) := pod(object.union(
	{
		"schedulerName": "default-scheduler", "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
		"terminationGracePeriodSeconds": 30, "securityContext": {}, "priority": 0,
		"preemptionPolicy": "PreemptLowerPriority", "tolerations": api_server_tolerations,
	},
	spec,
))

test_a_pod_that_sets_nothing_needs_no_policy_as_the_api_server_sends_it if {
	kube := rbac_world({"restricted": seed_test.specs.restricted}, {}, {}, {}) # usable by nobody
	decide(kube, api_server_pod({})) == {"errors": set(), "patch": []}
}

test_the_api_server_s_scheduler_gives_way_to_a_policy_default if {
	d := decide(seed_world(["default-scheduler"]), api_server_pod({}))
	d == {"errors": set(), "patch": [{"op": "add", "path": "/spec/schedulerName", "value": "my-scheduler"}]}

	# a default equal to what is there patches nothing
	same := decide(seed_world(["restricted-multiarch-by-node-selector"]), api_server_pod({}))
	same.patch == [{"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64", os: "Linux"}}]
}

test_the_api_server_s_scheduler_counts_for_what_is_required if {
	gpu := decide(world({"gpu": {"required": {"schedulerNames": ["gpu-scheduler"]}}}), api_server_pod({}))
	gpu.errors == {"SchedulingPolicy: schedulerName \"default-scheduler\": required, one of \"gpu-scheduler\"; policies considered for service account team-a/default: gpu (merge: smart)"}
	ok := decide(world({"default": {"required": {"schedulerNames": ["default-scheduler"]}}}), api_server_pod({}))
	ok.errors == set()
}

# The replicated PriorityClasses: cluster-default is the cluster's global default.
priority_classes := {
	"cluster-default": {"metadata": {"name": "cluster-default"}, "value": 100, "globalDefault": true},
	"team-low": {"metadata": {"name": "team-low"}, "value": 1000, "globalDefault": false},
}

test_the_global_default_priority_class_counts_as_not_set if {
	kube := object.union(rbac_world({"restricted": seed_test.specs.restricted}, {}, {}, {}), {"priorityclasses": priority_classes})
	decide(kube, api_server_pod({"priorityClassName": "cluster-default", "priority": 100})).errors == set()

	# any other class is checked
	count(decide(kube, api_server_pod({"priorityClassName": "team-low", "priority": 1000})).errors) == 1

	# without replicated PriorityClasses no class is known to be the global default
	count(decide(object.remove(kube, ["priorityclasses"]), api_server_pod({"priorityClassName": "cluster-default"})).errors) == 1
}

test_a_default_priority_class_on_a_pod_drops_the_resolved_priority if {
	kube := object.union(world({"team": {"default": {"priorityClassName": "team-low"}}}), {"priorityclasses": priority_classes})
	d := decide(kube, api_server_pod({"priorityClassName": "cluster-default", "priority": 100}))
	d.errors == set()
	d.patch == [
		{"op": "add", "path": "/spec/priorityClassName", "value": "team-low"},
		{"op": "remove", "path": "/spec/priority"},
		{"op": "remove", "path": "/spec/preemptionPolicy"},
	]

	# no class at all (no global default): priority 0 resolved, dropped all the same
	d2 := decide(kube, api_server_pod({}))
	d2.patch == [
		{"op": "add", "path": "/spec/priorityClassName", "value": "team-low"},
		{"op": "remove", "path": "/spec/priority"},
		{"op": "remove", "path": "/spec/preemptionPolicy"},
	]

	# a pod template has no resolved priority: only the class is patched
	deployment := {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "team-a"}, "spec": {"template": {"spec": {"containers": containers, "priorityClassName": "cluster-default"}}}}
	decide(kube, deployment).patch == [{"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "team-low"}]

	# a class the pod names itself is kept
	decide(kube, api_server_pod({"priorityClassName": "team-low", "priority": 1000})).patch == []
}

test_only_the_api_server_s_own_tolerations_are_exempt if {
	kube := seed_world(["restricted"])
	decide(kube, api_server_pod({})).errors == set()
	forever := object.remove(api_server_tolerations[1], ["tolerationSeconds"])
	d := decide(kube, api_server_pod({"tolerations": [api_server_tolerations[0], forever]}))
	d.errors == {"SchedulingPolicy: toleration {\"effect\":\"NoExecute\",\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\"}: not allowed (no allowed toleration rule covers it); policies considered for service account team-a/default: restricted (merge: smart)"}
}

# ---- denials ---------------------------------------------------------------------

test_a_denial_names_component_value_and_policies if {
	d := decide(seed_world(["restricted", "allowed-schedulers"]), pod({"schedulerName": "gpu-scheduler"}))
	d.errors == {"SchedulingPolicy: schedulerName \"gpu-scheduler\": not allowed (allowed: \"default-scheduler\", \"green-scheduler\", \"my-scheduler\"); policies considered for service account team-a/default: allowed-schedulers, restricted (merge: smart)"}
}

test_no_usable_policy if {
	kube := rbac_world({"restricted": seed_test.specs.restricted}, {}, {}, {})
	d := decide(kube, pod({"schedulerName": "other-scheduler", "nodeSelector": {"disk": "ssd"}}))
	d.errors == {
		"SchedulingPolicy: schedulerName \"other-scheduler\": not allowed (allowed: none); policies considered for service account team-a/default: none (merge: smart)",
		"SchedulingPolicy: nodeSelector disk=ssd: not allowed (no node selector key is allowed); policies considered for service account team-a/default: none (merge: smart)",
	}

	# what sets nothing passes
	d2 := decide(kube, pod({}))
	d2 == {"errors": set(), "patch": []}
}

test_only_policies_granted_to_the_service_account_count if {
	kube := rbac_world(
		{"gold": {"allowed": {"priorityClassNames": ["gold"]}}, "silver": {"allowed": {"priorityClassNames": ["silver"]}}},
		{"sp:silver": {"metadata": {"name": "sp:silver"}, "rules": [object.union(use_all, {"resourceNames": ["silver"]})]}},
		{},
		{"team-a": {"silver": {
			"metadata": {"name": "silver", "namespace": "team-a"},
			"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sp:silver"},
			"subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "team-a"}],
		}}},
	)
	u := usable with data.kubernetes as kube with input as pod({"serviceAccountName": "builder"})
	u == ["silver"]
	d := decide(kube, pod({"serviceAccountName": "builder", "priorityClassName": "gold"}))
	some e in d.errors
	contains(e, "priorityClassName \"gold\": not allowed (allowed: \"silver\"); policies considered for service account team-a/builder: silver (merge: smart)")
	d2 := decide(kube, pod({"priorityClassName": "silver"}))
	some e2 in d2.errors
	contains(e2, "service account team-a/default: none")
}

test_a_grant_of_a_policy_that_does_not_exist_is_ignored if {
	kube := rbac_world(
		{"restricted": seed_test.specs.restricted},
		{"sp:all": {"metadata": {"name": "sp:all"}, "rules": [object.union(use_all, {"resourceNames": ["restricted", "gone"]})]}},
		world({}).clusterrolebindings,
		{},
	)
	u := usable with data.kubernetes as kube with input as pod({})
	u == ["restricted"]
}

test_invalid_policies_are_named_in_denials if {
	kube := world({"broken": {"required": {"priorityClassNames": []}, "allowed": {"schedulerNames": ["a"]}}})
	d := decide(kube, pod({"schedulerName": "b"}))
	d.errors == {"SchedulingPolicy: schedulerName \"b\": not allowed (allowed: \"a\"); policies considered for service account team-a/default: broken (merge: smart); invalid, fix them: broken"}
}

test_off_until_schedulingpolicies_are_replicated if {
	kube := object.remove(seed_world(["restricted"]), ["schedulingpolicies"])
	d := decide(kube, pod({"schedulerName": "anything", "nodeSelector": {"x": "y"}}))
	d == {"errors": set(), "patch": []}
}

test_rbac_not_replicated if {
	kube := object.remove(seed_world(["restricted"]), ["roles", "rolebindings"])
	d := decide(kube, pod({}))
	d.errors == {"SchedulingPolicy: cannot tell which policies service account team-a/default may use: rolebindings, roles not replicated (opa-kube-sync --replicate-cluster for clusterroles and clusterrolebindings, --replicate for roles and rolebindings, group rbac.authorization.k8s.io/v1)"}
	d.patch == []
}

test_an_unknown_merge_setting_is_an_error if {
	d := decide_merged(seed_world(["restricted"]), pod({}), "deep")
	d.errors == {"SchedulingPolicy: setting merge \"deep\" is not one of first, simple, smart (module io.k8s.federation.schedulingpolicy.settings)"}
}

# ---- the seed's merge examples, decided ------------------------------------------

merge_world := seed_world(["schedpol-a", "schedpol-b"])

test_smart_merge_decisions if {
	# defaults per key from both: arch from a, os and the priority class from b
	d := decide_merged(merge_world, pod({}), "smart")
	d.errors == set()
	d.patch == [
		{"op": "add", "path": "/spec/priorityClassName", "value": "bronze"},
		{"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64", os: "Linux"}},
	]

	# allowed is additive: disk=sata (from b) next to the required keys
	ok := decide_merged(merge_world, pod({"nodeSelector": {arch: "arm64", os: "Windows", "disk": "sata"}, "priorityClassName": "gold"}), "smart")
	ok.errors == set()

	# required per key: a's arch values win over b's (no i386), b's os is required
	bad := decide_merged(merge_world, pod({"nodeSelector": {arch: "i386"}, "priorityClassName": "gold"}), "smart")
	{e | some e in bad.errors; contains(e, sprintf("%s=i386", [arch]))} != set()
	{e | some e in bad.errors; contains(e, sprintf("%s unset", [os]))} != set()
}

test_first_seen_wins_ever_decisions if {
	d := decide_merged(merge_world, pod({}), "first")
	d.errors == set()
	d.patch == [{"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64"}}]

	# b counts for nothing: disk=sata and any priority class are refused, os is not required
	bad := decide_merged(merge_world, pod({"nodeSelector": {arch: "amd64", "disk": "sata"}, "priorityClassName": "gold"}), "first")
	{e | some e in bad.errors; contains(e, "disk=sata")} != set()
	{e | some e in bad.errors; contains(e, "priorityClassName \"gold\"")} != set()
	ok := decide_merged(merge_world, pod({"nodeSelector": {arch: "arm64", "disk": "ssd"}}), "first")
	ok.errors == set()
}

test_simple_merge_decisions if {
	d := decide_merged(merge_world, pod({}), "simple")
	d.errors == set()
	d.patch == [
		{"op": "add", "path": "/spec/priorityClassName", "value": "bronze"},
		{"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64"}},
	]

	# allowed.nodeSelectors is a's alone; required.priorityClassNames is b's
	bad := decide_merged(merge_world, pod({"nodeSelector": {arch: "amd64", "disk": "sata"}, "priorityClassName": "gold"}), "simple")
	{e | some e in bad.errors; contains(e, "disk=sata")} != set()
	ok := decide_merged(merge_world, pod({"nodeSelector": {arch: "amd64"}, "priorityClassName": "silver"}), "simple")
	ok.errors == set()
}

# ---- the seed's default policies -------------------------------------------------------

test_restricted_policy if {
	kube := seed_world(["restricted"])
	ok := decide(kube, pod({"schedulerName": "default-scheduler"}))
	ok.errors == set()
	every spec in [
		{"schedulerName": "other"},
		{"priorityClassName": "high"},
		{"nodeSelector": {"disk": "ssd"}},
		{"tolerations": [{"key": "k", "operator": "Exists"}]},
		{"affinity": {"podAntiAffinity": {seed_test.preferred_kind: []}}},
	] {
		d := decide(kube, pod(spec))
		count(d.errors) == 1
	}
}

test_restricted_multiarch_policies if {
	by_selector := decide(seed_world(["restricted-multiarch-by-node-selector"]), pod({}))
	by_selector.errors == set()
	by_selector.patch == [
		{"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"},
		{"op": "add", "path": "/spec/nodeSelector", "value": {arch: "amd64", os: "Linux"}},
	]
	by_affinity := decide(seed_world(["restricted-multiarch-by-affinity"]), pod({}))
	by_affinity.errors == set()
	{op.path | some op in by_affinity.patch} == {"/spec/schedulerName", "/spec/affinity"}
	windows := decide(seed_world(["restricted-multiarch-by-node-selector"]), pod({"nodeSelector": {arch: "arm64", os: "Windows"}}))
	windows.patch == [{"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"}]
	windows.errors == set()
}

test_privileged_policy_allows_everything if {
	d := decide(seed_world(["privileged"]), pod({
		"schedulerName": "any",
		"priorityClassName": "system-node-critical",
		"nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
		"tolerations": [{"operator": "Exists"}],
		"affinity": match_test_all_kinds,
	}))
	d == {"errors": set(), "patch": []}
}

match_test_all_kinds := data.io.k8s.federation.schedulingpolicy.match_test.all_kinds
