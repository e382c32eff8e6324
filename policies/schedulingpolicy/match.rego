# Does a pod spec keep within a merged SchedulingPolicy? (Rego v1)
#
# violations(m, spec, exempt, unset) is the set of {"component", "value",
# "reason"} for the pod spec `spec` (defaults already applied) against the
# merged policy `m` ({"required", "allowed", "default"}, see merge.rego);
# `exempt` lists tolerations the check skips, `unset` the fields (schedulerName,
# priorityClassName) holding the value the API server fills in itself: neither
# is checked against what is allowed, both count for what is required.
#
# Deny-all-except: a value the pod sets is allowed only if the merged policy
# allows it — in `allowed` (an empty list or object there means "any"), in
# `required` (what is required is allowed) or as the `default` (what the pack
# injects is allowed, or a defaulted object could not be updated). A
# component absent from all three allows nothing. `required` additionally
# makes the component mandatory.
#
# Any JSON may stand where an object or a list is expected (replicated data,
# the admitted object): lookups go through value_at() / list_at() or plain
# references, which are undefined rather than an error on the wrong type.
package io.k8s.federation.schedulingpolicy.match

violations(m, spec, exempt, unset) := union({
	name_violations(m, spec, "schedulerName", "schedulerNames", unset),
	name_violations(m, spec, "priorityClassName", "priorityClassNames", unset),
	selector_violations(m, spec),
	toleration_violations(m, spec, exempt),
	affinity_violations(m, spec),
})

violation(component, value, reason) := {"component": component, "value": value, "reason": reason}

# ---- helpers ---------------------------------------------------------------

# The value at `path` in x, or `fallback` (also when x is not an object).
value_at(x, path, fallback) := object.get(x, path, fallback) if is_object(x)

else := fallback

# The list at `path` in x ([] when absent or not a list).
list_at(x, path) := l if {
	is_object(x)
	l := object.get(x, path, [])
	is_array(l)
} else := []

# Values quoted as JSON (any JSON may stand where a name is expected), sorted.
quoted(names) := concat(", ", [json.marshal(n) | some n in sort(names)])

names_text(names) := "none" if count(names) == 0

else := quoted(names)

# A rule list covers a value: an empty list covers anything, a non-empty one
# the values it lists, never "every" (null).
covered_by(list, _) if list == []

covered_by(list, value) if {
	value != null
	value in list
}

# ---- lists of names: schedulerName, priorityClassName ---------------------

name_violations(m, spec, field, list, unset) := {v |
	value := spec[field]
	is_string(value)
	value != ""
	not field in unset
	not required_names(m, list) # checked below
	not name_allowed(m, field, list, value)
	v := violation(field, sprintf("%q", [value]), sprintf("not allowed (allowed: %s)", [allowed_names(m, field, list)]))
} | {v |
	required := required_names(m, list)
	value := value_at(spec, field, "")
	not value in required
	v := violation(field, shown(value), sprintf("required, one of %s", [quoted(required)]))
}

required_names(m, list) := names if {
	names := m.required[list]
	is_array(names)
	count(names) > 0
}

name_allowed(m, _, list, _) if m.allowed[list] == []

name_allowed(m, _, list, value) if value in m.allowed[list]

name_allowed(m, _, list, value) if value in m.required[list]

name_allowed(m, field, _, value) if m["default"][field] == value

allowed_names(m, field, list) := "any" if {
	m.allowed[list] == []
} else := names_text((({n | some n in list_at(m.allowed, list)} | {n | some n in list_at(m.required, list)}) | {n | n := m["default"][field]}))

shown(value) := "none" if value == ""

else := json.marshal(value)

# ---- node selectors --------------------------------------------------------

selector_violations(m, spec) := {v |
	selector := spec.nodeSelector
	is_object(selector)
	some key, value in selector
	not m.required.nodeSelectors[key] # a required key is checked below
	not selector_allowed(m, key, value)
	v := violation("nodeSelector", sprintf("%s=%v", [key, value]), sprintf("not allowed (%s)", [selector_allowance(m, key)]))
} | {v |
	is_object(m.required.nodeSelectors)
	some key, values in m.required.nodeSelectors
	not selector_met(spec, key, values)
	v := violation("nodeSelector", selector_text(spec, key), sprintf("required, %s", [values_text(key, values)]))
}

selector_allowed(m, _, _) if m.allowed.nodeSelectors == {}

selector_allowed(m, key, value) if any_or_in(m.allowed.nodeSelectors[key], value)

