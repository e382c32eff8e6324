package io.k8s.federation.karmada.dependencies_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.karmada
import data.io.k8s.federation.remediation

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

cluster(name, region, level) := {
	"apiVersion": "cluster.karmada.io/v1alpha1",
	"kind": "Cluster",
	"metadata": {"name": name, "labels": {"pci-compliance-level": level}},
	"spec": {"region": region},
}

clusters := {
	"eu-1": cluster("eu-1", "eu-west-1", "3"),
	"eu-2": cluster("eu-2", "europe-west4", "1"),
	"us-1": cluster("us-1", "us-east-1", "3"),
}

pod_spec := {
	"serviceAccountName": "runner",
	"imagePullSecrets": [{"name": "pull"}],
	"volumes": [
		{"name": "a", "configMap": {"name": "vol-cm"}},
		{"name": "b", "secret": {"secretName": "vol-secret"}},
		{"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
		{"name": "d", "projected": {"sources": [{"configMap": {"name": "proj-cm"}}, {"secret": {"name": "proj-secret"}}]}},
		{"name": "e", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-secret"}}},
		{"name": "f", "rbd": {"image": "i", "secretRef": {"name": "rbd-secret"}}},
	],
	"initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-cm"}}]}],
	"containers": [{
		"name": "app",
		"envFrom": [{"secretRef": {"name": "env-secret"}}],
		"env": [
			{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "key-cm", "key": "k"}}},
			{"name": "B", "valueFrom": {"secretKeyRef": {"name": "key-secret", "key": "k"}}},
			{"name": "C", "value": "plain"},
		],
	}],
}

deployment(name, annotations, spec) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": name, "namespace": "shop", "annotations": annotations},
	"spec": {"replicas": 1, "template": {"spec": spec}},
}

configmap(name, annotations) := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": name, "namespace": "shop", "annotations": annotations},
}

deployments := {"shop": {
	"web": deployment("web", {}, pod_spec),
	"eu-web": deployment("eu-web", {eu_key: "true"}, {"containers": [{"name": "a", "envFrom": [{"configMapRef": {"name": "pci-cm"}}]}]}),
	"plain": deployment("plain", {}, {"containers": [{"name": "a"}]}),
}}

configmaps := {"shop": {
	"vol-cm": configmap("vol-cm", {eu_key: "true"}),
	"pci-cm": configmap("pci-cm", {pci_key: "3"}),
	"key-cm": configmap("key-cm", {}),
	"broken-cm": configmap("broken-cm", {pci_key: "high"}),
}}

binding(template, deps) := {
	"apiVersion": "work.karmada.io/v1alpha2",
	"kind": "ResourceBinding",
	"metadata": {"name": concat("-", [template, "deployment"]), "namespace": "shop", "annotations": {}},
	"spec": {
		"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": template},
		"placement": {"clusterAffinity": {"clusterNames": ["eu-1", "eu-2", "us-1"]}},
		"propagateDeps": deps,
	},
}

decide(obj) := d if {
	d := admission with input as obj
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
		with data.kubernetes.configmaps as configmaps
}

refs(obj) := r if {
	r := karmada.dependencies with input as obj with data.kubernetes.deployments as deployments
}

test_pod_spec_dependencies_as_karmada_reads_them if {
	refs(binding("web", true)) == {
		["ServiceAccount", "runner"], ["Secret", "pull"],
		["ConfigMap", "vol-cm"], ["Secret", "vol-secret"], ["PersistentVolumeClaim", "data"],
		["ConfigMap", "proj-cm"], ["Secret", "proj-secret"], ["Secret", "csi-secret"], ["Secret", "rbd-secret"],
		["ConfigMap", "init-cm"], ["Secret", "env-secret"], ["ConfigMap", "key-cm"], ["Secret", "key-secret"],
	}
}

