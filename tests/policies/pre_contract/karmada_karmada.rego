# Test fixture (tests/policies/test_eu_pci_differential.py): policies/karmada/karmada.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# Karmada placement (Rego v1): the federation placement rules (policies/federation)
# deciding which clusters a Karmada workload may use.
#
# A workload on karmada-apiserver is a resource template (a Deployment, …) that
# may carry the placement annotations the federation policy reads
# (policy.federation.alpha.kubernetes.io/eu-jurisdiction-required and
# …/pci-compliance-level). Karmada's detector writes one ResourceBinding (or
# ClusterResourceBinding) per template, copying spec.placement from the
# PropagationPolicy that selects it; Karmada's scheduler picks spec.clusters from
# that placement. This pack:
#
#   bindings   narrows spec.placement: the clusters the template's requirements
#              forbid join every exclude list the scheduler reads: that of
#              clusterAffinity, else those of every clusterAffinities term and
#              of each of its overflowAffinities tiers (clusterAffinity is
#              created when there is none). The user's own exclusions stay;
#              nothing else is touched. A binding is never denied (Karmada's
#              controllers write it): when no cluster is allowed every cluster
#              is excluded, the binding says why and the template gets a
#              Warning Event. A binding decided before whose template cannot be
#              judged (not replicated, malformed requirements, its kind's
#              setting broken) keeps the exclusions decided last.
#   templates  (setting control_plane "karmada") denied when their requirements
#              are malformed or no cluster satisfies them;
#   policies   a (Cluster)PropagationPolicy denied when, for a template it
#              selects, its explicit clusterNames (overflow tiers included)
#              name only forbidden clusters.
#
# What a binding carries afterwards:
#   fedplace.io/excluded-clusters  the clusters the policy forbids: a JSON list,
#                                  or {"allExcept": [...]} (every cluster but
#                                  those) when that is shorter
#   fedplace.io/placement          why, in words: the requirements and the
#                                  excluded clusters (bounded), or each
#                                  cluster's values when none is allowed
#   fedplace.io/exclusions-added   the record, per list the policy added to
#                                  ({"clusterAffinity": {"user": n, "digest": d},
#                                  "clusterAffinities/0/overflowAffinities/1":
#                                  ...}): the list written began with n user
#                                  entries and had digest d. Written by the
#                                  patch only, never by remediation, which
#                                  compares the first two.
#
# The user's entries of a list: those the binding's replicated
# (Cluster)PropagationPolicy holds in the same list, and all of a list the
# record does not describe (Karmada's detector rewrote it), else its first n.
#
# Clusters are the replicated Karmada Cluster objects (data.kubernetes.clusters,
# cluster.karmada.io); their region is spec.region, their PCI level the
# pci-compliance-level label. Templates are read from the replicated data
# (setting karmada_templates: kind -> plural, the kinds opa-kube-sync
# replicates). docs/karmada.md has the whole picture.
package pre_contract.io.k8s.federation.karmada

import data.pre_contract.io.k8s.federation.placement
import data.io.k8s.federation.replicated

excluded_key := "fedplace.io/excluded-clusters"

added_key := "fedplace.io/exclusions-added"

why_key := "fedplace.io/placement"

# JSON Pointer of the record annotation (RFC 6901: "/" is written "~1").
added_pointer := "/metadata/annotations/fedplace.io~1exclusions-added"

# Most clusters whose values fedplace.io/placement lists.
values_shown := 20

# -- settings ---------------------------------------------------------------------

# The template kinds (kind -> plural) the pack decides: by default the kinds
# deploy/ replicates. A binding of a kind named here whose template is not
# replicated excludes every cluster, so name only kinds opa-kube-sync
# replicates (--replicate); bindings of other kinds are left alone.
default templates := {
	"Deployment": "deployments",
	"StatefulSet": "statefulsets",
	"DaemonSet": "daemonsets",
	"ReplicaSet": "replicasets",
	"Job": "jobs",
	"ConfigMap": "configmaps",
	"Secret": "secrets",
	"Service": "services",
	"Ingress": "ingresses",
}

templates := data.io.k8s.federation.placement.settings.karmada_templates

templates_valid if {
	is_object(templates)
	every kind, plural in templates {
		valid_template(kind, plural)
	}
}

valid_template(kind, plural) if {
	is_string(kind)
	regex.match(`^[A-Z][A-Za-z0-9]*$`, kind)
	is_string(plural)
	regex.match(`^[a-z0-9][-a-z0-9.]*$`, plural)
}

