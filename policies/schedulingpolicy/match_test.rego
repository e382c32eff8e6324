# Component semantics, one policy at a time (defaults already applied to the
# pod spec: pods_test.rego covers injection).
package io.k8s.federation.schedulingpolicy.match_test

import data.io.k8s.federation.schedulingpolicy.match
import data.io.k8s.federation.schedulingpolicy.merge
import data.io.k8s.federation.schedulingpolicy.seed_test

arch := seed_test.arch

os := seed_test.os

region := seed_test.region

zone := seed_test.zone

rk := seed_test.required_kind

pk := seed_test.preferred_kind

violations(spec, pod) := match.violations(merge.normalize(spec), pod, [], set())

allows(spec, pod) if count(violations(spec, pod)) == 0

denies(spec, pod, component) if {
	some v in violations(spec, pod)
	v.component == component
}

seed(name, pod) := violations(seed_test.specs[name], pod)

seed_allows(name, pod) if count(seed(name, pod)) == 0

# ---- deny-all-except --------------------------------------------------------------

every_component := {
	"schedulerName": "my-scheduler",
	"priorityClassName": "gold",
	"nodeSelector": {"disk": "ssd"},
	"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
	"affinity": {"podAffinity": {rk: [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}]}},
}

test_a_component_absent_from_every_policy_is_not_allowed if {
	found := {v.component | some v in violations({}, every_component)}
	found == {"schedulerName", "priorityClassName", "nodeSelector", "toleration", "affinity"}
}

test_a_pod_setting_nothing_needs_no_policy if {
	allows({}, {"containers": [{"name": "c"}]})
	allows({}, {"schedulerName": "", "nodeSelector": {}, "tolerations": [], "affinity": {}})
}

test_denials_name_the_value if {
	some v in violations({}, {"schedulerName": "my-scheduler"})
	v == {"component": "schedulerName", "value": "\"my-scheduler\"", "reason": "not allowed (allowed: none)"}
}

# ---- scheduler names and priority classes -------------------------------------

test_allowed_scheduler_names if {
	seed_allows("allowed-schedulers", {"schedulerName": "green-scheduler"})
	seed_allows("allowed-schedulers", {"schedulerName": "my-scheduler"})
	seed_allows("allowed-schedulers", {})
	some v in seed("allowed-schedulers", {"schedulerName": "other"})
	v.reason == "not allowed (allowed: \"green-scheduler\", \"my-scheduler\")"
}

test_empty_allowed_list_means_any if {
	seed_allows("allowed-any-scheduler", {"schedulerName": "anything"})
	seed_allows("all-priorities", {"priorityClassName": "whatever"})
}

test_required_scheduler_names_are_mandatory_and_allowed if {
	seed_allows("required-schedulers", {"schedulerName": "my-scheduler"})
	some v in seed("required-schedulers", {})
	v == {"component": "schedulerName", "value": "none", "reason": "required, one of \"green-scheduler\", \"my-scheduler\""}
	vs := seed("required-schedulers", {"schedulerName": "other"})
	count(vs) == 1
}

test_the_default_is_allowed if {
	seed_allows("default-scheduler", {"schedulerName": "my-scheduler"})
	denies(seed_test.specs["default-scheduler"], {"schedulerName": "green-scheduler"}, "schedulerName")
}

test_single_priority_class if {
	seed_allows("single-priority", {"priorityClassName": "high-priority"})
	denies(seed_test.specs["single-priority"], {"priorityClassName": "low"}, "priorityClassName")
	denies(seed_test.specs["single-priority"], {}, "priorityClassName")
}

# ---- node selectors ------------------------------------------------------------------

test_complete_node_selector_policy if {
	name := "complete-node-selector"
	seed_allows(name, {"nodeSelector": {arch: "amd64"}})
	seed_allows(name, {"nodeSelector": {arch: "arm64", "disk": "hdd", region: "anywhere"}})
	denies(seed_test.specs[name], {"nodeSelector": {arch: "i386"}}, "nodeSelector")
	denies(seed_test.specs[name], {"nodeSelector": {arch: "amd64", "disk": "nvme"}}, "nodeSelector")
	denies(seed_test.specs[name], {"nodeSelector": {arch: "amd64", "gpu": "yes"}}, "nodeSelector")

	# a node selector without the required key (no default then: the pod set one)
	some v in seed(name, {"nodeSelector": {"disk": "ssd"}})
	v == {"component": "nodeSelector", "value": sprintf("%s unset", [arch]), "reason": sprintf("required, %s one of \"amd64\", \"arm64\"", [arch])}
}

