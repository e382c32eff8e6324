# The LimitRange pack's logic (Rego v1): Kubernetes' LimitRanger admission
# plugin (plugin/pkg/admission/limitranger/admission.go), evaluated on any
# object carrying a pod spec — Pods and the pod templates of ReplicaSets,
# Deployments, StatefulSets, DaemonSets, Jobs and CronJobs — against the
# LimitRange objects opa-kube-sync replicates (--replicate v1/limitranges).
# policies/limitrange/admission.rego turns the results into the admission
# decision; view.rego into the human-readable report.
#
# What happens, in Kubernetes' order:
#
# 1. Every LimitRange item is defaulted as the API server stores it
#    (SetDefaults_LimitRangeItem): for type Container, a missing default
#    (limit) falls back to max, a missing defaultRequest to the default,
#    then to min — so a min becomes the request of a container that sets
#    none, unless the item names a default, defaultRequest or max for it.
# 2. Defaults (mergeContainerResources): a container or init container that
#    names no limit for a resource gets the default; one naming no request
#    gets the defaultRequest — unless it names a limit, which is then its
#    request (the API server's Pod defaulting, SetDefaults_Pod, copies limits
#    to missing requests before admission; it is not patched here).
#    Several LimitRanges: the first by name that defaults a resource wins
#    (Kubernetes takes them in informer order, i.e. unspecified); within
#    one LimitRange, the last Container item naming it.
# 3. Checks (PodValidateLimitFunc) on the defaulted containers, for every
#    item of every LimitRange: min / max / maxLimitRequestRatio per container
#    and init container (type Container) and on the pod totals (type Pod).
#    Only resources a LimitRange names are tracked.
#
# Pod totals (podRequests / podLimits in the LimitRanger, the scheduler's
# rule): app containers and sidecars (init containers with restartPolicy
# Always) are summed; each other init container runs alone beside the
# sidecars started before it; the pod needs the larger of the two. A
# container without the resource adds nothing. With pod-level resources
# (spec.resources, PodLevelResources) cpu and memory are taken from there.
#
# Messages name who, what, the value and the bound and the LimitRange:
#   container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" in "shop")
# A malformed quantity — in the object or in a LimitRange — is a denial that
# names it. An existing Pod (it has status.phase) is not checked again:
# containers are immutable and Kubernetes skips Pod updates too.
#
# Every quantity a decision reads is parsed once (parsed); the checks compare
# the parsed values at Kubernetes' precision (milli-units, or whole units
# beyond MaxMilliValue), and messages are built only for what fails.
package io.k8s.federation.limitrange

import data.io.k8s.federation.limitrange.quantity
import data.io.k8s.federation.podspec
import data.io.k8s.federation.replicated

namespace := input.metadata.namespace

# Every replicated LimitRange, {namespace: {name: LimitRange}}; undefined when
# none is. It reads no input, so a tool can tell the pack is idle without
# looking at an object (fedplace what-if, insight/inputs.py).
all_ranges := found if {
	found := replicated.collection("limitranges")
	is_object(found)
	count(found) > 0
}

# The LimitRanges of the object's namespace, {name: LimitRange}.
ranges := found if {
	found := all_ranges[namespace]
	is_object(found)
	count(found) > 0
}

# Their names, sorted ([] without any).
range_names := sort([name | some name, _ in ranges])

# Whether the pack has anything to say about the object.
applies if {
	podspec.spec
	ranges
	not podspec.existing_pod
}

fields := {"min", "max", "default", "defaultRequest", "maxLimitRequestRatio"}

constraint_fields := ["min", "max", "maxLimitRequestRatio"]

# -- LimitRange items ----------------------------------------------------------

# The items that concern pods (type Container or Pod), in LimitRange name
# order, then list order: {"pos", "range", "index", "type", "raw"}.
raw_items := [{"pos": pos, "range": name, "index": index, "type": raw.type, "raw": raw} |
	some pos, name in range_names
	limits := ranges[name].spec.limits
	is_array(limits)
	some index, raw in limits
	raw.type in {"Container", "Pod"}
]

