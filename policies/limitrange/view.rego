# What `fedplace-limits` shows for a namespace (Rego v1): the effective limits
# of its LimitRanges and what the replicated workloads there would get from
# the pack now — computed inside OPA from the same rules as the admission
# decision, so the view and the webhook never disagree.
#
# Query: POST /v1/data/io/k8s/federation/limitrange/view/report with
#   {"input": {"namespace": "shop", "resources": ["replicasets", "pods"]}}
# ("resources" optional: every pod-bearing kind by default; kinds that are not
# replicated are skipped). The answer:
#   {"namespace", "limitRanges": [name],
#    "limits": [{"limitRange", "index", "type", "resource", "min", "max",
#                "defaultRequest", "default", "maxLimitRequestRatio",
#                "defaultFrom", "defaultRequestFrom", "defaultApplies", "defaultRequestApplies"}],
#    "errors": [malformed LimitRanges],
#    "workloads": [{"resource", "kind", "name", "violations": [message], "defaults": [what would be set]}]}
# Quantities are shown as written; defaults as the API server stores them
# (defaultFrom names the field a default came from: "default" or "max";
# defaultRequestFrom: "defaultRequest", "default", "max" or "min"); the
# *Applies flags say whether that default is the one containers get (the
# first LimitRange by name wins). A workload that exists is checked as if
# created now (a Pod's status is ignored).
package io.k8s.federation.limitrange.view

import data.io.k8s.federation.limitrange
import data.io.k8s.federation.limitrange.quantity
import data.io.k8s.federation.replicated

pod_bearing := ["pods", "replicasets", "deployments", "statefulsets", "daemonsets", "jobs", "cronjobs"]

resources := input.resources if is_array(input.resources)

else := pod_bearing

namespace := input.namespace

# The pack's view of the namespace: an empty Pod there.
_probe := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "", "namespace": namespace}, "spec": {"containers": []}}

report := {
	"namespace": namespace,
	"limitRanges": _names,
	"limits": _rows,
	"errors": _errors,
	"workloads": _workloads,
}

_names := names if {
	names := limitrange.range_names with input as _probe
}

_items := items if {
	items := limitrange.raw_items with input as _probe
}

_default_limits := defaults if {
	defaults := limitrange.default_limits with input as _probe
}

_default_requests := defaults if {
	defaults := limitrange.default_requests with input as _probe
}

_errors := sort([e | some e in errors]) if {
	errors := limitrange.range_errors with input as _probe
}

_rows := [row |
	some entry in _items
	some resource in sort({key |
		some f in limitrange.fields
		some key, _ in object.get(entry.raw, f, {})
	})
	limit_from := _first(entry, resource, ["default", "max"])
	request_from := _first(entry, resource, ["defaultRequest", "default", "max", "min"])
	row := {
		"limitRange": entry.range, "index": entry.index, "type": entry.type, "resource": resource,
		"min": _text(entry.raw, "min", resource), "max": _text(entry.raw, "max", resource),
		"maxLimitRequestRatio": _text(entry.raw, "maxLimitRequestRatio", resource),
		"default": _text(entry.raw, limit_from, resource), "defaultFrom": limit_from,
		"defaultRequest": _text(entry.raw, request_from, resource), "defaultRequestFrom": request_from,
		"defaultApplies": _applies(_default_limits, entry, resource),
		"defaultRequestApplies": _applies(_default_requests, entry, resource),
	}
]

_workloads := [w |
	some plural in resources
	objects := replicated.collection(plural)[namespace]
	some name in sort(object.keys(objects))
	obj := object.remove(objects[name], ["status"])
	violations := limitrange.violations with input as obj
	defaults := limitrange.defaulted with input as obj
	w := {
		"resource": plural, "kind": object.get(obj, "kind", ""), "name": name,
		"violations": sort([v | some v in violations]), "defaults": defaults,
	}
]

# The field a Container item's default comes from, as the API server defaults
# it; "" when none (always for Pod items, which have no defaults).
_first(item, r, order) := found[0] if {
	item.type == "Container"
	found := [f | some f in order; values := object.get(item.raw, f, {}); _ = values[r]]
	count(found) > 0
} else := ""

# A quantity as written ("" when the field does not name the resource).
_text(raw, field, r) := quantity.parse(v).text if {
	values := object.get(raw, field, {})
	v := values[r]
} else := ""

_applies(winners, item, r) if {
	w := winners[r]
	w.range == item.range
	w.index == item.index
} else := false
