package io.k8s.federation.karmada.remediation_key_test

import data.io.k8s.federation.remediation

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

cluster(name, region, level) := {
	"apiVersion": "cluster.karmada.io/v1alpha1",
	"kind": "Cluster",
	"metadata": {"name": name, "labels": {"pci-compliance-level": level}},
	"spec": {"region": region},
}

clusters := {
	"eu-1": cluster("eu-1", "eu-west-1", "3"),
	"eu-2": cluster("eu-2", "europe-west4", "1"),
	"us-1": cluster("us-1", "us-east-1", "3"),
}

template(kind, ns, name, annotations) := {
	"apiVersion": "apps/v1", "kind": kind,
	"metadata": object.union({"name": name, "annotations": annotations}, {"namespace": ns | ns != ""}),
}

# Templates of every shape the key must tell apart: alike requirements under
# different names, malformed ones, none, "false", a leading zero, cluster-scoped.
deployments := {
	"a": {
		"eu1": template("Deployment", "a", "eu1", {eu_key: "true"}),
		"eu2": template("Deployment", "a", "eu2", {eu_key: "true"}),
		"eu1l": json.patch(template("Deployment", "a", "eu1l", {eu_key: "true"}), [{"op": "add", "path": "/metadata/labels", "value": {"tier": "gold"}}]),
		"pci3": template("Deployment", "a", "pci3", {pci_key: "3"}),
		"pci03": template("Deployment", "a", "pci03", {pci_key: "03"}),
		"strict": template("Deployment", "a", "strict", {eu_key: "true", pci_key: "3"}),
		"nowhere": template("Deployment", "a", "nowhere", {eu_key: "true", pci_key: "9"}),
		"nowhere2": template("Deployment", "a", "nowhere2", {eu_key: "true", pci_key: "9"}),
		"free": template("Deployment", "a", "free", {}),
		"free2": template("Deployment", "a", "free2", {}),
		"nofalse": template("Deployment", "a", "nofalse", {eu_key: "false"}),
		"broken": template("Deployment", "a", "broken", {pci_key: "high"}),
		"broken2": template("Deployment", "a", "broken2", {eu_key: "yes"}),
		"wrongkind": template("StatefulSet", "a", "wrongkind", {eu_key: "true"}),
	},
	"b": {"eu1": template("Deployment", "b", "eu1", {eu_key: "true"})},
}

# The Namespaces as opa-kube-sync replicates them (every template's namespace
# is there: a rule set may read it, and one may deny an object whose namespace
# is not replicated yet).
namespaces := {
	"eu": template("Namespace", "", "eu", {eu_key: "true"}),
	"a": template("Namespace", "", "a", {}),
	"b": template("Namespace", "", "b", {}),
}

binding(ns, name, placement, annotations) := {
	"apiVersion": "work.karmada.io/v1alpha2",
	"kind": "ResourceBinding",
	"metadata": {"name": concat("-", [name, "deployment"]), "namespace": ns, "annotations": annotations},
	"spec": {
		"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": name},
		"placement": placement,
	},
}

affinity(exclude) := {"clusterAffinity": {"exclude": exclude}}

narrowed := {"fedplace.io/excluded-clusters": `["us-1"]`, "fedplace.io/placement": "old"}