# Every quantity of those items: {"item", "field", "r", "v"}.
_entries := [{"item": item, "field": field, "r": r, "v": v} |
	some item in raw_items
	some field, values in item.raw
	field in fields
	is_object(values)
	some r, v in values
]

# Every resource those items name; no other resource is looked at.
tracked := {e.r | some e in _entries}

# Every quantity the decision reads, parsed once: {value: quantity.parse(value)}.
parsed := {v: quantity.parse(v) | some v in _values}

_values contains e.v if some e in _entries

_values contains v if {
	some c in containers
	some kind in ["requests", "limits"]
	some v in c[kind]
}

_values contains v if {
	some values in _pod_level
	some v in values
}

# The bounds (min, max, maxLimitRequestRatio) that parse, by field:
# {"min": […], "max": […], "maxLimitRequestRatio": […]}, each {"type",
# "field", "r", "q", "range"}.
bounds_of := {field: [{"type": e.item.type, "field": field, "r": e.r, "q": q, "range": e.item.range} |
	some e in _entries
	e.field == field
	q := parsed[e.v]
	q.ok
] |
	some field in constraint_fields
}

# SetDefaults_LimitRangeItem, then the LimitRanger's merge: the default limit
# of a resource is the item's default, else its max; the default request the
# item's defaultRequest, else that default limit, else its min. The first
# LimitRange by name giving one wins; within one LimitRange its last
# Container item. {r: {"q", "range", "index", "field", "source": "default"}}
# (source as the containers' values that come from it say it).
default_limits := _defaults(_limit_candidates)

default_requests := _defaults(_request_candidates)

_limit_candidates := _default_candidates(["default", "max"])

_request_candidates := _default_candidates(["defaultRequest", "default", "max", "min"])

# The Container items, by precedence: the first LimitRange by name, then its
# last item.
_container_items := [item |
	some [_, _, item] in sort([[item.pos, 0 - item.index, item] | some item in raw_items; item.type == "Container"])
]

# Per tracked resource, the Container items giving it a default, by
# precedence: [[field, value, item]], with the item's first field in order
# naming the resource.
_default_candidates(order) := {r: candidates |
	some r in tracked
	candidates := [[field, v, item] |
		some item in _container_items
		found := [[f, v] | some f in order; v := item.raw[f][r]]
		count(found) > 0
		[field, v] := found[0]
	]
	count(candidates) > 0
}

# The first candidate whose value parses.
_defaults(candidates) := {r: {"q": parsed[v], "range": item.range, "index": item.index, "field": field, "source": "default"} |
	some r, of_r in candidates
	[field, v, item] := [c | some c in of_r; parsed[c[1]].ok][0]
}

# Malformed LimitRanges.
range_errors contains msg if {
	some e in _entries
	q := parsed[e.v]
	not q.ok
	msg := sprintf("%s: spec.limits[%d].%s[%s] \"%s\" %s", [_range_ref(e.item.range), e.item.index, e.field, e.r, q.text, q.error])
}

range_errors contains msg if some msg in _structure_errors

# LimitRanges whose structure is broken (apart from their quantities).
_structure_errors contains msg if {
	some name, range in ranges
	limits := range.spec.limits
	not is_array(limits)
	msg := sprintf("%s: spec.limits is not a list", [_range_ref(name)])
}

_structure_errors contains msg if {
	some name, range in ranges
	limits := range.spec.limits
	is_array(limits)
	some index, raw in limits
	not is_object(raw)
	msg := sprintf("%s: spec.limits[%d] is not an object", [_range_ref(name), index])
}

_structure_errors contains msg if {
	some item in raw_items
	some field, values in item.raw
	field in fields
	not is_object(values)
	msg := sprintf("%s: spec.limits[%d].%s is not a map of resource quantities", [_range_ref(item.range), item.index, field])
}

# -- containers ----------------------------------------------------------------

