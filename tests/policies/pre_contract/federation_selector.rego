# Test fixture (tests/policies/test_eu_pci_differential.py): policies/federation/selector.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# Placement of every other federated kind through the federation's cluster
# selector (Rego v1). ReplicaSets keep replica-set-preferences (lib.rego).
#
# The annotation federation.alpha.kubernetes.io/cluster-selector holds a JSON
# list of requirements {"key", "operator", "values"} matched against the
# labels of the Cluster objects, all ANDed, with Kubernetes label-selector
# semantics (operators In, NotIn, Exists, DoesNotExist, Gt, Lt; NotIn and
# DoesNotExist match a cluster without the label; Gt and Lt need the label to
# be an integer). See docs/policies.md, "Other kinds: the cluster selector".
#
# The format matches labels only, never cluster names, so the policy names the
# clusters it allows through an identifying label (setting cluster_name_label,
# default fedplace.io/cluster-name, whose value must be the cluster's name): a
# cluster without it cannot be selected and is not eligible for these kinds.
#
# Settings (optional module, package io.k8s.federation.placement.settings;
# docs/policies.md shows one):
#   selector_kinds      the kinds placed through the cluster selector (default
#                       Deployment, StatefulSet, DaemonSet, Job, ConfigMap,
#                       Secret, Service, Ingress); never ReplicaSet
#   cluster_name_label  the label naming a cluster (default fedplace.io/cluster-name)
#   control_plane       "federation-v1" (default) or "karmada" (lib.rego)
# A malformed setting denies every object asking for placement whose kind is
# not ReplicaSet, naming the setting: never a silent default.
#
# This file's name sorts after lib.rego on purpose: opa-kube-sync loads a
# ConfigMap's keys in order, OPA compiles each module against those already
# loaded, and this module calls lib.rego's functions.
package pre_contract.io.k8s.federation.placement

selector_key := "federation.alpha.kubernetes.io/cluster-selector"

# Who wrote the cluster-name requirements of the selector: "policy" (ignored
# and recomputed by the next decision) or "developer" (kept, restricted to the
# eligible clusters). Same semantics as source_key for replica-set-preferences.
selector_source_key := "fedplace.io/cluster-selector-source"

selector_operators := {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}

# Label keys and values as Kubernetes validates them (a qualified name; a value
# of at most 63 characters, alphanumeric at both ends).
label_key_pattern := `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`

label_value_pattern := `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`

settings_module := "module io.k8s.federation.placement.settings"

# -- settings ---------------------------------------------------------------------

default selector_kinds := ["Deployment", "StatefulSet", "DaemonSet", "Job", "ConfigMap", "Secret", "Service", "Ingress"]

selector_kinds := data.io.k8s.federation.placement.settings.selector_kinds

default cluster_name_label := "fedplace.io/cluster-name"

cluster_name_label := data.io.k8s.federation.placement.settings.cluster_name_label

selector_kinds_collection := selector_kinds if is_array(selector_kinds)

selector_kinds_collection := selector_kinds if is_set(selector_kinds)

settings_errors contains msg if {
	not control_plane in control_planes
	msg := sprintf("placement setting control_plane must be one of %s, got %s (%s)", [concat(", ", sort(control_planes)), json.marshal(control_plane), settings_module])
}

settings_errors contains msg if {
	not selector_kinds_collection
	msg := sprintf("placement setting selector_kinds must be a list of kinds, got %s (%s)", [type_name(selector_kinds), settings_module])
}

settings_errors contains msg if {
	some kind in selector_kinds_collection
	not valid_kind(kind)
	msg := sprintf("placement setting selector_kinds: %s is not a kind (%s)", [json.marshal(kind), settings_module])
}

settings_errors contains msg if {
	"ReplicaSet" in selector_kinds_collection
	msg := sprintf("placement setting selector_kinds must not name ReplicaSet, placed through %s (%s)", [preferences_key, settings_module])
}

settings_errors contains msg if {
	not valid_label_key(cluster_name_label)
	msg := sprintf("placement setting cluster_name_label must be a label key (optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ .), got %s (%s)", [json.marshal(cluster_name_label), settings_module])
}

