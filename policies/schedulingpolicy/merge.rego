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
#
# Both run on every admission request, and each call of a function here costs
# OPA some 23 allocations, more with large arguments: the helpers are handed
# the one section or component they read, never a whole spec or list of specs,
# and the common shapes (a spec with nothing to rewrite, a component given by
# one policy) take the shortest path.
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

# The type of each component of allowed.
allowed_types := {
	"schedulerNames": "array",
	"priorityClassNames": "array",
	"nodeSelectors": "object",
	"tolerations": "array",
	"affinities": "object",
}

empty := {"required": {}, "allowed": {}, "default": {}}

required_kind := "requiredDuringSchedulingIgnoredDuringExecution"

preferred_kind := "preferredDuringSchedulingIgnoredDuringExecution"

# ---- normalisation ---------------------------------------------------------

# A section that is not an object is read as {} (a spec that is not an object
# as empty).
normalize(spec) := {"required": r, "allowed": a, "default": d} if {
	# nothing to rewrite: the sections as they are
	is_object(spec)
	r := object.get(spec, "required", {})
	a := object.get(spec, "allowed", {})
	d := object.get(spec, "default", {})
	is_object(r)
	is_object(a)
	is_object(d)
	not "priorityClasseNames" in object.keys(r)
	not "priorityClasseNames" in object.keys(a)
	not "priorityClasseName" in object.keys(d)
	not rewritten(d)
} else := {
	"required": renamed(section(spec, "required"), "priorityClasseNames", "priorityClassNames"),
	"allowed": renamed(section(spec, "allowed"), "priorityClasseNames", "priorityClassNames"),
	"default": normalized_default(renamed(section(spec, "default"), "priorityClasseName", "priorityClassName")),
}

section(spec, name) := s if {
	s := spec[name]
	is_object(s)
} else := {}

# The alias renamed; when both spellings are given the correct one wins (the
# validation refuses such a spec anyway).
renamed(obj, alias, name) := obj if {
	not alias in object.keys(obj)
} else := object.remove(obj, [alias]) if {
	name in object.keys(obj)
} else := object.union(object.remove(obj, [alias]), {name: obj[alias]})

normalized_default(d) := object.union_n([d, expanded_tolerations(d), kubernetes_node_affinity(d)]) if {
	rewritten(d)
} else := d

# A default with a toleration listing values, or a node affinity (whose
# expressions may be written with keys / operators lists).
rewritten(d) if is_array(d.tolerations[_].values)

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

# specs: normalised specs (normalize). Indexed on the option.
merged(specs, _) := empty if count(specs) == 0

merged(specs, "first") := specs[0]

merged(specs, "simple") := specs[0] if {
	count(specs) == 1
} else := {sec: first_values([s[sec] | some s in specs], comps) | some sec, comps in components} if {
	count(specs) > 1
}

merged(specs, "smart") := specs[0] if {
	count(specs) == 1
} else := {
	"required": first_seen([s.required | some s in specs], components.required),
	"allowed": additive([s.allowed | some s in specs]),
	"default": first_seen([s["default"] | some s in specs], components["default"]),
} if {
	count(specs) > 1
}

# simple: the first value of each component, given the policies' sections.
first_values(secs, comps) := {comp: values[0] |
	some comp in comps
	values := [v | some s in secs; v := s[comp]]
	values != []
}

# smart, required and default: first seen per component, and per key of the
# keyed ones; given the policies' sections.
first_seen(secs, comps) := object.filter(given, comps) if {
	# one policy gives the section
	[given] = [s | some s in secs; s != {}]
} else := {comp: v |
	some comp in comps
	values := [x | some s in secs; x := s[comp]]
	values != []
	v := first_seen_value(comp, values)
}

# A component given by one policy is its value.
first_seen_value(comp, values) := v if {
	[v] = values
} else := first_seen_keys(objects) if {
	comp in keyed
	objects := [o | some o in values; is_object(o)]
	objects != []
} else := values[0]

first_seen_keys(objects) := {k: firsts[0] |
	some o in objects
	some k, _ in o
	firsts := [x | some o2 in objects; x := o2[k]]
}

# allowed: what any usable policy allows, given the policies' allowed
# sections. [] / {} mean "any" and win; what is of the wrong type counts for
# nothing (a component, key, affinity type or kind left with nothing is
# absent, never "any").
additive(secs) := {comp: v |
	some comp, type in allowed_types
	values := [x | some s in secs; x := s[comp]; type_name(x) == type]
	values != []
	v := union(comp, values)
}

# The union of a component's well-typed values (one or more). Each component
# has its own definitions: a call reads only those of its component. Node
# selectors none of which has a key with a list of values are unioned as
# affinities are (their keys with an object value kept, as types).
union("schedulerNames", values) := names(values)

union("priorityClassNames", values) := names(values)

union("tolerations", values) := v if {
	[v] = values
} else := [] if {
	[] in values
} else := [t | some v in values; some t in v]

union("nodeSelectors", values) := selectors if {
	[v] = values
	selectors := {key: sort({x | some x in list}) | some key, list in v; is_array(list)}
	selectors != {}
} else := {} if {
	{} in values
} else := selectors if {
	# the keys with a list of values, each key's lists unioned
	selectors := {key: names(lists) |
		some key in {key | some v in values; some key, x in v; is_array(x)}
		lists := [x | some v in values; x := v[key]; is_array(x)]
	}
	selectors != {}
} else := affinities(values)

union("affinities", values) := affinities(values)

# Affinities: each type's kinds' rule lists concatenated.
affinities(values) := {} if {
	{} in values
} else := types if {
	types := {t: kinds |
		some t in {t | some v in values; some t, x in v; is_object(x)}
		kinds := affinity_type([x | some v in values; x := v[t]])
	}
	types != {}
}

# Lists of names (or node selector values): [] (any) wins; otherwise every
# name once, sorted.
names(lists) := [] if {
	[] in lists
} else := sort({n | some list in lists; some n in list})

# One affinity type (nodeAffinities, …) as the policies give it.
affinity_type(types) := {} if {
	{} in types
} else := kinds if {
	kinds := {kind: rules |
		some kind in {kind | some x in types; some kind, y in x; is_object(y)}
		rules := affinity_kind([y | some x in types; y := x[kind]])
	}
	kinds != {}
}

# One kind of an affinity type as the policies give it: its rule lists
# (nodeSelectorTerms, podAffinityTerms) concatenated.
affinity_kind(kinds) := {} if {
	{} in kinds
} else := fields if {
	fields := {field: [term | some y2 in kinds; some term in y2[field]] |
		some y in kinds
		is_object(y)
		some field, terms in y
		is_array(terms)
	}
	fields != {}
}
