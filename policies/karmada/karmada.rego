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
#              forbid join the exclude list of clusterAffinity and of every
#              clusterAffinities term (clusterAffinity is created when there is
#              neither). The user's own exclusions stay; nothing else is touched.
#              A binding is never denied (Karmada's controllers write it): when no
#              cluster is allowed every cluster is excluded, the binding says why
#              and the template gets a Warning Event.
#   templates  (setting control_plane "karmada") denied when their requirements
#              are malformed or no cluster satisfies them;
#   policies   a (Cluster)PropagationPolicy denied when, for a template it
#              selects, its explicit clusterNames name only forbidden clusters.
#
# What a binding carries afterwards:
#   fedplace.io/excluded-clusters  the clusters the policy forbids (JSON list)
#   fedplace.io/placement          why, in words: the requirements and the
#                                  excluded clusters, or each cluster's values
#                                  when none is allowed
#   fedplace.io/exclusions-added   the exclude entries the policy added, per
#                                  list ({"clusterAffinity": [...],
#                                  "clusterAffinities/0": [...]}): what the next
#                                  decision may take back. Written by the patch
#                                  only, never by remediation, which compares the
#                                  first two.
#
# Clusters are the replicated Karmada Cluster objects (data.kubernetes.clusters,
# cluster.karmada.io); their region is spec.region, their PCI level the
# pci-compliance-level label. Templates are read from the replicated data
# (setting karmada_templates: kind -> plural, the kinds opa-kube-sync
# replicates). docs/karmada.md has the whole picture.
package io.k8s.federation.karmada

import data.io.k8s.federation.placement
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
	not data.io.k8s.federation.karmada.attached
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

# Clusters the binding must not use. A template not replicated (yet) or with
# malformed requirements may use none: fail closed; remediation narrows the
# binding again once the template is known.
forbidden := f if {
	decided
	f := forbidden_clusters | data.io.k8s.federation.karmada.dependencies_forbidden
}

forbidden_clusters := all_clusters if not template

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

why := msg if {
	decided
	msg := concat("", [why_text, data.io.k8s.federation.karmada.dependencies_why])
}

why_text := sprintf("template %s not replicated (yet): every cluster excluded until it is", [template_text]) if not template

else := sprintf("template %s has malformed placement annotations: %s; every cluster excluded", [template_text, concat("; ", sort(requirement_errors))]) if count(requirement_errors) > 0

else := sprintf("template %s has no placement requirements", [template_text]) if not asks

else := sprintf("no cluster satisfies the placement policy (%s): %s", [requirements_text, values_text]) if count(eligible) == 0

else := sprintf("clusters excluded by the placement policy (%s): %s", [requirements_text, names_text(forbidden)])

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

# What the last decision added, per exclude list (fedplace.io/exclusions-added).
record := r if {
	raw := input.metadata.annotations[added_key]
	json.is_valid(raw)
	r := json.unmarshal(raw)
	is_object(r)
} else := {}

# The exclude lists of the placement, each decided once: record key ->
# {path, current: the list now, added: what the policy adds, new: the list after}.
locations["clusterAffinity"] := location("clusterAffinity", "/spec/placement/clusterAffinity/exclude", affinity) if {
	affinity := placement_spec.clusterAffinity
	is_object(affinity)
}

locations[key] := location(key, sprintf("/spec/placement/clusterAffinities/%d/exclude", [i]), term) if {
	some i, term in placement_spec.clusterAffinities
	is_object(term)
	key := sprintf("clusterAffinities/%d", [i])
}

location(key, path, affinity) := {"path": path, "current": current, "added": added, "new": array.concat(user, added)} if {
	current := exclude_list(affinity)
	user := user_exclusions(key, current)
	added := sort(forbidden - {x | some x in user})
}

exclude_list(affinity) := l if {
	l := affinity.exclude
	is_array(l)
} else := []

previously_added(key) := {x | some x in record[key]} if is_array(record[key])

else := set()

# The user's exclusions in a list: all of it when it no longer holds what the
# policy added (Karmada's detector rewrote it from the PropagationPolicy), else
# the list without the policy's additions. User order kept.
user_exclusions(key, current) := user_list(previously_added(key), current)

user_list(added_before, current) := current if {
	count(added_before - {x | some x in current}) > 0
} else := [x | some x in current; not x in added_before]

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

new_record[key] := loc.added if {
	some key, loc in locations
	count(loc.added) > 0
}

new_record["clusterAffinity"] := sort(forbidden) if {
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

# Every term names clusters, and only clusters forbidden to the template.
names_only_forbidden(forbidden_set) if {
	count(affinity_terms) > 0
	every term in affinity_terms {
		names := object.get(term, "clusterNames", [])
		is_array(names)
		count(names) > 0
		every name in names {
			name in forbidden_set
		}
	}
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
		names_text({n | some term in affinity_terms; some n in term.clusterNames}),
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
