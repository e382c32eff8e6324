# The proposal's example placement rules, as a rule set of the placement-rules
# contract (Rego v1; docs/policies.md, "Write your own placement rule").
#
# A workload asks for them with two annotations:
#   policy.federation.alpha.kubernetes.io/eu-jurisdiction-required: "true"
#     only clusters whose region is in the EU: a provider prefix (GCE europe-*,
#     AWS eu-*) or name (Azure *europe), in any case;
#   policy.federation.alpha.kubernetes.io/pci-compliance-level: "N"
#     only clusters whose pci-compliance-level label is a whole number >= N (a
#     missing or non-numeric label counts as 0).
# Malformed values deny the workload. The workload imposes both on itself.
package fedplace.rules.eu_pci

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

pci_label := "pci-compliance-level"

eu_region_pattern := `(?i)^(europe-|eu-)|europe$`

requested := object.get(input, ["metadata", "annotations"], {})

require contains {
	"id": "eu-jurisdiction",
	"requires": "EU jurisdiction required",
	"imposed_by": "workload",
	"source": source(eu_key),
	"cluster": {"property": "region", "matches": eu_region_pattern},
} if {
	requested[eu_key] == "true"
}

require contains {
	"id": "pci-compliance-level",
	"requires": sprintf("PCI compliance level >= %d", [level]),
	"imposed_by": "workload",
	"source": source(pci_key),
	"cluster": {"label": pci_label, "min": level},
} if {
	requested[pci_key]
	level := required_level
}

required_level := to_number(requested[pci_key]) if whole_number(requested[pci_key])

else := 0

errors contains sprintf("annotation %s must be a whole number (at most 15 digits), got %q", [pci_key, value]) if {
	value := requested[pci_key]
	not whole_number(value)
}

errors contains sprintf("annotation %s must be \"true\" or \"false\", got %q", [eu_key, value]) if {
	value := requested[eu_key]
	not value in {"true", "false"}
}

source(key) := sprintf("annotation %s: %s", [key, json.marshal(requested[key])])

# At most 15 decimal digits: exact as a Rego number, so to_number cannot fail.
whole_number(s) if {
	is_string(s)
	regex.match(`^[0-9]{1,15}$`, s)
}
