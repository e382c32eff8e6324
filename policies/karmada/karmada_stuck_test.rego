package io.k8s.federation.karmada.stuck_test

import data.io.k8s.federation.karmada
import data.io.k8s.federation.placement.decision
import data.io.k8s.federation.remediation

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

clusters := {
	"eu-1": {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "eu-1"}, "spec": {"region": "eu-west-1"}},
	"us-1": {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "us-1"}, "spec": {"region": "us-east-1"}},
	"us-2": {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "us-2"}, "spec": {"region": "us-west-2"}},
}

deployments := {"shop": {
	"eu": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "eu", "namespace": "shop", "uid": "u-eu", "annotations": {eu_key: "true"}}},
	"free": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "free", "namespace": "shop", "uid": "u-free"}},
}}

failed := [{"type": "Scheduled", "status": "False", "reason": "SchedulerError", "message": "0/3 clusters are available: spread constraint"}]

binding(template, scheduled) := failing(template, scheduled, failed)

failing(template, scheduled, conditions) := {
	"apiVersion": "work.karmada.io/v1alpha2",
	"kind": "ResourceBinding",
	"metadata": {"name": concat("-", [template, "deployment"]), "namespace": "shop"},
	"spec": {
		"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": template, "uid": concat("-", ["u", template])},
		"placement": {"clusterAffinity": {"exclude": ["us-1", "us-2"]}},
		"clusters": [{"name": c, "replicas": 1} | some c in scheduled],
	},
	"status": {"conditions": conditions},
}

stuck(obj) := s if {
	s := karmada.stuck_clusters with input as obj
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
}

report(obj) := r if {
	r := decision.stuck with input as obj
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
}

test_a_forbidden_scheduled_cluster_is_stuck if {
	stuck(binding("eu", ["eu-1", "us-2"])) == {"us-2"}
	r := report(binding("eu", ["eu-1", "us-2"]))
	r.targets == ["us-2"]
	r.reason == "PlacementStuck"
	startswith(r.message, "ResourceBinding shop/eu-deployment: Karmada's scheduler kept clusters the placement policy forbids: us-2; its placement excludes them but rescheduling failed (SchedulerError: 0/3 clusters are available: spread constraint)")
	r.related == [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "eu", "uid": "u-eu"}]
}

test_allowed_scheduled_clusters_are_not_stuck if {
	count(stuck(binding("eu", ["eu-1"]))) == 0
	not report(binding("eu", ["eu-1"]))
	count(stuck(binding("free", ["us-1", "us-2"]))) == 0
}

test_unscheduled_binding_is_not_stuck if {
	count(stuck(binding("eu", []))) == 0
	b := json.remove(binding("eu", []), ["spec/clusters"])
	count(stuck(b)) == 0
}

test_a_binding_not_decided_is_not_stuck if {
	b := json.patch(binding("eu", ["us-1"]), [{"op": "replace", "path": "/spec/resource/kind", "value": "FlinkDeployment"}])
	count(stuck(b)) == 0
}

test_remediation_notification_carries_the_report if {
	ns := remediation.notifications with input as {"resources": [{"plural": "resourcebindings", "namespaced": true}]}
		with data.kubernetes.resourcebindings as {"shop": {
			"eu-deployment": binding("eu", ["us-1", "eu-1"]),
			"free-deployment": binding("free", ["us-1"]),
		}}
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
	some n in ns
	n.name == "eu-deployment"
	n.stuck.targets == ["us-1"]
	some m in ns
	m.name == "free-deployment"
	not m.stuck
}

test_not_stuck_before_the_scheduler_tried if {
	ok := [{"type": "Scheduled", "status": "True", "reason": "Success"}]
	count(stuck(failing("eu", ["us-1"], ok))) == 0
	count(stuck(failing("eu", ["us-1"], []))) == 0
}

test_not_stuck_while_the_placement_does_not_exclude_it_yet if {
	b := json.patch(binding("eu", ["eu-1", "us-2"]), [{"op": "replace", "path": "/spec/placement/clusterAffinity/exclude", "value": ["us-1"]}])
	count(stuck(b)) == 0
	b2 := json.patch(binding("eu", ["us-2"]), [{"op": "add", "path": "/spec/placement/clusterAffinities", "value": [{"affinityName": "a", "exclude": ["us-2"]}, {"affinityName": "b"}]}])
	count(stuck(b2)) == 0
}

test_explain_says_a_binding_is_stuck if {
	doc := data.io.k8s.federation.explain.packs.karmada with input as binding("eu", ["eu-1", "us-2"])
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
	doc.stuck == ["us-2"]
	count(doc.warnings) == 1
	contains(doc.warnings[0], "Karmada's scheduler kept clusters the placement policy forbids: us-2")
	ok := data.io.k8s.federation.explain.packs.karmada with input as binding("eu", ["eu-1"])
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
	ok.warnings == []
}

test_explain_of_the_template_says_its_binding_is_stuck if {
	bindings := {"shop": {"eu-deployment": binding("eu", ["eu-1", "us-2"])}}
	doc := data.io.k8s.federation.explain.packs.karmada with input as deployments.shop.eu
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
		with data.kubernetes.resourcebindings as bindings
		with data.io.k8s.federation.placement.settings.control_plane as "karmada"
	count(doc.warnings) == 1
	startswith(doc.warnings[0], "ResourceBinding shop/eu-deployment: Karmada's scheduler kept clusters the placement policy forbids: us-2;")
	fine := data.io.k8s.federation.explain.packs.karmada with input as deployments.shop.free
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
		with data.kubernetes.resourcebindings as bindings
		with data.io.k8s.federation.placement.settings.control_plane as "karmada"
	fine.warnings == []
}
