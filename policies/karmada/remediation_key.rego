# Which Karmada bindings remediation may decide alike (Rego v1): the Karmada
# pack's decision_key (policies/lib/remediation.rego, "shared decisions").
#
# A binding's decision annotations and errors are a function of the binding's
# kind, apiVersion and annotations (the packs read the placement annotations
# of any object), of what the placement rule sets read of its template, and of
# data shared by every binding (the clusters, the settings). What a rule set
# may read of a template for its bindings to be decided alike
# (docs/policies.md, "Shared decisions"): the template's apiVersion, kind,
# namespace, labels and annotations, and the labels and annotations of its Namespace
# object; the key holds exactly those. A rule set reading anything else of the
# object (its name, its spec, …) declares `reads_whole_object := true` in its
# package: every binding is then decided alone.
#
# The why names the template only when the template is not replicated, the
# rule sets report errors for it, or it asks for nothing: such a binding has
# no key and is decided alone. So is a binding that propagates its
# dependencies (its exclusions read its template's pod spec: karmada_deps.rego)
# and one whose Scheduled condition is False (it may be stuck, and the stuck
# report names the binding and reads its spec.clusters: karmada_stuck.rego).
# The key holds the whole of spec.placement too, so that a decision that comes
# to read it stays shared correctly. remediation_key_test.rego checks shared
# against separate decisions; a change to what a binding's annotations or
# errors read must be reflected here.
package io.k8s.federation.remediation

import data.io.k8s.federation.karmada
import data.io.k8s.federation.placement
import data.io.k8s.federation.replicated

decision_key(plural, obj) := {
	"binding": [obj.apiVersion, obj.kind],
	"annotations": object.get(obj, ["metadata", "annotations"], {}),
	"placement": object.get(obj, ["spec", "placement"], null),
	"template": key,
} if {
	plural in {"resourcebindings", "clusterresourcebindings"}
	obj.kind in {"ResourceBinding", "ClusterResourceBinding"}
	startswith(obj.apiVersion, "work.karmada.io/")
	not object.get(obj, ["spec", "propagateDeps"], false) == true
	not schedule_failed(obj)
	not rules_read_whole_object
	key := template_key(binding_template(obj.spec.resource))
	decided_by_rules(key)
}

schedule_failed(obj) if {
	some c in object.get(obj, ["status", "conditions"], [])
	c.type == "Scheduled"
	c.status == "False"
}

# Some rule set reads more of an object than template_key holds.
rules_read_whole_object if {
	some name
	data.fedplace.rules[name].reads_whole_object == true
}

# The binding's template as karmada.rego finds it (a kind the pack decides).
binding_template(resource) := t if {
	is_object(karmada.templates)
	plural := karmada.templates[resource.kind]
	karmada.valid_template(resource.kind, plural)
	namespace := object.get(resource, "namespace", "")
	t := template_at(plural, namespace, resource.name)
	t.kind == resource.kind
}

template_at(plural, namespace, name) := replicated.namespaced_object(plural, namespace, name) if namespace != ""

template_at(plural, "", name) := replicated.cluster_object(plural, name)

# The rule sets judge the template without error and ask for placement (else
# the why names the template). They are given what the key holds of the
# template, which is all a rule set may read of it (see the header), so that
# the rule sets are evaluated once per distinct key rather than once per
# binding: OPA caches a function's result by its arguments.
decided_by_rules(key) if {
	template := key_template(key)
	count(placement.constraint_errors) == 0 with input as template
	placement.asks_placement with input as template
}

# A template holding exactly what template_key keeps.
key_template(key) := {
	"apiVersion": key.apiVersion,
	"kind": key.kind,
	"metadata": {"namespace": key.namespace, "labels": key.labels, "annotations": key.annotations},
} if {
	key.namespace != ""
}

key_template(key) := {
	"apiVersion": key.apiVersion,
	"kind": key.kind,
	"metadata": {"labels": key.labels, "annotations": key.annotations},
} if {
	key.namespace == ""
}

# What the rule sets may read of a template (see the header).
template_key(template) := {
	"apiVersion": object.get(template, "apiVersion", ""),
	"kind": template.kind,
	"namespace": namespace,
	"labels": object.get(template, ["metadata", "labels"], {}),
	"annotations": object.get(template, ["metadata", "annotations"], {}),
	"namespace_object": namespace_key(namespace),
} if {
	namespace := object.get(template, ["metadata", "namespace"], "")
}

namespace_key(namespace) := {
	"labels": object.get(ns, ["metadata", "labels"], {}),
	"annotations": object.get(ns, ["metadata", "annotations"], {}),
} if {
	namespace != ""
	ns := replicated.cluster_object("namespaces", namespace)
} else := null
