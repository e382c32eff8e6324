# Validation of a SchedulingPolicy object at its own admission (Rego v1).
#
# The CRD's OpenAPI schema (deploy/components/schedulingpolicy/crd.yaml)
# refuses wrongly typed fields on a real API server; the rules here add what a
# schema cannot say (an empty required list requires nothing, a default the
# policy's own required values would refuse, both spellings of a field, …)
# and repeat the type checks, so a server that does not validate CRDs
# against their schemas (the devstack one) is covered too.
#
# `errors` holds one message per problem, naming the field and why:
#   SchedulingPolicy "p": spec.required.priorityClassNames: an empty list requires nothing; …
package io.k8s.federation.schedulingpolicy.validate

import data.io.k8s.federation.schedulingpolicy.merge

api_group := "scheduling.fedplace.io"

applies if {
	input.kind == "SchedulingPolicy"
	is_string(input.apiVersion)
	startswith(input.apiVersion, sprintf("%s/", [api_group]))
}

errors contains msg if {
	applies
	some problem in problems
	msg := sprintf("SchedulingPolicy %s: %s", [json.marshal(object.get(input, ["metadata", "name"], "")), problem])
}

spec := s if s := input.spec

else := {}

fields := {
	"required": {"schedulerNames", "priorityClassNames", "priorityClasseNames", "nodeSelectors", "tolerations", "affinities"},
	"allowed": {"schedulerNames", "priorityClassNames", "priorityClasseNames", "nodeSelectors", "tolerations", "affinities"},
	"default": {"schedulerName", "priorityClassName", "priorityClasseName", "nodeSelector", "tolerations", "affinity"},
}

name_lists := {"schedulerNames", "priorityClassNames", "priorityClasseNames"}

toleration_operators := {"Equal", "Exists"}

taint_effects := {"NoSchedule", "PreferNoSchedule", "NoExecute"}

affinity_types := {"nodeAffinities", "podAffinities", "podAntiAffinities"}

