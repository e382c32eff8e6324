# Residency decided through the contract, alone and with tenancy, scanning the
# clusters and through opa-kube-sync's cluster index.
# (Not under fedplace.rules: every package there is a rule set.)
package fedplace.rules_test.residency

import data.io.k8s.federation.admission
import data.io.k8s.federation.placement

key := "residency.fedplace.io/countries"

clusters := {
	"de-1": {"metadata": {"name": "de-1", "labels": {"fedplace.io/country": "DE", "tenants.fedplace.io/acme": "true"}}},
	"de-2": {"metadata": {"name": "de-2", "labels": {"fedplace.io/country": "DE"}}},
	"fr-1": {"metadata": {"name": "fr-1", "labels": {"fedplace.io/country": "FR", "tenants.fedplace.io/acme": "true"}}},
	"nl-1": {"metadata": {"name": "nl-1", "labels": {"fedplace.io/country": "NL", "tenants.fedplace.io/acme": "true"}}},
	"us-1": {"metadata": {"name": "us-1", "labels": {"fedplace.io/country": "US", "tenants.fedplace.io/acme": "true"}}},
	"nowhere": {"metadata": {"name": "nowhere", "labels": {"tenants.fedplace.io/acme": "true"}}},
}

all_clusters := {name | some name, _ in clusters}

# The cluster index as opa-kube-sync writes it (labels only: these clusters have no region).
index := {
	"layout": 2,
	"names": {n: true | some n, _ in clusters},
	"labels": {k: {v: {n: true | some n, c in clusters; c.metadata.labels[k] == v} |
		some c2 in clusters
		v := c2.metadata.labels[k]
	} |
		some c1 in clusters
		some k, _ in c1.metadata.labels
	},
	"regions": {},
}

namespaces := {
	"eu": {"metadata": {"name": "eu", "annotations": {key: "DE, FR,NL"}}},
	"acme-eu": {"metadata": {"name": "acme-eu", "labels": {"fedplace.io/tenant": "acme"}, "annotations": {key: "DE,FR"}}},
	"open": {"metadata": {"name": "open"}},
	"lowercase": {"metadata": {"name": "lowercase", "annotations": {key: "de"}}},
}

rs(namespace, annotations) := {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "db", "namespace": namespace, "annotations": annotations}}

# Scanning the clusters, and through the index: the two must agree.
eligible(namespace, annotations) := v if {
	v := placement.eligible_clusters with input as rs(namespace, annotations)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
	v == placement.eligible_clusters with input as rs(namespace, annotations)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
		with data.kubernetes_index.clusters as index
}

errors(namespace, annotations) := v if {
	v := placement.constraint_errors with input as rs(namespace, annotations)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
}

reasons(namespace, annotations) := v if {
	v := placement.cluster_reasons with input as rs(namespace, annotations)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
}

test_the_namespace_allows_its_countries if {
	eligible("eu", {}) == {"de-1", "de-2", "fr-1", "nl-1"}
	count(errors("eu", {})) == 0
}

test_a_workload_names_countries_alone if {
	eligible("open", {key: "US"}) == {"us-1"}
}

test_nothing_named_nothing_required if {
	eligible("open", {}) == all_clusters
}

test_the_workload_narrows if {
	eligible("eu", {key: "FR, NL"}) == {"fr-1", "nl-1"}
}

test_the_workload_cannot_widen if {
	# It names a country its namespace does not allow: only the countries both allow.
	eligible("eu", {key: "FR, US"}) == {"fr-1"}
	eligible("eu", {key: "US"}) == set()
	msgs := admission.errors with input as rs("eu", {key: "US"})
		with data.kubernetes.clusters as clusters
		with data.kubernetes.namespaces as namespaces
	some msg in msgs
	contains(msg, "namespace allows countries DE, FR, NL")
	contains(msg, "workload allows countries US")
}

test_tenancy_and_residency_intersect if {
	# acme's clusters: de-1, fr-1, nl-1, us-1, nowhere; DE or FR: de-1, de-2, fr-1.
	eligible("acme-eu", {}) == {"de-1", "fr-1"}
	eligible("acme-eu", {key: "FR"}) == {"fr-1"}
}

test_the_reasons_say_who_imposed_each if {
	r := reasons("acme-eu", {key: "FR"})
	{[x.set, x.imposed_by, x.value] | some x in r["de-2"]} == {
		["tenancy", "namespace", null],
		["residency", "workload", "DE"],
	}
	{[x.set, x.id, x.imposed_by, x.source] | some x in r["us-1"]} == {
		["residency", "residency", "namespace", "namespace acme-eu annotation residency.fedplace.io/countries: \"DE,FR\""],
		["residency", "residency", "workload", "annotation residency.fedplace.io/countries: \"FR\""],
	}
	r["fr-1"] == []
}

test_an_unlabelled_cluster_never_qualifies if {
	not "nowhere" in eligible("eu", {})
	some x in reasons("eu", {}).nowhere
	x.value == null
}

test_malformed_lists_deny if {
	errors("lowercase", {}) == {"namespace lowercase annotation residency.fedplace.io/countries must list ISO 3166-1 alpha-2 country codes in upper case, separated by commas (e.g. \"DE, FR\"), got \"de\""}
	errors("open", {key: ","}) == {"annotation residency.fedplace.io/countries must list ISO 3166-1 alpha-2 country codes in upper case, separated by commas (e.g. \"DE, FR\"), got \",\""}
	errors("open", {key: "Germany"}) == {"annotation residency.fedplace.io/countries must list ISO 3166-1 alpha-2 country codes in upper case, separated by commas (e.g. \"DE, FR\"), got \"Germany\""}
}

test_a_namespace_not_replicated_yet_denies if {
	"namespace fresh is not replicated yet: the countries it allows (residency.fedplace.io/countries) cannot be read; retry" in errors("fresh", {})
}
