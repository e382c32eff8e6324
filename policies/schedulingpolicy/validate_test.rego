package io.k8s.federation.schedulingpolicy.validate_test

import data.io.k8s.federation.schedulingpolicy.seed_test
import data.io.k8s.federation.schedulingpolicy.validate

problems(spec) := p if {
	p := validate.problems with input as seed_test.policy("p", spec)
}

# A spec's problems contain one starting with `prefix`.
refused(spec, prefix) if {
	some p in problems(spec)
	startswith(p, prefix)
}

test_errors_name_the_policy_and_only_apply_to_schedulingpolicies if {
	errs := validate.errors with input as seed_test.policy("team-a", {"required": {"priorityClassNames": []}})
	errs == {"SchedulingPolicy \"team-a\": spec.required.priorityClassNames: an empty list requires nothing and is not valid; list the names a pod must pick from, or leave the field out"}
	not_policy := validate.errors with input as {"apiVersion": "v1", "kind": "ConfigMap", "spec": {"required": {"schedulerNames": []}}}
	count(not_policy) == 0
	other_group := validate.errors with input as {"apiVersion": "extensions/v1alpha1", "kind": "SchedulingPolicy", "spec": {"required": {"schedulerNames": []}}}
	count(other_group) == 0
}

test_an_empty_policy_is_valid if {
	count(problems({})) == 0
	p := validate.problems with input as {"apiVersion": "scheduling.fedplace.io/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": "x"}}
	count(p) == 0
}

test_structure if {
	refused("not an object", "spec: must be an object")
	refused({"allowed": []}, "spec.allowed: must be an object")
	refused({"permitted": {}}, "spec.permitted: unknown field")
	refused({"allowed": {"schedulerName": "x"}}, "spec.allowed.schedulerName: unknown field (known: affinities, nodeSelectors,")
	refused({"default": {"schedulerNames": ["x"]}}, "spec.default.schedulerNames: unknown field")
}

test_both_spellings if {
	refused({"allowed": {"priorityClasseNames": ["a"], "priorityClassNames": ["a"]}}, "spec.allowed.priorityClasseNames: the seed's spelling of priorityClassNames; give only one of them")
	refused({"default": {"priorityClasseName": "a", "priorityClassName": "a"}}, "spec.default.priorityClasseName: the seed's spelling")
	count(problems({"allowed": {"priorityClasseNames": ["a"]}})) == 0
}

test_names if {
	refused({"allowed": {"schedulerNames": "x"}}, "spec.allowed.schedulerNames: must be a list of names")
	refused({"allowed": {"schedulerNames": ["ok", ""]}}, "spec.allowed.schedulerNames[1]: must be a non-empty string")
	refused({"required": {"priorityClassNames": [3]}}, "spec.required.priorityClassNames[0]: must be a non-empty string")
	refused({"required": {"schedulerNames": []}}, "spec.required.schedulerNames: an empty list requires nothing")
	count(problems({"allowed": {"schedulerNames": []}})) == 0
}

test_node_selectors if {
	refused({"allowed": {"nodeSelectors": ["disk"]}}, "spec.allowed.nodeSelectors: must be an object")
	refused({"allowed": {"nodeSelectors": {"disk": "ssd"}}}, "spec.allowed.nodeSelectors.disk: must be a list of values ([] for any value)")
	refused({"required": {"nodeSelectors": {"disk": [1]}}}, "spec.required.nodeSelectors.disk[0]: must be a string")
	refused({"required": {"nodeSelectors": {}}}, "spec.required.nodeSelectors: an empty object requires nothing")
	count(problems({"required": {"nodeSelectors": {"disk": []}}, "allowed": {"nodeSelectors": {}}})) == 0
}

test_toleration_rules if {
	refused({"allowed": {"tolerations": {}}}, "spec.allowed.tolerations: must be a list of toleration rules")
	refused({"allowed": {"tolerations": ["x"]}}, "spec.allowed.tolerations[0]: must be an object")
	refused({"allowed": {"tolerations": [{"key": "k"}]}}, "spec.allowed.tolerations[0].key: unknown field (a toleration rule lists keys, operators, values and effects)")
	refused({"allowed": {"tolerations": [{"operators": ["Equals"]}]}}, "spec.allowed.tolerations[0].operators[0]: \"Equals\" is not one of Equal, Exists")
	refused({"allowed": {"tolerations": [{"effects": ["NoSchedule", "Never"]}]}}, "spec.allowed.tolerations[0].effects[1]: \"Never\" is not one of NoExecute, NoSchedule, PreferNoSchedule")
	refused({"required": {"tolerations": [{"keys": "k"}]}}, "spec.required.tolerations[0].keys: must be a list of strings")
	refused({"required": {"tolerations": []}}, "spec.required.tolerations: an empty list requires nothing")
}

