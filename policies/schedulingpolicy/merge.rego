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
# authorisations that apply):
#
#   "smart"  (default) required and default: first seen wins per component,
#            and per key for the keyed ones (node selectors, affinities);
#            allowed: additive (the union; an "any" wins).
#   "first"  the first policy alone.
#   "simple" first seen wins per component, in every section.
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

aliases := {
	"required": {"priorityClasseNames": "priorityClassNames"},
	"allowed": {"priorityClasseNames": "priorityClassNames"},
	"default": {"priorityClasseName": "priorityClassName"},
}

empty := {"required": {}, "allowed": {}, "default": {}}

# ---- normalisation ---------------------------------------------------------

# (The usual spec, with no alias and nothing to rewrite in its default, takes
# a shorter path: its sections as they are, which is what the general case
# gives it.)
normalize(spec) := {"required": r, "allowed": a, "default": d} if {
	is_object(spec)
	given := {name: x | some name in sections; x := spec[name]; is_object(x)}
	r := object.get(given, "required", {})
	a := object.get(given, "allowed", {})
	d := object.get(given, "default", {})
	count(object.filter(r, aliases.required)) == 0
	count(object.filter(a, aliases.allowed)) == 0
	count(object.filter(d, aliases["default"])) == 0
	not rewritten(d)
} else := {
	"required": renamed(section(spec, "required"), aliases.required),
	"allowed": renamed(section(spec, "allowed"), aliases.allowed),
	"default": normalized_default(renamed(section(spec, "default"), aliases["default"])),
}

section(spec, name) := s if {
	is_object(spec)
	s := spec[name]
	is_object(s)
} else := {}

# Aliases renamed; when both spellings are given the correct one wins (the
# validation refuses such a spec anyway). Without an alias (the usual case),
# the section as it is.
renamed(obj, names) := obj if {
	count(object.filter(obj, names)) == 0
} else := {out: v |
	some k, v in obj
	out := object.get(names, k, k)
	not alias_shadowed(obj, k, out)
}

alias_shadowed(obj, k, out) if {
	k != out
	out in object.keys(obj)
}

# (A default with no toleration listing values and no node affinity is kept
# as it is: the rewriting below would give it back unchanged.)
normalized_default(d) := object.union(d, object.union(tolerations, affinity)) if {
	rewritten(d)
	tolerations := {"tolerations": ts |
		is_array(d.tolerations)
		ts := [t | some t0 in d.tolerations; some t in expand_toleration(t0)]
	}
	affinity := {"affinity": a |
		is_object(d.affinity)
		is_object(d.affinity.nodeAffinity)
		a := object.union(d.affinity, {"nodeAffinity": node_affinity_k8s(d.affinity.nodeAffinity)})
	}
} else := d

rewritten(d) if {
	is_array(d.tolerations)
	some t in d.tolerations
	is_object(t)
	is_array(t.values)
}

rewritten(d) if {
	is_object(d.affinity)
	is_object(d.affinity.nodeAffinity)
}

# {"key": "k", "values": ["a", "b"], …} → one toleration per value.
expand_toleration(t) := [object.union(object.remove(t, ["values"]), {"value": v}) | some v in t.values] if {
	is_object(t)
	is_array(t.values)
} else := [t]

required_kind := "requiredDuringSchedulingIgnoredDuringExecution"

preferred_kind := "preferredDuringSchedulingIgnoredDuringExecution"

node_affinity_k8s(na) := object.union(na, fixed) if {
	fixed := {k: v |
		some k in [required_kind, preferred_kind]
		v := node_kind_k8s(k, na[k])
	}
}

node_kind_k8s(kind, req) := object.union(req, {"nodeSelectorTerms": [term_k8s(t) | some t in req.nodeSelectorTerms]}) if {
	kind == required_kind
	is_object(req)
	is_array(req.nodeSelectorTerms)
}

