# Why the Karmada pack decides what it decides (Rego v1): its part of the
# explanation document beside the decision, read by `fedplace explain`.
#
# Query: POST /v1/data/io/k8s/federation/explain/packs with {"input": <object>}.
# placement_explain.rego adds packs["placement"]; this module adds
# packs["karmada"] for
#
#   a ResourceBinding / ClusterResourceBinding (either control plane, as
#     karmada.rego decides them in both): the template it names, the
#     template's requirements, per cluster each requirement with the cluster's
#     value and whether the decision excludes it, and what the binding's
#     exclude lists have and would get (with a rule set "tiers" requiring the
#     cluster label tier in the list the template's annotation names):
#
#     {"applies": true,
#      "summary": "Deployment shop/web: label tier in [gold]: 2 of 3 clusters allowed, 1 excluded (c-3); the decision adds 1 exclusion(s)",
#      "template": {"kind": "Deployment", "namespace": "shop", "name": "web", "replicated": true},
#      "requirements": [{"name": "tier", "label": "label tier", "required": "label tier in [gold]",
#                        "source": "annotation example.com/tier: \"gold\"",
#                        "imposed_by": "workload", "set": "tiers"}],
#      "checks": [{"requirement": "template", …, "ok": true}],
#      "clusters": {"c-3": {"eligible": false, "excluded": true, "scheduled": false,
#                            "exclusion": "added", "flags": ["excluded: the decision adds it"],
#                            "checks": [{"requirement": "tier", "label": "label tier",
#                                        "value": "silver", "required": "label tier in [gold]", "ok": false,
#                                        "imposed_by": "workload", "set": "tiers"}]}, …},
#      "excluded": ["c-3"],                    # the decision's fedplace.io/excluded-clusters
#      "annotated": null,                      # the binding's, now (null: it has none)
#      "why": "clusters excluded by …",        # the decision's fedplace.io/placement
#      "every_cluster_excluded": false,
#      "exclusions": [{"list": "clusterAffinity", "path": "/spec/placement/clusterAffinity/exclude",
#                      "has": ["zz-user"], "after": ["zz-user", "c-3"], "added": ["c-3"],
#                      "removed": [], "policy": ["c-3"], "user": ["zz-user"]}],
#      "stuck": [],                            # scheduled clusters the scheduler kept though forbidden
#      "warnings": []}                         # what needs an operator: a stuck placement (karmada_stuck.rego)
#
#     A cluster's "exclusion" is "has" (excluded, and every exclude list of
#     the binding already holds it), "added" (excluded: the decision's patch
#     adds it), "taken back" (allowed again: the patch removes the policy's
#     earlier exclusion) or "user" (allowed by the policy, excluded by the
#     binding's own placement); absent otherwise. "flags" says the same in
#     words, with "scheduled" when Karmada's scheduler put the binding there
#     (spec.clusters).
#   a template on Karmada (setting control_plane "karmada"): its requirements
#     and per cluster the checks, "eligible" being the clusters its bindings
#     may use; the summary says when the template is denied;
#   a (Cluster)PropagationPolicy (either control plane): per template it
#     selects, whether its clusterNames name an allowed cluster;
#   a binding the dependencies distributor generated (no spec.placement):
#     "applies": false, saying it is left alone (karmada_deps.rego);
#   anything else on Karmada: "applies": false, saying what the policy decides there.
#
# The requirements and per-cluster checks are the placement rule sets'
# (contract.rego), in the shape placement_explain.rego gives them, evaluated
# with the template as input.
#
# Only evaluated when asked. It calls karmada.rego's functions, so its name sorts
# after karmada.rego: opa-kube-sync loads a ConfigMap's keys in name order and
# OPA compiles each module against those already loaded (a call to a function
# not loaded yet fails to compile). It calls no function of policies/federation,
# which another ConfigMap holds, and only reads its rules. The package is
# shared with placement_explain.rego: every name here starts with karmada_.
package io.k8s.federation.explain

import data.io.k8s.federation.karmada
import data.io.k8s.federation.placement

packs["karmada"] := karmada_binding_doc if karmada.decided

packs["karmada"] := {"applies": false, "summary": karmada_undecided_summary} if {
	karmada.binding
	not karmada.decided
}

packs["karmada"] := karmada_template_doc if {
	not karmada.binding
	karmada.template_kind
}

