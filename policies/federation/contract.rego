# The placement-rules contract (Rego v1): which clusters an object may use,
# decided by whatever rule sets the administrators load.
#
# A rule set is a package under fedplace.rules (fedplace.rules.<name>, in any
# policy ConfigMap) with up to three partial sets, each evaluated with the
# object being placed as `input` (a workload, or a Karmada binding's template):
#
#   require contains {"id": "pci-level",          # stable requirement id
#                     "requires": "PCI level >= 2",  # optional: what the object requires, in words
#                     "imposed_by": "workload",    # "platform" (default), "namespace" or "workload"
#                     "source": "annotation …: \"2\"",  # optional: where the requirement comes from
#                     "cluster": {"label": "pci-compliance-level", "min": 2}}
#       A cluster must satisfy the condition. Indexed forms (docs/policies.md):
#       a subject — {"label": KEY} or {"property": "region" | "provider" | "zones" | "name"}
#       — and one operator: "in": [strings], "not_in": [strings], "matches": RE2,
#       "min": number, "max": number, "exists": boolean.
#       Labels and regions are answered from opa-kube-sync's cluster index, in
#       time that grows with the clusters a requirement admits (a region
#       requirement confines the label ones to its regions); provider, zones
#       and name read every cluster.
#   forbid contains {"cluster": NAME, "id": …, "requires": …, "imposed_by": …,
#                    "source": …, "value": …}
#       Arbitrary Rego over data.kubernetes.clusters: cost linear in clusters.
#   errors contains "message"
#       The object's own placement request is malformed: it is denied.
#
# A cluster is eligible iff it satisfies every requirement and no forbid names
# it. Rule sets compose by union of prohibitions, so a rule reading a
# workload's own annotations can only narrow what the platform's rules allow.
# A requirement or forbid of the wrong shape is a contract error: every object
# it applies to is denied, naming the rule set (never a silent widening).
#
# This module sorts first in its ConfigMap: lib.rego and selector.rego call its
# functions (OPA compiles each module against those already loaded).
package io.k8s.federation.placement

# A whole number written in at most 15 decimal digits ("0", "02", "12"): exact
# as a Rego number, and safe to convert — number() is only called on such
# strings, so to_number cannot fail (a failing builtin makes the rule undefined
# on an OPA server, silently changing the decision).
whole_number(s) if {
	is_string(s)
	regex.match(`^[0-9]{1,15}$`, s)
}

# The value of a whole_number string.
number(s) := to_number(s)

clusters := data.kubernetes.clusters

cluster_index_ready if data.kubernetes_index.clusters.layout == 2

# Every replicated cluster's name.
cluster_names := object.keys(data.kubernetes_index.clusters.names) if {
	cluster_index_ready
} else := object.keys(clusters) if {
	is_object(clusters)
} else := set()

# -- the rule sets' output ---------------------------------------------------------

contract_subjects := {"label", "property"}

contract_properties := {"region", "provider", "zones", "name"}

contract_operators := {"in", "not_in", "matches", "min", "max", "exists"}

contract_imposers := {"platform", "namespace", "workload"}

# Every requirement of every rule set, with its set's name ("set") and the
# defaults filled in.
rule_requirements contains object.union(
	requirement_defaults(r),
	object.union(r, {"set": name}),
) if {
	some name
	some r in data.fedplace.rules[name].require
	is_object(r)
	is_object(r.cluster)
}

rule_requirements contains {"set": name, "invalid": r} if {
	some name
	some r in data.fedplace.rules[name].require
	not has_object_condition(r)
}

# The defaults of a requirement's optional fields ("requires": the condition
# in words, written only when the rule set gives none).
requirement_defaults(r) := {"imposed_by": "platform", "source": ""} if {
	"requires" in object.keys(r)
} else := {"imposed_by": "platform", "source": "", "requires": condition_text(r.cluster)}

