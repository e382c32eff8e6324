# Unit tests of the LimitRange pack: defaults, min / max / ratio per container
# and per pod, several LimitRanges, quantities, kinds. Run by `opa test
# policies/` and by the project's suite (OPA's evaluator in process).
package io.k8s.federation.limitrange_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.limitrange

lr(name, items) := {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": "shop"}, "spec": {"limits": items}}

pod(containers) := {
	"apiVersion": "v1", "kind": "Pod",
	"metadata": {"name": "p", "namespace": "shop"},
	"spec": {"containers": containers},
}

app(resources) := {"name": "app", "image": "nginx", "resources": resources}

# The decision for obj with the LimitRanges lrs in its namespace.
decide(obj, lrs) := d if {
	d := admission with input as obj with data.kubernetes.limitranges as {"shop": {r.metadata.name: r | some r in lrs}}
}

# obj after the pack's patch.
patched(obj, lrs) := json.patch(obj, object.get(decide(obj, lrs), ["patches", "limitrange"], []))

# The resources of container i of a Pod, after the patch.
resources(obj, lrs, i) := patched(obj, lrs).spec.containers[i].resources

errors(obj, lrs) := {e | some e in object.get(decide(obj, lrs), "errors", [])}

defaults := lr("defaults", [{
	"type": "Container",
	"default": {"cpu": "500m", "memory": "512Mi"},
	"defaultRequest": {"cpu": "100m", "memory": "128Mi"},
}])

# -- defaults --------------------------------------------------------------------

test_defaults_fill_a_container_without_resources if {
	r := resources(pod([{"name": "app", "image": "nginx"}]), [defaults], 0)
	r == {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}
}

test_default_limit_only_where_no_limit_is_set if {
	r := resources(pod([app({"limits": {"cpu": "1"}, "requests": {"cpu": "200m"}})]), [defaults], 0)
	r == {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "200m", "memory": "128Mi"}}
}

test_default_request_only_where_no_request_is_set if {
	r := resources(pod([app({"requests": {"memory": "64Mi"}})]), [defaults], 0)
	r.requests == {"cpu": "100m", "memory": "64Mi"}
	r.limits == {"cpu": "500m", "memory": "512Mi"}
}

# The API server copies a container's limits to its missing requests before
# admission (SetDefaults_Pod): no defaultRequest then, and nothing to patch.
test_a_limit_without_request_is_the_request if {
	obj := pod([app({"limits": {"cpu": "300m", "memory": "256Mi"}})])
	d := decide(obj, [defaults])
	not d.patches.limitrange
	min_cpu := lr("min", [{"type": "Container", "min": {"cpu": "400m"}}])
	e := errors(obj, [min_cpu])
	e == {`container "app": cpu request 300m (its limit) is below min 400m (LimitRange "min" in "shop")`}
}

# SetDefaults_LimitRangeItem: a min is the default request when nothing else
# names the resource; no limit is added for it.
test_min_is_applied_as_the_request if {
	r := resources(pod([{"name": "app", "image": "nginx"}]), [lr("min", [{"type": "Container", "min": {"cpu": "250m"}}])], 0)
	r == {"requests": {"cpu": "250m"}}
}

# … and a max is the default limit, then the default request too.
test_max_is_the_default_limit_and_request if {
	r := resources(pod([{"name": "app", "image": "nginx"}]), [lr("max", [{"type": "Container", "max": {"memory": "1Gi"}, "min": {"memory": "64Mi"}}])], 0)
	r == {"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}
}

test_defaults_apply_to_init_containers if {
	obj := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {
		"initContainers": [{"name": "setup", "image": "busybox", "resources": {"limits": {}}}],
		"containers": [app({"limits": {"cpu": "1", "memory": "1Gi"}})],
	}}
	p := patched(obj, [defaults])
	p.spec.initContainers[0].resources == {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}
	p.spec.containers[0].resources == {"limits": {"cpu": "1", "memory": "1Gi"}}
}