valid_kind(k) if {
	is_string(k)
	regex.match(`^[A-Z][A-Za-z0-9]*$`, k)
}

# -- which objects ------------------------------------------------------------------

# The object's kind is placed through the cluster selector (settings sound).
selector_kind if {
	not karmada
	count(settings_errors) == 0
	is_string(input.kind)
	input.kind in selector_kinds_collection
}

# The object carries a placement constraint annotation, whatever its kind.
asks_placement if eu_required

asks_placement if pci_required

# (The cheap test first: most objects ask for nothing, and then the settings
# are never checked.)
selector_constrained if {
	asks_placement
	selector_kind
}

# -- the format ---------------------------------------------------------------------

valid_label_key(k) if {
	is_string(k)
	regex.match(label_key_pattern, k)
	key_parts := split(k, "/")
	key_name := key_parts[count(key_parts) - 1]
	count(key_name) <= 63
	count(k) - count(key_name) <= 254
}

valid_label_value(v) if {
	is_string(v)
	count(v) <= 63
	regex.match(label_value_pattern, v)
}

selector_raw := requested[selector_key]

selector_document := json.unmarshal(selector_raw) if {
	is_string(selector_raw)
	json.is_valid(selector_raw)
}

selector_errors contains msg if {
	not is_string(selector_raw)
	msg := sprintf("annotation %s must be a string, got %s", [selector_key, type_name(selector_raw)])
}

selector_errors contains msg if {
	is_string(selector_raw)
	not json.is_valid(selector_raw)
	msg := sprintf("annotation %s is not valid JSON", [selector_key])
}

selector_errors contains msg if {
	doc := selector_document
	not is_array(doc)
	msg := sprintf("annotation %s must be a JSON list of requirements {\"key\", \"operator\", \"values\"}, got %s", [selector_key, type_name(doc)])
}

selector_errors contains msg if {
	doc := selector_document
	is_array(doc)
	some i, r in doc
	problem := requirement_problem(r)
	problem != ""
	msg := sprintf("annotation %s: requirement %d%s: %s", [selector_key, i + 1, requirement_key_text(r), problem])
}

requirement_key_text(r) := sprintf(" (key %s)", [json.marshal(r.key)]) if {
	is_object(r)
	is_string(r.key)
} else := ""

# The values of a well-formed requirement (absent or null: none).
requirement_values(r) := v if {
	v := r.values
	is_array(v)
} else := []

values_malformed(r) if {
	v := object.get(r, "values", null)
	v != null
	not is_array(v)
}

values_malformed(r) if {
	v := object.get(r, "values", null)
	is_array(v)
	some x in v
	not is_string(x)
}

# What is wrong with one requirement, as labels.NewRequirement refuses it
# ("" when nothing is).
requirement_problem(r) := sprintf("must be an object {\"key\", \"operator\", \"values\"}, got %s", [type_name(r)]) if {
	not is_object(r)
} else := sprintf("key must be a label key (optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ .), got %s", [json.marshal(object.get(r, "key", null))]) if {
	not valid_label_key(object.get(r, "key", null))
} else := sprintf("operator must be one of DoesNotExist, Exists, Gt, In, Lt, NotIn, got %s", [json.marshal(object.get(r, "operator", null))]) if {
	not object.get(r, "operator", null) in selector_operators
} else := "values must be a list of strings" if {
	values_malformed(r)
} else := sprintf("operator %s needs at least one value", [r.operator]) if {
	r.operator in {"In", "NotIn"}
	count(requirement_values(r)) == 0
} else := sprintf("operator %s takes no values, got %d", [r.operator, count(requirement_values(r))]) if {
	r.operator in {"Exists", "DoesNotExist"}
	count(requirement_values(r)) > 0
} else := sprintf("operator %s needs exactly one value, got %d", [r.operator, count(requirement_values(r))]) if {
	r.operator in {"Gt", "Lt"}
	count(requirement_values(r)) != 1
} else := sprintf("operator %s needs a whole number (at most 15 digits), got %s", [r.operator, json.marshal(requirement_values(r)[0])]) if {
	r.operator in {"Gt", "Lt"}
	not whole_number(requirement_values(r)[0])
} else := sprintf("value %s is not a label value (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)", [json.marshal(bad[0])]) if {
	bad := [v | some v in requirement_values(r); not valid_label_value(v)]
	count(bad) > 0
} else := ""