test_node_selector_denial_says_what_is_allowed if {
	some v1 in seed("complete-node-selector", {"nodeSelector": {arch: "amd64", "disk": "nvme"}})
	v1.value == "disk=nvme"
	v1.reason == "not allowed (allowed values of disk: \"hdd\", \"ssd\")"
	some v2 in seed("complete-node-selector", {"nodeSelector": {arch: "amd64", "gpu": "yes"}})
	v2.value == "gpu=yes"
	v2.reason == sprintf("not allowed (allowed keys: %q, \"disk\", %q)", [arch, region])
	some v3 in seed("complete-node-selector", {"nodeSelector": {arch: "i386"}})
	v3.value == sprintf("%s=i386", [arch])
}

test_allowed_only_node_selector_policy if {
	name := "allowed-only-node-selector"
	seed_allows(name, {})
	seed_allows(name, {"nodeSelector": {zone: "eu-west-1b"}})
	denies(seed_test.specs[name], {"nodeSelector": {zone: "us-east-1a"}}, "nodeSelector")
	denies(seed_test.specs[name], {"nodeSelector": {"disk": "ssd"}}, "nodeSelector")
}

test_empty_node_selectors_allow_any_key if {
	allows({"allowed": {"nodeSelectors": {}}}, {"nodeSelector": {"anything": "goes"}})
}

# ---- tolerations ---------------------------------------------------------------------

test_fine_grain_tolerations if {
	name := "fine-grain-tolerations"
	seed_allows(name, {"tolerations": [{"key": "mykey", "operator": "Equal", "value": "value", "effect": "NoSchedule"}]})
	seed_allows(name, {"tolerations": [{"key": "mykey", "value": "value", "effect": "NoSchedule"}]}) # operator defaults to Equal
	seed_allows(name, {"tolerations": [{"key": "other_key", "operator": "Exists", "effect": "NoExecute"}]})
	denies(seed_test.specs[name], {"tolerations": [{"key": "mykey", "operator": "Equal", "value": "other", "effect": "NoSchedule"}]}, "toleration")
	denies(seed_test.specs[name], {"tolerations": [{"key": "mykey", "operator": "Equal", "value": "value", "effect": "NoExecute"}]}, "toleration")

	# Exists tolerates every value of mykey: more than the rule's values
	denies(seed_test.specs[name], {"tolerations": [{"key": "mykey", "operator": "Exists", "effect": "NoSchedule"}]}, "toleration")

	# no effect tolerates every effect of other_key: more than NoExecute
	denies(seed_test.specs[name], {"tolerations": [{"key": "other_key", "operator": "Exists"}]}, "toleration")
}