# App containers, then init containers: {"kind", "field", "index", "sidecar",
# "name", "resources" (as written in the object), "requests", "limits" (what
# it names for tracked resources, {r: value})}.
containers := array.concat(
	[_container("container", "containers", i, c, false) | some i, c in _app_containers],
	[_container("init container", "initContainers", i, c, _restarts_always(c)) | some i, c in _init_containers],
)

_app_containers := list if {
	list := podspec.spec.containers
	is_array(list)
} else := []

_init_containers := list if {
	list := podspec.spec.initContainers
	is_array(list)
} else := []

_container(kind, field, i, c, sidecar) := {
	"kind": kind, "field": field, "index": i, "name": object.get(c, "name", ""), "sidecar": sidecar,
	"resources": resources,
	"requests": {r: v | some r in tracked; v := resources.requests[r]},
	"limits": {r: v | some r in tracked; v := resources.limits[r]},
} if {
	resources := object.get(c, "resources", null)
}

# A sidecar: an init container that keeps running.
_restarts_always(c) if c.restartPolicy == "Always"

else := false

# Requests and limits after defaulting, per container (same order as
# containers), as the checks look at them: {"c" (the container), "requests":
# {r: value}, "limits": {r: value}, "big"}, each value {"q", "source"} with
# source "explicit", "limit" (the request is the container's limit) or
# "default" (plus the LimitRange's "range" and "field"); "big" names the
# resources whose request or limit is beyond MaxMilliValue.
effective := [_effective(c) | some c in containers]

_effective(c) := {"c": c, "requests": requests, "limits": limits, "big": big} if {
	limits := _override(default_limits, _explicit(c.limits, "explicit"))
	requests := _override(
		_override(default_requests, _explicit(c.limits, "limit")),
		_explicit(c.requests, "explicit"),
	)
	big := {r |
		some values in [requests, limits]
		some r, e in values
		e.q.ok
		not e.q.small
	}
}

# {r: {"q", "source"}} of declared values.
_explicit(values, source) := {r: {"q": parsed[v], "source": source} | some r, v in values}

# base with the entries of top instead of its own for the keys top has.
_override(base, top) := object.union(object.remove(base, object.keys(top)), top)

# -- pod totals ----------------------------------------------------------------

# Pod-level requests and limits (spec.resources) of cpu and memory:
# {"requests": {r: value}, "limits": {r: value}}.
_pod_level := {kind: {r: v |
	some r in ({"cpu", "memory"} & tracked)
	v := podspec.spec.resources[kind][r]
} |
	some kind in ["requests", "limits"]
}

# The resources Pod items name: only those are totalled.
pod_resources := {e.r | some e in _entries; e.item.type == "Pod"}

# {kind: {r: {"q", "source"}}}: source "pod" (pod-level resources, when
# they parse) or "total".
pod_totals := {kind: object.union(from_pod, totals) |
	some kind, level in _pod_level
	from_pod := {r: {"q": q, "source": "pod"} | some r in pod_resources; q := parsed[level[r]]; q.ok}
	totals := {r: {"q": q, "source": "total"} |
		some r in (pod_resources - object.keys(from_pod))
		sums := [quantity.total(parts) |
			some phase in _phases
			parts := [e.q | some values in phase; e := values[kind][r]; e.q.ok]
			count(parts) > 0
		]
		count(sums) > 0
		q := _largest(sums)
	}
}

# What runs together, as lists of effective values: the app containers and
# sidecars, which run for the pod's whole life (the first phase); then, for
# each init container, itself with the sidecars started before it.
_phases := array.concat([running], [phase |
	some k, c in containers
	c.field == "initContainers"
	phase := [effective[j] | some j, d in containers; _started_by(d, j, k)]
]) if {
	running := [effective[k] | some k, c in containers; _runs_throughout(c)]
}

_runs_throughout(c) if c.field == "containers"

_runs_throughout(c) if c.sidecar

# While init container k runs: itself and the sidecars before it.
_started_by(_, j, k) if j == k