# The developer's requirements in one normal form (key, operator, values only
# when the operator takes them): the decision writes them back as they are
# here, so a second decision reads back what the first wrote.
selector_requirements := [normal_requirement(r) | some r in selector_document] if {
	is_array(selector_document)
	count(selector_errors) == 0
} else := []

normal_requirement(r) := {"key": r.key, "operator": r.operator, "values": requirement_values(r)} if {
	r.operator in {"In", "NotIn", "Gt", "Lt"}
} else := {"key": r.key, "operator": r.operator}

# -- matching -------------------------------------------------------------------------

# The labels of replicated cluster `name` ({} when it has none). Called with
# the name, not the cluster: a real OPA server converts a stored object passed
# to a function whole.
cluster_labels(name) := l if {
	l := clusters[name].metadata.labels
	is_object(l)
} else := {}

# Kubernetes label-selector semantics for one (well-formed) requirement.
requirement_matches(r, labels) if {
	r.operator == "In"
	labels[r.key] in r.values
} else if {
	r.operator == "NotIn"
	not object.get(labels, r.key, null) in r.values
} else if {
	r.operator == "Exists"
	r.key in object.keys(labels)
} else if {
	r.operator == "DoesNotExist"
	not r.key in object.keys(labels)
} else if {
	r.operator == "Gt"
	value := labels[r.key]
	whole_number(value)
	number(value) > number(r.values[0])
} else if {
	r.operator == "Lt"
	value := labels[r.key]
	whole_number(value)
	number(value) < number(r.values[0])
} else := false

# The replicated clusters a list of requirements admits (all of them ANDed);
# no requirement admits every cluster. With opa-kube-sync's cluster index
# (lib.rego) each requirement is a set built from the label's values.
matching_clusters(reqs) := cluster_names if {
	count(reqs) == 0
} else := intersection({requirement_clusters(r) | some r in reqs}) if {
	cluster_index_ready
} else := {name |
	some name, _ in clusters
	labels := cluster_labels(name)
	every r in reqs {
		requirement_matches(r, labels)
	}
}

# The clusters one (well-formed) requirement admits, from the cluster index;
# the same as requirement_matches over every cluster.
requirement_clusters(r) := labelled_in(r.key, r.values) if {
	r.operator == "In"
} else := cluster_names - labelled_in(r.key, r.values) if {
	r.operator == "NotIn"
} else := labelled(r.key) if {
	r.operator == "Exists"
} else := cluster_names - labelled(r.key) if {
	r.operator == "DoesNotExist"
} else := union({object.keys(names) |
	some value, names in data.kubernetes_index.clusters.labels[r.key]
	whole_number(value)
	number(value) > number(r.values[0])
}) if {
	r.operator == "Gt"
} else := union({object.keys(names) |
	some value, names in data.kubernetes_index.clusters.labels[r.key]
	whole_number(value)
	number(value) < number(r.values[0])
}) if {
	r.operator == "Lt"
}

# The clusters with label `key` of one of `values`; with label `key` at all.
labelled_in(key, values) := union({object.keys(names) |
	some value in values
	names := data.kubernetes_index.clusters.labels[key][value]
})

labelled(key) := union({object.keys(names) | some names in data.kubernetes_index.clusters.labels[key]})

# The clusters of `candidates` (replicated ones) a list of requirements admits.
admitted(reqs, candidates) := candidates if count(reqs) == 0

else := matching_clusters(reqs) & candidates

# -- the decision's parts ----------------------------------------------------------------

# The rules below that pass over the clusters hold only for an object of a
# selector kind asking for placement, so that reading the whole package
# (fedplace explain, what-if) costs no pass for any other object.