has_object_condition(r) if {
	is_object(r)
	is_object(r.cluster)
}

rule_forbids contains object.union({"imposed_by": "platform", "source": "", "requires": "", "value": null}, object.union(f, {"set": name})) if {
	some name
	some f in data.fedplace.rules[name].forbid
	is_object(f)
}

rule_forbids contains {"set": name, "invalid": f} if {
	some name
	some f in data.fedplace.rules[name].forbid
	not is_object(f)
}

invalid_entry(e) if "invalid" in object.keys(e)

rule_errors contains msg if {
	some name
	some msg in data.fedplace.rules[name].errors
}

# -- the contract, checked --------------------------------------------------------------

# Each requirement's and forbid's problem ("" when none), checked once.
requirement_problems := {r: rule_requirement_problem(r) | some r in rule_requirements}

forbid_problems := {f: rule_forbid_problem(f) | some f in rule_forbids}

contract_errors contains msg if {
	some r, problem in requirement_problems
	problem != ""
	msg := sprintf("placement rule set %s: requirement %s: %s", [r.set, json.marshal(object.get(r, "id", null)), problem])
}

contract_errors contains msg if {
	some f, problem in forbid_problems
	problem != ""
	msg := sprintf("placement rule set %s: forbid %s: %s", [f.set, json.marshal(object.get(f, "id", null)), problem])
}

# (The first case: the usual well-formed requirement, in one pass; the
# others name what is wrong.)
rule_requirement_problem(r) := "" if {
	well_formed_requirement(r)
} else := sprintf("must be an object with a \"cluster\" condition object, got %s", [json.marshal(r.invalid)]) if {
	invalid_entry(r)
} else := "needs a non-empty string \"id\"" if {
	not non_empty_string(object.get(r, "id", null))
} else := sprintf("imposed_by must be one of %s", [concat(", ", sort(contract_imposers))]) if {
	not r.imposed_by in contract_imposers
} else := "\"requires\" and \"source\" must be strings" if {
	not is_string(r.requires)
} else := "\"requires\" and \"source\" must be strings" if {
	not is_string(r.source)
} else := condition_problem(r.cluster)

rule_forbid_problem(f) := sprintf("must be an object, got %s", [json.marshal(f.invalid)]) if {
	invalid_entry(f)
} else := "needs a non-empty string \"id\"" if {
	not non_empty_string(object.get(f, "id", null))
} else := "needs the string \"cluster\" it forbids" if {
	not is_string(object.get(f, "cluster", null))
} else := sprintf("imposed_by must be one of %s", [concat(", ", sort(contract_imposers))]) if {
	not f.imposed_by in contract_imposers
} else := "\"requires\" and \"source\" must be strings" if {
	not is_string(f.requires)
} else := "\"requires\" and \"source\" must be strings" if {
	not is_string(f.source)
} else := ""

well_formed_requirement(r) if {
	not invalid_entry(r)
	non_empty_string(r.id)
	r.imposed_by in contract_imposers
	is_string(r.requires)
	is_string(r.source)
	well_formed_condition(r.cluster)
}

# One subject and one operator of the right types: what condition_problem
# accepts.
well_formed_condition(c) if {
	count(c) == 2
	well_formed_subject(c)
	some op, v in c
	well_formed_operand(op, v, c)
}

well_formed_subject(c) if non_empty_string(c.label)

well_formed_subject(c) if c.property in contract_properties

well_formed_operand("in", v, _) if string_list(v)

well_formed_operand("not_in", v, _) if string_list(v)

well_formed_operand("matches", v, _) if valid_pattern(v)

well_formed_operand("min", v, c) if {
	is_number(v)
	not c.property == "zones"
}

well_formed_operand("max", v, c) if {
	is_number(v)
	not c.property == "zones"
}

well_formed_operand("exists", v, _) if is_boolean(v)

non_empty_string(s) if {
	is_string(s)
	s != ""
}

