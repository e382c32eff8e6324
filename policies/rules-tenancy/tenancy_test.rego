# Tenancy decided through the contract: eligible clusters, reasons and errors.
# (Not under fedplace.rules: every package there is a rule set.)
package fedplace.rules_test.tenancy

import data.io.k8s.federation.admission
import data.io.k8s.federation.placement

clusters := {
	"acme-only": {"metadata": {"name": "acme-only", "labels": {"tenants.fedplace.io/acme": "true"}}},
	"shared": {"metadata": {"name": "shared", "labels": {"tenants.fedplace.io/acme": "true", "tenants.fedplace.io/globex": "true"}}},
	"globex-only": {"metadata": {"name": "globex-only", "labels": {"tenants.fedplace.io/globex": "true"}}},
	"acme-off": {"metadata": {"name": "acme-off", "labels": {"tenants.fedplace.io/acme": "false"}}},
	"bare": {"metadata": {"name": "bare"}},
}

ns(name, labels, annotations) := {"metadata": {"name": name, "labels": labels, "annotations": annotations}}

namespaces := {
	"acme-web": ns("acme-web", {"fedplace.io/tenant": "acme"}, {}),
	"globex": ns("globex", {}, {"fedplace.io/tenant": "globex"}),
	"both-agree": ns("both-agree", {"fedplace.io/tenant": "acme"}, {"fedplace.io/tenant": "acme"}),
	"two-tenants": ns("two-tenants", {"fedplace.io/tenant": "acme"}, {"fedplace.io/tenant": "globex"}),
	"bad-name": ns("bad-name", {}, {"fedplace.io/tenant": "Acme Corp"}),
	"open": ns("open", {"team": "x"}, {}),
}

rs(namespace) := {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": namespace}}

eligible(namespace) := v if {
	v := placement.eligible_clusters with input as rs(namespace)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
}

reasons(namespace) := v if {
	v := placement.cluster_reasons with input as rs(namespace)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
}

errors(namespace) := v if {
	v := placement.constraint_errors with input as rs(namespace)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
}

test_a_tenant_label_keeps_the_tenants_clusters if {
	eligible("acme-web") == {"acme-only", "shared"}
	count(errors("acme-web")) == 0
}

test_a_tenant_annotation_names_it_too if {
	eligible("globex") == {"shared", "globex-only"}
}

test_label_and_annotation_agreeing if {
	eligible("both-agree") == {"acme-only", "shared"}
	count(errors("both-agree")) == 0
}

test_a_namespace_naming_no_tenant_is_not_restricted if {
	eligible("open") == {"acme-only", "shared", "globex-only", "acme-off", "bare"}
	count(errors("open")) == 0
}

test_the_reason_names_the_tenant_and_the_namespace if {
	[r] := reasons("acme-web")["globex-only"]
	r == {
		"set": "tenancy", "id": "tenant", "requires": "clusters of tenant acme", "imposed_by": "namespace",
		"source": "namespace acme-web label fedplace.io/tenant: \"acme\"", "value": null,
	}
	[off] := reasons("acme-web")["acme-off"]
	off.value == "false"
	reasons("acme-web").shared == []
}

test_two_tenants_deny if {
	errors("two-tenants") == {"namespace two-tenants names two tenants (label and annotation fedplace.io/tenant): acme, globex"}
	count(eligible("two-tenants") - {"acme-only", "shared", "globex-only", "acme-off", "bare"}) == 0
}

test_a_malformed_tenant_denies if {
	some msg in errors("bad-name")
	contains(msg, "annotation fedplace.io/tenant must be a DNS label")
	contains(msg, "\"Acme Corp\"")
}

test_a_namespace_not_replicated_yet_denies if {
	"namespace new-ns is not replicated yet: its tenant (fedplace.io/tenant) cannot be read; retry" in errors("new-ns")
}

test_the_admission_decision_denies_a_tenant_without_clusters if {
	lonely := object.union(namespaces, {"lonely": ns("lonely", {"fedplace.io/tenant": "initech"}, {})})
	msgs := admission.errors with input as rs("lonely")
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as lonely
	some msg in msgs
	contains(msg, "clusters of tenant initech")
}

test_the_workload_cannot_name_its_own_tenant if {
	obj := json.patch(rs("open"), [{"op": "add", "path": "/metadata/annotations", "value": {"fedplace.io/tenant": "acme"}}])
	all := placement.eligible_clusters with input as obj
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
	count(all) == 5
}

test_without_replicated_namespaces_nothing_is_required if {
	placement.eligible_clusters == {"acme-only", "shared", "globex-only", "acme-off", "bare"} with input as rs("acme-web")
		with data.kubernetes.clusters as clusters
	not placement.asks_placement with input as rs("acme-web")
		with data.kubernetes.clusters as clusters
}