selector_allowed(m, key, value) if any_or_in(m.required.nodeSelectors[key], value)

selector_allowed(m, key, value) if m["default"].nodeSelector[key] == value

selector_met(spec, key, values) if any_or_in(values, spec.nodeSelector[key])

any_or_in(values, _) if values == []

any_or_in(values, value) if {
	is_array(values)
	value in values
}

selector_text(spec, key) := sprintf("%s=%v", [key, spec.nodeSelector[key]]) if {
	spec.nodeSelector[key]
} else := sprintf("%s unset", [key])

selector_allowance(m, key) := "no node selector key is allowed" if {
	count(selector_keys(m)) == 0
} else := sprintf("allowed keys: %s", [quoted(selector_keys(m))]) if {
	not key in selector_keys(m)
} else := sprintf("allowed values of %s: %s", [key, names_text(selector_values(m, key))]) if {
	not selector_any_value(m, key)
}

selector_keys(m) := {k |
	some sec, field in {"allowed": "nodeSelectors", "required": "nodeSelectors", "default": "nodeSelector"}
	is_object(m[sec][field])
	some k, _ in m[sec][field]
}

selector_any_value(m, key) if m.allowed.nodeSelectors[key] == []

selector_any_value(m, key) if m.required.nodeSelectors[key] == []

selector_values(m, key) := ({v | some v in m.allowed.nodeSelectors[key]} | {v | some v in m.required.nodeSelectors[key]}) | {v | v := m["default"].nodeSelector[key]}

values_text(key, values) := sprintf("%s with any value", [key]) if {
	values == []
} else := sprintf("%s one of %s", [key, quoted(values)]) if {
	is_array(values)
} else := sprintf("%s one of ", [key])

# ---- tolerations -----------------------------------------------------------

tolerations(spec) := list_at(spec, ["tolerations"])

toleration_violations(m, spec, exempt) := {v |
	ts := tolerations(spec)
	count(ts) > 0
	not any_toleration(m)
	exempt_set := {canonical_toleration(e) | some e in exempt} - {{}}
	defaults := {canonical_toleration(d) | some d in list_at(m["default"], "tolerations")}
	rules := array.concat(list_at(m.allowed, "tolerations"), list_at(m.required, "tolerations"))
	some t in ts
	c := canonical_toleration(t)
	not c in exempt_set
	not c in defaults
	not rule_covers(rules, c)
	v := violation("toleration", json.marshal(t), "not allowed (no allowed toleration rule covers it)")
} | {v |
	required := m.required.tolerations
	is_array(required)
	count(required) > 0
	not required_toleration_met(tolerations(spec), required)
	v := violation("toleration", "none matching", sprintf("required, one matching a rule of %s", [json.marshal(required)]))
}

# Whether a toleration is one of the exempt ones (the same toleration, in
# canonical form).
exempt_toleration(t, exempt) if exempt_canonical(canonical_toleration(t), exempt)

exempt_canonical(c, exempt) if {
	count(c) > 0
	some e in exempt
	canonical_toleration(e) == c
}

# allowed says "any toleration".
any_toleration(m) if m.allowed.tolerations == []

# One of the toleration rules covers the toleration `c` (canonical form).
rule_covers(rules, c) if {
	some rule in rules
	covers(rule, c)
}

required_toleration_met(ts, required) if {
	some t in ts
	c := canonical_toleration(t)
	some rule in required
	covers(rule, c)
}

# A toleration, with what it tolerates made explicit: `key`, `value` and
# `effect` are null when it tolerates every one (an empty key, operator
# Exists, an empty effect). {} for what is not a toleration object.
# (object.get on a one-key object maps that key to null and anything else to
# itself: "" → null, and any value → null for operator Exists.)
canonical_toleration(t) := {
	"key": object.get({"": null}, [key], key),
	"operator": operator,
	"value": object.get({"Exists": null}, [operator], object.get(t, "value", "")),
	"effect": object.get({"": null}, [effect], effect),
	"tolerationSeconds": object.get(t, "tolerationSeconds", null),
} if {
	is_object(t)
	key := object.get(t, "key", "")
	operator := object.get(t, "operator", "Equal")
	effect := object.get(t, "effect", "")
} else := {}

# A rule covers a toleration when everything the toleration tolerates is
# within the rule (an empty or absent list in the rule covers anything).
covers(rule, c) if {
	is_object(rule)
	count(c) > 0
	covered_by(object.get(rule, "keys", []), c.key)
	covered_by(object.get(rule, "operators", []), c.operator)
	covered_by(object.get(rule, "values", []), c.value)
	covered_by(object.get(rule, "effects", []), c.effect)
}

