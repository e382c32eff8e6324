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
# Written for the devstack engine's speed as much as OPA's: quantities are
# parsed once per decision, all together (parsed), constraints are checked
# with plain integer comparisons in milli-units, messages are built only for
# what fails, and hot loops read rules through locals and call no helper
# they can do without (see README.md). Plain objects that break nothing —
# most of them — are decided by "the common case" at the end of this file,
# in milli-units alone; everything else by the rules in between.
package io.k8s.federation.limitrange

import data.io.k8s.federation.limitrange.quantity
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

range_names := sort([name | some name, _ in ranges])

existing_pod if {
	input.kind == "Pod"
	input.status.phase
}

# Whether the pack has anything to say about the object.
applies if {
	_spec
	ranges
	not existing_pod
}

fields := {"min", "max", "default", "defaultRequest", "maxLimitRequestRatio"}

constraint_fields := ["min", "max", "maxLimitRequestRatio"]

# -- LimitRange items ----------------------------------------------------------
#
# (Hot loops bind the rules they read to locals first: regorus looks a rule
# up again, ~1 µs, on every reference inside a loop.)

# The items that concern pods (type Container or Pod), in LimitRange name
# order, then list order.
# (Lookups rather than builtins where they give the same: a builtin call
# costs regorus more than several lookups. raw.type is undefined unless raw
# is an object.)
raw_items := [{"pos": pos, "range": name, "index": index, "type": raw.type, "raw": raw} |
	found := ranges
	types := {"Container", "Pod"}
	some pos, name in range_names
	limits := found[name].spec.limits
	is_array(limits)
	some index, raw in limits
	raw.type in types
]

# Every value of those items: {"pos", "range", "index", "type", "field", "r", "v"}.
_entries := [{
	"pos": item.pos, "range": item.range, "index": item.index, "type": item.type,
	"field": field, "r": r, "v": v,
} |
	names := fields
	some item in raw_items
	some field, values in item.raw
	field in names
	is_object(values)
	some r, v in values
]

# The maps of quantities of those items ({r: v}), whatever their field.
_value_maps := [values |
	names := fields
	some item in raw_items
	some field, values in item.raw
	field in names
	is_object(values)
]

# Every resource those items name; no other resource is looked at.
tracked := {r | some values in _value_maps; some r, _ in values}

# Every quantity the decision needs, parsed once: {value: parsed quantity}
# (quantity.parse_all, in its two parts).
parsed := object.union(_short, _unusual)

_short := quantity.parse_short(_values)

# The values not in the short form (usually none), parsed in full: the only
# ones that can be malformed or beyond MaxMilliValue, so the checks for
# those look here first.
_unusual := {v: quantity.parse(v) | some v in _values - object.keys(_short)}

_malformed := {v | some v, q in _unusual; not q.ok}

_big_values := {v | some v, q in _unusual; q.ok; not q.small}

_values contains v if {
	some values in _value_maps
	some _, v in values
}

_values contains v if {
	names := tracked
	some c in containers
	some r in names
	v := c.resources.requests[r]
}

_values contains v if {
	names := tracked
	some c in containers
	some r in names
	v := c.resources.limits[r]
}

_values contains v if {
	some _, values in _pod_level
	some _, v in values
}

# The bounds (min, max, maxLimitRequestRatio) that parse, by field:
# {"min": […], "max": […], "maxLimitRequestRatio": […]}, each {"type",
# "field", "r", "q", "range"}.
bounds_of := {field: [{"type": item.type, "field": field, "r": r, "q": q, "range": item.range} |
	some item in items
	values := item.raw[field]
	is_object(values)
	some r, v in values
	q := p[v]
	q.ok
] |
	items := raw_items
	p := parsed
	some field in constraint_fields
}

# SetDefaults_LimitRangeItem, then the LimitRanger's merge: the default limit
# of a resource is the item's default, else its max; the default request the
# item's defaultRequest, else that default limit, else its min. The first
# LimitRange by name giving one wins; within one LimitRange its last
# Container item. {r: {"q", "range", "index", "field", "source": "default"}}
# (source as the containers' values that come from it say it).
default_limits := _defaults(["default", "max"])

