# Which Karmada bindings remediation may decide alike (Rego v1): the Karmada
# pack's decision_key (policies/lib/remediation.rego, "shared decisions").
#
# A binding's decision annotations and errors are a function of the binding's
# kind, apiVersion and annotations (the packs read the placement annotations
# of any object), of its template's kind and its two requirement annotations,
# and of data shared by every binding (the clusters, the settings). The why
# names the template only when the template is not replicated, its requirements
# are malformed, or it asks for nothing: such a binding has no key and is
# decided alone. So is a binding that propagates its dependencies (its
# exclusions read its template's pod spec: karmada_deps.rego) and one whose
# Scheduled condition is False (it may be stuck, and the stuck report names the
# binding and reads its spec.clusters: karmada_stuck.rego). The key holds the
# whole of spec.placement too, so that a decision that comes to read it stays
# shared correctly. remediation_key_test.rego
# checks shared against separate decisions; a change to what a binding's
# annotations or errors read must be reflected here.
package io.k8s.federation.remediation

import data.io.k8s.federation.karmada
import data.io.k8s.federation.placement
import data.io.k8s.federation.replicated

decision_key(plural, obj) := {
	"binding": [obj.apiVersion, obj.kind],
	"annotations": object.get(obj, ["metadata", "annotations"], {}),
	"placement": object.get(obj, ["spec", "placement"], null),
	"template": [resource.kind, requirements],
} if {
	plural in {"resourcebindings", "clusterresourcebindings"}
	obj.kind in {"ResourceBinding", "ClusterResourceBinding"}
	startswith(obj.apiVersion, "work.karmada.io/")
	not object.get(obj, ["spec", "propagateDeps"], false) == true
	not schedule_failed(obj)
	resource := obj.spec.resource
	template := binding_template(resource)
	requirements := plain_requirements(object.get(template, ["metadata", "annotations"], {}))
}

schedule_failed(obj) if {
	some c in object.get(obj, ["status", "conditions"], [])
	c.type == "Scheduled"
	c.status == "False"
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

# The two requirements when they are well formed and ask for something, else undefined.
plain_requirements(annotations) := [eu, pci] if {
	eu := object.get(annotations, placement.eu_key, null)
	pci := object.get(annotations, placement.pci_key, null)
	eu in {null, "true", "false"}
	well_formed_pci(pci)
	asks(eu, pci)
}

well_formed_pci(null)

well_formed_pci(pci) if placement.whole_number(pci)

asks("true", _)

asks(_, pci) if pci != null
