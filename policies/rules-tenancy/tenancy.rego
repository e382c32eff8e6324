# Tenancy, a rule set of the placement-rules contract (Rego v1;
# docs/policies.md, "Tenancy").
#
# A namespace belongs to a tenant when its Namespace object carries the label
# or the annotation
#   fedplace.io/tenant: "<tenant>"      (a DNS label: a-z, 0-9, "-", at most 63)
# Objects in that namespace may then only use clusters labelled for the tenant:
#   tenants.fedplace.io/<tenant>: "true"
# (a cluster may be labelled for several tenants). A namespace naming no tenant
# is not restricted by this set. The namespace imposes the rule: nothing in the
# workload can lift it.
#
# The Namespace is read from the replicated namespaces
# (data.kubernetes.namespaces, opa-kube-sync --replicate-cluster=v1/namespaces).
# A namespace missing from them while they are replicated (just created, not
# replicated yet) denies the object: the tenant cannot be known.
package fedplace.rules.tenancy

tenant_key := "fedplace.io/tenant"

cluster_label_prefix := "tenants.fedplace.io/"

namespaces := data.kubernetes.namespaces

namespace_name := input.metadata.namespace

namespace := namespaces[namespace_name]

# The tenant's name and where it was read, from the label, else the annotation.
named_by contains {"where": "label", "tenant": t} if {
	t := namespace.metadata.labels[tenant_key]
}

named_by contains {"where": "annotation", "tenant": t} if {
	t := namespace.metadata.annotations[tenant_key]
}

tenants := {n.tenant | some n in named_by}

tenant := t if {
	count(tenants) == 1
	some t in tenants
	valid_tenant(t)
}

valid_tenant(t) if {
	is_string(t)
	regex.match(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`, t)
}

require contains {
	"id": "tenant",
	"requires": sprintf("clusters of tenant %s", [tenant]),
	"imposed_by": "namespace",
	"source": concat(", ", sort([sprintf("namespace %s %s %s: %s", [namespace_name, n.where, tenant_key, json.marshal(n.tenant)]) |
		some n in named_by
	])),
	"cluster": {"label": concat("", [cluster_label_prefix, tenant]), "in": ["true"]},
}

errors contains sprintf("namespace %s names two tenants (label and annotation %s): %s", [namespace_name, tenant_key, concat(", ", sort(tenants))]) if {
	count(tenants) > 1
}

errors contains sprintf("namespace %s: %s %s must be a DNS label (a-z, 0-9, \"-\", at most 63 characters), got %s", [namespace_name, n.where, tenant_key, json.marshal(n.tenant)]) if {
	some n in named_by
	not valid_tenant(n.tenant)
}

errors contains sprintf("namespace %s is not replicated yet: its tenant (%s) cannot be read; retry", [namespace_name, tenant_key]) if {
	is_object(namespaces)
	is_string(namespace_name)
	not namespaces[namespace_name]
}