# The patch adds to what the object has: a null or missing limits / requests
# object, or single entries of existing ones.
test_patch_applies_to_the_object_as_submitted if {
	obj := pod([
		{"name": "a", "image": "x"},
		app({"limits": null, "requests": {"cpu": "50m"}}),
		{"name": "b", "image": "x", "resources": {}},
	])
	d := decide(obj, [defaults])
	ops := d.patches.limitrange
	ops[0] == {"op": "add", "path": "/spec/containers/0/resources", "value": {
		"limits": {"cpu": "500m", "memory": "512Mi"},
		"requests": {"cpu": "100m", "memory": "128Mi"},
	}}
	ops[1] == {"op": "add", "path": "/spec/containers/1/resources/limits", "value": {"cpu": "500m", "memory": "512Mi"}}
	ops[2] == {"op": "add", "path": "/spec/containers/1/resources/requests/memory", "value": "128Mi"}
	p := json.patch(obj, ops)
	p.spec.containers[2].resources.requests == {"cpu": "100m", "memory": "128Mi"}
}

test_resource_names_are_escaped_in_patch_paths if {
	gpus := lr("gpus", [{"type": "Container", "default": {"nvidia.com/gpu": "1"}}])
	d := decide(pod([app({"limits": {"cpu": "1"}})]), [gpus])
	d.patches.limitrange == [
		{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"},
		{"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"nvidia.com/gpu": "1"}},
	]
}

test_kubernetes_records_defaults_on_pods if {
	obj := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {
		"initContainers": [{"name": "setup", "image": "busybox"}],
		"containers": [app({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}})],
	}}
	d := decide(obj, [defaults])
	d.annotations["kubernetes.io/limit-ranger"] == "LimitRanger plugin set: memory request for container app; memory limit for container app; cpu, memory request for init container setup; cpu, memory limit for init container setup"
}

test_templates_get_no_annotation if {
	d := decide(deployment([{"name": "app", "image": "nginx"}]), [defaults])
	not d.annotations["kubernetes.io/limit-ranger"]
	count(d.patches.limitrange) == 1
}

# -- min / max per container -------------------------------------------------------

bounds := lr("limits", [{"type": "Container", "min": {"cpu": "100m", "memory": "64Mi"}, "max": {"cpu": "2", "memory": "1Gi"}}])

test_the_issue_example_message if {
	e := errors(pod([app({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}})]), [bounds])
	e == {`container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" in "shop")`}
}