default_requests := _defaults(["defaultRequest", "default", "max", "min"])

# (Per Container item, the first of the fields in order naming the resource,
# if its value parses.)
_defaults(order) := {r: first[2] |
	items := _container_items
	p := parsed
	some r in tracked
	candidates := sort([[item.pos, 0 - item.index, d] |
		some item in items
		found := [[f, v] | some f in order; values := item.raw[f]; v := values[r]]
		[field, v] := found[0]
		q := p[v]
		q.ok
		d := {"q": q, "range": item.range, "index": item.index, "field": field, "source": "default"}
	])
	first := candidates[0]
}

_container_items := [item | some item in raw_items; item.type == "Container"]

# Malformed LimitRanges. (A malformed quantity is one of _malformed: the
# short form takes none.)
range_errors contains msg if {
	_malformed != set()
	p := parsed
	some e in _entries
	q := p[e.v]
	not q.ok
	msg := sprintf("%s: spec.limits[%d].%s[%s] \"%s\" %s", [_range_ref(e.range), e.index, e.field, e.r, q.text, q.error])
}

range_errors contains msg if some msg in _structure_errors

# LimitRanges whose structure is broken (apart from their quantities).
# (A LimitRange without spec.limits has no items. Lookups rather than
# object.get with a path, which costs regorus several µs a call.)
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
	names := fields
	some item in raw_items
	some field, values in item.raw
	field in names
	not is_object(values)
	msg := sprintf("%s: spec.limits[%d].%s is not a map of resource quantities", [_range_ref(item.range), item.index, field])
}

# -- containers ----------------------------------------------------------------

# The pod spec. (Named in full: a rule read through the import makes regorus
# evaluate the whole package.)
_spec := data.io.k8s.federation.podspec.spec

# App containers, then init containers: {"kind", "field", "index",
# "sidecar", "name", "resources"}. The checks read the requests and limits
# of tracked resources from resources (c.resources.requests[r]: undefined
# unless both are objects), as written in the object.
containers := array.concat(
	[{
		"kind": "container", "field": "containers", "index": i, "sidecar": false, "name": object.get(c, "name", ""),
		"resources": object.get(c, "resources", null),
	} |
		list := object.get(_spec, "containers", [])
		is_array(list)
		some i, c in list
	],
	_init_containers,
)

# (The init containers, apart: without any, the pod totals take one phase.)
_init_containers := [{
	"kind": "init container", "field": "initContainers", "index": i, "sidecar": object.get(c, "restartPolicy", "") == "Always",
	"name": object.get(c, "name", ""), "resources": object.get(c, "resources", null),
} |
	list := object.get(_spec, "initContainers", [])
	is_array(list)
	some i, c in list
]

# Requests and limits after defaulting, per container (same order as
# containers), as the checks look at them: {"c" (the container), "requests":
# {r: value}, "limits": {r: value}, "big"}, each value {"q", "source"} with
# source "explicit", "limit" (the request is the container's limit) or
# "default" (plus the LimitRange's "range" and "field"); "big" names the
# resources whose request or limit is beyond MaxMilliValue (compared in
# units, on the exact path; only values _big_values holds can be).
effective := [{"c": c, "requests": requests, "limits": limits, "big": big} |
	p := parsed
	names := tracked
	default_limit := default_limits
	default_request := default_requests
	bigs := _big_values
	some c in containers

	# (c.resources.limits[r]: undefined unless both are objects; the
	# defaults name tracked resources only)
	limits := object.union(
		{r: e | some r, e in default_limit; not c.resources.limits[r]},
		{r: {"q": p[v], "source": "explicit"} | some r in names; v := c.resources.limits[r]},
	)
	requests := object.union_n([
		{r: e | some r, e in default_request; not c.resources.requests[r]; not c.resources.limits[r]},
		{r: {"q": p[v], "source": "limit"} | some r in names; v := c.resources.limits[r]; not c.resources.requests[r]},
		{r: {"q": p[v], "source": "explicit"} | some r in names; v := c.resources.requests[r]},
	])
	big := {r |
		bigs != set()
		some values in [requests, limits]
		some r, e in values
		e.q.ok
		not e.q.small
	}
]