packs["karmada"] := karmada_policy_doc if karmada.propagation_policy

packs["karmada"] := {"applies": false, "summary": karmada_other_summary} if {
	placement.karmada
	not karmada.binding
	not karmada.template_kind
	not karmada.propagation_policy
}

# placement_explain.rego's "placement" pack stands down for the objects explained
# here (its placement_karmada_explained).

# -- what the policy leaves alone ----------------------------------------------------

karmada_kinds_text := concat(", ", sort([k | some k, _ in karmada.templates])) if karmada.templates_valid

else := "none: the setting is malformed"

karmada_undecided_summary := sprintf("a binding Karmada's dependencies distributor generated for %s (no spec.placement; it follows the bindings in spec.requiredBy): left alone, the clusters its requirements forbid are excluded from the bindings that take it along (propagateDeps)", [karmada.template_text]) if {
	karmada.attached
} else := sprintf("the placement policy leaves bindings of %s alone: it decides the template kinds %s (setting karmada_templates)", [
	karmada_resource_kind,
	karmada_kinds_text,
])

karmada_resource_kind := k if {
	k := karmada.resource.kind
	is_string(k)
} else := "a template of no kind"

karmada_other_summary := sprintf("on Karmada (setting control_plane) the placement policy narrows the bindings of templates of the kinds %s and denies such templates when no cluster satisfies them; this is a %s", [
	karmada_kinds_text,
	karmada_input_kind,
]) if {
	count(karmada.settings_errors) == 0
} else := sprintf("on Karmada (setting control_plane) the placement policy decides templates and their bindings, but its settings are malformed: %s", [concat("; ", sort(karmada.settings_errors))])

karmada_input_kind := sprintf("%v", [input.kind]) if input.kind

else := "object without a kind"

# -- the object whose annotations hold the requirements -----------------------------------

# The binding's template (when replicated), or the template itself.
karmada_subject := karmada.template if karmada.binding

karmada_subject := input if {
	not karmada.binding
	karmada.template_kind
}

karmada_errors := e if {
	e := placement.constraint_errors with input as karmada_subject
}

# The subject can be judged: it is known and the rule sets report no error for it.
karmada_judged if count(karmada_errors) == 0

karmada_asks if {
	karmada_judged
	placement.asks_placement with input as karmada_subject
}

karmada_requirements_text := t if {
	t := placement.requirements_text with input as karmada_subject
} else := "no requirements"

# -- requirements and checks (the rule sets', contract.rego) ---------------------------------

# placement_explain.rego's rules, read with the subject as input by their data
# path (rules of another ConfigMap: undefined, never a compile error, until it is loaded).
karmada_requirements := r if {
	karmada_asks
	r := data.io.k8s.federation.explain.placement_requirements with input as karmada_subject
} else := []

karmada_cluster_checks := c if {
	karmada_asks
	c := data.io.k8s.federation.explain.placement_rule_checks_by_cluster with input as karmada_subject
} else := {}

karmada_checks(name) := object.get(karmada_cluster_checks, name, [])

# -- per cluster ------------------------------------------------------------------------------

karmada_known_clusters := {name: cluster |
	known := placement.clusters
	is_object(known)
	some name, cluster in known
	is_object(cluster)
}

karmada_member(x, s) if x in s

else := false

# -- bindings -----------------------------------------------------------------------------------

karmada_template_ref := {
	"kind": karmada_resource_kind,
	"namespace": karmada.resource_namespace,
	"name": object.get(karmada.resource, "name", ""),
	"replicated": karmada_member(true, {true | karmada.template}),
}

karmada_forbidden := {x | some x in karmada.forbidden}

karmada_allowed := {name | some name, _ in karmada_known_clusters} - karmada_forbidden

karmada_every_cluster_excluded if {
	count(karmada_known_clusters) > 0
	count(karmada_allowed) == 0
}

karmada_binding_doc := {
	"applies": true,
	"summary": karmada_binding_summary,
	"template": karmada_template_ref,
	"requirements": karmada_requirements,
	"checks": karmada_binding_checks,
	"clusters": karmada_binding_clusters,
	"excluded": sort(karmada.forbidden),
	"annotated": karmada_annotated,
	"why": karmada.why,
	"every_cluster_excluded": karmada_member(true, {true | karmada_every_cluster_excluded}),
	"exclusions": karmada_exclusion_lists,
	"stuck": sort(karmada.stuck_clusters),
	"warnings": [karmada.stuck_message | karmada.stuck],
}

