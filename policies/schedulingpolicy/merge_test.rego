package io.k8s.federation.schedulingpolicy.merge_test

import data.io.k8s.federation.schedulingpolicy.merge
import data.io.k8s.federation.schedulingpolicy.seed_test

arch := seed_test.arch

os := seed_test.os

a := merge.normalize(seed_test.specs["schedpol-a"])

b := merge.normalize(seed_test.specs["schedpol-b"])

# ---- the seed's worked merge examples, option by option ---------------------

test_option1_smart_deep_merge if {
	m := merge.merged([a, b], "smart")

	# required: first seen wins per key (arch from a, os from b), per component
	m.required.nodeSelectors == {arch: ["amd64", "arm64"], os: ["Linux", "Windows"]}
	m.required.priorityClassNames == ["bronze", "gold", "silver"]

	# allowed: additive
	m.allowed.nodeSelectors == {"disk": ["sata", "ssd"]}

	# default: first seen wins per key
	m["default"].nodeSelector == {arch: "amd64", os: "Linux"}
	m["default"].priorityClassName == "bronze"
	count(m.required) == 2
	count(m.allowed) == 1
	count(m["default"]) == 2
}

test_option2_first_seen_wins_ever if {
	m := merge.merged([a, b], "first")
	m == a
	m.required == {"nodeSelectors": {arch: ["amd64", "arm64"]}}
	m.allowed == {"nodeSelectors": {"disk": ["ssd"]}}
	m["default"] == {"nodeSelector": {arch: "amd64"}}
}

test_option3_simple_merge if {
	m := merge.merged([a, b], "simple")
	m.required == {"nodeSelectors": {arch: ["amd64", "arm64"]}, "priorityClassNames": ["bronze", "gold", "silver"]}
	m.allowed == {"nodeSelectors": {"disk": ["ssd"]}}
	m["default"] == {"nodeSelector": {arch: "amd64"}, "priorityClassName": "bronze"}
}

test_order_decides_first_seen if {
	m := merge.merged([b, a], "smart")
	m.required.nodeSelectors[arch] == ["amd64", "arm64", "i386"]
	m["default"].nodeSelector[arch] == "i386"
	m.allowed.nodeSelectors == {"disk": ["sata", "ssd"]}
}

test_no_policy_merges_to_nothing_allowed if {
	every option in merge.options {
		m := merge.merged([], option)
		m == {"required": {}, "allowed": {}, "default": {}}
	}
}

test_one_policy_is_itself_under_every_option if {
	every option in merge.options {
		m := merge.merged([a], option)
		m == a
	}
}

# ---- additive allowed: "any" wins -----------------------------------------------

test_additive_lists_union_and_any_wins if {
	x := merge.normalize({"allowed": {"schedulerNames": ["s1"], "priorityClassNames": ["p1"], "tolerations": [{"keys": ["k1"]}]}})
	y := merge.normalize({"allowed": {"schedulerNames": ["s2", "s1"], "priorityClassNames": [], "tolerations": [{"keys": ["k2"]}]}})
	m := merge.merged([x, y], "smart")
	m.allowed.schedulerNames == ["s1", "s2"]
	m.allowed.priorityClassNames == []
	m.allowed.tolerations == [{"keys": ["k1"]}, {"keys": ["k2"]}]
	z := merge.normalize({"allowed": {"tolerations": []}})
	m2 := merge.merged([x, z], "smart")
	m2.allowed.tolerations == []
}

test_additive_node_selectors_any_value_and_any_key_win if {
	x := merge.normalize({"allowed": {"nodeSelectors": {"disk": ["ssd"], "zone": ["a"]}}})
	y := merge.normalize({"allowed": {"nodeSelectors": {"disk": ["hdd"], "zone": []}}})
	m := merge.merged([x, y], "smart")
	m.allowed.nodeSelectors == {"disk": ["hdd", "ssd"], "zone": []}
	z := merge.normalize({"allowed": {"nodeSelectors": {}}})
	m2 := merge.merged([x, z], "smart")
	m2.allowed.nodeSelectors == {}
}

term(k) := {"nodeSelectorTerms": [{"matchExpressions": [{"keys": [k]}]}]}

test_additive_affinities if {
	rk := seed_test.required_kind
	x := merge.normalize({"allowed": {"affinities": {"nodeAffinities": {rk: term("a")}}}})
	y := merge.normalize({"allowed": {"affinities": {"nodeAffinities": {rk: term("b")}, "podAffinities": {}}}})
	m := merge.merged([x, y], "smart")
	m.allowed.affinities.nodeAffinities[rk].nodeSelectorTerms == array.concat(term("a").nodeSelectorTerms, term("b").nodeSelectorTerms)
	m.allowed.affinities.podAffinities == {}
	z := merge.normalize({"allowed": {"affinities": {"nodeAffinities": {}}}})
	m2 := merge.merged([x, z], "smart")
	m2.allowed.affinities.nodeAffinities == {}
	w := merge.normalize({"allowed": {"affinities": {}}})
	m3 := merge.merged([x, w], "smart")
	m3.allowed.affinities == {}
}