test_affinity_rules if {
	rk := seed_test.required_kind
	refused({"allowed": {"affinities": []}}, "spec.allowed.affinities: must be an object")
	refused({"allowed": {"affinities": {"nodeAffinity": {}}}}, "spec.allowed.affinities.nodeAffinity: unknown affinity type")
	refused({"allowed": {"affinities": {"nodeAffinities": []}}}, "spec.allowed.affinities.nodeAffinities: must be an object")
	refused({"allowed": {"affinities": {"nodeAffinities": {"required": {}}}}}, "spec.allowed.affinities.nodeAffinities.required: unknown constraint")
	refused({"allowed": {"affinities": {"nodeAffinities": {rk: {"podAffinityTerms": []}}}}}, sprintf("spec.allowed.affinities.nodeAffinities.%s.podAffinityTerms: unknown field (expected nodeSelectorTerms)", [rk]))
	refused({"allowed": {"affinities": {"podAffinities": {rk: {"podAffinityTerms": [{"topologyKey": "x"}]}}}}}, sprintf("spec.allowed.affinities.podAffinities.%s.podAffinityTerms[0].topologyKey: unknown field", [rk]))
	refused(
		{"allowed": {"affinities": {"nodeAffinities": {rk: {"nodeSelectorTerms": [{"matchExpressions": [{"keys": ["a"], "operators": ["Near"]}]}]}}}}},
		sprintf("spec.allowed.affinities.nodeAffinities.%s.nodeSelectorTerms[0].matchExpressions[0].operators[0]: \"Near\" is not one of", [rk]),
	)
	refused(
		{"allowed": {"affinities": {"podAffinities": {rk: {"podAffinityTerms": [{"matchExpressions": [{"keys": ["a"], "operators": ["Gt"]}]}]}}}}},
		sprintf("spec.allowed.affinities.podAffinities.%s.podAffinityTerms[0].matchExpressions[0].operators[0]: \"Gt\" is not one of", [rk]),
	)
	refused({"required": {"affinities": {}}}, "spec.required.affinities: an empty object requires nothing")
	refused({"required": {"affinities": {"podAffinities": {}}}}, "spec.required.affinities.podAffinities: an empty object requires nothing")
	refused({"required": {"affinities": {"podAffinities": {rk: {}}}}}, sprintf("spec.required.affinities.podAffinities.%s: must list the required terms", [rk]))
	count(problems({"allowed": {"affinities": {"podAffinities": {rk: {}}}}})) == 0
}

test_defaults if {
	refused({"default": {"schedulerName": ""}}, "spec.default.schedulerName: must be a non-empty string")
	refused({"default": {"priorityClasseName": 1}}, "spec.default.priorityClasseName: must be a non-empty string")
	refused({"default": {"nodeSelector": {}}}, "spec.default.nodeSelector: an empty object injects nothing")
	refused({"default": {"nodeSelector": {"disk": ["ssd"]}}}, "spec.default.nodeSelector.disk: must be a string")
	refused({"default": {"tolerations": []}}, "spec.default.tolerations: an empty list injects nothing")
	refused({"default": {"affinity": {}}}, "spec.default.affinity: an empty object injects nothing")
	refused({"default": {"affinity": {"nodeAffinities": {}}}}, "spec.default.affinity.nodeAffinities: unknown field")
}

test_default_tolerations if {
	refused({"default": {"tolerations": ["x"]}}, "spec.default.tolerations[0]: must be a toleration object")
	refused({"default": {"tolerations": [{"key": "k", "keys": ["k"]}]}}, "spec.default.tolerations[0].keys: unknown field")
	refused({"default": {"tolerations": [{"key": "k", "operator": "In"}]}}, "spec.default.tolerations[0].operator: \"In\" is not one of Equal, Exists")
	refused({"default": {"tolerations": [{"key": "k", "effect": "Never"}]}}, "spec.default.tolerations[0].effect: \"Never\" is not one of")
	refused({"default": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}, "spec.default.tolerations[0]: operator Exists takes no value")
	refused({"default": {"tolerations": [{"operator": "Equal", "value": "v"}]}}, "spec.default.tolerations[0]: an empty key needs operator Exists")
	refused({"default": {"tolerations": [{"key": "k", "value": "a", "values": ["b"]}]}}, "spec.default.tolerations[0]: give value or values, not both")
	refused({"default": {"tolerations": [{"key": "k", "values": []}]}}, "spec.default.tolerations[0].values: an empty list injects no toleration")
	refused({"default": {"tolerations": [{"key": "k", "tolerationSeconds": "300"}]}}, "spec.default.tolerations[0].tolerationSeconds: must be a number")
	count(problems({"default": {"tolerations": [{"operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 60}]}})) == 0
}

test_default_affinity_expressions_need_key_and_operator if {
	rk := seed_test.required_kind
	bad := {"default": {"affinity": {"nodeAffinity": {rk: {"nodeSelectorTerms": [{"matchExpressions": [{"keys": ["a", "b"], "operators": ["In"]}]}]}}}}}
	refused(bad, "spec.default.affinity.nodeAffinity: expression {\"keys\":[\"a\",\"b\"],\"operators\":[\"In\"]} needs a key and an operator")
}

test_defaults_the_policy_itself_would_refuse if {
	refused({"required": {"schedulerNames": ["a"]}, "default": {"schedulerName": "b"}}, "spec.default.schedulerName: \"b\" is not one of spec.required.schedulerNames (a defaulted pod would be denied)")
	refused({"required": {"priorityClasseNames": ["gold"]}, "default": {"priorityClasseName": "bronze"}}, "spec.default.priorityClassName: \"bronze\" is not one of spec.required.priorityClassNames")
	refused({"required": {"nodeSelectors": {"arch": ["amd64"]}}, "default": {"nodeSelector": {"arch": "i386"}}}, "spec.default.nodeSelector.arch: \"i386\" is not one of spec.required.nodeSelectors.arch")
	count(problems({"required": {"nodeSelectors": {"arch": []}}, "default": {"nodeSelector": {"arch": "i386"}}})) == 0
}