# The clusters the binding's fedplace.io/excluded-clusters names now (either
# form: a list, or {"allExcept": [...]}); null: none, or unreadable.
karmada_annotated := sort(karmada.last_excluded) if karmada.decided_before

else := null

# Object-level: is the template replicated, and do the rule sets judge it without error.
karmada_binding_checks := array.concat([karmada_template_check], [c | some c in karmada_annotation_checks])

karmada_template_check := {
	"requirement": "template",
	"label": "template",
	"value": karmada.template_text,
	"required": "replicated",
	"ok": true,
} if {
	karmada.template
} else := {
	"requirement": "template",
	"label": "template",
	"value": karmada.template_text,
	"required": "replicated",
	"ok": false,
	"note": "not replicated (yet): every cluster excluded until it is; is its kind replicated (setting karmada_templates)?",
}

karmada_annotation_checks contains {
	"requirement": "annotations",
	"label": "template's placement errors",
	"value": msg,
	"required": "none",
	"ok": false,
	"note": "every cluster excluded",
} if {
	karmada.binding
	some msg in karmada_errors
}

karmada_scheduled := {c.name |
	some c in object.get(input, ["spec", "clusters"], [])
	is_object(c)
	is_string(c.name)
}

karmada_binding_clusters := {name: entry |
	some name, _ in karmada_known_clusters
	status := karmada_exclusion(name)
	entry := object.union(
		{
			"eligible": karmada_member(name, karmada_allowed),
			"excluded": karmada_member(name, karmada_forbidden),
			"scheduled": karmada_member(name, karmada_scheduled),
			"checks": karmada_checks(name),
			"flags": array.concat(
				[f | some f in [karmada_exclusion_flags[status]]],
				["scheduled" | name in karmada_scheduled],
			),
		},
		{"exclusion": status | status != ""},
	)
}

karmada_exclusion_flags := {
	"has": "excluded: the binding has it",
	"added": "excluded: the decision adds it",
	"taken back": "exclusion taken back",
	"user": "excluded by the binding's own placement",
}

# A cluster's place in the binding's exclude lists (see the header).
karmada_exclusion(name) := "has" if {
	name in karmada_forbidden
	count(karmada_current_lists) > 0
	every l in karmada_current_lists {
		name in l.has
	}
} else := "added" if {
	name in karmada_forbidden
} else := "taken back" if {
	some l in karmada_exclusion_lists
	name in l.removed
} else := "user" if {
	some l in karmada_exclusion_lists
	name in l.user
} else := ""

# -- the binding's exclude lists ---------------------------------------------------------------

# The lists the binding has now (karmada.locations: record key -> {path, current}).
karmada_current_lists := [{"list": key, "path": loc.path, "has": loc.current} | some key, loc in karmada.locations]

# Each list, what it has and what it holds after the decision's patch.
karmada_exclusion_lists := [karmada_list_entry(key, loc.path, loc.current, karmada_after(loc), loc.user) |
	some key, loc in karmada.locations
] if {
	count(karmada.locations) > 0
} else := [karmada_list_entry("clusterAffinity", "/spec/placement/clusterAffinity/exclude", [], sort(karmada.forbidden), [])] if {
	count(karmada.forbidden) > 0
} else := []

karmada_list_entry(key, path, has, after, user) := {
	"list": key,
	"path": path,
	"has": has,
	"after": after,
	"added": [x | some x in after; not x in has],
	"removed": [x | some x in has; not x in after],
	"policy": [x | some x in after; not x in user],
	"user": user,
}

# A list after the patch: the value the patch adds at its path, empty when the
# patch removes it, else unchanged.
karmada_after(loc) := op.value if {
	some op in karmada.exclusion_ops
	op.path == loc.path
	op.op == "add"
} else := [] if {
	some op in karmada.exclusion_ops
	op.path == loc.path
	op.op == "remove"
} else := loc.current

karmada_added_count := count({[l.list, x] | some l in karmada_exclusion_lists; some x in l.added})

karmada_removed_count := count({[l.list, x] | some l in karmada_exclusion_lists; some x in l.removed})