# -- pod totals ----------------------------------------------------------------

# Pod-level requests and limits (spec.resources) of cpu and memory.
_pod_level := {kind: values |
	names := tracked
	some kind in ["requests", "limits"]
	values := {r: v |
		level := _spec.resources[kind]
		some r in ["cpu", "memory"]
		r in names
		v := level[r]
	}
}

# The resources Pod items name: only those are totalled.
pod_resources := {r |
	names := fields
	some item in raw_items
	item.type == "Pod"
	some field, values in item.raw
	field in names
	is_object(values)
	some r, _ in values
}

# {kind: {r: {"q", "source"}}}: source "pod" (pod-level resources, when
# they parse) or "total".
pod_totals := {kind: object.union(from_pod, totals) |
	resources := pod_resources
	p := parsed
	phases := _phases
	some kind, level in _pod_level
	from_pod := {r: {"q": q, "source": "pod"} | some r in resources; q := p[level[r]]; q.ok}
	totals := {r: {"q": q, "source": "total"} |
		some r in resources
		not from_pod[r]
		sums := [quantity.total(parts) |
			some phase in phases
			parts := [e.q |
				some values in phase
				of_kind := values[kind]
				e := of_kind[r]
				e.q.ok
			]
			parts != []
		]
		sums != []
		q := _largest(sums)
	}
}

# What runs together, as lists of effective values: the app containers and
# sidecars, which run for the pod's whole life (the first phase); then, for
# each init container, itself with the sidecars started before it. Without
# init containers, all the containers in one phase.
_phases := [effective] if {
	_init_containers == []
} else := array.concat([running], [phase |
	some k, c in cs
	c.field == "initContainers"
	phase := [eff[j] | some j, d in cs; _started_by(d, j, k)]
]) if {
	cs := containers
	eff := effective
	running := array.concat(
		[eff[k] | some k, c in cs; c.field == "containers"],
		[eff[k] | some k, c in cs; c.sidecar],
	)
}

# While init container k runs: itself and the sidecars before it.
_started_by(_, j, k) if j == k

_started_by(d, j, k) if {
	d.sidecar
	j < k
}

_largest(qs) := qs[0] if not qs[1]

else := [q | some q in qs; every other in qs { not quantity.less(q, other) }][0]

# -- mutation ------------------------------------------------------------------

# What defaulting adds, per container index: {"limits": {r: text}, "requests": {r: text}}
# (non-empty maps only).
added := {k: adds |
	some k, values in effective
	adds := {kind: texts |
		some kind in ["limits", "requests"]
		texts := {r: e.q.text | some r, e in values[kind]; e.source == "default"}
		texts != {}
	}
	adds != {}
}

# RFC 6902 operations adding the defaults to the object as submitted: the
# resources object, or the limits / requests object, or single entries.
patch := [op |
	applies
	cs := containers
	some k, adds in _decision_added
	some op in _container_ops(cs[k], adds)
]

# added, from the common case when it holds (the same value, found at less cost).
_decision_added := common_added if common_case

else := added

# (The object tests come first: OPA and regorus disagree on
# `not is_object(x)` when x is undefined.)
_container_ops(c, adds) := [op |
	some kind in ["limits", "requests"]
	values := adds[kind]
	some op in _kind_ops(c, kind, values)
] if {
	is_object(c.resources)
} else := [{"op": "add", "path": _resources_path(c), "value": adds}]

_kind_ops(c, kind, values) := [{"op": "add", "path": sprintf("%s/%s/%s", [_resources_path(c), kind, _escape(r)]), "value": values[r]} |
	some r in sort([name | some name, _ in values])
] if {
	is_object(c.resources[kind])
} else := [{"op": "add", "path": sprintf("%s/%s", [_resources_path(c), kind]), "value": values}]

_resources_path(c) := sprintf("%s/%s/%d/resources", [data.io.k8s.federation.podspec.pointer, c.field, c.index])

_escape(key) := replace(replace(key, "~", "~0"), "/", "~1")

