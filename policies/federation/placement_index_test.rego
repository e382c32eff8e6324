# The placement rules decide the same with opa-kube-sync's cluster index
# (data.kubernetes_index.clusters, lib.rego) as by reading every cluster.
# tests/policies/test_cluster_index.py compares the two on random cases, with
# the index the sync itself builds, explanation included.
package io.k8s.federation.placement_index_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.placement

name_label := "fedplace.io/cluster-name"

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

selector_key := "federation.alpha.kubernetes.io/cluster-selector"

clusters := {
	"gce-eu": {"metadata": {"name": "gce-eu", "labels": {name_label: "gce-eu", "pci-compliance-level": "2", "zone": "3"}}, "status": {"region": "europe-west1"}},
	"aws-eu": {"metadata": {"name": "aws-eu", "labels": {name_label: "aws-eu", "pci-compliance-level": "03", "tier": "gold"}}, "status": {"region": "EU-Central-1"}},
	"karmada-eu": {"metadata": {"name": "karmada-eu", "labels": {name_label: "karmada-eu", "pci-compliance-level": "4"}}, "spec": {"region": "westeurope"}},
	"status-wins": {"metadata": {"name": "status-wins", "labels": {"pci-compliance-level": "4"}}, "status": {"region": "us-east1"}, "spec": {"region": "eu-west-1"}},
	"no-status-region": {"metadata": {"name": "no-status-region", "labels": {name_label: "no-status-region", "pci-compliance-level": "abc"}}, "status": {}, "spec": {"region": "eu-north-1"}},
	"us": {"metadata": {"name": "us", "labels": {name_label: "us", "pci-compliance-level": "3", "tier": "gold", "zone": "12"}}, "status": {"region": "us-central1"}},
	"impostor": {"metadata": {"name": "impostor", "labels": {name_label: "gce-eu", "pci-compliance-level": "9"}}, "status": {"region": "europe-west4"}},
	"bare": {"metadata": {"name": "bare"}},
	"status-not-a-string": {"metadata": {"name": "status-not-a-string", "labels": {"pci-compliance-level": "4"}}, "status": {"region": false}, "spec": {"region": "eu-west-1"}},
}

# The index as opa-kube-sync writes it (common/cluster_index.py), built here from the clusters.
region_of(c) := r if {
	r := object.get(c, ["status", "region"], object.get(c, ["spec", "region"], null))
	is_string(r)
}

index_of(cs) := {
	"layout": 2,
	"names": {n: true | some n, c in cs; is_object(c)},
	"labels": {k: {v: {n: true | some n, c in cs; c.metadata.labels[k] == v} |
		some c2 in cs
		v := c2.metadata.labels[k]
		is_string(v)
	} |
		some c1 in cs
		some k, _ in c1.metadata.labels
	},
	"regions": {r: {n: true | some n, c in cs; region_of(c) == r} | some c in cs; r := region_of(c)},
	"region_labels": {r: {k: {v: {n: true | some n, c in cs; region_of(c) == r; c.metadata.labels[k] == v} |
		some c2 in cs
		region_of(c2) == r
		v := c2.metadata.labels[k]
		is_string(v)
	} |
		some c1 in cs
		region_of(c1) == r
		some k, _ in c1.metadata.labels
	} |
		some c in cs
		r := region_of(c)
	},
	"named_by": {k: {n: true | some n, c in cs; c.metadata.labels[k] == n} |
		some n1, c1 in cs
		some k, v in c1.metadata.labels
		v == n1
	},
}

index := index_of(clusters)

rs(annotations) := {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "shop", "annotations": annotations}}

deployment(annotations) := object.union(rs(annotations), {"kind": "Deployment"})

req(key, operator, values) := {"key": key, "operator": operator, "values": values}

selecting(reqs) := deployment({eu_key: "true", selector_key: json.marshal(reqs)})