_started_by(d, j, k) if {
	d.sidecar
	j < k
}

_largest(qs) := [q | some q in qs; every other in qs { not quantity.less(q, other) }][0]

# -- mutation ------------------------------------------------------------------

# What defaulting adds, per container index: {"limits": {r: text}, "requests": {r: text}}
# (non-empty maps only).
added := {k: adds |
	some k, values in effective
	adds := {kind: texts |
		some kind in ["limits", "requests"]
		texts := {r: e.q.text | some r, e in values[kind]; e.source == "default"}
		count(texts) > 0
	}
	count(adds) > 0
}

# RFC 6902 operations adding the defaults to the object as submitted: the
# resources object, or the limits / requests object, or single entries.
patch := [op |
	applies
	some k, adds in _decision_added
	some op in _container_ops(containers[k], adds)
]

# added, from the common case when it holds (the same value, found at less cost).
_decision_added := common_added if common_case

else := added

_container_ops(c, adds) := [op |
	some kind in ["limits", "requests"]
	values := adds[kind]
	some op in _kind_ops(c, kind, values)
] if {
	is_object(c.resources)
} else := [{"op": "add", "path": _resources_path(c), "value": adds}]

_kind_ops(c, kind, values) := [{"op": "add", "path": sprintf("%s/%s/%s", [_resources_path(c), kind, _escape(r)]), "value": values[r]} |
	some r in sort(object.keys(values))
] if {
	is_object(c.resources[kind])
} else := [{"op": "add", "path": sprintf("%s/%s", [_resources_path(c), kind]), "value": values}]

_resources_path(c) := sprintf("%s/%s/%d/resources", [podspec.pointer, c.field, c.index])

_escape(key) := replace(replace(key, "~", "~0"), "/", "~1")

# Kubernetes' own record of what it defaulted, on Pods (kubernetes.io/limit-ranger):
# "LimitRanger plugin set: cpu, memory request for container app; cpu limit for container app".
annotation := sprintf("LimitRanger plugin set: %s", [concat("; ", parts)]) if {
	input.kind == "Pod"
	applies
	parts := [sprintf("%s %s for %s %s", [concat(", ", sort(object.keys(adds[kind]))), _singular(kind), c.kind, c.name]) |
		some k, adds in _decision_added
		c := containers[k]
		some kind in ["requests", "limits"]
		adds[kind]
	]
	count(parts) > 0
}

# What defaulting sets, in words, e.g.
# container "app": cpu limit 500m (LimitRange "defaults").
defaulted := [sprintf("%s: %s %s %s (LimitRange \"%s\")", [_who(containers[k]), r, _singular(kind), e.q.text, e.range]) |
	applies
	some k, values in effective
	some kind in ["requests", "limits"]
	some r in sort(object.keys(values[kind]))
	e := values[kind][r]
	e.source == "default"
]

# -- checks --------------------------------------------------------------------

# What the checks of each item type look at: each container (Container), the
# pod totals (Pod, named by "who"); each {"requests", "limits", "big"} (see
# effective).
subjects := {"Container": effective, "Pod": [{
	"who": "pod", "requests": pod_totals.requests, "limits": pod_totals.limits,
	"big": {r | some kind in ["requests", "limits"]; some r, e in pod_totals[kind]; e.q.ok; not e.q.small},
}]}

# Every violated constraint; empty when the pack does not apply.
violations contains msg if {
	applies
	some msg in range_errors
}

# Malformed quantities of the object.
violations contains msg if {
	applies
	some c in containers
	some kind in ["requests", "limits"]
	some r, v in c[kind]
	q := parsed[v]
	not q.ok
	msg := sprintf("%s: %s %s \"%s\" %s", [_who(c), r, _singular(kind), q.text, q.error])
}

violations contains msg if {
	applies
	some kind, values in _pod_level
	some r, v in values
	q := parsed[v]
	not q.ok
	msg := sprintf("pod: %s %s \"%s\" %s", [r, _singular(kind), q.text, q.error])
}