# Kubernetes' own record of what it defaulted, on Pods (kubernetes.io/limit-ranger):
# "LimitRanger plugin set: cpu, memory request for container app; cpu limit for container app".
annotation := sprintf("LimitRanger plugin set: %s", [concat("; ", parts)]) if {
	input.kind == "Pod"
	applies
	cs := containers
	parts := [sprintf("%s %s for %s %s", [concat(", ", sort([r | some r, _ in adds[kind]])), singular, c.kind, c.name]) |
		some k, adds in _decision_added
		c := cs[k]
		some kind in ["requests", "limits"]
		adds[kind]
		singular := _singular(kind)
	]
	count(parts) > 0
}

# What defaulting sets, in words, e.g.
# container "app": cpu limit 500m (LimitRange "defaults").
defaulted := [sprintf("%s: %s %s %s (LimitRange \"%s\")", [_who(cs[k]), r, _singular(kind), e.q.text, e.range]) |
	applies
	cs := containers
	some k, values in effective
	some kind in ["requests", "limits"]
	of_kind := values[kind]
	some r in sort([name | some name, _ in of_kind])
	e := of_kind[r]
	e.source == "default"
]

# -- checks --------------------------------------------------------------------

# What the checks of each item type look at: each container (Container), the
# pod totals (Pod, named by "who"); each {"requests", "limits", "big"} (see
# effective).
subjects := {"Container": effective, "Pod": [{
	"who": "pod", "requests": totals.requests, "limits": totals.limits,
	"big": {r | some kind in ["requests", "limits"]; some r, e in totals[kind]; e.q.ok; not e.q.small},
}]} if {
	totals := pod_totals
}

# Every violated constraint; empty when the pack does not apply.
violations contains msg if {
	applies
	some msg in range_errors
}

# Malformed quantities of the object.
violations contains msg if {
	applies
	_malformed != set()
	p := parsed
	names := tracked
	some c in containers
	some kind in ["requests", "limits"]
	some r in names
	v := c.resources[kind][r]
	q := p[v]
	not q.ok
	msg := sprintf("%s: %s %s \"%s\" %s", [_who(c), r, _singular(kind), q.text, q.error])
}

violations contains msg if {
	applies
	_malformed != set()
	p := parsed
	some kind, values in _pod_level
	some r, v in values
	q := p[v]
	not q.ok
	msg := sprintf("pod: %s %s \"%s\" %s", [r, _singular(kind), q.text, q.error])
}

# One message per violated bound, the first problem found, as Kubernetes
# reports it (minConstraint, maxConstraint, limitRequestRatioConstraint).
# Cheap tests in milli-units, without builtin calls (which cost regorus more
# than the lookups), find the candidates: a superset of the failures, a
# missing, malformed or big value included; the problem functions then say
# exactly what fails, or nothing. Bounds and values beyond MaxMilliValue take
# the exact path below.
violations contains msg if {
	applies
	subs := subjects
	some b in bounds_of.min
	r := b.r
	some s in subs[b.type]
	not s.requests[r]
	msg := _message(s, b, _min_problem(s, r, b))
}

violations contains msg if {
	applies
	subs := subjects
	some b in bounds_of.min
	bound := b.q.milli
	r := b.r
	some s in subs[b.type]
	some values in [s.requests, s.limits]
	values[r].q.milli < bound
	msg := _message(s, b, _min_problem(s, r, b))
}

violations contains msg if {
	applies
	subs := subjects
	some b in bounds_of.max
	r := b.r
	some s in subs[b.type]
	not s.limits[r]
	msg := _message(s, b, _max_problem(s, r, b))
}

violations contains msg if {
	applies
	subs := subjects
	some b in bounds_of.max
	bound := b.q.milli
	r := b.r
	some s in subs[b.type]
	some values in [s.limits, s.requests]
	values[r].q.milli > bound
	msg := _message(s, b, _max_problem(s, r, b))
}