inputs := [
	rs({eu_key: "true"}),
	rs({eu_key: "true", pci_key: "3"}),
	rs({pci_key: "4"}),
	rs({pci_key: "0"}),
	rs({pci_key: "high"}),
	rs({eu_key: "true", pci_key: "99"}),
	rs({eu_key: "true", "federation.kubernetes.io/replica-set-preferences": `{"clusters": {"gce-eu": {"weight": 2}, "us": {"weight": 1}}}`}),
	rs({}),
	deployment({eu_key: "true", pci_key: "2"}),
	deployment({pci_key: "1"}),
	selecting([req("tier", "In", ["gold"])]),
	selecting([req("tier", "NotIn", ["gold"])]),
	selecting([{"key": "zone", "operator": "Exists"}]),
	selecting([{"key": "zone", "operator": "DoesNotExist"}]),
	selecting([req("zone", "Gt", ["2"]), req("pci-compliance-level", "Lt", ["4"])]),
	selecting([req(name_label, "In", ["gce-eu", "us"])]),
	selecting([req(name_label, "NotIn", ["aws-eu"]), req("tier", "In", ["silver"])]),
]

scanned(o) := d if {
	d := admission with input as o with data.kubernetes.clusters as clusters
}

looked_up(o) := d if {
	d := admission with input as o with data.kubernetes.clusters as clusters with data.kubernetes_index.clusters as index
}

test_the_index_is_read if {
	placement.cluster_index_ready with data.kubernetes_index.clusters as index
	not placement.cluster_index_ready with data.kubernetes.clusters as clusters
}

test_eligible_clusters_from_the_index if {
	e := placement.eligible_clusters with input as rs({eu_key: "true", pci_key: "3"})
		with data.kubernetes.clusters as clusters
		with data.kubernetes_index.clusters as index
	e == {"aws-eu", "karmada-eu", "impostor"}
}

test_every_decision_is_the_same_either_way if {
	every o in inputs {
		scanned(o) == looked_up(o)
	}
}

# When every cluster carries the name label (the usual federation), the
# selector's clusters come from two counts instead of an intersection: the
# same decisions.
named_clusters := {n: c | some n, c in clusters; c.metadata.labels[name_label] == n}

test_every_decision_is_the_same_either_way_when_every_cluster_is_named if {
	placement.selector_eligible == {"gce-eu", "aws-eu", "karmada-eu", "no-status-region"} with input as deployment({eu_key: "true"})
		with data.kubernetes.clusters as named_clusters
		with data.kubernetes_index.clusters as index_of(named_clusters)
	every o in inputs {
		d1 := admission with input as o with data.kubernetes.clusters as named_clusters
		d2 := admission with input as o
			with data.kubernetes.clusters as named_clusters
			with data.kubernetes_index.clusters as index_of(named_clusters)
		d1 == d2
	}
}

test_the_cases_are_not_all_alike if {
	decisions := {json.marshal(looked_up(o)) | some o in inputs}
	count(decisions) >= 12
}

# An index of a layout these rules do not know (here the previous one) is not
# read: here it would name no cluster.
test_an_index_of_another_layout_is_ignored if {
	e := placement.eligible_clusters with input as rs({eu_key: "true", pci_key: "3"})
		with data.kubernetes.clusters as clusters
		with data.kubernetes_index.clusters as {"layout": 1, "names": {}, "labels": {}, "regions": {}}
	e == {"aws-eu", "karmada-eu", "impostor"}
}

test_karmada_bindings_decide_the_same_either_way if {
	templates := {"shop": {"web": object.union(deployment({eu_key: "true", pci_key: "3"}), {"metadata": {"uid": "u1"}})}}
	b := {
		"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
		"metadata": {"name": "web-deployment", "namespace": "shop"},
		"spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web", "uid": "u1"}, "placement": {}},
	}
	d1 := admission with input as b with data.kubernetes.clusters as clusters with data.kubernetes.deployments as templates
	d2 := admission with input as b
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.kubernetes_index.clusters as index
	d1 == d2
	# the allowed clusters are fewer: the annotation names them
	d2.annotations["fedplace.io/excluded-clusters"] == {"allExcept": ["aws-eu", "impostor", "karmada-eu"]}
}