# ---- affinities ------------------------------------------------------------
#
# Policy side: affinities.{nodeAffinities,podAffinities,podAntiAffinities}.
# {requiredDuringSchedulingIgnoredDuringExecution,preferredDuringSchedulingIgnoredDuringExecution}
# holding node rules {"nodeSelectorTerms": [{"matchExpressions": [rule…]}]}
# or pod rules {"podAffinityTerms": [{"topologyKeys": […], "matchExpressions": [rule…]}]},
# a rule being {"keys", "operators", "values"} (each an empty list = any).
# In allowed, {} at any level means "any".

types := {"nodeAffinity": "nodeAffinities", "podAffinity": "podAffinities", "podAntiAffinity": "podAntiAffinities"}

required_kind := "requiredDuringSchedulingIgnoredDuringExecution"

preferred_kind := "preferredDuringSchedulingIgnoredDuringExecution"

# The pod's terms of one type and kind: node selector terms (nodeAffinity) or
# pod affinity terms, with preferred terms unwrapped.
pod_terms(affinity, "nodeAffinity", kind) := list_at(affinity, ["nodeAffinity", kind, "nodeSelectorTerms"]) if kind == required_kind

pod_terms(affinity, "nodeAffinity", kind) := [p.preference | some p in value_at(affinity, ["nodeAffinity", kind], [])] if kind == preferred_kind

pod_terms(affinity, t, kind) := list_at(affinity, [t, kind]) if {
	t != "nodeAffinity"
	kind == required_kind
}

pod_terms(affinity, t, kind) := [p.podAffinityTerm | some p in value_at(affinity, [t, kind], [])] if {
	t != "nodeAffinity"
	kind == preferred_kind
}

# A node selector term's expressions (matchFields are checked like matchExpressions).
node_expressions(term) := array.concat(list_at(term, "matchExpressions"), list_at(term, "matchFields"))

# A pod affinity term's label selector as expressions (matchLabels k: v → k In [v]).
selector_expressions(term) := array.concat(
	list_at(term, ["labelSelector", "matchExpressions"]),
	[{"key": k, "operator": "In", "values": [v]} | some k, v in value_at(term, ["labelSelector", "matchLabels"], {})],
)

# The rule terms a policy section gives for one type and kind.
rule_terms(affinities, "nodeAffinity", kind) := list_at(affinities, ["nodeAffinities", kind, "nodeSelectorTerms"])

rule_terms(affinities, t, kind) := list_at(affinities, [types[t], kind, "podAffinityTerms"]) if t != "nodeAffinity"

rules_of(terms) := [r | some term in terms; some r in list_at(term, "matchExpressions")]

# A type the policies allow in any form ({} in allowed) has nothing to check.
affinity_violations(m, spec) := {v |
	is_object(spec.affinity)
	some t, parts in spec.affinity
	is_object(parts)
	count(parts) > 0
	not wildcard_type(m, t)
	some v in affinity_type_violations(m, spec.affinity, t, parts)
} | required_affinity_violations(m, spec)

wildcard_type(m, _) if m.allowed.affinities == {}

wildcard_type(m, t) if m.allowed.affinities[types[t]] == {}

affinity_type_violations(m, affinity, t, parts) := {v |
	some kind, _ in parts
	some v in affinity_kind_violations(m, affinity, t, kind)
} if {
	type_permitted(m, t)
} else := {violation("affinity", t, sprintf("not allowed (no %s in the policies)", [object.get(types, t, t)]))}

affinity_kind_violations(m, affinity, t, kind) := kind_violations(m, affinity, t, kind) if {
	kind_permitted(m, t, kind)
} else := {violation("affinity", sprintf("%s.%s", [t, kind]), sprintf("not allowed (%s.%s is not in the policies)", [object.get(types, t, t), kind]))}

kind_violations(m, affinity, "nodeAffinity", kind) := {v |
	some term in pod_terms(affinity, "nodeAffinity", kind)
	some e in node_expressions(term)
	not node_expression_allowed(m, kind, e)
	v := violation("affinity", sprintf("nodeAffinity.%s match expression %s", [kind, json.marshal(e)]), "not allowed (no allowed rule matches it)")
}