# (The subjects that are fine: a request and a limit above zero, limit <=
# ratio x request, in milli-units; the others are candidates. Not a
# comparison under `not`: OPA and regorus differ on one with an undefined
# operand.)
violations contains msg if {
	applies
	subs := subjects
	some b in bounds_of.maxLimitRequestRatio
	bound := b.q.milli
	r := b.r
	of_type := subs[b.type]
	fine := {j |
		some j, subject in of_type
		request := subject.requests[r].q.milli
		limit := subject.limits[r].q.milli
		request > 0
		limit > 0
		limit * 1000 <= bound * request
	}
	some i, s in of_type
	not fine[i]
	msg := _message(s, b, _ratio_problem(s, r, b))
}

# The exact path: a bound or a value beyond MaxMilliValue.
violations contains msg if {
	applies
	_big_values != set()
	subs := subjects
	some of_field in bounds_of
	some b in of_field
	not b.q.small
	some s in subs[b.type]
	msg := _message(s, b, _problem(b.field, s, b.r, b))
}

violations contains msg if {
	applies
	_big_values != set()
	by_field := bounds_of
	some s in effective
	some r in s.big
	some field in ["min", "max"]
	some b in by_field[field]
	b.type == "Container"
	b.r == r
	msg := _message(s, b, _problem(field, s, r, b))
}

# (A pod total can be big without any value being.)
violations contains msg if {
	applies
	by_field := bounds_of
	some s in subjects.Pod
	some r in s.big
	some field in ["min", "max"]
	some b in by_field[field]
	b.type == "Pod"
	b.r == r
	msg := _message(s, b, _problem(field, s, r, b))
}

_message(s, b, problem) := sprintf("%s: %s (%s)", [_subject_who(s), problem, _range_ref(b.range)])

# A subject as messages name it: a container, or the pod.
_subject_who(s) := _who(s.c) if s.c

else := s.who

_problem(field, s, r, b) := _min_problem(s, r, b) if field == "min"

_problem(field, s, r, b) := _max_problem(s, r, b) if field == "max"

_problem(field, s, r, b) := _ratio_problem(s, r, b) if field == "maxLimitRequestRatio"

# min: a request is needed, at least min; a limit, if any, at least min too.
_min_problem(s, r, b) := sprintf("no %s request, but min is %s", [r, b.q.text]) if {
	not s.requests[r]
} else := _says(s, r, "request", e, "is below min", b) if {
	e := s.requests[r]
	e.q.ok
	_less(s, r, e, b)
} else := _says(s, r, "limit", e, "is below min", b) if {
	s.requests[r].q.ok
	e := s.limits[r]
	e.q.ok
	_less(s, r, e, b)
}

# max: a limit is needed, at most max; a request, if any, at most max too.
_max_problem(s, r, b) := sprintf("no %s limit, but max is %s", [r, b.q.text]) if {
	not s.limits[r]
} else := _says(s, r, "limit", e, "exceeds max", b) if {
	e := s.limits[r]
	e.q.ok
	_more(s, r, e, b)
} else := _says(s, r, "request", e, "exceeds max", b) if {
	s.limits[r].q.ok
	e := s.requests[r]
	e.q.ok
	_more(s, r, e, b)
}

# maxLimitRequestRatio: a non-zero request and limit, limit / request at most
# the ratio — compared exactly (Kubernetes divides in float64, which can
# refuse a ratio exactly equal to the bound; see docs/policies.md).
_ratio_problem(s, r, b) := sprintf("%s maxLimitRequestRatio %s needs a non-zero request", [r, b.q.text]) if {
	not _positive(s, "requests", r)
	not _broken(s, "requests", r)
} else := sprintf("%s maxLimitRequestRatio %s needs a non-zero limit", [r, b.q.text]) if {
	_positive(s, "requests", r)
	not _positive(s, "limits", r)
	not _broken(s, "limits", r)
} else := sprintf("%s limit %s is %s times the request %s, above maxLimitRequestRatio %s", [
	r, _shown_in(s, r, limit), _ratio_text(lim, req), _shown_in(s, r, request), b.q.text,
]) if {
	request := s.requests[r]
	limit := s.limits[r]
	[req, lim] := _values_at(s, r, b, [request.q, limit.q])
	req > 0
	lim > 0
	_ratio_exceeded(lim, req, b.q)
}

_positive(s, kind, r) if {
	values := s[kind]
	values[r].q.units > 0
}