test_exists_is_covered_only_by_a_rule_without_values if {
	spec := {"allowed": {"tolerations": [{"keys": ["k"], "operators": ["Equal", "Exists"], "values": ["v"]}]}}
	allows(spec, {"tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]})
	denies(spec, {"tolerations": [{"key": "k", "operator": "Exists"}]}, "toleration")
	allows({"allowed": {"tolerations": [{"keys": ["k"], "operators": ["Exists"]}]}}, {"tolerations": [{"key": "k", "operator": "Exists"}]})
}

test_coarse_grain_tolerations if {
	name := "coarse-grain-tolerations"
	seed_allows(name, {"tolerations": [{"key": "anything", "operator": "Equal", "value": "v", "effect": "PreferNoSchedule"}]})
	seed_allows(name, {"tolerations": [{"key": "anything", "operator": "Exists", "effect": "NoSchedule"}]})
	seed_allows(name, {"tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}) # every key
	denies(seed_test.specs[name], {"tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]}, "toleration")
	denies(seed_test.specs[name], {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute"}]}, "toleration")
	denies(seed_test.specs[name], {"tolerations": [{"operator": "Exists"}]}, "toleration")
}

test_empty_toleration_list_and_empty_rule_allow_all if {
	everything := {"tolerations": [{"operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute"}]}
	seed_allows("any-toleration", everything)
	seed_allows("any-toleration-explicit", everything)
}

test_every_offending_toleration_is_named if {
	vs := seed("fine-grain-tolerations", {"tolerations": [
		{"key": "mykey", "operator": "Equal", "value": "value", "effect": "NoSchedule"},
		{"key": "a", "operator": "Exists"},
		{"key": "b", "operator": "Exists"},
	]})
	{v.value | some v in vs} == {"{\"key\":\"a\",\"operator\":\"Exists\"}", "{\"key\":\"b\",\"operator\":\"Exists\"}"}
}

test_default_tolerations_are_allowed if {
	n := merge.normalize(seed_test.specs["default-tolerations"])
	count(match.violations(n, {"tolerations": n["default"].tolerations}, [], set())) == 0
	count(match.violations(n, {"tolerations": [{"key": "mykey", "operator": "Equal", "value": "third", "effect": "NoSchedule"}]}, [], set())) == 1
}

test_required_tolerations_need_one_match if {
	spec := {"required": {"tolerations": [{"keys": ["dedicated"], "values": ["team-a"], "effects": ["NoSchedule"]}]}}
	allows(spec, {"tolerations": [{"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}]})
	some v in violations(spec, {})
	v.component == "toleration"
	startswith(v.reason, "required, one matching a rule of")
}

test_exempt_tolerations_are_not_checked if {
	api_server := [
		{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
		{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
	]
	n := merge.normalize(seed_test.specs.restricted)
	count(match.violations(n, {"tolerations": api_server}, api_server, set())) == 0
	count(match.violations(n, {"tolerations": api_server}, [], set())) == 2

	# exactly those: another tolerationSeconds (or none: forever), value or operator is checked
	every t in [
		object.union(api_server[0], {"tolerationSeconds": 3600}),
		object.remove(api_server[1], ["tolerationSeconds"]),
		object.union(api_server[0], {"operator": "Equal", "value": "x"}),
		object.union(api_server[1], {"effect": "NoSchedule"}),
	] {
		count(match.violations(n, {"tolerations": [t]}, api_server, set())) == 1
	}

	# nothing but a toleration object matches an exemption
	count(match.violations(n, {"tolerations": [1]}, [2], set())) == 1
}

test_fields_the_api_server_filled_in_are_not_checked_against_allowed if {
	nothing := merge.normalize({})
	count(match.violations(nothing, {"schedulerName": "default-scheduler"}, [], {"schedulerName"})) == 0
	count(match.violations(nothing, {"schedulerName": "default-scheduler"}, [], set())) == 1
	count(match.violations(nothing, {"priorityClassName": "cluster-default"}, [], {"priorityClassName"})) == 0

	# they count for what is required
	required := merge.normalize({"required": {"schedulerNames": ["gpu"]}})
	some v in match.violations(required, {"schedulerName": "default-scheduler"}, [], {"schedulerName"})
	v == {"component": "schedulerName", "value": "\"default-scheduler\"", "reason": "required, one of \"gpu\""}
	count(match.violations(merge.normalize({"required": {"schedulerNames": ["default-scheduler"]}}), {"schedulerName": "default-scheduler"}, [], {"schedulerName"})) == 0
}

# ---- affinities ----------------------------------------------------------------------

node_required(expressions) := {"nodeAffinity": {rk: {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}

expr(key, operator, values) := {"key": key, "operator": operator, "values": values}

arch_amd64 := expr(arch, "In", ["amd64"])

test_basic_affinity_policy if {
	name := "basic-affinity"
	seed_allows(name, {"affinity": node_required([arch_amd64])})
	seed_allows(name, {"affinity": node_required([expr(arch, "In", ["arm64", "amd64"])])})

	# plus any combination of the allowed keys / operators / values
	seed_allows(name, {"affinity": node_required([arch_amd64, expr(region, "NotIn", ["us-1"])])})
	seed_allows(name, {"affinity": node_required([arch_amd64, expr("kubernetes.io/authorized-region", "In", ["eu-2", "us-1"])])})

	# all pod anti-affinities, no pod affinity
	seed_allows(name, {"affinity": object.union(node_required([arch_amd64]), {"podAntiAffinity": {pk: [{"weight": 1, "podAffinityTerm": {"topologyKey": "x"}}]}})})
	denies(seed_test.specs[name], {"affinity": object.union(node_required([arch_amd64]), {"podAffinity": {rk: [{"topologyKey": "x"}]}})}, "affinity")

	# outside the rules
	denies(seed_test.specs[name], {"affinity": node_required([arch_amd64, expr(region, "In", ["ap-1"])])}, "affinity")
	denies(seed_test.specs[name], {"affinity": node_required([arch_amd64, expr(region, "Exists", [])])}, "affinity")
	denies(seed_test.specs[name], {"affinity": node_required([expr(arch, "In", ["i386"])])}, "affinity")

	# preferred node affinity is not listed
	denies(
		seed_test.specs[name], {"affinity": {"nodeAffinity": {
			rk: {"nodeSelectorTerms": [{"matchExpressions": [arch_amd64]}]},
			pk: [{"weight": 1, "preference": {"matchExpressions": [arch_amd64]}}],
		}}},
		"affinity",
	)
}

test_basic_affinity_requires_the_arch_term if {
	some v in seed("basic-affinity", {})
	v.component == "affinity"
	v.value == sprintf("nodeAffinity.%s", [rk])
	endswith(v.reason, "got none")
}

test_not_full_combinatory if {
	name := "not-full-combinatory"
	seed_allows(name, {"affinity": node_required([expr(zone, "NotIn", ["dc1"])])})
	seed_allows(name, {"affinity": node_required([expr(region, "In", ["eu-2"]), expr(zone, "NotIn", ["dc2", "dc1"])])})
	denies(seed_test.specs[name], {"affinity": node_required([expr(zone, "In", ["dc1"])])}, "affinity")
	denies(seed_test.specs[name], {"affinity": node_required([expr(region, "NotIn", ["dc1"])])}, "affinity")
}

test_expression_denial_names_the_expression if {
	some v in seed("not-full-combinatory", {"affinity": node_required([expr(zone, "In", ["dc1"])])})
	v.value == sprintf("nodeAffinity.%s match expression %s", [rk, json.marshal(expr(zone, "In", ["dc1"]))])
}

all_kinds := {
	"nodeAffinity": {
		rk: {"nodeSelectorTerms": [{"matchExpressions": [expr("a", "In", ["b"])]}]},
		pk: [{"weight": 1, "preference": {"matchExpressions": [expr("c", "Exists", [])]}}],
	},
	"podAffinity": {rk: [{"topologyKey": "t", "labelSelector": {"matchLabels": {"app": "x"}}}]},
	"podAntiAffinity": {pk: [{"weight": 5, "podAffinityTerm": {"topologyKey": "t"}}]},
}

test_allow_all_affinities if {
	seed_allows("allow-all-affinities", {"affinity": all_kinds})
	seed_allows("allow-all-affinities-explicit", {"affinity": all_kinds})
}

test_only_node_affinities if {
	seed_allows("node-affinities-only", {"affinity": {"nodeAffinity": all_kinds.nodeAffinity}})
	vs := seed("node-affinities-only", {"affinity": all_kinds})
	{v.value | some v in vs} == {"podAffinity", "podAntiAffinity"}
	some v in vs
	v.reason == "not allowed (no podAffinities in the policies)"
}

test_a_kind_not_listed_is_not_allowed if {
	spec := {"allowed": {"affinities": {"podAntiAffinities": {pk: {}}}}}
	allows(spec, {"affinity": {"podAntiAffinity": all_kinds.podAntiAffinity}})
	some v in violations(spec, {"affinity": {"podAntiAffinity": {rk: [{"topologyKey": "t"}]}}})
	v.value == sprintf("podAntiAffinity.%s", [rk])
}

term(topology, labels) := {"topologyKey": topology, "labelSelector": {"matchLabels": labels}}

test_pod_affinity_term_rules if {
	spec := {"allowed": {"affinities": {"podAntiAffinities": {rk: {"podAffinityTerms": [{
		"topologyKeys": ["kubernetes.io/hostname"],
		"matchExpressions": [{"keys": ["app"], "operators": ["In"]}],
	}]}}}}}
	allows(spec, {"affinity": {"podAntiAffinity": {rk: [term("kubernetes.io/hostname", {"app": "web"})]}}})
	denies(spec, {"affinity": {"podAntiAffinity": {rk: [term("zone", {"app": "web"})]}}}, "affinity")
	denies(spec, {"affinity": {"podAntiAffinity": {rk: [term("kubernetes.io/hostname", {"tier": "web"})]}}}, "affinity")
}

test_required_affinity_terms_must_imply_a_required_term if {
	name := "restricted-multiarch-by-affinity"
	n := merge.normalize(seed_test.specs[name])

	# its own default (two ORed terms, one per required term) keeps within it
	count(match.violations(n, {"schedulerName": "default-scheduler", "affinity": n["default"].affinity}, [], set())) == 0

	# a term outside every required term does not
	sched := {"schedulerName": "default-scheduler"}
	vs := match.violations(n, object.union(sched, {"affinity": node_required([expr("disk", "In", ["ssd"])])}), [], set())
	{v.component | some v in vs} == {"affinity"}
	count(vs) == 2 # the expression is not allowed, and the term implies no required term

	# a term narrowing a required one does
	count(match.violations(n, object.union(sched, {"affinity": node_required([expr(arch, "In", ["arm64"])])}), [], set())) == 0
	count(match.violations(n, object.union(sched, {"affinity": node_required([expr(arch, "In", ["arm64", "i386"])])}), [], set())) > 0
}

test_required_pod_anti_affinity if {
	spec := {"required": {"affinities": {"podAntiAffinities": {rk: {"podAffinityTerms": [{
		"topologyKeys": ["kubernetes.io/hostname"],
		"matchExpressions": [{"keys": ["app"]}],
	}]}}}}}
	good := {"podAntiAffinity": {rk: [{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}
	allows(spec, {"affinity": good})
	denies(spec, {}, "affinity")
	denies(spec, {"affinity": {"podAntiAffinity": {rk: [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}]}}}, "affinity")
}