settings_errors contains msg if {
	not templates_valid
	msg := sprintf("placement setting karmada_templates must map kinds to the plural opa-kube-sync replicates them under, got %s (%s)", [json.marshal(templates), placement.settings_module])
}

# -- clusters -----------------------------------------------------------------------

all_clusters := placement.cluster_names

cluster_values(name) := sprintf("%s (region %s, %s %s)", [name, region, placement.pci_label, level]) if {
	cluster := placement.clusters[name]
	region := object.get(cluster, ["spec", "region"], "none")
	level := object.get(cluster, ["metadata", "labels", placement.pci_label], "none")
}

names_text(names) := concat(", ", sort(names)) if count(names) > 0

else := "none"

# -- bindings ---------------------------------------------------------------------

binding if {
	input.kind in {"ResourceBinding", "ClusterResourceBinding"}
	startswith(input.apiVersion, "work.karmada.io/")
}

resource := object.get(input, ["spec", "resource"], {})

resource_namespace := object.get(resource, "namespace", "")

template_text := sprintf("%s %s/%s", [resource.kind, resource_namespace, resource.name]) if resource_namespace != ""

else := sprintf("%s %s", [resource.kind, resource.name])

# The entry of the binding's kind, checked alone (a remediation pass decides
# thousands of bindings, each in a scope of its own: the whole map's check
# would run for each).
template_plural := plural if {
	is_object(templates)
	plural := templates[resource.kind]
	valid_template(resource.kind, plural)
}

# The policy decides a binding whose template is of a kind it knows.
decided if {
	binding
	not data.pre_contract.io.k8s.federation.karmada.attached
	template_plural
}

template := t if {
	resource_namespace != ""
	t := replicated.namespaced_object(template_plural, resource_namespace, resource.name)
	t.kind == resource.kind
}

template := t if {
	resource_namespace == ""
	t := replicated.cluster_object(template_plural, resource.name)
	t.kind == resource.kind
}

# The template's requirements, read by the federation rules with the template as input.
requirement_errors := e if {
	e := placement.constraint_errors with input as template
}

asks if {
	placement.asks_placement with input as template
}

eligible := e if {
	e := placement.eligible_clusters with input as template
}

requirements_text := t if {
	t := placement.requirements_text with input as template
}

# -- the last decision, from the binding's own annotations ---------------------------

# The clusters fedplace.io/excluded-clusters names: a JSON list of names, or
# {"allExcept": [names]} (every cluster known now but those). Undefined when the
# binding has none or it is unreadable: the binding was never decided.
last_excluded := s if {
	v := json.unmarshal(input.metadata.annotations[excluded_key])
	is_array(v)
	s := {x | some x in v; is_string(x)}
} else := s if {
	v := json.unmarshal(input.metadata.annotations[excluded_key])
	is_array(v.allExcept)
	s := all_clusters - {x | some x in v.allExcept}
}

decided_before if last_excluded

# -- what the binding must not use -------------------------------------------------------

# The binding's kind has no usable karmada_templates entry (the setting is not
# an object, or the kind's plural is malformed).
kind_setting_broken if not is_object(templates)

kind_setting_broken if {
	is_object(templates)
	plural := templates[resource.kind]
	not valid_template(resource.kind, plural)
}

# A binding decided before whose template cannot be judged now keeps what
# was decided last: its template not replicated (yet), its requirements
# malformed, or the setting naming its kind broken.
keeping if {
	decided_before
	not template
}

keeping if {
	decided_before
	count(requirement_errors) > 0
}

# A decided binding of a kind whose setting is broken is decided (keeping);
# other bindings of such a kind, never decided, are left alone.
decided if {
	binding
	kind_setting_broken
	decided_before
}

# Clusters the binding must not use. A template not replicated (yet) or with
# malformed requirements may use none on a binding never decided (fail
# closed); a binding decided before keeps its last exclusions. Remediation
# narrows the binding again once the template is known.
forbidden := f if {
	decided
	f := forbidden_clusters | data.pre_contract.io.k8s.federation.karmada.dependencies_forbidden
}

forbidden_clusters := last_excluded if keeping

else := all_clusters if not template

else := all_clusters if count(requirement_errors) > 0

else := set() if not asks

else := all_clusters - eligible

unsatisfiable if {
	decided
	template
	count(requirement_errors) == 0
	asks
	count(eligible) == 0
}