condition_subjects(c) := {k | some k in contract_subjects; k in object.keys(c)}

condition_operators(c) := {k | some k in contract_operators; k in object.keys(c)}

condition_problem(c) := "the condition needs exactly one subject: \"label\" or \"property\"" if {
	count(condition_subjects(c)) != 1
} else := "the condition needs exactly one operator: in, not_in, matches, min, max or exists" if {
	count(condition_operators(c)) != 1
} else := sprintf("unknown condition key(s) %s", [concat(", ", sort(extra))]) if {
	extra := (object.keys(c) - contract_subjects) - contract_operators
	count(extra) > 0
} else := "\"label\" must be a non-empty string" if {
	"label" in object.keys(c)
	not non_empty_string(c.label)
} else := sprintf("\"property\" must be one of %s", [concat(", ", sort(contract_properties))]) if {
	"property" in object.keys(c)
	not c.property in contract_properties
} else := sprintf("%s takes a list of strings", [op]) if {
	some op in {"in", "not_in"}
	op in object.keys(c)
	not string_list(c[op])
} else := "matches takes a valid RE2 regular expression" if {
	"matches" in object.keys(c)
	not valid_pattern(c.matches)
} else := sprintf("%s takes a number", [op]) if {
	some op in {"min", "max"}
	op in object.keys(c)
	not is_number(c[op])
} else := "min and max do not apply to zones (a cluster has several)" if {
	c.property == "zones"
	some op in {"min", "max"}
	op in object.keys(c)
} else := "exists takes true or false" if {
	"exists" in object.keys(c)
	not is_boolean(c.exists)
} else := ""

string_list(v) if {
	is_array(v)
	every x in v {
		is_string(x)
	}
}

valid_pattern(p) if {
	is_string(p)
	regex.is_valid(p)
}

# The requirements of the contract's shape: only these decide.
valid_requirements := [r |
	some r in rule_requirements
	requirement_problems[r] == ""
]

valid_forbids := [f |
	some f in rule_forbids
	forbid_problems[f] == ""
]

# -- conditions in words --------------------------------------------------------------

condition_subject_text(c) := sprintf("label %s", [c.label]) if is_string(c.label)

else := c.property

condition_text(c) := sprintf("%s in [%s]", [condition_subject_text(c), concat(", ", c["in"])]) if {
	string_list(c["in"])
} else := sprintf("%s not in [%s]", [condition_subject_text(c), concat(", ", c.not_in)]) if {
	string_list(c.not_in)
} else := sprintf("%s matches %s", [condition_subject_text(c), c.matches]) if {
	is_string(c.matches)
} else := sprintf("%s >= %v", [condition_subject_text(c), c.min]) if {
	is_number(c.min)
} else := sprintf("%s <= %v", [condition_subject_text(c), c.max]) if {
	is_number(c.max)
} else := sprintf("%s set", [condition_subject_text(c)]) if {
	c.exists == true
} else := sprintf("%s not set", [condition_subject_text(c)]) if {
	c.exists == false
} else := "a malformed condition"

# -- which clusters satisfy each requirement -------------------------------------------

# satisfying[i]: the names of the clusters satisfying valid_requirements[i],
# from opa-kube-sync's cluster index for labels and regions, else read cluster
# by cluster. The index is read where it is, never passed to a function: a
# real OPA server converts a stored document passed whole.
satisfying[i] := indexed_satisfying(i) if {
	some i, r in valid_requirements
	indexed_subject(r.cluster)
}

satisfying[i] := {name | some name in cluster_names; satisfies(name, r.cluster)} if {
	some i, r in valid_requirements
	not indexed_subject(r.cluster)
}

indexed_subject(c) if {
	cluster_index_ready
	is_string(c.label)
}

indexed_subject(c) if {
	cluster_index_ready
	c.property == "region"
}