resourcebindings := {
	"a": {
		"eu1-deployment": binding("a", "eu1", affinity([]), {}),
		"eu2-deployment": binding("a", "eu2", affinity([]), {}),
		"eu1l-deployment": binding("a", "eu1l", affinity([]), {}),
		"eu2b-deployment": json.patch(binding("a", "eu2", affinity(["x"]), {}), [{"op": "replace", "path": "/metadata/name", "value": "eu2b-deployment"}]),
		"eu1n-deployment": json.patch(binding("a", "eu1", affinity([]), narrowed), [{"op": "replace", "path": "/metadata/name", "value": "eu1n-deployment"}]),
		"pci3-deployment": binding("a", "pci3", affinity([]), {}),
		"pci03-deployment": binding("a", "pci03", affinity([]), {}),
		"strict-deployment": binding("a", "strict", affinity([]), {}),
		"nowhere-deployment": binding("a", "nowhere", affinity([]), {}),
		"nowhere2-deployment": binding("a", "nowhere2", affinity([]), {}),
		"free-deployment": binding("a", "free", affinity([]), {}),
		"free2-deployment": binding("a", "free2", affinity([]), {}),
		"nofalse-deployment": binding("a", "nofalse", affinity([]), {}),
		"broken-deployment": binding("a", "broken", affinity([]), {}),
		"broken2-deployment": binding("a", "broken2", affinity([]), {}),
		"gone-deployment": binding("a", "gone", affinity([]), {}),
		"wrongkind-deployment": binding("a", "wrongkind", affinity([]), {}),
		# The binding carries placement annotations of its own: other rules read those.
		"own-deployment": binding("a", "eu1", affinity([]), {eu_key: "false", pci_key: "x"}),
		# Karmada's scheduler kept a cluster now excluded (stuck: the report names the binding).
		"stuck-deployment": json.patch(binding("a", "eu1", affinity(["us-1"]), narrowed), [
			{"op": "replace", "path": "/metadata/name", "value": "stuck-deployment"},
			{"op": "add", "path": "/spec/clusters", "value": [{"name": "us-1", "replicas": 2}]},
			{"op": "add", "path": "/status", "value": {"conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "no room"}]}},
		]),
		# Its dependencies' requirements add to its exclusions (karmada_deps.rego).
		"deps-deployment": json.patch(binding("a", "eu1", affinity([]), {}), [
			{"op": "replace", "path": "/metadata/name", "value": "deps-deployment"},
			{"op": "add", "path": "/spec/propagateDeps", "value": true},
		]),
	},
	"b": {"eu1-deployment": binding("b", "eu1", affinity([]), {})},
}

clusterresourcebindings := {"eu-namespace": {
	"apiVersion": "work.karmada.io/v1alpha2",
	"kind": "ClusterResourceBinding",
	"metadata": {"name": "eu-namespace"},
	"spec": {"resource": {"apiVersion": "v1", "kind": "Namespace", "name": "eu"}, "placement": {}},
}}

settings := {"karmada_templates": {"Deployment": "deployments", "Namespace": "namespaces"}}

everything := {"resources": [
	{"plural": "resourcebindings", "namespaced": true},
	{"plural": "clusterresourcebindings", "namespaced": false},
]}

shared := x if {
	x := remediation.notifications with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as namespaces
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as settings
}

# Every object decided alone: what the notifications were before keys existed.
alone := x if {
	x := remediation.notifications with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as namespaces
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as settings
		with remediation.decision_key as null
}

keys := {ref: key | some [key, ref] in x} if {
	x := remediation.keyed_refs with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as namespaces
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as settings
}

test_shared_decisions_equal_separate_ones if {
	count(alone) == 22
	some n in shared
	n.name == "stuck-deployment"
	n.stuck.reason == "PlacementStuck"
	shared == alone
}

test_shared_decisions_equal_separate_ones_targeted if {
	objects := {"objects": [
		{"resource": "resourcebindings", "namespace": "a", "name": "eu2-deployment"},
		{"resource": "resourcebindings", "namespace": "b", "name": "eu1-deployment"},
		{"resource": "resourcebindings", "namespace": "a", "name": "nowhere2-deployment"},
		{"resource": "clusterresourcebindings", "name": "eu-namespace"},
	]}
	targeted := object.union(everything, objects)
	one := remediation.notifications with input as targeted
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as namespaces
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as settings
	count(one) == 4
	one == {n | some n in alone; [n.namespace, n.name] in {["a", "eu2-deployment"], ["b", "eu1-deployment"], ["a", "nowhere2-deployment"], ["", "eu-namespace"]}}
}

key(ns, name) := keys[["resourcebindings", ns, name]]

test_alike_bindings_share_a_key if {
	key("a", "eu1-deployment") == key("a", "eu2-deployment")
	key("a", "nowhere-deployment") == key("a", "nowhere2-deployment")
}

test_what_the_decision_may_read_tells_keys_apart if {
	key("a", "eu1-deployment") != key("b", "eu1-deployment") # the template's namespace
	key("a", "eu1-deployment") != key("a", "eu1l-deployment") # the template's labels
	key("a", "eu1-deployment") != key("a", "eu1n-deployment") # its annotations
	key("a", "eu1-deployment") != key("a", "eu2b-deployment") # its placement
	key("a", "eu1-deployment") != key("a", "own-deployment")
	key("a", "pci3-deployment") != key("a", "pci03-deployment") # the requirement as written
	key("a", "eu1-deployment") != key("a", "strict-deployment")
	keys[["clusterresourcebindings", "", "eu-namespace"]] != null
}

# A binding that may be stuck (its Scheduled condition False) or that propagates its
# dependencies is decided alone.
test_stuck_and_dependency_propagating_bindings_have_no_key if {
	key("a", "stuck-deployment") == null
	key("a", "deps-deployment") == null
}

# The why names the template (or nothing is known of it): decided alone.
test_bindings_whose_why_names_the_template_have_no_key if {
	every name in ["free", "free2", "nofalse", "broken", "broken2", "gone", "wrongkind"] {
		key("a", concat("-", [name, "deployment"])) == null
	}
}

# A rule set that reads more of the object than the key holds says so: every
# binding is then decided alone.
test_a_rule_set_reading_the_whole_object_makes_every_binding_alone if {
	whole := remediation.keyed_refs with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as namespaces
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as settings
		with data.fedplace.rules.whole_object.reads_whole_object as true
	count(whole) == 22
	every pair in whole {
		pair[0] == null
	}
}

# -- a rule set reading the Namespace object ------------------------------------------------
#
# remediation_key_rules_test.rego's rule set (fedplace.rules.remediation_key_test_tenant)
# requires clusters labelled for the tenant the template's Namespace names:
# bindings of alike templates in two namespaces of different tenants are decided
# differently, and sharing must not mix them up.

tenant_label := "remediation-key-test.fedplace.io/tenant"

tenant_namespaces := object.union(namespaces, {
	"a": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {tenant_label: "blue"}}},
	"b": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b", "labels": {tenant_label: "green"}}},
})

