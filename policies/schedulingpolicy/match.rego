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
# the admitted object): lookups go through get() and `x[_]` / `x[k]`, never
# `some … in x` on what may not be a collection (regorus raises an error
# there; OPA makes the expression undefined).
#
# Evaluated on every admission: helpers are `else` chains (regorus, the
# devstack engine, evaluates every definition of a function; an `else` chain
# stops at the first that holds) and per-item work is done once per item.
package io.k8s.federation.schedulingpolicy.match

violations(m, spec, exempt, unset) := ((name_violations(m, spec, "schedulerName", "schedulerNames", unset) |
	name_violations(m, spec, "priorityClassName", "priorityClassNames", unset)) |
	(selector_violations(m, spec) | toleration_violations(m, spec, exempt))) |
	affinity_violations(m, spec)

violation(component, value, reason) := {"component": component, "value": value, "reason": reason}

# ---- lists of names: schedulerName, priorityClassName ---------------------

name_violations(m, spec, field, list, unset) := {v |
	value := spec[field]
	is_string(value)
	value != ""
	not field in unset
	not required_list(m, list) # checked below
	not name_allowed(m, field, list, value)
	v := violation(field, sprintf("%q", [value]), sprintf("not allowed (allowed: %s)", [allowed_names(m, field, list)]))
} | {v |
	required := m.required[list]
	is_array(required)
	count(required) > 0
	value := get(spec, field, "")
	not value in required
	v := violation(field, shown(value), sprintf("required, one of %s", [quoted(required)]))
}

required_list(m, list) if {
	is_array(m.required[list])
	count(m.required[list]) > 0
}

name_allowed(m, field, list, value) := true if {
	m.allowed[list] == []
} else := true if {
	value in m.allowed[list]
} else := true if {
	value in m.required[list]
} else := true if {
	m["default"][field] == value
}

allowed_names(m, field, list) := "any" if {
	m.allowed[list] == []
} else := text if {
	names := {n |
		some n in array.concat(section_list(m, "allowed", list), section_list(m, "required", list))
	} | {n | n := m["default"][field]}
	text := names_text(names)
}

names_text(names) := "none" if count(names) == 0 else := quoted(names)

# Values quoted as JSON (any JSON may stand where a name is expected).
quoted(names) := concat(", ", [json.marshal(n) | some n in sort(names)])

shown(value) := "none" if value == "" else := json.marshal(value)

# object.get on anything: `fallback` unless x is an object (replicated data and
# admitted objects can hold any JSON where an object is expected).
get(x, path, fallback) := object.get(x, path, fallback) if is_object(x) else := fallback

# A list in a section of the merged policy ([] when absent or not a list).
section_list(m, sec, field) := as_array(get(m, [sec, field], []))

as_array(x) := x if is_array(x) else := []

# ---- node selectors --------------------------------------------------------

selector_violations(m, spec) := {v |
	selector := get(spec, "nodeSelector", {})
	is_object(selector)
	some key, value in selector
	not m.required.nodeSelectors[key] # a required key is checked below
	not selector_allowed(m, key, value)
	v := violation("nodeSelector", sprintf("%s=%v", [key, value]), sprintf("not allowed (%s)", [selector_allowance(m, key)]))
} | {v |
	required := m.required.nodeSelectors
	is_object(required)
	some key, values in required
	not selector_met(spec, key, values)
	v := violation("nodeSelector", selector_text(spec, key), sprintf("required, %s", [values_text(key, values)]))
}

selector_text(spec, key) := sprintf("%s=%v", [key, spec.nodeSelector[key]]) if {
	spec.nodeSelector[key]
} else := sprintf("%s unset", [key])

selector_allowed(m, key, value) := true if {
	m.allowed.nodeSelectors == {}
} else := true if {
	any_or_in(m.allowed.nodeSelectors[key], value)
} else := true if {
	any_or_in(m.required.nodeSelectors[key], value)
} else := true if {
	m["default"].nodeSelector[key] == value
}

selector_met(spec, key, values) if {
	value := spec.nodeSelector[key]
	any_or_in(values, value)
}

any_or_in(values, value) := true if {
	values == []
} else := true if {
	is_array(values)
	value in values
}

selector_allowance(m, key) := "no node selector key is allowed" if {
	not selector_key_known(m, key)
	count(selector_keys(m)) == 0
}

selector_allowance(m, key) := sprintf("allowed keys: %s", [quoted(selector_keys(m))]) if {
	not selector_key_known(m, key)
	count(selector_keys(m)) > 0
}

selector_allowance(m, key) := sprintf("allowed values of %s: %s", [key, names_text(selector_values(m, key))]) if {
	selector_key_known(m, key)
	not selector_any_value(m, key)
}

selector_keys(m) := {k | some sec, field in {"allowed": "nodeSelectors", "required": "nodeSelectors", "default": "nodeSelector"}; selectors := m[sec][field]; is_object(selectors); some k, _ in selectors}

