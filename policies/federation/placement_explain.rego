# Why the placement policy decides what it decides (Rego v1): the explanation
# document beside the decision, read by `fedplace explain`.
#
# Query: POST /v1/data/io/k8s/federation/explain/packs with {"input": <object>}
# (the object exactly as admission sees it). Every pack adds its own key to
# `packs`; this module adds "placement" (Karmada's bindings and policies, and
# every object on Karmada, are the "karmada" pack's: policies/karmada/karmada_explain.rego).
# With a rule set "tiers" requiring, of a workload annotated with a tier, the
# cluster label tier in that list:
#
#   {"applies": true,
#    "summary": "label tier in [gold]: 2 of 5 clusters eligible",
#    "requirements": [{"name": "tier", "label": "label tier", "required": "label tier in [gold]",
#                      "source": "annotation example.com/tier: \"gold\"",
#                      "imposed_by": "workload", "set": "tiers"}, …],
#    "clusters": {"cluster-b": {"eligible": false, "selected": false,
#                 "checks": [{"requirement": "tier", "label": "label tier", "value": "silver",
#                             "required": "label tier in [gold]", "ok": false, "imposed_by": "workload",
#                             "set": "tiers"}, …]}, …}}
#
# The requirements and checks are the placement rule sets' (contract.rego):
# "name"/"requirement" is a requirement's id, "label" the cluster property it
# reads ("label KEY", "region", …; "rule" for a forbid), "value" the cluster's
# (null when it has none), "required" what the object requires, in words.
#
# The contract (docs/policies.md, "The explanation contract") is generic: a
# pack explains object-level `checks` and/or per-cluster `clusters`, each check
# naming the requirement, the value found and the value required. Kinds placed
# through the cluster selector (selector.rego) get the same document, plus the
# requirement "cluster-name-label" (the label the policy selects clusters by)
# and, when the developer wrote a selector, "cluster-selector"; per cluster, a
# check of the name label and one per developer requirement.
#
# Only evaluated when asked: the admission package and the remediation library
# never read it. It calls lib.rego's functions but only reads selector.rego's
# rules: opa-kube-sync loads a ConfigMap's keys in name order and OPA compiles
# each module against those already loaded (a call to a function not loaded
# yet fails to compile; a rule not loaded yet is merely undefined until it is).
package io.k8s.federation.explain

import data.io.k8s.federation.placement

packs["placement"] := doc if {
	placement.applies
	not placement.constrained
	doc := {
		"applies": true,
		"summary": "no placement requirements (no rule set requires or forbids anything of its clusters): the policy leaves replica-set-preferences alone (any cluster)",
		"requirements": [],
		"clusters": {},
	}
}

packs["placement"] := doc if {
	placement.constrained
	doc := {
		"applies": true,
		"summary": placement_summary,
		"requirements": placement_requirements,
		"clusters": placement_clusters,
	}
}

packs["placement"] := doc if {
	not placement.applies
	not placement.selector_kind
	not placement_karmada_explained
	doc := {
		"applies": false,
		"summary": placement_not_applying_summary,
	}
}

# Kinds placed through the cluster selector (selector.rego).
packs["placement"] := doc if {
	placement.selector_kind
	not placement.selector_constrained
	doc := {
		"applies": true,
		"summary": sprintf("no placement requirements (no rule set requires or forbids anything of its clusters): the policy leaves %s alone (any cluster)", [placement.selector_key]),
		"requirements": [],
		"clusters": {},
	}
}

packs["placement"] := doc if {
	placement.selector_constrained
	doc := {
		"applies": true,
		"summary": selector_summary,
		"requirements": array.concat(placement_requirements, selector_requirements),
		"clusters": selector_clusters,
	}
}

# Karmada's bindings and (Cluster)PropagationPolicies (decided in either control
# plane) and every object on Karmada (setting control_plane) are explained by the
# "karmada" pack (policies/karmada/karmada_explain.rego); this pack says nothing of them.
# Rules of policies/karmada/ read by their data path: undefined, not a compile
# error, while that ConfigMap is not loaded.
placement_karmada_explained if placement.karmada

placement_karmada_explained if data.io.k8s.federation.karmada.binding

placement_karmada_explained if data.io.k8s.federation.karmada.propagation_policy

placement_not_applying_summary := sprintf("the placement policy constrains ReplicaSets only (%s) through replica-set-preferences, and the kinds %s through the cluster selector (setting selector_kinds)", [
	placement_kind,
	concat(", ", sort([k | some k in placement.selector_kinds_collection])),
]) if {
	count(placement.settings_errors) == 0
} else := sprintf("the placement policy constrains ReplicaSets only (%s): its settings are malformed, so no other kind is placed: %s", [
	placement_kind,
	concat("; ", sort(placement.settings_errors)),
])

placement_kind := sprintf("this is a %s", [k]) if {
	k := input.kind
	is_string(k)
} else := "the object has no kind"

# -- requirements ----------------------------------------------------------------

# Every requirement and forbid of the placement rule sets (contract.rego), in
# the explanation contract's words: "name" is the requirement id, "label" the
# cluster property it reads, plus who imposed it and the rule set.
placement_requirements := array.concat(
	[{
		"name": r.id, "label": placement.condition_subject_text(r.cluster), "required": r.requires,
		"source": r.source, "imposed_by": r.imposed_by, "set": r.set,
	} |
		some r in placement.valid_requirements
	],
	[{
		"name": f.id, "label": "rule", "required": f.requires,
		"source": f.source, "imposed_by": f.imposed_by, "set": f.set,
	} |
		some f in placement.valid_forbids
	],
)

# -- per cluster ------------------------------------------------------------------