# fedplace.io/excluded-clusters: the smaller of the two lists, so that a
# binding excluding all but a few of thousands of clusters stays small.
excluded_value := sort(forbidden) if {
	count(forbidden) <= count(all_clusters - forbidden)
} else := {"allExcept": sort(all_clusters - forbidden)}

why := msg if {
	decided
	msg := concat("", [why_text, data.pre_contract.io.k8s.federation.karmada.dependencies_why])
}

kept_text := sprintf("the %d cluster(s) excluded when the binding was last decided stay excluded", [count(forbidden)])

why_text := sprintf("placement setting karmada_templates names no valid plural for %s: %s", [resource.kind, kept_text]) if {
	keeping
	kind_setting_broken
} else := sprintf("template %s not replicated (yet): %s until it is", [template_text, kept_text]) if {
	keeping
	not template
} else := sprintf("template %s has malformed placement annotations: %s; %s", [template_text, concat("; ", sort(requirement_errors)), kept_text]) if {
	keeping
} else := sprintf("template %s not replicated (yet): every cluster excluded until it is", [template_text]) if {
	not template
} else := sprintf("template %s has malformed placement annotations: %s; every cluster excluded", [template_text, concat("; ", sort(requirement_errors))]) if {
	count(requirement_errors) > 0
} else := sprintf("template %s has no placement requirements", [template_text]) if {
	not asks
} else := sprintf("no cluster satisfies the placement policy (%s): %s", [requirements_text, values_text]) if {
	count(eligible) == 0
} else := sprintf("clusters excluded by the placement policy (%s): %s", [requirements_text, excluded_text])

# The excluded clusters in words, bounded: their names when few, else the
# allowed ones when few, else a count and the first names (the exact set is
# fedplace.io/excluded-clusters).
excluded_text := names_text(forbidden) if {
	count(forbidden) <= values_shown
} else := sprintf("%d of %d clusters, every one but %s", [count(forbidden), count(all_clusters), names_text(all_clusters - forbidden)]) if {
	count(all_clusters - forbidden) <= values_shown
} else := sprintf("%d of %d clusters: %s and %d more", [
	count(forbidden), count(all_clusters),
	concat(", ", [n | some i, n in sort(forbidden); i < values_shown]),
	count(forbidden) - values_shown,
])

values_text := concat("; ", array.concat(shown, more)) if {
	names := sort(all_clusters)
	shown := [cluster_values(name) | some i, name in names; i < values_shown]
	more := [sprintf("and %d more", [count(names) - values_shown]) | count(names) > values_shown]
}

unsatisfiable_event := {
	"object": {
		"apiVersion": object.get(resource, "apiVersion", ""),
		"kind": resource.kind,
		"namespace": resource_namespace,
		"name": resource.name,
		"uid": object.get(resource, "uid", ""),
	},
	"type": "Warning",
	"reason": "PlacementUnsatisfiable",
	"message": sprintf("%s %s: %s", [input.kind, input.metadata.name, why]),
} if {
	unsatisfiable
}

# -- the binding's patch ------------------------------------------------------------

placement_spec := object.get(input, ["spec", "placement"], null)

# The record (fedplace.io/exclusions-added): per exclude list fedplace wrote,
# {"user": n, "digest": d}: the list it wrote began with n entries of the
# user's and had the digest d. Older records held the added names instead
# (a list); they are still read.
record := r if {
	r := json.unmarshal(input.metadata.annotations[added_key])
	is_object(r)
} else := {}

# A list's digest: the first 16 hex digits of the SHA-256 of its JSON.
list_digest(l) := substring(crypto.sha256(json.marshal(l)), 0, 16)

# The PropagationPolicy or ClusterPropagationPolicy the binding's placement was
# copied from (Karmada's detector names it in the binding's annotations), when
# replicated.
source_policy := p if {
	annotations := object.get(input, ["metadata", "annotations"], {})
	p := replicated.namespaced_object(
		"propagationpolicies",
		annotations["propagationpolicy.karmada.io/namespace"],
		annotations["propagationpolicy.karmada.io/name"],
	)
	p.kind == "PropagationPolicy"
} else := p if {
	p := replicated.cluster_object("clusterpropagationpolicies", input.metadata.annotations["clusterpropagationpolicy.karmada.io/name"])
	p.kind == "ClusterPropagationPolicy"
}

source_placement := p if {
	p := source_policy.spec.placement
	is_object(p)
} else := {}