# One message per violated bound, the first problem found, as Kubernetes
# reports it (minConstraint, maxConstraint, limitRequestRatioConstraint).
violations contains msg if {
	applies
	some field, bounds in bounds_of
	some b in bounds
	some s in subjects[b.type]
	problem := _problem(field, s, b.r, b)
	msg := sprintf("%s: %s (%s)", [_subject_who(s), problem, _range_ref(b.range)])
}

# A request above its limit, caused by a default: the API server would refuse
# the pod (ValidateResourceRequirements), so the pack says why first. (Only
# where a limit was defaulted: a defaulted request comes with a defaulted
# limit or none, as a container naming a limit has it as its request.)
violations contains msg if {
	applies
	some k, adds in added
	some r, _ in adds.limits
	values := effective[k]
	request := values.requests[r]
	limit := values.limits[r]
	request.q.ok
	limit.q.ok
	quantity.less(limit.q, request.q)
	msg := sprintf("%s: %s request %s is above its limit %s", [_who(values.c), r, _shown(request), _shown(limit)])
}

# A subject as messages name it: a container, or the pod.
_subject_who(s) := _who(s.c) if s.c

else := s.who

_problem("min", s, r, b) := _min_problem(s, r, b, _precision(s, r, b))

_problem("max", s, r, b) := _max_problem(s, r, b, _precision(s, r, b))

_problem("maxLimitRequestRatio", s, r, b) := _ratio_problem(s, r, b, _precision(s, r, b))

# min: a request is needed, at least min; a limit, if any, at least min too.
# (p: the precision the values compare at, see _precision.)
_min_problem(s, r, b, p) := sprintf("no %s request, but min is %s", [r, b.q.text]) if {
	not s.requests[r]
} else := _says(s, r, "request", e, "is below min", b) if {
	e := s.requests[r]
	e.q.ok
	e.q[p] < b.q[p]
} else := _says(s, r, "limit", e, "is below min", b) if {
	s.requests[r].q.ok
	e := s.limits[r]
	e.q.ok
	e.q[p] < b.q[p]
}

# max: a limit is needed, at most max; a request, if any, at most max too.
_max_problem(s, r, b, p) := sprintf("no %s limit, but max is %s", [r, b.q.text]) if {
	not s.limits[r]
} else := _says(s, r, "limit", e, "exceeds max", b) if {
	e := s.limits[r]
	e.q.ok
	e.q[p] > b.q[p]
} else := _says(s, r, "request", e, "exceeds max", b) if {
	s.limits[r].q.ok
	e := s.requests[r]
	e.q.ok
	e.q[p] > b.q[p]
}

# maxLimitRequestRatio: a non-zero request and limit, limit / request at most
# the ratio — compared exactly (Kubernetes divides in float64, which can
# refuse a ratio exactly equal to the bound; see docs/policies.md).
_ratio_problem(s, r, b, p) := sprintf("%s maxLimitRequestRatio %s needs a non-zero request", [r, b.q.text]) if {
	not _positive(s.requests, r)
	not _broken(s.requests, r)
} else := sprintf("%s maxLimitRequestRatio %s needs a non-zero limit", [r, b.q.text]) if {
	_positive(s.requests, r)
	not _positive(s.limits, r)
	not _broken(s.limits, r)
} else := sprintf("%s limit %s is %s times the request %s, above maxLimitRequestRatio %s", [r, _shown_in(s, r, limit), _ratio_text(lim, req), _shown_in(s, r, request), b.q.text]) if {
	request := s.requests[r]
	limit := s.limits[r]
	req := request.q[p]
	lim := limit.q[p]
	req > 0
	lim > 0
	_ratio_exceeded(lim, req, b.q)
}

_positive(values, r) if values[r].q.units > 0

_broken(values, r) if {
	e := values[r]
	not e.q.ok
}

# Kubernetes' requestLimitEnforcedValues: a subject's request and limit and a
# bound compare in milli-units when all three are at most MaxMilliValue, else
# in units.
_precision(s, r, b) := "milli" if {
	not r in s.big
	b.q.small
} else := "units"