# The index's groups for a requirement's subject: {value: {name: true}}.
indexed_groups(i) := data.kubernetes_index.clusters.labels[valid_requirements[i].cluster.label]

indexed_groups(i) := data.kubernetes_index.clusters.regions if valid_requirements[i].cluster.property == "region"

# Clusters that have the subject at all.
indexed_present(i) := union({object.keys(names) | some names in indexed_groups(i)})

default indexed_present_or_empty(_) := set()

indexed_present_or_empty(i) := indexed_present(i)

indexed_satisfying(i) := union({object.keys(names) |
	some v in valid_requirements[i].cluster["in"]
	names := indexed_groups(i)[v]
}) if is_array(valid_requirements[i].cluster["in"])

indexed_satisfying(i) := cluster_names - union({object.keys(names) |
	some v in valid_requirements[i].cluster.not_in
	names := indexed_groups(i)[v]
}) if is_array(valid_requirements[i].cluster.not_in)

indexed_satisfying(i) := union({object.keys(names) |
	some v, names in indexed_groups(i)
	regex.match(valid_requirements[i].cluster.matches, v)
}) if is_string(valid_requirements[i].cluster.matches)

# min and max read a whole-number value; a missing or non-numeric one counts as 0.
indexed_satisfying(i) := cluster_names if {
	valid_requirements[i].cluster.min <= 0
}

indexed_satisfying(i) := union({object.keys(names) |
	some v, names in indexed_groups(i)
	whole_number(v)
	number(v) >= valid_requirements[i].cluster.min
}) if {
	valid_requirements[i].cluster.min > 0
}

indexed_satisfying(i) := set() if {
	valid_requirements[i].cluster.max < 0
}

indexed_satisfying(i) := cluster_names - union({object.keys(names) |
	some v, names in indexed_groups(i)
	whole_number(v)
	number(v) > valid_requirements[i].cluster.max
}) if {
	valid_requirements[i].cluster.max >= 0
}

indexed_satisfying(i) := indexed_present_or_empty(i) & cluster_names if valid_requirements[i].cluster.exists == true

indexed_satisfying(i) := cluster_names - indexed_present_or_empty(i) if valid_requirements[i].cluster.exists == false

# -- one cluster against one condition (the scan, explain and the page) -------------------

# The cluster's value of the condition's subject: a string, a list (zones), or
# undefined when the cluster has none. Called with the name: a real OPA server
# converts a stored object passed to a function whole.
subject_value(name, c) := v if {
	is_string(c.label)
	v := clusters[name].metadata.labels[c.label]
	is_string(v)
}

subject_value(name, c) := v if {
	c.property == "region"
	v := cluster_region(name)
}

subject_value(name, c) := v if {
	c.property == "provider"
	v := clusters[name].spec.provider
	is_string(v)
}

subject_value(name, c) := v if {
	c.property == "zones"
	v := cluster_zones(name)
	count(v) > 0
}

subject_value(name, c) := name if c.property == "name"

# The region as every placement rule reads it: a Federation v1 Cluster's
# status.region, else (no status.region at all) a Karmada Cluster's
# spec.region; none unless that is a string. As opa-kube-sync's cluster index
# reads it: a status.region of another type (false included) means no region.
cluster_region(name) := r if {
	r := clusters[name].status.region
	is_string(r)
} else := r if {
	not status_has_region(name)
	r := clusters[name].spec.region
	is_string(r)
}

status_has_region(name) if {
	status := clusters[name].status
	is_object(status)
	"region" in object.keys(status)
}

# A cluster's zones: a Karmada Cluster's spec.zones and deprecated spec.zone, a
# Federation v1 Cluster's status.zones.
cluster_zones(name) := sort({z |
	some path in [["spec", "zones"], ["status", "zones"]]
	some z in object.get(clusters[name], path, [])
	is_string(z)
} | {z |
	z := clusters[name].spec.zone
	is_string(z)
	z != ""
})