test_request_below_min if {
	e := errors(pod([app({"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}})]), [bounds])
	e == {`container "app": cpu request 50m is below min 100m (LimitRange "limits" in "shop")`}
}

test_limit_below_min if {
	e := errors(pod([app({"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "48Mi"}})]), [bounds])
	e == {`container "app": memory request 32Mi is below min 64Mi (LimitRange "limits" in "shop")`}
	with_request := errors(pod([app({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "90m", "memory": "1Gi"}})]), [bounds])
	with_request == {`container "app": cpu limit 90m is below min 100m (LimitRange "limits" in "shop")`}
}

test_a_defaulted_value_is_named_with_its_origin if {
	wide := lr("a-wide", [{"type": "Container", "default": {"memory": "2Gi"}}])
	e := errors(pod([app({"requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"cpu": "1"}})]), [wide, bounds])
	e == {`container "app": memory limit 2Gi (default from LimitRange "a-wide") exceeds max 1Gi (LimitRange "limits" in "shop")`}
}

test_values_compare_exactly_across_suffixes if {
	e := errors(pod([app({"requests": {"cpu": "0.1", "memory": "1073741824"}, "limits": {"cpu": "2000m", "memory": "1024Mi"}})]), [bounds])
	e == set()
	over := errors(pod([app({"requests": {"cpu": "0.1", "memory": "64Mi"}, "limits": {"cpu": "2", "memory": "1073741825"}})]), [bounds])
	over == {`container "app": memory limit 1073741825 exceeds max 1Gi (LimitRange "limits" in "shop")`}
}

# Kubernetes compares in milli-units rounded up: 0.5m is 1m.
test_milli_rounding_as_kubernetes if {
	tiny := lr("tiny", [{"type": "Container", "min": {"cpu": "1m"}}])
	e := errors(pod([app({"requests": {"cpu": "0.5m"}})]), [tiny])
	e == set()
}

test_every_container_is_checked if {
	obj := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {
		"initContainers": [{"name": "setup", "image": "x", "resources": {"limits": {"cpu": "3", "memory": "64Mi"}}}],
		"containers": [
			app({"limits": {"cpu": "1", "memory": "64Mi"}}),
			{"name": "side", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "4Gi"}}},
		],
	}}
	e := errors(obj, [bounds])
	e == {
		`container "side": memory limit 4Gi exceeds max 1Gi (LimitRange "limits" in "shop")`,
		`init container "setup": cpu limit 3 exceeds max 2 (LimitRange "limits" in "shop")`,
	}
}

# A max needs a limit, which the max itself provides as a default; a min on a
# Pod item needs a request somewhere.
test_missing_values_are_explained if {
	pod_min := lr("pod-min", [{"type": "Pod", "min": {"cpu": "1"}, "max": {"memory": "1Gi"}}])
	e := errors(pod([app({})]), [pod_min])
	e == {
		`pod: no cpu request, but min is 1 (LimitRange "pod-min" in "shop")`,
		`pod: no memory limit, but max is 1Gi (LimitRange "pod-min" in "shop")`,
	}
}

# A request above a defaulted limit: the API server would refuse the pod.
test_request_above_a_defaulted_limit if {
	e := errors(pod([app({"requests": {"cpu": "2"}})]), [defaults])
	e == {`container "app": cpu request 2 is above its limit 500m (default from LimitRange "defaults")`}
}

# -- maxLimitRequestRatio ----------------------------------------------------------

ratio := lr("burst", [{"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}])

test_ratio_above_the_bound if {
	e := errors(pod([app({"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}})]), [ratio])
	e == {`container "app": cpu limit 1 is 4 times the request 250m, above maxLimitRequestRatio 2 (LimitRange "burst" in "shop")`}
}

test_ratio_at_the_bound_is_allowed if {
	e := errors(pod([app({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}})]), [ratio])
	e == set()
	fraction := lr("fraction", [{"type": "Container", "maxLimitRequestRatio": {"cpu": "1.1"}}])
	exact := errors(pod([app({"requests": {"cpu": "10"}, "limits": {"cpu": "11"}})]), [fraction])
	exact == set()
}

test_ratio_needs_a_request_and_a_limit if {
	e := errors(pod([app({"limits": {"memory": "1Gi"}})]), [ratio])
	e == {`container "app": cpu maxLimitRequestRatio 2 needs a non-zero request (LimitRange "burst" in "shop")`}
	zero := errors(pod([app({"requests": {"cpu": "100m"}, "limits": {"cpu": "0"}})]), [ratio])
	zero == {`container "app": cpu maxLimitRequestRatio 2 needs a non-zero limit (LimitRange "burst" in "shop")`}
}

test_ratio_with_decimals_in_the_message if {
	e := errors(pod([app({"requests": {"cpu": "300m"}, "limits": {"cpu": "1"}})]), [ratio])
	e == {`container "app": cpu limit 1 is 3.33 times the request 300m, above maxLimitRequestRatio 2 (LimitRange "burst" in "shop")`}
}

# -- pod totals --------------------------------------------------------------------

pod_max := lr("pod", [{"type": "Pod", "max": {"memory": "1Gi", "cpu": "2"}}])

test_pod_total_is_the_sum_of_containers if {
	obj := pod([
		app({"limits": {"memory": "600Mi", "cpu": "1"}}),
		{"name": "side", "image": "x", "resources": {"limits": {"memory": "600Mi", "cpu": "500m"}}},
	])
	e := errors(obj, [pod_max])
	e == {`pod: memory limit total 1200Mi exceeds max 1Gi (LimitRange "pod" in "shop")`}
}

# Kubernetes' rule (podRequests / podLimits): ordinary init containers run one
# at a time before the app containers, so the pod needs the larger of the
# biggest init container and the sum of the app containers — init containers
# are not added up.
test_init_containers_count_as_the_largest_not_the_sum if {
	obj := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {
		"initContainers": [
			{"name": "migrate", "image": "x", "resources": {"limits": {"memory": "900Mi", "cpu": "1"}}},
			{"name": "warm", "image": "x", "resources": {"limits": {"memory": "900Mi", "cpu": "1"}}},
		],
		"containers": [app({"limits": {"memory": "600Mi", "cpu": "1"}})],
	}}
	e := errors(obj, [pod_max])
	e == set()
	bigger := json.patch(obj, [{"op": "replace", "path": "/spec/initContainers/1/resources/limits/memory", "value": "1100Mi"}])
	e2 := errors(bigger, [pod_max])
	e2 == {`pod: memory limit total 1100Mi exceeds max 1Gi (LimitRange "pod" in "shop")`}
}

# Sidecars (init containers with restartPolicy Always) keep running: they add
# to the app containers, and to every init container started after them.
test_sidecars_are_added_up if {
	obj := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {
		"initContainers": [
			{"name": "proxy", "image": "x", "restartPolicy": "Always", "resources": {"limits": {"memory": "500Mi", "cpu": "100m"}}},
			{"name": "migrate", "image": "x", "resources": {"limits": {"memory": "600Mi", "cpu": "100m"}}},
		],
		"containers": [app({"limits": {"memory": "400Mi", "cpu": "100m"}})],
	}}
	e := errors(obj, [pod_max])
	e == {`pod: memory limit total 1100Mi exceeds max 1Gi (LimitRange "pod" in "shop")`}
	t := limitrange.pod_totals with input as obj with data.kubernetes.limitranges as {"shop": {"pod": pod_max}}
	t.limits.memory.q.whole == 1153433600
}

test_pod_ratio_on_the_totals if {
	pod_ratio := lr("pod-burst", [{"type": "Pod", "maxLimitRequestRatio": {"cpu": "2"}}])
	obj := pod([
		app({"requests": {"cpu": "100m"}, "limits": {"cpu": "500m"}}),
		{"name": "b", "image": "x", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}},
	])
	e := errors(obj, [pod_ratio])
	e == {`pod: cpu limit total 1500m is 7.5 times the request total 200m, above maxLimitRequestRatio 2 (LimitRange "pod-burst" in "shop")`}
}

test_pod_min_on_the_sum if {
	pod_min := lr("pod-min", [{"type": "Pod", "min": {"cpu": "1"}}])
	obj := pod([app({"requests": {"cpu": "300m"}}), {"name": "b", "image": "x", "resources": {"requests": {"cpu": "400m"}}}])
	e := errors(obj, [pod_min])
	e == {`pod: cpu request total 700m is below min 1 (LimitRange "pod-min" in "shop")`}
}

test_pod_level_resources_replace_the_sum if {
	obj := json.patch(pod([app({"limits": {"memory": "2Gi", "cpu": "1"}, "requests": {"memory": "100Mi"}})]), [{"op": "add", "path": "/spec/resources", "value": {"limits": {"memory": "512Mi"}, "requests": {"memory": "100Mi"}}}])
	e := errors(obj, [pod_max])
	e == set()
	without := errors(pod([app({"limits": {"memory": "2Gi", "cpu": "1"}, "requests": {"memory": "100Mi"}})]), [pod_max])
	without == {`pod: memory limit total 2Gi exceeds max 1Gi (LimitRange "pod" in "shop")`}
}

# -- several LimitRanges -------------------------------------------------------------

test_several_limitranges_all_apply_and_all_are_reported if {
	small := lr("small", [{"type": "Container", "max": {"memory": "512Mi"}}])
	e := errors(pod([app({"limits": {"memory": "2Gi", "cpu": "1"}})]), [bounds, small, pod_max])
	e == {
		`container "app": memory limit 2Gi exceeds max 1Gi (LimitRange "limits" in "shop")`,
		`container "app": memory limit 2Gi exceeds max 512Mi (LimitRange "small" in "shop")`,
		`pod: memory limit total 2Gi exceeds max 1Gi (LimitRange "pod" in "shop")`,
	}
}

# Defaults: the first LimitRange by name naming the resource wins; within one
# LimitRange, its last Container item.
test_which_default_wins if {
	a := lr("a", [{"type": "Container", "default": {"cpu": "300m"}}, {"type": "Container", "default": {"cpu": "400m"}}])
	b := lr("b", [{"type": "Container", "default": {"cpu": "900m", "memory": "1Gi"}}])
	r := resources(pod([{"name": "app", "image": "x"}]), [b, a], 0)
	r == {"limits": {"cpu": "400m", "memory": "1Gi"}, "requests": {"cpu": "400m", "memory": "1Gi"}}
}

# -- what is tracked -------------------------------------------------------------------

test_only_named_resources_are_tracked if {
	obj := pod([app({"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "lots"}})])
	e := errors(obj, [bounds])
	e == set()
	gpus := lr("gpus", [{"type": "Container", "max": {"nvidia.com/gpu": "1"}}])
	e2 := errors(obj, [gpus])
	e2 == {`container "app": nvidia.com/gpu limit "lots" is not a valid quantity`}
}

test_malformed_quantities_are_denials if {
	e := errors(pod([app({"requests": {"cpu": "1K"}, "limits": {"cpu": "-1", "memory": "1Gi"}})]), [bounds])
	e == {
		`container "app": cpu request "1K" is not a valid quantity`,
		`container "app": cpu limit "-1" must not be negative`,
	}
	bad := lr("bad", [{"type": "Container", "max": {"memory": "1Gb"}}, {"type": "Pod", "min": {"cpu": true}, "max": "2Gi"}])
	e2 := errors(pod([app({})]), [bad])
	e2 == {
		`LimitRange "bad" in "shop": spec.limits[0].max[memory] "1Gb" is not a valid quantity`,
		`LimitRange "bad" in "shop": spec.limits[1].min[cpu] "true" is not a valid quantity`,
		`LimitRange "bad" in "shop": spec.limits[1].max is not a map of resource quantities`,
	}
}

test_malformed_limitranges_are_denials if {
	e := errors(pod([app({})]), [{"metadata": {"name": "x"}, "spec": {"limits": "none"}}, {"metadata": {"name": "y"}, "spec": {"limits": [1]}}])
	e == {
		`LimitRange "x" in "shop": spec.limits is not a list`,
		`LimitRange "y" in "shop": spec.limits[0] is not an object`,
	}
}

test_items_of_other_types_are_ignored if {
	pvc := lr("storage", [{"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}, "min": {"storage": "x"}}])
	d := decide(pod([app({})]), [pvc])
	count(object.get(d, "errors", [])) == 0
	not d.patches.limitrange
}

test_json_numbers_are_quantities if {
	numbers := lr("numbers", [{"type": "Container", "max": {"cpu": 2}, "default": {"cpu": 0.5}}])
	r := resources(pod([{"name": "app", "image": "x"}]), [numbers], 0)
	r == {"limits": {"cpu": "0.5"}, "requests": {"cpu": "0.5"}}
	e := errors(pod([app({"limits": {"cpu": 3}})]), [numbers])
	e == {`container "app": cpu limit 3 exceeds max 2 (LimitRange "numbers" in "shop")`}
}

# -- what it applies to ------------------------------------------------------------------

deployment(containers) := {
	"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "shop"},
	"spec": {"template": {"spec": {"containers": containers}}},
}

test_every_pod_bearing_kind_is_patched_at_its_pod_spec if {
	template := {"spec": {"containers": [{"name": "app", "image": "x"}]}}
	kinds := {
		"Pod": {"spec": {"containers": [{"name": "app", "image": "x"}]}},
		"ReplicaSet": {"spec": {"template": template}},
		"Deployment": {"spec": {"template": template}},
		"StatefulSet": {"spec": {"template": template}},
		"DaemonSet": {"spec": {"template": template}},
		"Job": {"spec": {"template": template}},
		"CronJob": {"spec": {"jobTemplate": {"spec": {"template": template}}}},
	}
	paths := {kind: path |
		some kind, body in kinds
		obj := object.union({"kind": kind, "metadata": {"name": "x", "namespace": "shop"}}, body)
		d := decide(obj, [defaults])
		[op] := d.patches.limitrange
		path := op.path
	}
	paths == {
		"Pod": "/spec/containers/0/resources",
		"ReplicaSet": "/spec/template/spec/containers/0/resources",
		"Deployment": "/spec/template/spec/containers/0/resources",
		"StatefulSet": "/spec/template/spec/containers/0/resources",
		"DaemonSet": "/spec/template/spec/containers/0/resources",
		"Job": "/spec/template/spec/containers/0/resources",
		"CronJob": "/spec/jobTemplate/spec/template/spec/containers/0/resources",
	}
}

test_nothing_without_limitranges_or_pod_spec if {
	none := admission with input as pod([{"name": "app", "image": "x"}]) with data.kubernetes.limitranges as {"other": {"defaults": defaults}}
	not none.patches.limitrange
	cm := decide({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop"}}, [defaults])
	not cm.patches.limitrange
	count(object.get(cm, "errors", [])) == 0
}

# Containers are immutable: an existing Pod (it has a status) is not checked
# again, as Kubernetes' LimitRanger skips Pod updates.
test_existing_pods_are_left_alone if {
	existing := object.union(pod([app({"limits": {"memory": "4Gi"}})]), {"status": {"phase": "Running"}})
	d := decide(existing, [defaults, bounds])
	count(object.get(d, "errors", [])) == 0
	not d.patches.limitrange
}

# Values and bounds beyond MaxMilliValue are compared in whole units (the
# exact path), as the LimitRanger does; so are pod totals beyond it.
test_values_beyond_max_milli_value if {
	e := errors(pod([app({"requests": {"memory": "8Ei"}, "limits": {"memory": "8Ei"}})]), [bounds])
	e == {`container "app": memory limit 8Ei exceeds max 1Gi (LimitRange "limits" in "shop")`}
	huge := lr("huge", [{"type": "Container", "min": {"memory": "8Ei"}, "max": {"cpu": "9223372036854775807"}}])
	below := errors(pod([app({"requests": {"memory": "1Gi", "cpu": "1"}, "limits": {"memory": "1Gi", "cpu": "2"}})]), [huge])
	below == {`container "app": memory request 1Gi is below min 8Ei (LimitRange "huge" in "shop")`}
	total := errors(pod([app({"limits": {"memory": "8P"}}), {"name": "b", "image": "x", "resources": {"limits": {"memory": "8P"}}}]), [lr("pod", [{"type": "Pod", "max": {"memory": "10P"}}])])
	total == {`pod: memory limit total 16P exceeds max 10P (LimitRange "pod" in "shop")`}
}

# -- a usual decision --------------------------------------------------------------

plain_pod := pod([
	app({"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
	{"name": "b", "image": "x", "resources": {"limits": {"cpu": "0.5"}}},
	{"name": "c", "image": "x"},
])

plain_ranges := [defaults, bounds, ratio_loose, pod_max_loose]

ratio_loose := lr("burst", [{"type": "Container", "maxLimitRequestRatio": {"cpu": "10"}}])

pod_max_loose := lr("pod", [{"type": "Pod", "max": {"memory": "3Gi", "cpu": "2.5"}}])

test_several_limitranges_default_and_bound_a_pod if {
	d := decide(plain_pod, plain_ranges)
	count(d.errors) == 0
	count(d.patches.limitrange) == 3
	r := resources(plain_pod, plain_ranges, 1)
	r == {"limits": {"cpu": "0.5", "memory": "512Mi"}, "requests": {"memory": "128Mi"}}
	added := limitrange.added with input as plain_pod with data.kubernetes.limitranges as {"shop": {r.metadata.name: r | some r in plain_ranges}}
	added == {
		1: {"requests": {"memory": "128Mi"}, "limits": {"memory": "512Mi"}},
		2: {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
	}
}

test_one_more_container_breaks_the_pod_max if {
	tight := lr("pod", [{"type": "Pod", "max": {"memory": "1Gi"}}])
	e := errors(plain_pod, [defaults, tight])
	e == {`pod: memory limit total 2Gi exceeds max 1Gi (LimitRange "pod" in "shop")`}
}

# -- the common case against the rules -------------------------------------------

# What the common case and the rules make of obj: whether the common case
# holds, and both's defaults and the rules' violations.
common(obj, lrs) := {"holds": holds, "common_added": common_added, "added": added, "violations": violations} if {
	with_lrs := {"shop": {r.metadata.name: r | some r in lrs}}
	holds := count([x | x := limitrange.common_case with input as obj with data.kubernetes.limitranges as with_lrs]) > 0
	common_added := limitrange.common_added with input as obj with data.kubernetes.limitranges as with_lrs
	added := limitrange.added with input as obj with data.kubernetes.limitranges as with_lrs
	violations := limitrange.violations with input as obj with data.kubernetes.limitranges as with_lrs
}

# The first LimitRange by name defaults, with its last Container item; the
# default request falls back to default, max, then min, item by item.
test_common_case_defaults_in_the_rules_order if {
	lrs := [
		lr("a", [
			{"type": "Container", "default": {"cpu": "300m"}, "min": {"memory": "32Mi"}},
			{"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}},
		]),
		lr("b", [{"type": "Container", "default": {"cpu": "1", "memory": "512Mi"}, "defaultRequest": {"cpu": "50m", "memory": "64Mi"}}]),
	]
	c := common(pod([{"name": "app", "image": "nginx"}]), lrs)
	c.holds
	c.violations == set()
	c.common_added == c.added
	c.added == {0: {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "2", "memory": "1Gi"}}}
}

# A Pod min with no container naming the resource (or no container at all),
# or a total above max, is for the rules to explain.
test_common_case_bounds_at_their_edges if {
	bounds := lr("bounds", [{"type": "Container", "min": {"cpu": "10m"}}, {"type": "Pod", "min": {"memory": "1Mi"}, "max": {"cpu": "1"}}])
	empty := common(pod([]), [bounds])
	empty.holds == false
	count(empty.violations) == 2
	no_memory := common(pod([app({"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}})]), [bounds])
	no_memory.holds == false
	count(no_memory.violations) == 1
	fine := pod([app({"requests": {"cpu": "100m", "memory": "1Mi"}, "limits": {"cpu": "500m"}})])
	common(fine, [bounds]).holds
	common(fine, [bounds]).violations == set()
	over := pod([
		app({"requests": {"cpu": "100m", "memory": "1Mi"}, "limits": {"cpu": "600m"}}),
		{"name": "b", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "1Mi"}, "limits": {"cpu": "600m"}}},
	])
	common(over, [bounds]).holds == false
	count(common(over, [bounds]).violations) == 1
}