test_default_service_account_is_no_dependency if {
	b := json.patch(binding("plain", true), [])
	count(refs(b)) == 0
	d := json.patch(deployments, [{"op": "add", "path": "/shop/plain/spec/template/spec/serviceAccountName", "value": "default"}])
	count(karmada.dependencies) == 0 with input as b with data.kubernetes.deployments as d
}

test_without_propagate_deps_no_dependency if {
	count(refs(binding("web", false))) == 0
}

test_the_distributor_annotation_names_dependencies if {
	b := json.patch(binding("plain", true), [{"op": "add", "path": "/metadata/annotations/resourcebinding.karmada.io~1dependencies", "value": json.marshal([
		{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "pci-cm"},
		{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "other", "name": "elsewhere"},
		{"apiVersion": "v1", "kind": "Secret", "namespace": "shop", "labelSelector": {"matchLabels": {"a": "b"}}},
	])}])
	refs(b) == {["ConfigMap", "pci-cm"]}
	decide(b).annotations["fedplace.io/excluded-clusters"] == ["eu-2"]
}

test_a_dependency_requirement_narrows_its_parent if {
	d := decide(binding("web", true))
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
	contains(d.annotations["fedplace.io/placement"], "with its dependencies (propagateDeps) also excluded: ConfigMap shop/vol-cm forbids us-1")
	d.patches.karmada[0] == {"op": "add", "path": "/spec/placement/clusterAffinity/exclude", "value": ["us-1"]}
}

test_without_propagate_deps_the_dependency_is_ignored if {
	d := decide(binding("web", false))
	d.annotations["fedplace.io/excluded-clusters"] == []
}

test_parent_and_dependency_requirements_add_up if {
	d := decide(binding("eu-web", true))
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": ["eu-1"]}
	contains(d.annotations["fedplace.io/placement"], "ConfigMap shop/pci-cm forbids eu-2")
}

test_a_malformed_dependency_closes_its_parent if {
	ds := json.patch(deployments, [{"op": "add", "path": "/shop/plain/spec/template/spec/volumes", "value": [{"name": "x", "configMap": {"name": "broken-cm"}}]}])
	d := admission with input as binding("plain", true)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as ds
		with data.kubernetes.configmaps as configmaps
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": []}
}

test_a_dependency_not_replicated_adds_nothing if {
	d := admission with input as binding("web", true)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
		with data.kubernetes.configmaps as {}
	d.annotations["fedplace.io/excluded-clusters"] == []
}

attached := {
	"apiVersion": "work.karmada.io/v1alpha2",
	"kind": "ResourceBinding",
	"metadata": {
		"name": "vol-cm-configmap", "namespace": "shop",
		"labels": {"resourcebinding.karmada.io/depended-by-5dbb6dbb4": "9e8c1a4e"},
	},
	"spec": {
		"resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "vol-cm"},
		"requiredBy": [{"namespace": "shop", "name": "web-deployment", "clusters": [{"name": "eu-1"}]}],
	},
}

test_an_attached_binding_is_left_alone if {
	d := decide(attached)
	not d.annotations["fedplace.io/excluded-clusters"]
	not d.patches.karmada
	count(d.errors) == 0
	not karmada.decided with input as attached
}

test_remediation_leaves_attached_bindings_alone if {
	ns := remediation.notifications with input as {"resources": [{"plural": "resourcebindings", "namespaced": true}]}
		with data.kubernetes.resourcebindings as {"shop": {"vol-cm-configmap": attached, "web-deployment": binding("web", true)}}
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as deployments
		with data.kubernetes.configmaps as configmaps
	{n.name | some n in ns} == {"web-deployment"}
}

test_explain_says_an_attached_binding_is_left_alone if {
	doc := data.io.k8s.federation.explain.packs.karmada with input as attached
		with data.kubernetes.clusters as clusters
		with data.kubernetes.configmaps as configmaps
	doc.applies == false
	startswith(doc.summary, "a binding Karmada's dependencies distributor generated for ConfigMap shop/vol-cm")
}