# lim / req > ratio, lim and req at the same precision.
_ratio_exceeded(lim, req, ratio) if {
	ratio.small
	lim * 1000 > ratio.milli * req
}

_ratio_exceeded(lim, req, ratio) if {
	not ratio.small
	lim > ratio.units * req
}

# lim / req with at most two decimals, rounded down: 4, 7.5, 3.33.
_ratio_text(lim, req) := text if {
	hundredths := floor((lim * 100) / req)
	text := _decimals(floor(hundredths / 100), hundredths % 100)
}

_decimals(whole, 0) := format_int(whole, 10)

_decimals(whole, part) := sprintf("%d.%d", [whole, part / 10]) if {
	part != 0
	part % 10 == 0
}

_decimals(whole, part) := sprintf("%d.%02d", [whole, part]) if part % 10 != 0

# -- the common case -----------------------------------------------------------
#
# Most objects carry plain quantities only — every value involved in the
# short form and a whole number of milli-units ("250m", "0.5", "512Mi",
# "1.5Gi"), at most MaxMilliValue — no init containers and no pod-level
# resources, and break nothing. For them, common_case establishes that
# nothing is violated and common_added what defaulting adds, with integers
# in milli-units alone: exactly how Kubernetes compares such values
# (MilliValue), and exact for sums. It builds none of the parsed quantities,
# value records and messages of the rules above, and costs OPA about a
# quarter of what they cost on such an object (docs/policies.md). When it
# does not hold (something to explain, anything unusual), the rules above
# decide, as they always could: the decision is the same either way
# (ranger_test.rego, tests/packs/limitrange/test_differential.py).

# The decision's values the common case can compare: {value: MilliValue}.
_milli := quantity.plain_milli(_values)

# Every value is one of them, and the rest of the preconditions hold.
_plain if {
	applies
	count(_init_containers) == 0
	_pod_level == {"requests": {}, "limits": {}}
	count(_structure_errors) == 0
	count(_values - object.keys(_milli)) == 0
}

# default_limits and default_requests as {r: value} (every value parses here),
# and in milli-units: each Container item's, as SetDefaults_LimitRangeItem
# makes them, merged so that the one that wins comes last.
_common_defaults := {kind: object.union_n([d[kind] | some d in _item_defaults]) | some kind in ["limits", "requests"]}

# The default limits (default, else max) and default requests (defaultRequest,
# else default, else max, else min) of each Container item, {"limits": {r:
# value}, "requests": {r: value}}: the last LimitRange by name first, each
# one's items in list order (the first LimitRange's last item wins).
_item_defaults := [d |
	some [_, _, item] in sort([[0 - item.pos, item.index, item] | some item in raw_items; item.type == "Container"])
	d := {
		"limits": object.union(object.get(item.raw, "max", {}), object.get(item.raw, "default", {})),
		"requests": object.union_n([object.get(item.raw, f, {}) | some f in ["min", "max", "default", "defaultRequest"]]),
	}
]

_common_default_milli := {kind: {r: _milli[v] | some r, v in values} | some kind, values in _common_defaults}

# Defaulting in milli-units, per container (same order as containers):
# {"requests": {r: milli}, "limits": {r: milli}, "added": what defaulting
# sets, as common_added gives it}. A container's limits: the default limits
# under its own; its requests: the default requests under its limits under
# its own requests (object.union's right-hand side wins).
_common_effective := [{"requests": requests, "limits": limits, "added": added} |
	_plain
	some c in containers
	explicit_limits := {r: _milli[v] | some r, v in c.limits}
	limits := object.union(_common_default_milli.limits, explicit_limits)
	requests := object.union_n([
		_common_default_milli.requests,
		explicit_limits,
		{r: _milli[v] | some r, v in c.requests},
	])
	added := {kind: values |
		some kind, values in {
			"limits": object.remove(_common_defaults.limits, c.limits),
			"requests": object.remove(_common_defaults.requests, object.union(c.limits, c.requests)),
		}
		count(values) > 0
	}
]

