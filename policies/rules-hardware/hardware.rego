# Hardware, a rule set of the placement-rules contract (Rego v1;
# docs/policies.md, "Hardware").
#
# A workload asks for cluster hardware with two annotations, each a
# comma-separated list:
#   hardware.fedplace.io/cluster-labels: "gpu=a100|h100, network=infiniband"
#     only clusters whose label gpu is a100 or h100, and whose label network is
#     infiniband (KEY=VALUE, alternatives separated by "|");
#   hardware.fedplace.io/cluster-minimums: "gpu-count=2, memory-gib=512"
#     only clusters whose label gpu-count is a whole number >= 2, and whose
#     label memory-gib is >= 512 (a missing or non-numeric label counts as 0).
# Keys are Kubernetes label keys; values label values. A malformed entry denies
# the workload, naming it. The workload imposes these on itself.
package fedplace.rules.hardware

labels_key := "hardware.fedplace.io/cluster-labels"

minimums_key := "hardware.fedplace.io/cluster-minimums"

requested := object.get(input, ["metadata", "annotations"], {})

# The non-empty comma-separated entries of an annotation, trimmed.
entries(key) := {trim_space(e) |
	is_string(requested[key])
	some e in split(requested[key], ",")
	trim_space(e) != ""
}

# KEY=VALUE entries split once at the first "=".
pairs(key) := {[e, k, v] |
	some e in entries(key)
	i := indexof(e, "=")
	i > 0
	k := trim_space(substring(e, 0, i))
	v := trim_space(substring(e, i + 1, -1))
}

# A label key: an optional DNS-subdomain prefix and "/", then a name of at most
# 63 characters, alphanumeric at both ends.
valid_label_key(k) if regex.match(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`, k)

valid_label_value(v) if regex.match(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`, v)

# At most 15 decimal digits: exact as a Rego number, so to_number cannot fail.
whole_number(s) if regex.match(`^[0-9]{1,15}$`, s)

label_values(v) := sort({trim_space(x) | some x in split(v, "|")})

source(key) := sprintf("annotation %s: %s", [key, json.marshal(requested[key])])

require contains {
	"id": "hardware-label",
	"requires": sprintf("label %s in [%s]", [k, concat(", ", values)]),
	"imposed_by": "workload",
	"source": source(labels_key),
	"cluster": {"label": k, "in": values},
} if {
	some [_, k, v] in pairs(labels_key)
	valid_label_key(k)
	values := label_values(v)
	every x in values {
		valid_label_value(x)
	}
}

require contains {
	"id": "hardware-minimum",
	"requires": sprintf("label %s >= %d", [k, to_number(v)]),
	"imposed_by": "workload",
	"source": source(minimums_key),
	"cluster": {"label": k, "min": to_number(v)},
} if {
	some [_, k, v] in pairs(minimums_key)
	valid_label_key(k)
	whole_number(v)
}

errors contains sprintf("annotation %s: %q is not KEY=VALUE", [key, e]) if {
	some key in [labels_key, minimums_key]
	some e in entries(key)
	indexof(e, "=") < 1
}

errors contains sprintf("annotation %s: %q is not a label key", [key, k]) if {
	some key in [labels_key, minimums_key]
	some [_, k, _] in pairs(key)
	not valid_label_key(k)
}

errors contains sprintf("annotation %s: %q needs label values (a|b), got %q", [labels_key, k, v]) if {
	some [_, k, v] in pairs(labels_key)
	some x in label_values(v)
	not valid_label_value(x)
}

errors contains sprintf("annotation %s: %q needs a whole number (at most 15 digits), got %q", [minimums_key, k, v]) if {
	some [_, k, v] in pairs(minimums_key)
	not whole_number(v)
}

errors contains sprintf("annotation %s must be a string listing KEY=VALUE entries, got %s", [key, json.marshal(requested[key])]) if {
	some key in [labels_key, minimums_key]
	not is_string(requested[key])
}

errors contains sprintf("annotation %s lists nothing", [key]) if {
	some key in [labels_key, minimums_key]
	is_string(requested[key])
	count(entries(key)) == 0
}