_broken(s, kind, r) if {
	values := s[kind]
	e := values[r]
	not e.q.ok
}

# A value and a bound compared at Kubernetes' precision: milli-units when the
# subject's request and limit and the bound are all small, else units.
_less(s, r, e, b) if {
	_all_small(s, r, b)
	e.q.milli < b.q.milli
}

_less(s, r, e, b) if {
	not _all_small(s, r, b)
	e.q.units < b.q.units
}

_more(s, r, e, b) if {
	_all_small(s, r, b)
	e.q.milli > b.q.milli
}

_more(s, r, e, b) if {
	not _all_small(s, r, b)
	e.q.units > b.q.units
}

_all_small(s, r, b) if {
	not r in s.big
	b.q.small
}

_values_at(s, r, b, qs) := [q.milli | some q in qs] if _all_small(s, r, b)

else := [q.units | some q in qs]

_ratio_exceeded(lim, req, ratio) if {
	ratio.small
	lim * 1000 > ratio.milli * req
}

_ratio_exceeded(lim, req, ratio) if {
	not ratio.small
	lim > ratio.units * req
}

# lim / req with at most two decimals, rounded down: 4, 7.5, 3.33.
_ratio_text(lim, req) := format_int(hundredths / 100, 10) if {
	hundredths := floor((lim * 100) / req)
	hundredths % 100 == 0
} else := sprintf("%d.%d", [floor(hundredths / 100), (hundredths % 100) / 10]) if {
	hundredths := floor((lim * 100) / req)
	hundredths % 10 == 0
} else := sprintf("%d.%02d", [floor(hundredths / 100), hundredths % 100]) if {
	hundredths := floor((lim * 100) / req)
}

# A request above its limit, caused by a default: the API server would refuse
# the pod (ValidateResourceRequirements), so the pack says why first.
# (Only where a limit was defaulted: a defaulted request comes with a
# defaulted limit or none, as a container naming a limit has it as its
# request. quantity.less written out.)
violations contains msg if {
	applies
	eff := effective
	some k, adds in added
	values := eff[k]
	some r, _ in adds.limits
	request := values.requests[r]
	limit := values.limits[r]
	request.q.ok
	limit.q.ok
	[limit.q.whole, limit.q.nano] < [request.q.whole, request.q.nano]
	msg := sprintf("%s: %s request %s is above its limit %s", [_who(values.c), r, _shown(request), _shown(limit)])
}

# -- the common case -----------------------------------------------------------
#
# Most objects are decided without a violation, with plain quantities only:
# every value involved in the short form ("250m", "0.5", "512Mi", "1.5Gi"),
# a whole number of milli-units and small; no init containers, no pod-level
# resources, LimitRanges well formed. For those, common_case establishes
# that nothing is violated, and common_added what defaulting adds, with
# integers in milli-units alone: exactly how Kubernetes compares such values
# (MilliValue), and exact for sums, as every value is whole milli-units. It
# builds none of the parsed quantities, candidates and messages of the rules
# above, which cost the devstack engine about twice as much (README.md).
# When it does not hold (something to explain, anything unusual), the rules
# above decide, as they always could: the decision is the same either way
# (ranger_test.rego, tests/packs/limitrange/test_differential.py).

# The quantities of the decision that the common case can compare: {v: milli}.
_milli := quantity.short_milli(_values)

# Every value is one of them, and the rest of the preconditions hold.
_plain if {
	applies
	_init_containers == []
	_pod_level == {"requests": {}, "limits": {}}
	_structure_errors == set()
	_values - object.keys(_milli) == set()
}

# The default limits and requests, {"limits": {r: value}, "requests": {r: value}}.
_common_defaults := {"limits": _common_default(["default", "max"]), "requests": _common_default(["defaultRequest", "default", "max", "min"])}

# default_limits / default_requests as {r: value} (every value parses here).
_common_default(order) := {r: first[2] |
	items := _container_items
	some r in tracked
	candidates := sort([[item.pos, 0 - item.index, v] |
		some item in items
		found := [v | some f in order; values := item.raw[f]; v := values[r]]
		v := found[0]
	])
	first := candidates[0]
}

