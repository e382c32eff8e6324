# A placement rule set for remediation_key_test.rego only: it reads the
# template's Namespace object (a label naming its tenant) and requires clusters
# labelled for that tenant. Active only where a Namespace carries the label
# below, which no other test's data does.
package fedplace.rules.remediation_key_test_tenant

tenant_label := "remediation-key-test.fedplace.io/tenant"

require contains {
	"id": "tenant",
	"requires": sprintf("tenant %s", [tenant]),
	"imposed_by": "namespace",
	"source": sprintf("namespace label %s", [tenant_label]),
	"cluster": {"label": "tenant", "in": [tenant]},
} if {
	tenant := data.kubernetes.namespaces[input.metadata.namespace].metadata.labels[tenant_label]
	is_string(tenant)
}

test_requires_the_tenant_a_namespace_label_names if {
	r := require with input as {"metadata": {"namespace": "a"}}
		with data.kubernetes.namespaces as {"a": {"metadata": {"labels": {tenant_label: "blue"}}}}
	[x.cluster | some x in r] == [{"label": "tenant", "in": ["blue"]}]
}

test_inactive_without_the_label if {
	count(require) == 0 with input as {"metadata": {"namespace": "a"}}
		with data.kubernetes.namespaces as {"a": {"metadata": {"labels": {"tenant": "blue"}}}}
}