# Eligible clusters the policy can name: labelled with cluster_name_label = their
# name. From the index: every eligible cluster when every cluster is so
# labelled (two counts, the usual case), else the intersection; without it one
# pass over the eligible clusters only, not over all of them.
selector_eligible := eligible_clusters if {
	selector_kind
	cluster_index_ready
	count(data.kubernetes_index.clusters.named_by[cluster_name_label]) == count(data.kubernetes_index.clusters.names)
} else := eligible_clusters & indexed_named_clusters if {
	selector_kind
	cluster_index_ready
} else := {name |
	selector_kind
	some name in eligible_clusters
	cluster_labels(name)[cluster_name_label] == name
}

# The clusters whose cluster_name_label is their name, from the cluster index.
indexed_named_clusters := object.keys(data.kubernetes_index.clusters.named_by[cluster_name_label]) if {
	cluster_index_ready
} else := set()

# D: the developer's requirements on other labels, kept as they are.
developer_requirements := [r | some r in selector_requirements; r.key != cluster_name_label]

# N: requirements on the name label. Written by the policy (source "policy"):
# ignored and recomputed; otherwise the developer's, narrowing the choice.
name_requirements := [r | some r in selector_requirements; r.key == cluster_name_label]

selector_policy_written if requested[selector_source_key] == "policy"

developer_name_requirements := name_requirements if {
	not selector_policy_written
} else := []

developer_selector := array.concat(developer_requirements, developer_name_requirements)

# Eligible clusters the developer's whole selector admits: none is a contradiction.
selector_admitted := admitted(developer_selector, selector_eligible) if selector_constrained

# The clusters the decision names: eligible, and admitted by the developer's N.
selector_allowed := admitted(developer_name_requirements, selector_eligible) if selector_constrained

selector_placeable if {
	count(selector_errors) == 0
	count(selector_admitted) > 0
}

selector := array.concat(developer_requirements, [{
	"key": cluster_name_label,
	"operator": "In",
	"values": sort(selector_allowed),
}]) if {
	selector_constrained
}

selector_source := "developer" if count(developer_name_requirements) > 0

else := "policy"

# -- messages -----------------------------------------------------------------------------

# Clusters that meet the requirements but carry no (or a wrong) name label.
unselectable_eligible := eligible_clusters - selector_eligible if selector_constrained

unselectable_text := sprintf("; %s not selectable, the label %s missing or not the cluster's name", [
	concat(", ", sort(unselectable_eligible)),
	cluster_name_label,
]) if {
	count(unselectable_eligible) > 0
} else := ""

requirement_text(r) := sprintf("%s %s %s", [r.key, r.operator, json.marshal(r.values)]) if {
	r.values
} else := sprintf("%s %s", [r.key, r.operator])

names_text(s) := concat(", ", sort(s)) if count(s) > 0

else := "none"

selector_contradiction_text := msg if {
	selector_constrained
	msg := sprintf(
		"%s admits none of the clusters the placement policy allows: [%s] admits %s; eligible: %s (%s)",
		[
			selector_key,
			concat(", ", [requirement_text(r) | some r in developer_selector]),
			names_text(matching_clusters(developer_selector)),
			names_text(selector_eligible),
			requirements_text,
		],
	)
}

# -- for the explanation (placement_explain.rego) ------------------------------------------
#
# Rules, not functions: placement_explain.rego sorts before this file, and a
# module calling a function of a module not loaded yet fails to compile.

# The developer's selector, each requirement as text.
developer_selector_texts := [requirement_text(r) | some r in developer_selector]

# Per replicated cluster, whether it meets each developer requirement (in order).
developer_selector_matches := {name: [requirement_matches(r, cluster_labels(name)) | some r in developer_selector] |
	selector_constrained
	some name, _ in clusters
}

# The clusters the developer's whole selector admits, and those its
# requirements on other labels admit.
developer_selector_admits := matching_clusters(developer_selector) if selector_constrained

developer_requirements_admit := matching_clusters(developer_requirements) if selector_constrained