affinity_kinds := {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"}

node_operators := {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}

label_operators := {"In", "NotIn", "Exists", "DoesNotExist"}

# ---- spec and sections -----------------------------------------------------

problems contains "spec: must be an object" if not is_object(spec)

problems contains msg if {
	is_object(spec)
	some k, _ in spec
	not k in object.keys(fields)
	msg := unknown_spec_field(k)
}

unknown_spec_field(k) := "spec.allowedAffinities: not a field; affinities are allowed under spec.allowed.affinities" if k == "allowedAffinities"

unknown_spec_field(k) := sprintf("spec.%s: unknown field (a SchedulingPolicy has required, allowed and default)", [k]) if k != "allowedAffinities"

problems contains sprintf("spec.%s: must be an object", [sec]) if {
	some sec, _ in fields
	x := spec[sec]
	not is_object(x)
}

problems contains sprintf("spec.%s.%s: unknown field (known: %s)", [sec, k, concat(", ", sort(known))]) if {
	some sec, known in fields
	some k, _ in as_object(spec[sec])
	not k in known
}

problems contains sprintf("spec.%s.priorityClasseNames: the seed's spelling of priorityClassNames; give only one of them", [sec]) if {
	some sec in ["required", "allowed"]
	spec[sec].priorityClasseNames
	spec[sec].priorityClassNames
}

problems contains "spec.default.priorityClasseName: the seed's spelling of priorityClassName; give only one of them" if {
	spec["default"].priorityClasseName
	spec["default"].priorityClassName
}

# ---- required / allowed: names ---------------------------------------------

problems contains sprintf("spec.%s.%s: must be a list of names", [sec, f]) if {
	some sec in ["required", "allowed"]
	some f in name_lists
	v := spec[sec][f]
	not is_array(v)
}

problems contains sprintf("spec.%s.%s[%d]: must be a non-empty string", [sec, f, i]) if {
	some sec in ["required", "allowed"]
	some f in name_lists
	some i, n in as_list(spec[sec][f])
	not nonempty_string(n)
}

problems contains sprintf("spec.required.%s: an empty list requires nothing and is not valid; list the names a pod must pick from, or leave the field out", [f]) if {
	some f in name_lists
	spec.required[f] == []
}

# ---- required / allowed: node selectors ------------------------------------

problems contains sprintf("spec.%s.nodeSelectors: must be an object of label key to a list of values", [sec]) if {
	some sec in ["required", "allowed"]
	v := spec[sec].nodeSelectors
	not is_object(v)
}

problems contains sprintf("spec.%s.nodeSelectors.%s: must be a list of values ([] for any value)", [sec, k]) if {
	some sec in ["required", "allowed"]
	some k, v in as_object(spec[sec].nodeSelectors)
	not is_array(v)
}

problems contains sprintf("spec.%s.nodeSelectors.%s[%d]: must be a string", [sec, k, i]) if {
	some sec in ["required", "allowed"]
	some k, v in as_object(spec[sec].nodeSelectors)
	some i, x in as_list(v)
	not is_string(x)
}

problems contains "spec.required.nodeSelectors: an empty object requires nothing and is not valid; list the required keys, or leave the field out" if {
	spec.required.nodeSelectors == {}
}

# ---- required / allowed: toleration rules ----------------------------------

problems contains sprintf("spec.%s.tolerations: must be a list of toleration rules", [sec]) if {
	some sec in ["required", "allowed"]
	v := spec[sec].tolerations
	not is_array(v)
}

problems contains sprintf("spec.%s.tolerations[%d]: must be an object with keys, operators, values, effects", [sec, i]) if {
	some sec in ["required", "allowed"]
	some i, r in as_list(spec[sec].tolerations)
	not is_object(r)
}

problems contains msg if {
	some sec in ["required", "allowed"]
	some i, r in as_list(spec[sec].tolerations)
	some k, _ in as_object(r)
	not k in {"keys", "operators", "values", "effects"}
	msg := sprintf("spec.%s.tolerations[%d].%s: unknown field (a toleration rule lists keys, operators, values and effects)", [sec, i, k])
}

problems contains msg if {
	some sec in ["required", "allowed"]
	some i, r in as_list(spec[sec].tolerations)
	some field, allowed in {"keys": set(), "values": set(), "operators": toleration_operators, "effects": taint_effects}
	some msg in list_problems(sprintf("spec.%s.tolerations[%d].%s", [sec, i, field]), object.get(as_object(r), field, []), allowed)
}

problems contains "spec.required.tolerations: an empty list requires nothing and is not valid; list the rules one of which a pod's tolerations must match, or leave the field out" if {
	spec.required.tolerations == []
}

# A list of strings, each in `allowed` unless `allowed` is empty.
list_problems(path, v, _) := {sprintf("%s: must be a list of strings", [path])} if not is_array(v)

list_problems(path, v, allowed) := {msg |
	some i, x in v
	msg := item_problem(path, i, x, allowed)
} if {
	is_array(v)
}

item_problem(path, i, x, _) := sprintf("%s[%d]: must be a string", [path, i]) if not is_string(x)

item_problem(path, i, x, allowed) := sprintf("%s[%d]: %q is not one of %s", [path, i, x, concat(", ", sort(allowed))]) if {
	is_string(x)
	count(allowed) > 0
	not x in allowed
}

# ---- required / allowed: affinities ----------------------------------------

problems contains sprintf("spec.%s.affinities: must be an object", [sec]) if {
	some sec in ["required", "allowed"]
	v := spec[sec].affinities
	not is_object(v)
}

problems contains msg if {
	some sec in ["required", "allowed"]
	some t, v in as_object(spec[sec].affinities)
	some msg in affinity_type_problems(sprintf("spec.%s.affinities.%s", [sec, t]), t, v)
}

problems contains "spec.required.affinities: an empty object requires nothing and is not valid; list the required affinities, or leave the field out" if {
	spec.required.affinities == {}
}

problems contains sprintf("spec.required.affinities.%s: an empty object requires nothing and is not valid; list the required terms", [t]) if {
	some t, v in as_object(spec.required.affinities)
	v == {}
}

problems contains sprintf("spec.required.affinities.%s.%s: must list the required terms", [t, kind]) if {
	some t, v in as_object(spec.required.affinities)
	some kind, rules in as_object(v)
	count(required_terms(rules)) == 0
}

required_terms(rules) := [x | some _, terms in as_object(rules); some x in as_list(terms)]

affinity_type_problems(path, t, _) := {sprintf("%s: unknown affinity type (known: %s)", [path, concat(", ", sort(affinity_types))])} if {
	not t in affinity_types
}

affinity_type_problems(path, t, v) := {sprintf("%s: must be an object", [path])} if {
	t in affinity_types
	not is_object(v)
}

affinity_type_problems(path, t, v) := {msg |
	some kind, rules in v
	some msg in affinity_kind_problems(sprintf("%s.%s", [path, kind]), t, kind, rules)
} if {
	t in affinity_types
	is_object(v)
}

affinity_kind_problems(path, _, kind, _) := {sprintf("%s: unknown constraint (known: %s)", [path, concat(", ", sort(affinity_kinds))])} if {
	not kind in affinity_kinds
}

affinity_kind_problems(path, _, kind, rules) := {sprintf("%s: must be an object", [path])} if {
	kind in affinity_kinds
	not is_object(rules)
}

affinity_kind_problems(path, t, kind, rules) := term_list_problems(path, t, rules) if {
	kind in affinity_kinds
	is_object(rules)
}

term_list_problems(path, t, rules) := {msg |
	some k, terms in rules
	some msg in term_field_problems(sprintf("%s.%s", [path, k]), t, k, terms)
}

term_field_problems(path, t, k, _) := {sprintf("%s: unknown field (expected %s)", [path, terms_field(t)])} if {
	k != terms_field(t)
}

term_field_problems(path, t, k, terms) := {sprintf("%s: must be a list of terms", [path])} if {
	k == terms_field(t)
	not is_array(terms)
}

term_field_problems(path, t, k, terms) := {msg |
	some i, term in terms
	some msg in term_problems(sprintf("%s[%d]", [path, i]), t, term)
} if {
	k == terms_field(t)
	is_array(terms)
}

terms_field(t) := "nodeSelectorTerms" if t == "nodeAffinities"

terms_field(t) := "podAffinityTerms" if t != "nodeAffinities"

term_problems(path, _, term) := {sprintf("%s: must be an object", [path])} if not is_object(term)

term_problems(path, t, term) := ({sprintf("%s.%s: unknown field (known: %s)", [path, k, concat(", ", sort(term_fields(t)))]) |
	some k, _ in term
	not k in term_fields(t)
} | topology_problems(path, t, term)) | {msg |
	some msg in rule_list_problems(sprintf("%s.matchExpressions", [path]), object.get(term, "matchExpressions", []), t)
} if {
	is_object(term)
}

term_fields(t) := {"matchExpressions"} if t == "nodeAffinities"

term_fields(t) := {"topologyKeys", "matchExpressions"} if t != "nodeAffinities"

topology_problems(path, t, term) := list_problems(sprintf("%s.topologyKeys", [path]), object.get(term, "topologyKeys", []), set()) if {
	t != "nodeAffinities"
}

topology_problems(_, t, _) := set() if t == "nodeAffinities"

rule_list_problems(path, rules, _) := {sprintf("%s: must be a list of rules", [path])} if not is_array(rules)

rule_list_problems(path, rules, t) := {msg |
	some i, r in rules
	some msg in rule_problems(sprintf("%s[%d]", [path, i]), r, t)
} if {
	is_array(rules)
}

rule_problems(path, r, _) := {sprintf("%s: must be an object with keys, operators, values", [path])} if not is_object(r)

rule_problems(path, r, t) := {sprintf("%s.%s: unknown field (a rule lists keys, operators and values)", [path, k]) |
	some k, _ in r
	not k in {"keys", "operators", "values"}
} | {msg |
	some field, allowed in {"keys": set(), "values": set(), "operators": expression_operators(t)}
	some msg in list_problems(sprintf("%s.%s", [path, field]), object.get(r, field, []), allowed)
} if {
	is_object(r)
}

expression_operators(t) := node_operators if t == "nodeAffinities"

expression_operators(t) := label_operators if t != "nodeAffinities"

# ---- default ---------------------------------------------------------------

problems contains sprintf("spec.default.%s: must be a non-empty string", [f]) if {
	some f in ["schedulerName", "priorityClassName", "priorityClasseName"]
	v := spec["default"][f]
	not nonempty_string(v)
}

problems contains "spec.default.nodeSelector: must be an object of label key to value" if {
	v := spec["default"].nodeSelector
	not is_object(v)
}

problems contains "spec.default.nodeSelector: an empty object injects nothing and is not valid; leave the field out" if {
	spec["default"].nodeSelector == {}
}

problems contains sprintf("spec.default.nodeSelector.%s: must be a string", [k]) if {
	some k, v in as_object(spec["default"].nodeSelector)
	not is_string(v)
}

problems contains "spec.default.tolerations: must be a list of tolerations" if {
	v := spec["default"].tolerations
	not is_array(v)
}

problems contains "spec.default.tolerations: an empty list injects nothing and is not valid; leave the field out" if {
	spec["default"].tolerations == []
}

default_tolerations contains [sprintf("spec.default.tolerations[%d]", [i]), t] if {
	some i, t in as_list(spec["default"].tolerations)
}

problems contains sprintf("%s: must be a toleration object", [path]) if {
	some [path, t] in default_tolerations
	not is_object(t)
}

problems contains sprintf("%s.%s: unknown field (a toleration has key, operator, value or values, effect, tolerationSeconds)", [path, k]) if {
	some [path, t] in default_tolerations
	some k, _ in as_object(t)
	not k in {"key", "operator", "value", "values", "effect", "tolerationSeconds"}
}

problems contains sprintf("%s.%s: must be a string", [path, k]) if {
	some [path, t] in default_tolerations
	some k in ["key", "operator", "value", "effect"]
	x := t[k]
	not is_string(x)
}

problems contains sprintf("%s.operator: %q is not one of Equal, Exists", [path, t.operator]) if {
	some [path, t] in default_tolerations
	is_string(t.operator)
	not t.operator in toleration_operators
}

problems contains sprintf("%s.effect: %q is not one of %s", [path, t.effect, concat(", ", sort(taint_effects))]) if {
	some [path, t] in default_tolerations
	is_string(t.effect)
	t.effect != ""
	not t.effect in taint_effects
}

problems contains sprintf("%s: operator Exists takes no value", [path]) if {
	some [path, t] in default_tolerations
	t.operator == "Exists"
	has_value(t)
}

problems contains sprintf("%s: an empty key needs operator Exists", [path]) if {
	some [path, t] in default_tolerations
	is_object(t)
	object.get(t, "key", "") == ""
	object.get(t, "operator", "Equal") != "Exists"
}

problems contains sprintf("%s: give value or values, not both", [path]) if {
	some [path, t] in default_tolerations
	is_string(t.value)
	t.values
}

problems contains msg if {
	some [path, t] in default_tolerations
	some msg in list_problems(sprintf("%s.values", [path]), t.values, set())
}

problems contains sprintf("%s.values: an empty list injects no toleration", [path]) if {
	some [path, t] in default_tolerations
	t.values == []
}

problems contains sprintf("%s.tolerationSeconds: must be a number", [path]) if {
	some [path, t] in default_tolerations
	x := t.tolerationSeconds
	not is_number(x)
}

has_value(t) if object.get(t, "value", "") != ""

has_value(t) if t.values

problems contains "spec.default.affinity: must be an object" if {
	v := spec["default"].affinity
	not is_object(v)
}

problems contains "spec.default.affinity: an empty object injects nothing and is not valid; leave the field out" if {
	spec["default"].affinity == {}
}

problems contains sprintf("spec.default.affinity.%s: unknown field (known: nodeAffinity, podAffinity, podAntiAffinity)", [k]) if {
	some k, _ in as_object(spec["default"].affinity)
	not k in {"nodeAffinity", "podAffinity", "podAntiAffinity"}
}

problems contains sprintf("spec.default.affinity.%s: must be an object", [k]) if {
	some k, v in as_object(spec["default"].affinity)
	k in {"nodeAffinity", "podAffinity", "podAntiAffinity"}
	not is_object(v)
}

# Node affinity expressions (after reading the seed's one-element keys /
# operators lists) are injected as they are: they need a key and an operator.
problems contains sprintf("spec.default.affinity.nodeAffinity: expression %s needs a key and an operator (a Kubernetes node selector requirement)", [json.marshal(e)]) if {
	affinity := merge.normalize(spec)["default"].affinity
	some kind in ["requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"]
	some term in default_node_terms(affinity, kind)
	some e in as_list(object.get(as_object(term), "matchExpressions", []))
	not default_expression_ok(e)
}

default_node_terms(affinity, kind) := as_list(object.get(as_object(affinity), ["nodeAffinity", kind, "nodeSelectorTerms"], [])) if {
	kind == "requiredDuringSchedulingIgnoredDuringExecution"
}

default_node_terms(affinity, kind) := [p.preference | some p in as_list(object.get(as_object(affinity), ["nodeAffinity", kind], []))] if {
	kind == "preferredDuringSchedulingIgnoredDuringExecution"
}

default_expression_ok(e) if {
	nonempty_string(e.key)
	e.operator in node_operators
}

# ---- defaults the policy's own required values would refuse ----------------

problems contains sprintf("spec.default.%s: %s is not one of spec.required.%s (a defaulted pod would be denied)", [field, json.marshal(value), list]) if {
	n := merge.normalize(spec)
	some field, list in {"schedulerName": "schedulerNames", "priorityClassName": "priorityClassNames"}
	value := n["default"][field]
	required := n.required[list]
	is_array(required)
	count(required) > 0
	not value in required
}

problems contains sprintf("spec.default.nodeSelector.%s: %s is not one of spec.required.nodeSelectors.%s (a defaulted pod would be denied)", [k, json.marshal(value), k]) if {
	some k, value in as_object(spec["default"].nodeSelector)
	required := spec.required.nodeSelectors[k]
	is_array(required)
	count(required) > 0
	not value in required
}

# ---- helpers ---------------------------------------------------------------

nonempty_string(x) if {
	is_string(x)
	x != ""
}

as_list(x) := x if is_array(x)

as_list(x) := [] if not is_array(x)

as_object(x) := x if is_object(x)

as_object(x) := {} if not is_object(x)