# The value as the page and explain show it (null when the cluster has none).
subject_shown(name, c) := v if {
	v := subject_value(name, c)
} else := null

satisfies(name, c) if {
	not c.property == "zones"
	value_satisfies(subject_shown(name, c), c)
}

satisfies(name, c) if {
	c.property == "zones"
	zones_satisfy(cluster_zones(name), c)
}

value_satisfies(v, c) if {
	is_string(v)
	v in c["in"]
}

value_satisfies(v, c) if {
	is_array(c.not_in)
	not v in c.not_in
}

value_satisfies(v, c) if {
	is_string(v)
	regex.match(c.matches, v)
}

value_satisfies(v, c) if numeric_value(v) >= c.min

value_satisfies(v, c) if numeric_value(v) <= c.max

value_satisfies(v, c) if {
	c.exists == true
	v != null
}

value_satisfies(null, c) if c.exists == false

numeric_value(v) := number(v) if whole_number(v)

else := 0

zones_satisfy(zones, c) if {
	some z in zones
	z in c["in"]
}

zones_satisfy(zones, c) if {
	is_array(c.not_in)
	every z in zones {
		not z in c.not_in
	}
}

zones_satisfy(zones, c) if {
	some z in zones
	regex.match(c.matches, z)
}

zones_satisfy(zones, c) if {
	c.exists == true
	count(zones) > 0
}

zones_satisfy(zones, c) if {
	c.exists == false
	count(zones) == 0
}

# -- the decision ---------------------------------------------------------------------

# The object asks for placement: some rule set requires or forbids something
# of its clusters. (Errors deny the object whether or not it asks.)
asks_placement if count(valid_requirements) > 0

asks_placement if count(valid_forbids) > 0

# Why the object cannot be placed at all: its request is malformed, or a rule
# set breaks the contract.
constraint_errors := rule_errors | contract_errors

forbidden_by_rules := {f.cluster | some f in valid_forbids}

# The clusters the object may use: those satisfying every requirement that no
# forbid names. Each requirement's set (satisfying) holds replicated clusters
# only, so their intersection needs no pass over cluster_names.
eligible_clusters := required_clusters - forbidden_by_rules if {
	count(forbidden_by_rules) > 0
} else := required_clusters

required_clusters := confined_clusters if {
	regions_confine
} else := intersection({s | some s in satisfying}) if {
	count(valid_requirements) > 0
} else := cluster_names

# -- the index path: requirements confined to the regions they allow ---------------------
#
# When every requirement is indexed and one of them fails a cluster without a
# region (region in / matches / exists), only clusters of the qualifying
# regions can be eligible: each label requirement is answered from the index's
# region_labels groups of those regions alone, so that the sets built hold the
# answer rather than every cluster with the label ("EU and PCI >= 2" is the
# union of the EU regions' groups at levels 2 and up, nothing intersected).

regions_confine if {
	cluster_index_ready
	every r in valid_requirements {
		indexed_subject(r.cluster)
	}
	some r in valid_requirements
	r.cluster.property == "region"
	not value_satisfies(null, r.cluster)
}

# The regions every region requirement allows.
qualifying_regions := {v |
	some v, _ in data.kubernetes_index.clusters.regions
	every r in valid_requirements {
		region_allows(r.cluster, v)
	}
}

region_allows(c, _) if not c.property == "region"

region_allows(c, v) if {
	c.property == "region"
	value_satisfies(v, c)
}

# Label requirements a cluster without the label fails (in, matches, min > 0,
# max < 0, exists: true), and those it satisfies (the others).
confining_labels := [c | some r in valid_requirements; c := r.cluster; is_string(c.label); not value_satisfies(null, c)]

permissive_labels := [c | some r in valid_requirements; c := r.cluster; is_string(c.label); value_satisfies(null, c)]

