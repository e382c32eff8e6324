# Residency, a rule set of the placement-rules contract (Rego v1;
# docs/policies.md, "Residency").
#
# Clusters carry the country they run in as the label
#   fedplace.io/country: "DE"           (ISO 3166-1 alpha-2, upper case)
# A namespace (its Namespace object) and a workload each may name the countries
# allowed, with the annotation
#   residency.fedplace.io/countries: "DE, FR, NL"
# Each names a requirement: only clusters labelled with one of those countries
# (an unlabelled cluster never qualifies). Both together allow the countries
# both name: the workload can only narrow what its namespace allows.
#
# The Namespace is read from the replicated namespaces
# (data.kubernetes.namespaces, opa-kube-sync --replicate-cluster=v1/namespaces).
# A namespace missing from them while they are replicated (just created, not
# replicated yet) denies the object: what it allows cannot be known.
package fedplace.rules.residency

countries_key := "residency.fedplace.io/countries"

country_label := "fedplace.io/country"

namespaces := data.kubernetes.namespaces

namespace_name := input.metadata.namespace

# Who names countries: {"imposed_by", "where", "value"}.
naming contains {"imposed_by": "namespace", "where": sprintf("namespace %s annotation %s", [namespace_name, countries_key]), "value": v} if {
	v := namespaces[namespace_name].metadata.annotations[countries_key]
}

naming contains {"imposed_by": "workload", "where": sprintf("annotation %s", [countries_key]), "value": v} if {
	v := input.metadata.annotations[countries_key]
}

countries(value) := {trim_space(c) |
	some c in split(value, ",")
	trim_space(c) != ""
}

valid_country(c) if regex.match(`^[A-Z]{2}$`, c)

valid_list(value) if {
	is_string(value)
	count(countries(value)) > 0
	every c in countries(value) {
		valid_country(c)
	}
}

require contains {
	"id": "residency",
	"requires": sprintf("%s allows countries %s", [n.imposed_by, concat(", ", sort(countries(n.value)))]),
	"imposed_by": n.imposed_by,
	"source": sprintf("%s: %s", [n.where, json.marshal(n.value)]),
	"cluster": {"label": country_label, "in": sort(countries(n.value))},
} if {
	some n in naming
	valid_list(n.value)
}

errors contains sprintf("%s must list ISO 3166-1 alpha-2 country codes in upper case, separated by commas (e.g. \"DE, FR\"), got %s", [n.where, json.marshal(n.value)]) if {
	some n in naming
	not valid_list(n.value)
}

errors contains sprintf("namespace %s is not replicated yet: the countries it allows (%s) cannot be read; retry", [namespace_name, countries_key]) if {
	is_object(namespaces)
	is_string(namespace_name)
	not namespaces[namespace_name]
}