# The containers' values: {kind: {r: [milli]}} (a container without one
# gives none).
_common_container_values := {kind: {r: [m | some e in _common_effective; m := e[kind][r]] | some r in tracked} |
	some kind in ["requests", "limits"]
}

# The pod totals: {"requests": {r: milli}, "limits": {r: milli}} over the
# resources Pod items name (only the containers giving one count).
_common_totals := {kind: {r: sum(parts) |
	some r in pod_resources
	parts := values[r]
	count(parts) > 0
} |
	some kind, values in _common_container_values
}

# What the checks look at, by item type: the subjects, and their values in
# the form of _common_container_values.
_common_subjects := {"Container": _common_effective, "Pod": [_common_totals]}

_common_values := {
	"Container": _common_container_values,
	"Pod": {kind: {r: [m] | some r, m in totals} | some kind, totals in _common_totals},
}

# The bounds in milli-units, by field: {field: [[item type, r, milli]]}.
_common_bounds := {field: [[item.type, r, _milli[v]] | some item in raw_items; some r, v in item.raw[field]] |
	some field in constraint_fields
}

# A constraint a subject breaks, in milli-units: in the common case exactly
# the violations the rules above find (and then explain).
# min: every subject has a request, and no request or limit is below min.
_common_broken if {
	some [type, r, _] in _common_bounds.min
	count(object.get(_common_values[type].requests, r, [])) < count(_common_subjects[type])
}

_common_broken if {
	some [type, r, bound] in _common_bounds.min
	some values in _common_values[type]
	min(values[r]) < bound
}

# max: every subject has a limit, and no limit or request is above max.
_common_broken if {
	some [type, r, _] in _common_bounds.max
	count(object.get(_common_values[type].limits, r, [])) < count(_common_subjects[type])
}

_common_broken if {
	some [type, r, bound] in _common_bounds.max
	some values in _common_values[type]
	max(values[r]) > bound
}

# maxLimitRequestRatio: a request and a limit above zero, the limit at most
# ratio x request.
_common_broken if {
	some [type, r, ratio] in _common_bounds.maxLimitRequestRatio
	subjects := _common_subjects[type]
	within := [s |
		some s in subjects
		s.requests[r] > 0
		s.limits[r] > 0
		s.limits[r] * 1000 <= ratio * s.requests[r]
	]
	count(within) < count(subjects)
}

# A pod total beyond MaxMilliValue is compared in units: the rules above.
_common_broken if {
	some values in _common_totals
	some m in values
	m > 9223372036854775000 # MaxMilliValue in milli-units
}

# A defaulted limit below the request (the API server would refuse the pod).
_common_broken if {
	some e in _common_effective
	some r, _ in e.added.limits
	e.requests[r] > e.limits[r]
}

# The common case holds: the object is plain and breaks nothing.
common_case if {
	_plain
	not _common_broken
}

# added, in the common case.
common_added := {k: e.added | some k, e in _common_effective; count(e.added) > 0}

# -- words ---------------------------------------------------------------------

_says(s, r, what, e, relation, b) := sprintf("%s %s %s %s %s", [r, what, _shown_in(s, r, e), relation, b.q.text])

_who(c) := sprintf("%s \"%s\"", [c.kind, c.name])

_range_ref(name) := sprintf("LimitRange \"%s\" in \"%s\"", [name, namespace])

_singular("requests") := "request"

_singular("limits") := "limit"

# A value as a message shows it: its text, and where it came from unless the
# object itself set it. Pod totals are written out when needed.
_shown_in(_, r, e) := sprintf("total %s", [quantity.format(e.q, r)]) if e.source == "total"

else := _shown(e)

_shown(e) := sprintf("%s (default from LimitRange \"%s\")", [e.q.text, e.range]) if e.source == "default"

else := sprintf("%s (its limit)", [e.q.text]) if e.source == "limit"

else := e.q.text