selector_key_known(m, key) if key in selector_keys(m)

selector_any_value(m, key) if m.allowed.nodeSelectors[key] == []

selector_any_value(m, key) if m.required.nodeSelectors[key] == []

selector_values(m, key) := ({v | v := m.allowed.nodeSelectors[key][_]} | {v | v := m.required.nodeSelectors[key][_]}) | {v | v := m["default"].nodeSelector[key]}

values_text(key, values) := sprintf("%s with any value", [key]) if values == [] else := sprintf("%s one of %s", [key, quoted(as_array(values))])

# ---- tolerations -----------------------------------------------------------

tolerations(spec) := ts if {
	ts := spec.tolerations
	is_array(ts)
} else := []

toleration_violations(m, spec, exempt) := {v |
	ts := tolerations(spec)
	count(ts) > 0
	rules := array.concat(section_list(m, "allowed", "tolerations"), section_list(m, "required", "tolerations"))
	some t in ts
	c := canonical_toleration(t)
	not exempt_canonical(c, exempt)
	not toleration_allowed(m, c, rules)
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

# (rules: the allowed and required toleration rules of m, listed once per pod.)
toleration_allowed(m, c, rules) := true if {
	m.allowed.tolerations == []
} else := true if {
	some rule in rules
	covers(rule, c)
} else := true if {
	some d in as_array(m["default"].tolerations)
	canonical_toleration(d) == c
}

required_toleration_met(ts, required) if {
	some t in ts
	c := canonical_toleration(t)
	some rule in required
	covers(rule, c)
}

# A toleration, with what it tolerates made explicit: `key`, `value` and
# `effect` are null when it tolerates every one (an empty key, operator
# Exists, an empty effect).
canonical_toleration(t) := {
	"key": tolerated(object.get(t, "key", "")),
	"operator": operator,
	"value": tolerated_value(operator, object.get(t, "value", "")),
	"effect": tolerated(object.get(t, "effect", "")),
	"tolerationSeconds": object.get(t, "tolerationSeconds", null),
} if {
	is_object(t)
	operator := object.get(t, "operator", "Equal")
} else := {}

tolerated(x) := null if x == "" else := x

tolerated_value(operator, value) := null if operator == "Exists" else := value

# A rule covers a toleration when everything the toleration tolerates is
# within the rule: a rule list that is empty or absent covers anything; a
# non-empty one covers the values it lists, never "every" (null).
covers(rule, c) if {
	is_object(rule)
	count(c) > 0
	covered_by(object.get(rule, "keys", []), c.key)
	covered_by(object.get(rule, "operators", []), c.operator)
	covered_by(object.get(rule, "values", []), c.value)
	covered_by(object.get(rule, "effects", []), c.effect)
}

covered_by(list, value) := true if {
	list == []
} else := true if {
	value != null
	value in list
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

kinds := ["requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"]

# The pod's terms of one type and kind: node selector terms (nodeAffinity) or
# pod affinity terms, with preferred terms unwrapped.
pod_terms(affinity, t, kind) := get(affinity, [t, kind, "nodeSelectorTerms"], []) if {
	t == "nodeAffinity"
	kind == kinds[0]
} else := [p.preference | p := get(affinity, [t, kind], [])[_]] if {
	t == "nodeAffinity"
	kind == kinds[1]
} else := get(affinity, [t, kind], []) if {
	kind == kinds[0]
} else := [p.podAffinityTerm | p := get(affinity, [t, kind], [])[_]] if {
	kind == kinds[1]
}

# A node selector term's expressions (matchFields are checked like matchExpressions).
node_expressions(term) := array.concat(as_array(get(term, "matchExpressions", [])), as_array(get(term, "matchFields", [])))

# A pod affinity term's label selector as expressions (matchLabels k: v → k In [v]).
selector_expressions(term) := array.concat(
	as_array(get(term, ["labelSelector", "matchExpressions"], [])),
	[{"key": k, "operator": "In", "values": [v]} | some k; v := get(term, ["labelSelector", "matchLabels"], {})[k]],
)

# The rule terms a policy section gives for one type and kind.
rule_terms(affinities, t, kind) := get(affinities, [types[t], kind, "nodeSelectorTerms"], []) if {
	t == "nodeAffinity"
} else := get(affinities, [types[t], kind, "podAffinityTerms"], [])

rules_of(terms) := [r | some term in as_array(terms); some r in as_array(get(term, "matchExpressions", []))]

# (A type the policies allow in any form, {} in allowed, has nothing to
# check: skipped at once.)
affinity_violations(m, spec) := {v |
	affinity := get(spec, "affinity", {})
	is_object(affinity)
	some t, parts in affinity
	is_object(parts)
	count(parts) > 0
	not wildcard_type(m, t)
	some v in affinity_type_violations(m, affinity, t, parts)
} | required_affinity_violations(m, spec)

wildcard_type(m, t) := true if {
	m.allowed.affinities == {}
} else := true if {
	m.allowed.affinities[types[t]] == {}
}

affinity_type_violations(m, affinity, t, parts) := {v |
	some kind, _ in parts
	some v in affinity_kind_violations(m, affinity, t, kind)
} if {
	type_permitted(m, t)
} else := {violation("affinity", t, sprintf("not allowed (no %s in the policies)", [get(types, t, t)]))}

affinity_kind_violations(m, affinity, t, kind) := {v |
	t == "nodeAffinity"
	some term in as_array(pod_terms(affinity, t, kind))
	some e in node_expressions(term)
	not node_expression_allowed(m, kind, e)
	v := violation("affinity", sprintf("%s.%s match expression %s", [t, kind, json.marshal(e)]), "not allowed (no allowed rule matches it)")
} | {v |
	t != "nodeAffinity"
	some term in as_array(pod_terms(affinity, t, kind))
	not pod_term_allowed(m, t, kind, term)
	v := violation("affinity", sprintf("%s.%s term %s", [t, kind, json.marshal(term)]), "not allowed (no allowed term rule matches it)")
} if {
	kind_permitted(m, t, kind)
} else := {violation("affinity", sprintf("%s.%s", [t, kind]), sprintf("not allowed (%s.%s is not in the policies)", [get(types, t, t), kind]))}

type_permitted(m, t) := true if {
	m.allowed.affinities == {}
} else := true if {
	is_object(m.allowed.affinities[types[t]])
} else := true if {
	is_object(m.required.affinities[types[t]])
} else := true if {
	is_object(m["default"].affinity[t])
}

kind_permitted(m, t, kind) := true if {
	wildcard_kind(m, t, kind)
} else := true if {
	is_object(m.allowed.affinities[types[t]][kind])
} else := true if {
	is_object(m.required.affinities[types[t]][kind])
} else := true if {
	_ = m["default"].affinity[t][kind]
}

# allowed says "any" for this type and kind: {} at some level.
wildcard_kind(m, t, kind) := true if {
	m.allowed.affinities == {}
} else := true if {
	m.allowed.affinities[types[t]] == {}
} else := true if {
	m.allowed.affinities[types[t]][kind] == {}
}

node_expression_allowed(m, kind, e) := true if {
	wildcard_kind(m, "nodeAffinity", kind)
} else := true if {
	some r in rules_of(rule_terms(m.allowed.affinities, "nodeAffinity", kind))
	expression_matches(e, r)
} else := true if {
	some r in rules_of(rule_terms(m.required.affinities, "nodeAffinity", kind))
	expression_matches(e, r)
} else := true if {
	some term in as_array(pod_terms(m["default"].affinity, "nodeAffinity", kind))
	e in node_expressions(term)
}

pod_term_allowed(m, t, kind, term) := true if {
	wildcard_kind(m, t, kind)
} else := true if {
	some rt in array.concat(
		as_array(rule_terms(get(m, ["allowed", "affinities"], {}), t, kind)),
		as_array(rule_terms(get(m, ["required", "affinities"], {}), t, kind)),
	)
	pod_term_within(term, rt)
} else := true if {
	term in as_array(pod_terms(m["default"].affinity, t, kind))
}

# Every expression of the pod term's selector matches a rule of the rule term,
# and its topology key is listed (or the rule term lists none).
pod_term_within(term, rt) if {
	covered_by(get(rt, "topologyKeys", []), get(term, "topologyKey", ""))
	rules := as_array(get(rt, "matchExpressions", []))
	every e in selector_expressions(term) {
		rule_list_matches(rules, e)
	}
}

rule_list_matches(rules, e) := true if {
	rules == []
} else := true if {
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
	every value in as_array(object.get(e, "values", [])) {
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
	affinity := get(spec, "affinity", {})
	some t, pt in types
	some kind
	_ = get(affinities, pt, {})[kind]
	required_terms := as_array(rule_terms(affinities, t, kind))
	terms := as_array(pod_terms(affinity, t, kind))
	not all_terms_imply(t, terms, required_terms)
	v := violation("affinity", sprintf("%s.%s", [t, kind]), sprintf("required, every term implying one of %s; got %s", [json.marshal(required_terms), terms_text(terms)]))
}

terms_text(terms) := "none" if count(terms) == 0 else := json.marshal(terms)

all_terms_imply(t, terms, required_terms) if {
	count(terms) > 0
	every term in terms {
		some rt in required_terms
		term_implies(t, term, rt)
	}
}

term_implies(t, term, rt) := true if {
	t == "nodeAffinity"
	every r in rules_of([rt]) {
		some e in node_expressions(term)
		expression_matches(e, r)
	}
} else := true if {
	t != "nodeAffinity"
	covered_by(get(rt, "topologyKeys", []), get(term, "topologyKey", ""))
	every r in rules_of([rt]) {
		some e in selector_expressions(term)
		expression_matches(e, r)
	}
}
