# SchedulingPolicy specs normalised and merged (Rego v1).
#
# A spec has three sections, each with five components:
#
#   required: schedulerNames, priorityClassNames, nodeSelectors, tolerations, affinities
#   allowed:  schedulerNames, priorityClassNames, nodeSelectors, tolerations, affinities
#   default:  schedulerName,  priorityClassName,  nodeSelector,  tolerations, affinity
#
# normalize(spec) reads the seed's misspelt aliases (priorityClasseNames,
# priorityClasseName) as the correct names, expands a default toleration
# listing `values` into one toleration per value, and reads a default node
# affinity expression written with one-element `keys` / `operators` lists as
# Kubernetes' `key` / `operator`. Anything else is kept as written; the
# validation (validate.rego) says what is wrong with a spec.
#
# merged(specs, option) combines the specs of the usable policies, given in
# alphabetical order of policy name (the result is not a new policy, only the
# authorisations that apply). One policy is merged as it is; several:
#
#   "smart"  (default) required and default: first seen wins per component,
#            and per key for the keyed ones (node selectors, affinities);
#            allowed: additive (the union; an "any" wins).
#   "first"  the first policy alone.
#   "simple" first seen wins per component, in every section.
#
# A component of the wrong type (a name list that is not a list, …) is read
# as absent.
package io.k8s.federation.schedulingpolicy.merge

options := {"smart", "first", "simple"}

sections := ["required", "allowed", "default"]

components := {
	"required": ["schedulerNames", "priorityClassNames", "nodeSelectors", "tolerations", "affinities"],
	"allowed": ["schedulerNames", "priorityClassNames", "nodeSelectors", "tolerations", "affinities"],
	"default": ["schedulerName", "priorityClassName", "nodeSelector", "tolerations", "affinity"],
}

# Components merged key by key in required and default (smart merge).
keyed := {"nodeSelectors", "affinities", "nodeSelector", "affinity"}

# Components of allowed that are lists (the others are objects).
list_components := {"schedulerNames", "priorityClassNames", "tolerations"}

aliases := {
	"required": {"priorityClasseNames": "priorityClassNames"},
	"allowed": {"priorityClasseNames": "priorityClassNames"},
	"default": {"priorityClasseName": "priorityClassName"},
}

empty := {"required": {}, "allowed": {}, "default": {}}

required_kind := "requiredDuringSchedulingIgnoredDuringExecution"

preferred_kind := "preferredDuringSchedulingIgnoredDuringExecution"

# ---- normalisation ---------------------------------------------------------

normalize(spec) := {
	"required": renamed(section(spec, "required"), aliases.required),
	"allowed": renamed(section(spec, "allowed"), aliases.allowed),
	"default": normalized_default(renamed(section(spec, "default"), aliases["default"])),
}

section(spec, name) := s if {
	s := spec[name]
	is_object(s)
} else := {}

# Aliases renamed; when both spellings are given the correct one wins (the
# validation refuses such a spec anyway).
renamed(obj, names) := obj if {
	count(object.filter(obj, names)) == 0
} else := {object.get(names, k, k): v |
	some k, v in obj
	not shadowed(obj, names, k)
}

shadowed(obj, names, k) if names[k] in object.keys(obj)

normalized_default(d) := object.union_n([d, expanded_tolerations(d), kubernetes_node_affinity(d)]) if {
	rewritten(d)
} else := d

# A default with a toleration listing values, or a node affinity (whose
# expressions may be written with keys / operators lists).
rewritten(d) if {
	some t in d.tolerations
	is_array(t.values)
}

rewritten(d) if is_object(d.affinity.nodeAffinity)

# {"key": "k", "values": ["a", "b"], …} → one toleration per value.
expanded_tolerations(d) := {"tolerations": [t | some t0 in d.tolerations; some t in expand_toleration(t0)]} if {
	is_array(d.tolerations)
} else := {}

expand_toleration(t) := [object.union(object.remove(t, ["values"]), {"value": v}) | some v in t.values] if {
	is_array(t.values)
} else := [t]

kubernetes_node_affinity(d) := {"affinity": object.union(d.affinity, {"nodeAffinity": node_affinity})} if {
	is_object(d.affinity.nodeAffinity)
	node_affinity := object.union(d.affinity.nodeAffinity, {kind: node_kind(kind, v) |
		some kind in [required_kind, preferred_kind]
		v := d.affinity.nodeAffinity[kind]
	})
} else := {}