# The exclude lists of the placement the scheduler reads, each decided once:
# record key -> {path, current: the list now, user: the user's entries in it,
# added: what the policy adds, new: the list after}. clusterAffinity when set
# (the scheduler then ignores clusterAffinities), else every clusterAffinities
# term and every overflowAffinities tier of each term.
locations["clusterAffinity"] := location(
	"clusterAffinity",
	"/spec/placement/clusterAffinity/exclude",
	affinity,
	object.get(source_placement, "clusterAffinity", {}),
) if {
	affinity := placement_spec.clusterAffinity
	is_object(affinity)
}

locations[key] := location(key, sprintf("/spec/placement/clusterAffinities/%d/exclude", [i]), term, policy_term(i)) if {
	some i, term in placement_spec.clusterAffinities
	is_object(term)
	key := sprintf("clusterAffinities/%d", [i])
}

locations[key] := location(
	key,
	sprintf("/spec/placement/clusterAffinities/%d/overflowAffinities/%d/exclude", [i, j]),
	tier,
	policy_tier(i, j),
) if {
	some i, term in placement_spec.clusterAffinities
	is_object(term)
	some j, tier in term.overflowAffinities
	is_object(tier)
	key := sprintf("clusterAffinities/%d/overflowAffinities/%d", [i, j])
}

policy_term(i) := t if {
	t := source_placement.clusterAffinities[i]
	is_object(t)
} else := {}

policy_tier(i, j) := t if {
	t := source_placement.clusterAffinities[i].overflowAffinities[j]
	is_object(t)
} else := {}

location(key, path, affinity, policy_affinity) := {
	"path": path,
	"current": current,
	"user": user,
	"added": added,
	"new": array.concat(user, added),
} if {
	current := exclude_list(affinity)
	user := user_list(current, own_entries(key, current) - {x | some x in exclude_list(policy_affinity)})
	added := sort(forbidden - {x | some x in user})
}

exclude_list(affinity) := l if {
	l := affinity.exclude
	is_array(l)
} else := []

# The entries of a list that fedplace added: the tail after the user's n
# entries when the list is exactly the one fedplace wrote (the record's
# digest); none when anyone else wrote it since (Karmada's detector rewrote it
# from the PropagationPolicy: all of it is the user's). An entry the
# PropagationPolicy's own list holds is the user's in any case.
own_entries(key, current) := {x | some i, x in current; i >= r.user} if {
	r := record[key]
	is_number(r.user)
	r.digest == list_digest(current)
} else := added_before if {
	is_array(record[key])
	added_before := {x | some x in record[key]}
	count(added_before - {x | some x in current}) == 0
} else := set()

user_list(current, own) := [x | some x in current; not x in own]

exclusion_ops contains {"op": "add", "path": loc.path, "value": loc.new} if {
	some loc in locations
	loc.new != loc.current
	count(loc.new) > 0
}

exclusion_ops contains {"op": "remove", "path": loc.path} if {
	some loc in locations
	count(loc.current) > 0
	count(loc.new) == 0
}

exclusion_ops contains {"op": "add", "path": "/spec/placement/clusterAffinity", "value": {"exclude": sort(forbidden)}} if {
	count(locations) == 0
	count(forbidden) > 0
	is_object(placement_spec)
}

exclusion_ops contains {"op": "add", "path": "/spec/placement", "value": {"clusterAffinity": {"exclude": sort(forbidden)}}} if {
	count(locations) == 0
	count(forbidden) > 0
	not is_object(placement_spec)
}

new_record[key] := {"user": count(loc.user), "digest": list_digest(loc.new)} if {
	some key, loc in locations
	count(loc.added) > 0
}

new_record["clusterAffinity"] := {"user": 0, "digest": list_digest(sort(forbidden))} if {
	count(locations) == 0
	count(forbidden) > 0
}

record_ops contains {"op": "add", "path": added_pointer, "value": value} if {
	value := json.marshal(new_record)
	value != object.get(input, ["metadata", "annotations", added_key], "{}")
}

# The exclusions first, then the record (its parent, metadata.annotations, exists:
# the decision's annotations are merged before any pack's patch).
patch := array.concat(
	[op | some op in exclusion_ops],
	[op | some op in record_ops],
) if {
	decided
}

# -- templates (control_plane "karmada") --------------------------------------------

karmada_type if regex.match(`^[^/]*karmada\.io/`, input.apiVersion)

template_kind if {
	placement.karmada
	is_string(input.kind)
	not karmada_type
	templates_valid
	templates[input.kind]
}

template_errors contains msg if {
	template_kind
	some msg in placement.constraint_errors
}