node_kind_k8s(kind, prefs) := [pref_k8s(p) | some p in prefs] if {
	kind == preferred_kind
	is_array(prefs)
}

pref_k8s(p) := object.union(p, {"preference": term_k8s(p.preference)}) if {
	is_object(p)
	is_object(p.preference)
} else := p

term_k8s(t) := object.union(t, {"matchExpressions": [expression_k8s(e) | some e in t.matchExpressions]}) if {
	is_object(t)
	is_array(t.matchExpressions)
} else := t

# The seed writes one default expression as {"keys": ["k"], "operators": ["In"], …}.
expression_k8s(e) := object.union(object.remove(e, ["keys", "operators"]), {"key": e.keys[0], "operator": e.operators[0]}) if {
	is_object(e)
	not e.key
	not e.operator
	is_array(e.keys)
	count(e.keys) == 1
	is_array(e.operators)
	count(e.operators) == 1
} else := e

# ---- merging ---------------------------------------------------------------

# (One else chain: the cases exclude each other, and the chain stops at the
# first that holds.)
merged(specs, option) := empty if {
	count(specs) == 0
} else := specs[0] if {
	option == "first"
} else := specs[0] if {
	# One policy: every option gives it as it is.
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

first_values(specs, sec) := {comp: v |
	some comp in components[sec]
	v := first_value(specs, sec, comp)
}

first_value(specs, sec, comp) := values[0] if {
	values := [v | some s in specs; v := s[sec][comp]]
	count(values) > 0
}

# (When a single policy has anything in the section, its components as they
# are: what the general case gives then.)
first_seen(specs, sec) := object.filter(given[0], components[sec]) if {
	given := [x | some s in specs; x := s[sec]; is_object(x); count(x) > 0]
	count(given) == 1
} else := {comp: v |
	some comp in components[sec]
	v := first_seen_component(specs, sec, comp)
}

first_seen_component(specs, sec, comp) := merged_keys if {
	comp in keyed
	objs := [v | some s in specs; v := s[sec][comp]; is_object(v)]
	count(objs) > 0
	merged_keys := {k: first |
		some o in objs
		some k, _ in o
		firsts := [v | some o2 in objs; v := o2[k]]
		first := firsts[0]
	}
} else := first_value(specs, sec, comp)

# allowed: what any usable policy allows. [] / {} mean "any" and win.
additive(specs) := {comp: v |
	some comp in components.allowed
	values := [x | some s in specs; x := s.allowed[comp]]
	count(values) > 0
	v := union_of(comp, values)
}

union_of(comp, values) := [] if {
	comp in {"schedulerNames", "priorityClassNames", "tolerations"}
	[] in values
} else := sort({n | some v in values; is_array(v); some n in v}) if {
	comp in {"schedulerNames", "priorityClassNames"}
} else := [r | some v in values; is_array(v); some r in v] if {
	comp == "tolerations"
} else := {} if {
	{} in values
} else := {k: selector_values(values, k) |
	some v in values
	is_object(v)
	some k, _ in v
} if {
	comp == "nodeSelectors"
} else := {t: affinity_type_union(values, t) |
	some v in values
	is_object(v)
	some t, _ in v
} if {
	comp == "affinities"
}

selector_values(values, k) := [] if {
	some v in values
	v[k] == []
} else := sort({x | some v in values; is_array(v[k]); some x in v[k]})

affinity_type_union(values, t) := {} if {
	some v in values
	v[t] == {}
} else := {kind: affinity_kind_union(values, t, kind) |
	some v in values
	is_object(v[t])
	some kind, _ in v[t]
}

# A kind's rule lists (nodeSelectorTerms, podAffinityTerms) concatenated.
affinity_kind_union(values, t, kind) := {} if {
	some v in values
	v[t][kind] == {}
} else := {field: [term | some v2 in values; term := v2[t][kind][field][_]] |
	some v in values
	is_object(v[t][kind])
	some field, terms in v[t][kind]
	is_array(terms)
}