node_kind(kind, req) := object.union(req, {"nodeSelectorTerms": [node_term(t) | some t in req.nodeSelectorTerms]}) if {
	kind == required_kind
	is_array(req.nodeSelectorTerms)
}

node_kind(kind, prefs) := [preference(p) | some p in prefs] if {
	kind == preferred_kind
	is_array(prefs)
}

preference(p) := object.union(p, {"preference": node_term(p.preference)}) if is_object(p.preference)

else := p

node_term(t) := object.union(t, {"matchExpressions": [expression(e) | some e in t.matchExpressions]}) if {
	is_array(t.matchExpressions)
} else := t

# The seed writes one default expression as {"keys": ["k"], "operators": ["In"], …}.
expression(e) := object.union(object.remove(e, ["keys", "operators"]), {"key": key, "operator": operator}) if {
	not e.key
	not e.operator
	[key] = e.keys
	[operator] = e.operators
} else := e

# ---- merging ---------------------------------------------------------------

merged(specs, option) := empty if {
	count(specs) == 0
} else := specs[0] if {
	option == "first"
} else := specs[0] if {
	option in options
	count(specs) == 1
} else := {sec: first_values(specs, sec) | some sec in sections} if {
	option == "simple"
} else := {
	"required": first_seen(specs, "required"),
	"allowed": additive(specs),
	"default": first_seen(specs, "default"),
} if {
	option == "smart"
}

# simple: the first value of each component.
first_values(specs, sec) := {comp: values[0] |
	some comp in components[sec]
	values := [v | some s in specs; v := s[sec][comp]]
	count(values) > 0
}

# smart, required and default: first seen per component, and per key of the keyed ones.
first_seen(specs, sec) := object.filter(given[0], components[sec]) if {
	given := [x | some s in specs; x := s[sec]; count(x) > 0]
	count(given) == 1
} else := {comp: v |
	some comp in components[sec]
	values := [x | some s in specs; x := s[sec][comp]]
	count(values) > 0
	v := first_seen_value(comp, values)
}

first_seen_value(comp, values) := {k: firsts[0] |
	some o in objects
	some k, _ in o
	firsts := [x | some o2 in objects; x := o2[k]]
} if {
	comp in keyed
	objects := [o | some o in values; is_object(o)]
	count(objects) > 0
} else := values[0]

# allowed: what any usable policy allows. [] / {} mean "any" and win; what
# is of the wrong type counts for nothing (a component, key, affinity type or
# kind left with nothing is absent, never "any").
additive(specs) := {comp: v |
	some comp in components.allowed
	values := [x | some s in specs; x := s.allowed[comp]; well_typed(comp, x)]
	count(values) > 0
	v := union(comp, values)
}

well_typed(comp, x) if {
	comp in list_components
	is_array(x)
}

well_typed(comp, x) if {
	not comp in list_components
	is_object(x)
}

union(comp, values) := [] if {
	comp in list_components
	[] in values
} else := {} if {
	not comp in list_components
	{} in values
} else := [r | some v in values; some r in v] if {
	comp == "tolerations"
} else := sort({n | some v in values; some n in v}) if {
	comp in list_components
} else := nonempty({key: selector_values(values, key) | some v in values; some key, x in v; is_array(x)}) if {
	comp == "nodeSelectors"
} else := nonempty({t: types | some v in values; some t, x in v; is_object(x); types := affinity_type(values, t)})

nonempty(x) := x if count(x) > 0

# The values of a node selector key: [] (any) wins.
selector_values(values, key) := [] if {
	some v in values
	v[key] == []
} else := sort({x | some v in values; is_array(v[key]); some x in v[key]})

affinity_type(values, t) := {} if {
	some v in values
	v[t] == {}
} else := nonempty({kind: rules | some v in values; some kind, x in v[t]; is_object(x); rules := affinity_kind(values, t, kind)})

# A kind's rule lists (nodeSelectorTerms, podAffinityTerms) concatenated.
affinity_kind(values, t, kind) := {} if {
	some v in values
	v[t][kind] == {}
} else := nonempty({field: [term | some v2 in values; some term in v2[t][kind][field]] |
	some v in values
	is_object(v[t][kind])
	some field, terms in v[t][kind]
	is_array(terms)
})