karmada_change_text := sprintf("; the decision adds %d and takes back %d exclusion(s)", [karmada_added_count, karmada_removed_count]) if {
	karmada_added_count > 0
	karmada_removed_count > 0
} else := sprintf("; the decision adds %d exclusion(s)", [karmada_added_count]) if {
	karmada_added_count > 0
} else := sprintf("; the decision takes back %d exclusion(s)", [karmada_removed_count]) if {
	karmada_removed_count > 0
} else := "; the binding's exclude lists already hold them" if {
	count(karmada_forbidden) > 0
} else := ""

karmada_binding_summary := sprintf("%s: %s", [karmada.template_text, karmada.why]) if {
	not karmada_judged
} else := sprintf("%s has no placement requirements: no cluster excluded%s", [karmada.template_text, karmada_change_text]) if {
	not karmada_asks
} else := sprintf("%s: %s: every cluster excluded (0 of %d allowed): the workload can run nowhere%s", [
	karmada.template_text,
	karmada_requirements_text,
	count(karmada_known_clusters),
	karmada_change_text,
]) if {
	count(karmada_allowed) == 0
} else := sprintf("%s: %s: %d of %d clusters allowed, %d excluded (%s)%s", [
	karmada.template_text,
	karmada_requirements_text,
	count(karmada_allowed),
	count(karmada_known_clusters),
	count(karmada_forbidden),
	karmada.names_text(karmada_forbidden),
	karmada_change_text,
])

# -- templates on Karmada --------------------------------------------------------------------

karmada_eligible := e if {
	e := placement.eligible_clusters with input as karmada_subject
} else := set()

karmada_template_doc := {
	"applies": true,
	"summary": karmada_template_summary,
	"requirements": karmada_requirements,
	"checks": [c | some c in karmada_template_checks],
	"clusters": karmada_template_clusters,
	"warnings": [m | some m in [karmada.template_stuck_message]],
}

karmada_template_checks contains {
	"requirement": "annotations",
	"label": "placement errors",
	"value": msg,
	"required": "none",
	"ok": false,
} if {
	some msg in karmada_errors
}

karmada_template_clusters := {name: entry |
	karmada_asks
	some name, _ in karmada_known_clusters
	entry := {
		"eligible": karmada_member(name, karmada_eligible),
		"checks": karmada_checks(name),
	}
}

karmada_template_summary := sprintf("placement errors: the template is denied (%s)", [concat("; ", sort(karmada_errors))]) if {
	not karmada_judged
} else := "no placement requirements: its bindings exclude no cluster" if {
	not karmada_asks
} else := sprintf("%s: no cluster satisfies them (0 of %d): the template is denied", [karmada_requirements_text, count(karmada_known_clusters)]) if {
	count(karmada_eligible) == 0
} else := sprintf("%s: %d of %d clusters allowed; its bindings exclude the others", [
	karmada_requirements_text,
	count(karmada_eligible),
	count(karmada_known_clusters),
])

# -- (Cluster)PropagationPolicies ----------------------------------------------------------------

karmada_policy_doc := {
	"applies": true,
	"summary": karmada_policy_summary,
	"checks": [c | some c in karmada_policy_checks],
}

karmada_policy_names := {n |
	some term in karmada.affinity_terms
	some n in object.get(term, "clusterNames", [])
}

karmada_policy_checks contains check if {
	karmada.templates_valid
	some t in karmada.selected_templates
	count(placement.constraint_errors) == 0 with input as t
	placement.asks_placement with input as t
	allowed := placement.eligible_clusters with input as t
	text := placement.requirements_text with input as t
	check := {
		"requirement": "allowed-cluster",
		"label": sprintf("%s %s", [t.kind, karmada.object_text(t)]),
		"value": sprintf("clusterNames %s", [karmada.names_text(karmada_policy_names)]),
		"required": sprintf("an allowed cluster (%s: %s)", [text, karmada.names_text(allowed)]),
		"ok": karmada_policy_ok(karmada.all_clusters - allowed),
	}
}

karmada_policy_ok(forbidden) if not karmada.names_only_forbidden(forbidden)

else := false

karmada_policy_summary := sprintf("denied: its clusterNames name only forbidden clusters for %d of the templates it selects", [count(karmada.policy_errors)]) if {
	count(karmada.policy_errors) > 0
} else := sprintf("admitted: it selects %d template(s) asking for placement; its clusterNames name an allowed cluster for each (or name none)", [count(karmada_policy_checks)])