# Defaulting in milli-units, per container (same order as containers):
# {"requests": {r: milli}, "limits": {r: milli}, "added_limits": {r: value},
# "added_requests": {r: value}} (what defaulting sets, as common_added gives
# it). A container's limits: the default limits under its own; its requests:
# the default requests under its limits under its own requests
# (object.union's right-hand side wins).
_common_effective := [{"requests": requests, "limits": limits, "added_limits": added_limits, "added_requests": added_requests} |
	_plain
	milli := _milli
	names := tracked
	defaults := _common_defaults
	default_limit := defaults.limits
	default_request := defaults.requests
	default_limit_milli := {r: milli[v] | some r, v in default_limit}
	default_request_milli := {r: milli[v] | some r, v in default_request}
	some c in containers
	explicit_limits := {r: milli[v] | some r in names; v := c.resources.limits[r]}
	explicit_requests := {r: milli[v] | some r in names; v := c.resources.requests[r]}
	added_limits := {r: v | some r, v in default_limit; not explicit_limits[r]}
	added_requests := {r: v | some r, v in default_request; not explicit_requests[r]; not explicit_limits[r]}
	limits := object.union(default_limit_milli, explicit_limits)
	requests := object.union_n([default_request_milli, explicit_limits, explicit_requests])
]

# The pod totals: {"requests": {r: milli}, "limits": {r: milli}} over the
# resources Pod items name (only the containers giving one count).
_common_totals := {"requests": _common_total("requests"), "limits": _common_total("limits")}

_common_total(kind) := {r: sum(parts) |
	eff := _common_effective
	some r in pod_resources
	parts := [m | some e in eff; values := e[kind]; m := values[r]]
	parts != []
}

# What the checks look at, by item type.
_common_subjects := {"Container": _common_effective, "Pod": [_common_totals]}

# A constraint a subject breaks: the tests of the violations above, in
# milli-units, which in the common case find exactly the violations (the
# rules above then say which, and how). A min needs a request at least as
# large and no limit below it; a max, a limit at most as large and no
# request above it; a ratio, both above zero and the limit at most ratio x
# request. The subjects that are fine are counted: one pass per bound.
_common_broken if {
	subs := _common_subjects
	milli := _milli
	some item in raw_items
	of_type := subs[item.type]
	some r, v in item.raw.min
	bound := milli[v]
	low := {j | some j, s in of_type; s.limits[r] < bound}
	fine := {j | some j, s in of_type; s.requests[r] >= bound; not low[j]}
	count(fine) != count(of_type)
}

_common_broken if {
	subs := _common_subjects
	milli := _milli
	some item in raw_items
	of_type := subs[item.type]
	some r, v in item.raw.max
	bound := milli[v]
	high := {j | some j, s in of_type; s.requests[r] > bound}
	fine := {j | some j, s in of_type; s.limits[r] <= bound; not high[j]}
	count(fine) != count(of_type)
}

_common_broken if {
	subs := _common_subjects
	milli := _milli
	some item in raw_items
	of_type := subs[item.type]
	some r, v in item.raw.maxLimitRequestRatio
	bound := milli[v]
	fine := {j |
		some j, subject in of_type
		request := subject.requests[r]
		limit := subject.limits[r]
		request > 0
		limit > 0
		limit * 1000 <= bound * request
	}
	count(fine) != count(of_type)
}

# A pod total beyond MaxMilliValue is compared in units: the rules above.
_common_broken if {
	some _, values in _common_totals
	some _, m in values
	m > 9223372036854775000 # max_milli_value x 1000
}

# A defaulted limit below the request (the API server would refuse the pod).
_common_broken if {
	some e in _common_effective
	some r, _ in e.added_limits
	e.requests[r] > e.limits[r]
}

# The common case holds: the object is plain and breaks nothing.
common_case if {
	_plain
	not _common_broken
}

# added, in the common case.
common_added := {k: adds |
	some k, e in _common_effective
	adds := {kind: texts | some [kind, texts] in [["limits", e.added_limits], ["requests", e.added_requests]]; texts != {}}
	adds != {}
}

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
