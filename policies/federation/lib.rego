# Helpers of the federation placement policy: which clusters an object may use.
package io.k8s.federation.placement

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

preferences_key := "federation.kubernetes.io/replica-set-preferences"

# The cluster label that carries a cluster's PCI compliance level.
pci_label := "pci-compliance-level"

# Regions counted as EU jurisdiction: by provider prefix (GCE europe-*, AWS
# eu-*) or by name (Azure *europe).
eu_region_prefixes := {"europe-", "eu-"}

eu_region(region) if {
	some prefix in eu_region_prefixes
	startswith(lower(region), prefix)
}

eu_region(region) if endswith(lower(region), "europe")

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

required_pci := to_number(requested[pci_key]) if regex.match(`^[0-9]+$`, requested[pci_key])

else := 0

annotation_errors contains msg if {
	value := requested[pci_key]
	not regex.match(`^[0-9]+$`, value)
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

cluster_pci(cluster) := to_number(level) if {
	level := object.get(cluster, ["metadata", "labels", pci_label], "0")
	regex.match(`^[0-9]+$`, level)
} else := 0

cluster_eu_ok(_) if not eu_required

cluster_eu_ok(cluster) if {
	eu_required
	eu_region(object.get(cluster, ["status", "region"], ""))
}

eligible_clusters contains name if {
	some name, cluster in object.get(data, ["kubernetes", "clusters"], {})
	cluster_eu_ok(cluster)
	cluster_pci(cluster) >= required_pci
}

developer_preferences := json.unmarshal(requested[preferences_key]) if json.is_valid(requested[preferences_key])

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
