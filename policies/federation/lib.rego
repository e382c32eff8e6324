# Helpers of the federation placement policy: which clusters an object may use.
package io.k8s.federation.placement

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

preferences_key := "federation.kubernetes.io/replica-set-preferences"

# Who wrote the preferences: "policy" when this policy computed them (so a
# later decision recomputes them from scratch), "developer" otherwise (so the
# developer's choice is kept, restricted to eligible clusters).
source_key := "fedplace.io/replica-set-preferences-source"

# The cluster label that carries a cluster's PCI compliance level.
pci_label := "pci-compliance-level"

# Regions counted as EU jurisdiction: by provider prefix (GCE europe-*, AWS
# eu-*) or by name (Azure *europe).
eu_region(region) if startswith(lower(region), "europe-")

eu_region(region) if startswith(lower(region), "eu-")

eu_region(region) if endswith(lower(region), "europe")

# A whole number written in decimal digits ("0", "12"); cheap enough to run
# per cluster, and safe: to_number is only called on such strings.
whole_number(s) if {
	is_string(s)
	s != ""
	trim_left(s, "0123456789") == ""
}

requested := object.get(input, ["metadata", "annotations"], {})

applies if input.kind == "ReplicaSet"

eu_required if requested[eu_key] == "true"

pci_required if requested[pci_key]

constrained if {
	applies
	eu_required
}

constrained if {
	applies
	pci_required
}

required_pci := to_number(requested[pci_key]) if whole_number(requested[pci_key])

else := 0

annotation_errors contains msg if {
	value := requested[pci_key]
	not whole_number(value)
	msg := sprintf("annotation %s must be a whole number, got %q", [pci_key, value])
}

annotation_errors contains msg if {
	value := requested[eu_key]
	not value in {"true", "false"}
	msg := sprintf("annotation %s must be \"true\" or \"false\", got %q", [eu_key, value])
}

annotation_errors contains msg if {
	raw := requested[preferences_key]
	not json.is_valid(raw)
	msg := sprintf("annotation %s is not valid JSON", [preferences_key])
}

clusters := data.kubernetes.clusters

# Eligibility is checked inline (one pass over the clusters per rule): the
# remediation library evaluates this policy once per replicated object.
eligible_clusters contains name if {
	not eu_required
	some name, cluster in clusters
	pci_ok(object.get(cluster, ["metadata", "labels", pci_label], "0"))
}

eligible_clusters contains name if {
	eu_required
	some name, cluster in clusters
	regex.match(`^(europe-|eu-)|europe$`, lower(object.get(cluster, ["status", "region"], "")))
	pci_ok(object.get(cluster, ["metadata", "labels", pci_label], "0"))
}

# A cluster's PCI level label satisfies the requirement; labels that are not
# whole numbers count as level 0.
pci_ok(_) if required_pci == 0

pci_ok(label) if {
	regex.match(`^[0-9]+$`, label)
	to_number(label) >= required_pci
}

developer_set_preferences if {
	requested[preferences_key]
	not requested[source_key] == "policy"
}

developer_preferences := json.unmarshal(requested[preferences_key]) if {
	developer_set_preferences
	json.is_valid(requested[preferences_key])
}

preferences_source := "developer" if count(developer_clusters) > 0

else := "policy"

developer_clusters contains name if {
	some name, _ in object.get(developer_preferences, "clusters", {})
}

# The developer's preferences restricted to eligible clusters, or, when the
# developer gave none, every eligible cluster with weight 1.
preferences := object.union(developer_preferences, {"clusters": clusters}) if {
	count(developer_clusters) > 0
	clusters := {name: pref |
		some name, pref in developer_preferences.clusters
		name in eligible_clusters
	}
} else := {"clusters": {name: {"weight": 1} | some name in eligible_clusters}, "rebalance": true}

requirements_text := sprintf("EU jurisdiction required: %v, PCI compliance level >= %d", [eu_required_bool, required_pci])

eu_required_bool := true if eu_required

else := false