test_smart_merges_affinities_per_type_first_seen if {
	x := merge.normalize({"default": {"affinity": {"podAffinity": {"p": 1}}}})
	y := merge.normalize({"default": {"affinity": {"podAffinity": {"p": 2}, "podAntiAffinity": {"q": 3}}}})
	m := merge.merged([x, y], "smart")
	m["default"].affinity == {"podAffinity": {"p": 1}, "podAntiAffinity": {"q": 3}}
	s := merge.merged([x, y], "simple")
	s["default"].affinity == {"podAffinity": {"p": 1}}
}

# ---- normalisation -------------------------------------------------------------

test_seed_spelling_is_read_as_the_correct_one if {
	n := merge.normalize(seed_test.specs["single-priority"])
	n.required == {"priorityClassNames": ["high-priority"]}
	n["default"] == {"priorityClassName": "high-priority"}
}

test_correct_spelling_wins_over_the_alias if {
	n := merge.normalize({"allowed": {"priorityClasseNames": ["a"], "priorityClassNames": ["b"]}})
	n.allowed == {"priorityClassNames": ["b"]}
}

test_default_toleration_values_expand_to_one_toleration_each if {
	n := merge.normalize(seed_test.specs["default-tolerations"])
	n["default"].tolerations == [
		{"key": "mykey", "operator": "Equal", "value": "value", "effect": "NoSchedule"},
		{"key": "mykey", "operator": "Equal", "value": "other_value", "effect": "NoSchedule"},
		{"key": "other_key", "operator": "Exists", "effect": "NoExecute"},
	]
}

test_default_affinity_one_element_keys_read_as_key if {
	n := merge.normalize(seed_test.specs["basic-affinity"])
	terms := n["default"].affinity.nodeAffinity[seed_test.required_kind].nodeSelectorTerms
	terms == [{"matchExpressions": [{"key": arch, "operator": "In", "values": ["amd64"]}]}]

	# required / allowed rules keep their lists
	n.required == merge.normalize({"required": seed_test.specs["basic-affinity"].required}).required
	rules := n.required.affinities.nodeAffinities[seed_test.required_kind].nodeSelectorTerms[0].matchExpressions
	rules == [{"keys": [arch], "operators": ["In"], "values": ["amd64", "arm64"]}]
}

test_normalize_tolerates_garbage if {
	n := merge.normalize("not an object")
	n == {"required": {}, "allowed": {}, "default": {}}
	m := merge.normalize({"required": "x", "allowed": {"schedulerNames": "y"}, "default": {"tolerations": "z", "affinity": 3}})
	m.required == {}
	m.allowed == {"schedulerNames": "y"}
	m["default"] == {"tolerations": "z", "affinity": 3}
}

# What is of the wrong type in allowed counts for nothing in the union:
# absent, never "any" ([] / {}), as for a single policy.
test_smart_union_reads_wrongly_typed_parts_as_absent if {
	bad := merge.normalize({"allowed": {
		"schedulerNames": "x",
		"nodeSelectors": {"disk": "ssd"},
		"affinities": {"nodeAffinities": {merge.required_kind: "x"}, "podAffinities": "x"},
	}})
	other := merge.normalize({"allowed": {"priorityClassNames": ["p"], "nodeSelectors": {"zone": 1}}})
	m := merge.merged([bad, other], "smart")
	m.allowed == {"priorityClassNames": ["p"]}

	# beside a well-typed part the union holds that part only
	good := merge.normalize({"allowed": {"schedulerNames": ["s"], "nodeSelectors": {"disk": ["hdd"]}}})
	m2 := merge.merged([bad, good], "smart")
	m2.allowed == {"schedulerNames": ["s"], "nodeSelectors": {"disk": ["hdd"]}}
}

# An alias is renamed whatever its value (false and null included).
test_an_alias_is_renamed_whatever_its_value if {
	merge.normalize({"allowed": {"priorityClasseNames": false}}).allowed == {"priorityClassNames": false}
	merge.normalize({"default": {"priorityClasseName": null}})["default"] == {"priorityClassName": null}
}

# A component only one of several policies gives is unioned as any other:
# names sorted once each, wrongly typed keys, types and kinds left out.
test_smart_union_of_a_component_one_policy_gives if {
	rk := merge.required_kind
	x := merge.normalize({"allowed": {
		"schedulerNames": ["b", "a", "b"],
		"nodeSelectors": {"disk": ["ssd", "hdd"], "zone": "x"},
		"affinities": {"podAffinities": {rk: {"podAffinityTerms": [1], "x": "y"}, "k": "x"}, "nodeAffinities": {}, "t": "x"},
	}})
	y := merge.normalize({"allowed": {"tolerations": [{"key": "k"}]}})
	m := merge.merged([x, y], "smart")
	m.allowed == {
		"schedulerNames": ["a", "b"],
		"nodeSelectors": {"disk": ["hdd", "ssd"]},
		"affinities": {"podAffinities": {rk: {"podAffinityTerms": [1]}}, "nodeAffinities": {}},
		"tolerations": [{"key": "k"}],
	}
}