template_errors contains msg if {
	template_kind
	count(placement.constraint_errors) == 0
	placement.asks_placement
	count(placement.eligible_clusters) == 0
	msg := sprintf("no cluster satisfies the placement policy (%s)", [placement.requirements_text])
}

template_errors contains msg if {
	placement.karmada
	placement.asks_placement
	not karmada_type
	some msg in settings_errors
}

# -- (Cluster)PropagationPolicies -----------------------------------------------------

propagation_policy if {
	input.kind in {"PropagationPolicy", "ClusterPropagationPolicy"}
	startswith(input.apiVersion, "policy.karmada.io/")
}

# The affinity terms of the policy's placement: clusterAffinity, else every
# clusterAffinities term.
affinity_terms := [a] if {
	a := input.spec.placement.clusterAffinity
	is_object(a)
} else := terms if {
	terms := input.spec.placement.clusterAffinities
	is_array(terms)
} else := []

# A term's affinities: the term itself and each of its overflowAffinities tiers
# (each with its own clusterNames).
term_affinities(term) := array.concat([term], [tier | some tier in object.get(term, "overflowAffinities", [])])

# Every term names clusters, and only clusters forbidden to the template, in
# the term itself and in every overflow tier.
names_only_forbidden(forbidden_set) if {
	count(affinity_terms) > 0
	every term in affinity_terms {
		every affinity in term_affinities(term) {
			names := object.get(affinity, "clusterNames", [])
			is_array(names)
			count(names) > 0
			every name in names {
				name in forbidden_set
			}
		}
	}
}

# Every cluster the policy's affinities name.
named_clusters := {n |
	some term in affinity_terms
	some affinity in term_affinities(term)
	some n in object.get(affinity, "clusterNames", [])
}

policy_errors contains msg if {
	propagation_policy
	templates_valid
	some t in selected_templates
	count(placement.constraint_errors) == 0 with input as t
	placement.asks_placement with input as t
	allowed := placement.eligible_clusters with input as t
	names_only_forbidden(all_clusters - allowed)
	text := placement.requirements_text with input as t
	msg := sprintf("%s %s places %s %s only on clusters the placement policy forbids (%s): %s", [
		input.kind, input.metadata.name, t.kind, object_text(t), text,
		names_text(named_clusters),
	])
}

object_text(obj) := sprintf("%s/%s", [obj.metadata.namespace, obj.metadata.name]) if obj.metadata.namespace

else := obj.metadata.name

# Templates a policy selects: by name, else by label selector, else every
# template of the kind; a PropagationPolicy in its own namespace, a
# ClusterPropagationPolicy in the selector's namespace or in all of them.
selected_templates contains t if {
	some rs in object.get(input, ["spec", "resourceSelectors"], [])
	plural := templates[rs.kind]
	some t in candidates(rs, plural)
	is_object(t)
	t.kind == rs.kind
	t.apiVersion == rs.apiVersion
	selects(rs, t)
}

candidates(_, plural) := objects if {
	input.kind == "PropagationPolicy"
	objects := replicated.collection(plural)[input.metadata.namespace]
}

candidates(rs, plural) := objects if {
	input.kind == "ClusterPropagationPolicy"
	rs.namespace
	objects := replicated.collection(plural)[rs.namespace]
}

candidates(rs, plural) := [t | some _, objects in replicated.collection(plural); some _, t in objects] if {
	input.kind == "ClusterPropagationPolicy"
	not rs.namespace
}

selects(rs, t) if t.metadata.name == rs.name

selects(rs, t) if {
	not rs.name
	rs.labelSelector
	labels_match(rs.labelSelector, object.get(t, ["metadata", "labels"], {}))
}

selects(rs, _) if {
	not rs.name
	not rs.labelSelector
}

# Kubernetes label-selector semantics: matchLabels and matchExpressions, ANDed.
labels_match(selector, labels) if {
	every key, value in object.get(selector, "matchLabels", {}) {
		labels[key] == value
	}
	every expr in object.get(selector, "matchExpressions", []) {
		expression_matches(expr, labels)
	}
}

expression_matches(expr, labels) if {
	expr.operator == "In"
	labels[expr.key] in expr.values
}

expression_matches(expr, labels) if {
	expr.operator == "NotIn"
	not labels[expr.key] in expr.values
}

expression_matches(expr, labels) if {
	expr.operator == "Exists"
	labels[expr.key]
}

expression_matches(expr, labels) if {
	expr.operator == "DoesNotExist"
	not labels[expr.key]
}