tenant_clusters := {
	"eu-1": json.patch(clusters["eu-1"], [{"op": "add", "path": "/metadata/labels/tenant", "value": "blue"}]),
	"eu-2": json.patch(clusters["eu-2"], [{"op": "add", "path": "/metadata/labels/tenant", "value": "green"}]),
	"us-1": json.patch(clusters["us-1"], [{"op": "add", "path": "/metadata/labels/tenant", "value": "green"}]),
}

tenant_shared := x if {
	x := remediation.notifications with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as tenant_namespaces
		with data.kubernetes.clusters as tenant_clusters
		with data.io.k8s.federation.placement.settings as settings
}

tenant_alone := x if {
	x := remediation.notifications with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as tenant_namespaces
		with data.kubernetes.clusters as tenant_clusters
		with data.io.k8s.federation.placement.settings as settings
		with remediation.decision_key as null
}

tenant_keys := {ref: key | some [key, ref] in x} if {
	x := remediation.keyed_refs with input as everything
		with data.kubernetes.resourcebindings as resourcebindings
		with data.kubernetes.clusterresourcebindings as clusterresourcebindings
		with data.kubernetes.deployments as deployments
		with data.kubernetes.namespaces as tenant_namespaces
		with data.kubernetes.clusters as tenant_clusters
		with data.io.k8s.federation.placement.settings as settings
}

excluded_of(notifications, ns, name) := n.annotations["fedplace.io/excluded-clusters"] if {
	some n in notifications
	[n.namespace, n.name] == [ns, name]
}

test_a_rule_set_reading_a_namespace_label_shares_correctly if {
	tenant_shared == tenant_alone

	# the tenant decides: a/eu1 may use only eu-1 (blue), b/eu1 only eu-2 (green and EU)
	excluded_of(tenant_alone, "a", "eu1-deployment") == {"allExcept": ["eu-1"]}
	excluded_of(tenant_alone, "b", "eu1-deployment") == {"allExcept": ["eu-2"]}

	# "free" asks for nothing of its own, but its namespace's tenant asks now: it has a key
	tenant_keys[["resourcebindings", "a", "free-deployment"]] != null
	tenant_keys[["resourcebindings", "a", "free-deployment"]] == tenant_keys[["resourcebindings", "a", "free2-deployment"]]
	tenant_keys[["resourcebindings", "a", "eu1-deployment"]] != tenant_keys[["resourcebindings", "b", "eu1-deployment"]]
	tenant_keys[["resourcebindings", "a", "eu1-deployment"]].template.namespace_object == {"labels": {tenant_label: "blue"}, "annotations": {}}
}