# The clusters the decision's replica-set-preferences lists (none when the
# decision denies: no eligible cluster, or the developer names a forbidden one).
placement_selected contains name if {
	count(placement.eligible_clusters) > 0
	count(placement.developer_clusters - placement.eligible_clusters) == 0
	chosen := object.get(placement.preferences, "clusters", {})
	is_object(chosen)
	some name, _ in chosen
	name in placement.eligible_clusters
}

placement_clusters := {name: entry |
	known := placement.clusters
	is_object(known)
	some name, cluster in known
	is_object(cluster)
	checks := placement_rule_checks(name)
	entry := object.union(
		{
			"eligible": placement_member(name, placement.eligible_clusters),
			"selected": placement_member(name, placement_selected),
			"checks": checks,
		},
		placement_requested(name),
	)
}

placement_member(x, s) if x in s

else := false

# When the developer set replica-set-preferences: whether they name this cluster.
placement_requested(name) := {"requested": placement_member(name, placement.developer_clusters)} if {
	count(placement.developer_clusters) > 0
} else := {}

# The rule sets' checks of one cluster (contract.rego's cluster_checks), in the
# explanation contract's words.
placement_rule_checks(name) := [{
	"requirement": c.id, "label": c.subject, "value": c.value, "required": c.requires, "ok": c.ok,
	"imposed_by": c.imposed_by, "set": c.set,
} |
	some c in placement.cluster_checks[name]
]

# Every cluster's checks, {name: [check]}: what the Karmada pack shows
# (karmada_explain.rego reads it with a template as input).
placement_rule_checks_by_cluster := {name: placement_rule_checks(name) | some name, _ in placement.cluster_checks}

# -- summary ------------------------------------------------------------------------

placement_summary := sprintf("%s: %d of %d clusters eligible%s", [
	placement.requirements_text,
	count(placement.eligible_clusters),
	count(placement_clusters),
	placement_developer_summary,
])

placement_developer_summary := sprintf("; the developer's replica-set-preferences names %d, %d of them forbidden", [
	count(placement.developer_clusters),
	count(placement.developer_clusters - placement.eligible_clusters),
]) if {
	count(placement.developer_clusters) > 0
} else := ""

# -- the cluster selector (other kinds) -------------------------------------------------

# The name label the policy selects clusters by, and the developer's selector.
selector_requirements := array.concat(
	[{
		"name": "cluster-name-label",
		"label": placement.cluster_name_label,
		"required": "= the cluster's name",
		"source": "the cluster selector matches labels only; setting cluster_name_label, default fedplace.io/cluster-name",
	}],
	[r | some r in [selector_developer_requirement]],
)

selector_developer_requirement := {
	"name": "cluster-selector",
	"label": "cluster selector",
	"required": concat(", ", placement.developer_selector_texts),
	"source": sprintf("annotation %s: %s", [placement.selector_key, json.marshal(placement.requested[placement.selector_key])]),
} if {
	count(placement.developer_selector) > 0
}

# The clusters the decision's selector admits (none when it denies).
selector_selected := placement.selector_allowed & placement.developer_requirements_admit if {
	placement.selector_placeable
} else := set()

selector_clusters := {name: entry |
	known := placement.clusters
	is_object(known)
	some name, cluster in known
	is_object(cluster)
	labels := selector_labels(cluster)
	checks := array.concat(
		placement_rule_checks(name),
		array.concat([selector_name_check(name, labels)], selector_developer_checks(name, labels)),
	)
	entry := object.union(
		{
			"eligible": placement_member(name, placement.selector_eligible),
			"selected": placement_member(name, selector_selected),
			"checks": checks,
		},
		selector_requested(name),
	)
}

selector_requested(name) := {"requested": placement_member(name, placement.developer_selector_admits)} if {
	count(placement.developer_selector) > 0
} else := {}

selector_name_check(name, labels) := {
	"requirement": "cluster-name-label",
	"label": placement.cluster_name_label,
	"value": labels[placement.cluster_name_label],
	"required": name,
	"ok": true,
} if {
	labels[placement.cluster_name_label] == name
} else := {
	"requirement": "cluster-name-label",
	"label": placement.cluster_name_label,
	"value": labels[placement.cluster_name_label],
	"required": name,
	"ok": false,
	"note": "names another cluster: the policy cannot select this one",
} if {
	is_string(labels[placement.cluster_name_label])
} else := {
	"requirement": "cluster-name-label",
	"label": placement.cluster_name_label,
	"value": "",
	"required": name,
	"ok": false,
	"note": "label missing: the policy cannot select this cluster",
}

selector_labels(cluster) := l if {
	l := cluster.metadata.labels
	is_object(l)
} else := {}

selector_developer_checks(name, labels) := [c |
	some i, r in placement.developer_selector
	c := object.union(
		{
			"requirement": "cluster-selector",
			"label": r.key,
			"value": object.get(labels, r.key, ""),
			"required": trim_space(trim_prefix(placement.developer_selector_texts[i], r.key)),
			"ok": placement.developer_selector_matches[name][i],
		},
		selector_absent_note(r, labels),
	)
]

selector_absent_note(r, labels) := {} if {
	r.key in object.keys(labels)
} else := {"note": "label absent"}

selector_summary := sprintf("%s: %d of %d clusters eligible (selectable through label %s)%s", [
	placement.requirements_text,
	count(placement.selector_eligible),
	count(selector_clusters),
	placement.cluster_name_label,
	selector_developer_summary,
])

selector_developer_summary := sprintf("; the developer's cluster selector admits %d of them", [count(placement.selector_admitted)]) if {
	count(placement.developer_selector) > 0
} else := ""