# The clusters of the qualifying regions the confining label requirements
# allow, region by region. In a region where every cluster satisfies a
# requirement (its groups' sizes add up to the region's: counts, no names
# read) the requirement is left out there, so a rule every cluster of the
# region meets (a tenant's own region, an allowed country) costs no set.
confined_base := union({region_confined(v) | some v in qualifying_regions})

region_confined(v) := s if {
	restricting := restricting_labels(v)
	count(restricting) > 0
	s := intersection({regional_label_clusters(v, c) | some c in restricting})
} else := object.keys(data.kubernetes_index.clusters.regions[v])

restricting_labels(v) := [c | some c in confining_labels; not covers_region(v, c)]

covers_region(v, c) if {
	sum([count(names) |
		some w, names in data.kubernetes_index.clusters.region_labels[v][c.label]
		value_satisfies(w, c)
	]) == count(data.kubernetes_index.clusters.regions[v])
}

# The clusters of region v a confining label requirement allows.
regional_label_clusters(v, c) := union({object.keys(names) |
	some w, names in data.kubernetes_index.clusters.region_labels[v][c.label]
	value_satisfies(w, c)
})

# The clusters of the qualifying regions a permissive label requirement refuses.
confined_refused := union({object.keys(names) |
	some c in permissive_labels
	some v in qualifying_regions
	some w, names in data.kubernetes_index.clusters.region_labels[v][c.label]
	not value_satisfies(w, c)
})

confined_clusters := confined_base - confined_refused if {
	count(permissive_labels) > 0
} else := confined_base

# The object's whole judgement, for a caller that reads it with `input`
# replaced by another object (a Karmada binding's template): one evaluation
# instead of one per rule. eligible is empty unless the object asks for
# placement and has no errors.
judgement := {
	"errors": constraint_errors,
	"asks": judged_asks,
	"eligible": judged_eligible,
	"requirements_text": requirements_text,
}

default judged_asks := false

judged_asks := true if asks_placement

judged_eligible := eligible_clusters if {
	asks_placement
	count(constraint_errors) == 0
} else := set()

# What the object requires, in words, for messages: every requirement's and
# forbid's text, sorted, once each.
requirements_text := concat(", ", sort({t |
	some r in valid_requirements
	t := r.requires
} | {t |
	some f in valid_forbids
	t := f.requires
	t != ""
}))

# -- why, per cluster (explain and the page; linear in clusters) ---------------------------

# Each requirement the cluster fails and each forbid naming it, as a reason:
# {"set", "id", "requires", "imposed_by", "source", "value"}.
cluster_reasons[name] := reasons if {
	some name in cluster_names
	reasons := array.concat(
		[reason |
			some i, r in valid_requirements
			not name in satisfying[i]
			reason := {
				"set": r.set, "id": r.id, "requires": r.requires, "imposed_by": r.imposed_by,
				"source": r.source, "value": subject_shown(name, r.cluster),
			}
		],
		[reason |
			some f in valid_forbids
			f.cluster == name
			reason := {
				"set": f.set, "id": f.id, "requires": f.requires, "imposed_by": f.imposed_by,
				"source": f.source, "value": f.value,
			}
		],
	)
}

# Every requirement checked against every cluster, satisfied or not:
# {"set", "id", "requires", "imposed_by", "source", "subject", "value", "ok"}.
cluster_checks[name] := checks if {
	some name in cluster_names
	checks := array.concat(
		[check |
			some i, r in valid_requirements
			check := {
				"set": r.set, "id": r.id, "requires": r.requires, "imposed_by": r.imposed_by,
				"source": r.source, "subject": condition_subject_text(r.cluster),
				"value": subject_shown(name, r.cluster), "ok": name in satisfying[i],
			}
		],
		[check |
			some f in valid_forbids
			f.cluster == name
			check := {
				"set": f.set, "id": f.id, "requires": f.requires, "imposed_by": f.imposed_by,
				"source": f.source, "subject": "rule", "value": f.value, "ok": false,
			}
		],
	)
}
