package io.k8s.federation.remediation_test

import data.io.k8s.federation.remediation

clusters := {
	"eu-a": {"metadata": {"name": "eu-a", "labels": {"pci-compliance-level": "2"}}, "status": {"region": "europe-west1"}},
	"eu-b": {"metadata": {"name": "eu-b", "labels": {"pci-compliance-level": "1"}}, "status": {"region": "eu-west-1"}},
}

rs(ns, name, annotations) := {
	"apiVersion": "apps/v1", "kind": "ReplicaSet",
	"metadata": {"name": name, "namespace": ns, "annotations": annotations},
}

replicasets := {
	"default": {
		"pci2": rs("default", "pci2", {"policy.federation.alpha.kubernetes.io/pci-compliance-level": "2"}),
		"free": rs("default", "free", {}),
	},
	"shop": {"eu": rs("shop", "eu", {"policy.federation.alpha.kubernetes.io/eu-jurisdiction-required": "true"})},
}

test_notifications_for_constrained_objects_only if {
	ns := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
	{[n.namespace, n.name] | some n in ns} == {["default", "pci2"], ["shop", "eu"]}
}

test_notification_carries_desired_annotations if {
	ns := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
	some n in ns
	n.name == "pci2"
	n.resource == "replicasets"
	n.errors == []
	n.annotations["federation.kubernetes.io/replica-set-preferences"] == `{"clusters":{"eu-a":{"weight":1}},"rebalance":true}`
}

test_unsatisfiable_object_reports_errors if {
	downgraded := json.patch(clusters, [{"op": "replace", "path": "/eu-a/metadata/labels/pci-compliance-level", "value": "1"}])
	ns := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as downgraded
	some n in ns
	n.name == "pci2"
	count(n.errors) == 1
}

test_cluster_scoped_resources if {
	objs := {"top": {"kind": "ReplicaSet", "metadata": {"name": "top", "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": "1"}}}}
	ns := remediation.notifications with input as {"resources": [{"plural": "globalsets", "namespaced": false}]}
		with data.kubernetes.globalsets as objs
		with data.kubernetes.clusters as clusters
	count(ns) == 1
	some n in ns
	n.namespace == ""
	n.resource == "globalsets"
}

test_targeted_objects_only if {
	ns := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
		with input as {"objects": [
			{"resource": "replicasets", "namespace": "shop", "name": "eu"},
			{"resource": "replicasets", "namespace": "default", "name": "free"},
			{"resource": "replicasets", "namespace": "default", "name": "gone"},
			{"resource": "deployments", "namespace": "default", "name": "pci2"},
		]}
	{[n.namespace, n.name] | some n in ns} == {["shop", "eu"]}
}

test_targeted_cluster_scoped if {
	objs := {"top": {"kind": "ReplicaSet", "metadata": {"name": "top", "annotations": {"policy.federation.alpha.kubernetes.io/pci-compliance-level": "1"}}}}
	ns := remediation.notifications with input as {
		"resources": [{"plural": "globalsets", "namespaced": false}],
		"objects": [{"resource": "globalsets", "name": "top"}],
	}
		with data.kubernetes.globalsets as objs
		with data.kubernetes.clusters as clusters
	[n.name | some n in ns] == ["top"]
}

# Remediation evaluates placement alone: a ReplicaSet another pack objects to (here a
# LimitRange violation, which denies it at admission) is still re-placed, and not
# reported unsatisfiable.
test_another_packs_errors_neither_block_nor_count if {
	big := {"name": "app", "image": "nginx", "resources": {"limits": {"memory": "2Gi"}}}
	heavy := object.union(
		rs("default", "heavy", {"policy.federation.alpha.kubernetes.io/pci-compliance-level": "2"}),
		{"spec": {"template": {"spec": {"containers": [big]}}}},
	)
	limits := {"default": {"limits": {
		"apiVersion": "v1", "kind": "LimitRange",
		"metadata": {"name": "limits", "namespace": "default"},
		"spec": {"limits": [{"type": "Container", "max": {"memory": "1Gi"}}]},
	}}}
	admission := data.io.k8s.federation.admission with input as heavy
		with data.kubernetes.clusters as clusters
		with data.kubernetes.limitranges as limits
	count(admission.errors) == 1
	ns := remediation.notifications with data.kubernetes.replicasets as {"default": {"heavy": heavy}}
		with data.kubernetes.clusters as clusters
		with data.kubernetes.limitranges as limits
	some n in ns
	n.name == "heavy"
	n.errors == []
	json.unmarshal(n.annotations["federation.kubernetes.io/replica-set-preferences"]).clusters == {"eu-a": {"weight": 1}}
}

# -- shared decisions (decision_key) ------------------------------------------------

one_key(_, _) := "one"

own_key(_, obj) := obj.metadata.name

unkeyed := n if {
	n := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
}

test_objects_of_one_key_share_the_first_ones_decision if {
	# default/free comes first: its decision (nothing to say) is every object's.
	ns := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
		with remediation.decision_key as one_key
	count(unkeyed) == 2
	count(ns) == 0

	# Targeted at the other two: default/pci2 comes first.
	targeted := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
		with remediation.decision_key as one_key
		with input as {"objects": [
			{"resource": "replicasets", "namespace": "shop", "name": "eu"},
			{"resource": "replicasets", "namespace": "default", "name": "pci2"},
		]}
	{[n.name, n.annotations] | some n in targeted} == {[name, a] | some name in ["eu", "pci2"]; some n in unkeyed; n.name == "pci2"; a := n.annotations}
}

test_a_key_per_object_decides_each_alone if {
	ns := remediation.notifications with data.kubernetes.replicasets as replicasets
		with data.kubernetes.clusters as clusters
		with remediation.decision_key as own_key
	ns == unkeyed
}