kind_violations(m, affinity, t, kind) := {v |
	some term in pod_terms(affinity, t, kind)
	not pod_term_allowed(m, t, kind, term)
	v := violation("affinity", sprintf("%s.%s term %s", [t, kind, json.marshal(term)]), "not allowed (no allowed term rule matches it)")
} if {
	t != "nodeAffinity"
}

node_expression_allowed(m, kind, _) if wildcard_kind(m, "nodeAffinity", kind)

node_expression_allowed(m, kind, e) if {
	some sec in ["allowed", "required"]
	some r in rules_of(rule_terms(m[sec].affinities, "nodeAffinity", kind))
	expression_matches(e, r)
}

node_expression_allowed(m, kind, e) if {
	some term in pod_terms(m["default"].affinity, "nodeAffinity", kind)
	e in node_expressions(term)
}

pod_term_allowed(m, t, kind, _) if wildcard_kind(m, t, kind)

pod_term_allowed(m, t, kind, term) if {
	some sec in ["allowed", "required"]
	some rt in rule_terms(value_at(m[sec], "affinities", {}), t, kind)
	pod_term_within(term, rt)
}

pod_term_allowed(m, t, kind, term) if term in pod_terms(m["default"].affinity, t, kind)

type_permitted(m, t) if is_object(m.allowed.affinities[types[t]])

type_permitted(m, t) if is_object(m.required.affinities[types[t]])

type_permitted(m, t) if is_object(m["default"].affinity[t])

kind_permitted(m, t, kind) if wildcard_kind(m, t, kind)

kind_permitted(m, t, kind) if is_object(m.allowed.affinities[types[t]][kind])

kind_permitted(m, t, kind) if is_object(m.required.affinities[types[t]][kind])

kind_permitted(m, t, kind) if _ = m["default"].affinity[t][kind]

# allowed says "any" for this type and kind. (Below affinity_violations a type
# is never one allowed in any form: those are not checked at all.)
wildcard_kind(m, t, kind) if m.allowed.affinities[types[t]][kind] == {}

# Every expression of the pod term's selector matches a rule of the rule term,
# and its topology key is listed (or the rule term lists none).
pod_term_within(term, rt) if {
	covered_by(value_at(rt, "topologyKeys", []), value_at(term, "topologyKey", ""))
	rules := list_at(rt, "matchExpressions")
	every e in selector_expressions(term) {
		rule_list_matches(rules, e)
	}
}

rule_list_matches(rules, _) if rules == []

rule_list_matches(rules, e) if {
	some r in rules
	expression_matches(e, r)
}

# An expression {key, operator, values} matches a rule {keys, operators,
# values}: its key and operator are listed and its values are a subset (an
# empty list in the rule = any).
expression_matches(e, r) if {
	is_object(e)
	is_object(r)
	covered_by(object.get(r, "keys", []), object.get(e, "key", ""))
	covered_by(object.get(r, "operators", []), object.get(e, "operator", ""))
	values := object.get(r, "values", [])
	every value in list_at(e, "values") {
		covered_by(values, value)
	}
}

# required.affinities: for every type and kind listed, the pod has terms of
# that kind and each of them implies one of the required rule terms: every
# rule of the rule term is matched by one of the pod term's expressions (and,
# for pod affinities, its topology key is listed). Kubernetes ORs terms, so
# this is what makes the pod land only where the policy requires.
required_affinity_violations(m, spec) := {v |
	affinities := m.required.affinities
	is_object(affinities)
	affinity := value_at(spec, "affinity", {})
	some t, pt in types
	some kind, _ in value_at(affinities, pt, {})
	required_terms := rule_terms(affinities, t, kind)
	terms := pod_terms(affinity, t, kind)
	not all_terms_imply(t, terms, required_terms)
	v := violation("affinity", sprintf("%s.%s", [t, kind]), sprintf("required, every term implying one of %s; got %s", [json.marshal(required_terms), terms_text(terms)]))
}

terms_text(terms) := "none" if count(terms) == 0

else := json.marshal(terms)

all_terms_imply(t, terms, required_terms) if {
	count(terms) > 0
	every term in terms {
		some rt in required_terms
		term_implies(t, term, rt)
	}
}

term_implies("nodeAffinity", term, rt) if {
	every r in rules_of([rt]) {
		some e in node_expressions(term)
		expression_matches(e, r)
	}
}

term_implies(t, term, rt) if {
	t != "nodeAffinity"
	covered_by(value_at(rt, "topologyKeys", []), value_at(term, "topologyKey", ""))
	every r in rules_of([rt]) {
		some e in selector_expressions(term)
		expression_matches(e, r)
	}
}
