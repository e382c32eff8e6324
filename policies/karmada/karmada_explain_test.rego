# Unit tests of the Karmada explanation (karmada_explain.rego); run by `opa test policies/`
# and by the project's suite (tests/policies) under OPA's evaluator and the engine.
package io.k8s.federation.karmada.explain_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.explain

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

excluded_key := "fedplace.io/excluded-clusters"

why_key := "fedplace.io/placement"

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

deployment(name, annotations) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": name, "namespace": "shop", "uid": concat("-", ["uid", name]), "annotations": annotations},
}

templates := {"shop": {
	"eu": deployment("eu", {eu_key: "true"}),
	"pci": deployment("pci", {pci_key: "3"}),
	"strict": deployment("strict", {eu_key: "true", pci_key: "3"}),
	"nowhere": deployment("nowhere", {eu_key: "true", pci_key: "9"}),
	"free": deployment("free", {}),
	"broken": deployment("broken", {pci_key: "high"}),
}}

binding(template, placement) := b if {
	base := {
		"apiVersion": "work.karmada.io/v1alpha2",
		"kind": "ResourceBinding",
		"metadata": {"name": concat("-", [template, "deployment"]), "namespace": "shop"},
		"spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": template}, "placement": {}},
	}
	b := json.patch(base, [{"op": "add", "path": "/spec/placement", "value": placement} | placement != null])
}

packs(obj) := p if {
	p := explain.packs with input as obj with data.kubernetes.clusters as clusters with data.kubernetes.deployments as templates
}

decide(obj) := d if {
	d := admission with input as obj with data.kubernetes.clusters as clusters with data.kubernetes.deployments as templates
}

# The binding after the webhook: the decision's annotations merged, then its patch.
admitted(obj) := after if {
	d := decide(obj)
	annotated := object.union(obj, {"metadata": object.union(obj.metadata, {"annotations": object.union(
		object.get(obj, ["metadata", "annotations"], {}),
		{k: json.marshal(v) | some k, v in d.annotations; not is_string(v)},
	)})})
	after := json.patch(annotated, object.get(d, ["patches", "karmada"], []))
}

check(entry, requirement) := c if {
	some c in entry.checks
	c.requirement == requirement
}

list_named(doc, name) := l if {
	some l in doc.exclusions
	l.list == name
}

karmada_settings := {"control_plane": "karmada"}

# -- bindings ---------------------------------------------------------------------------------

test_binding_each_requirement_with_the_cluster_value_and_why_excluded if {
	doc := packs(binding("strict", {"clusterAffinity": {"exclude": ["zz-user"]}})).karmada
	doc.applies == true
	doc.template == {"kind": "Deployment", "namespace": "shop", "name": "strict", "replicated": true}
	{r.name | some r in doc.requirements} == {"eu-jurisdiction", "pci-compliance-level"}

	# the template's requirements, from the rule set (contract.rego), as the placement pack shows them
	some eu in doc.requirements
	eu == {
		"name": "eu-jurisdiction", "label": "region", "required": "EU jurisdiction required",
		"source": `annotation policy.federation.alpha.kubernetes.io/eu-jurisdiction-required: "true"`,
		"imposed_by": "workload", "set": "eu_pci",
	}

	# region from spec.region, the level from the label
	check(doc.clusters["eu-2"], "eu-jurisdiction") == {
		"requirement": "eu-jurisdiction", "label": "region", "value": "europe-west4",
		"required": "EU jurisdiction required", "ok": true, "imposed_by": "workload", "set": "eu_pci",
	}
	check(doc.clusters["eu-2"], "pci-compliance-level") == {
		"requirement": "pci-compliance-level", "label": "label pci-compliance-level", "value": "1",
		"required": "PCI compliance level >= 3", "ok": false, "imposed_by": "workload", "set": "eu_pci",
	}
	check(doc.clusters["us-1"], "eu-jurisdiction").ok == false
	check(doc.clusters["us-1"], "pci-compliance-level").ok == true
	doc.clusters["eu-1"].eligible == true
	doc.clusters["eu-1"].excluded == false
	not doc.clusters["eu-1"].exclusion
	doc.clusters["eu-2"].excluded == true
	doc.clusters["eu-2"].exclusion == "added"
	doc.clusters["eu-2"].flags == ["excluded: the decision adds it"]
	doc.excluded == ["eu-2", "us-1"]
	doc.annotated == null
	doc.every_cluster_excluded == false
	doc.summary == "Deployment shop/strict: EU jurisdiction required, PCI compliance level >= 3: 1 of 3 clusters allowed, 2 excluded (eu-2, us-1); the decision adds 2 exclusion(s)"
	list_named(doc, "clusterAffinity") == {
		"list": "clusterAffinity", "path": "/spec/placement/clusterAffinity/exclude",
		"has": ["zz-user"], "after": ["zz-user", "eu-2", "us-1"], "added": ["eu-2", "us-1"], "removed": [],
		"policy": ["eu-2", "us-1"], "user": ["zz-user"],
	}
}

# The explanation agrees with the decision: excluded and why are its annotations,
# eligible its complement, and each list's "after" what its patch leaves.
test_the_binding_explanation_agrees_with_the_decision if {
	every b in [
		binding("eu", null),
		binding("pci", {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}),
		binding("strict", {"clusterAffinity": {"clusterNames": ["us-1"], "exclude": ["zz-user"]}}),
		binding("strict", {"clusterAffinities": [{"affinityName": "a", "clusterNames": ["us-1"]}, {"affinityName": "b", "exclude": ["eu-1"]}]}),
		binding("strict", {"clusterAffinities": [{"affinityName": "a", "overflowAffinities": [{"affinityName": "o", "exclude": ["zz-user"]}]}]}),
		binding("nowhere", null),
		binding("free", {"clusterAffinity": {"exclude": ["zz-user"]}}),
		binding("missing", null),
		binding("broken", null),
		admitted(binding("eu", {"clusterAffinity": {"exclude": ["zz-user"]}})),
	] {
		doc := packs(b).karmada
		d := decide(b)
		doc.excluded == excluded_names(d.annotations[excluded_key])
		doc.why == d.annotations[why_key]
		{name | some name, c in doc.clusters; c.eligible} == object.keys(clusters) - {x | some x in doc.excluded}
		after := admitted(b)
		every l in doc.exclusions {
			exclude_at(after, l.list) == l.after
		}
	}
}

# The clusters a fedplace.io/excluded-clusters value names (a list, or every
# cluster but allExcept).
excluded_names(v) := v if is_array(v)

excluded_names(v) := sort(object.keys(clusters) - {x | some x in v.allExcept}) if is_object(v)

exclude_at(obj, "clusterAffinity") := object.get(obj, ["spec", "placement", "clusterAffinity", "exclude"], [])

exclude_at(obj, key) := object.get(obj, ["spec", "placement", "clusterAffinities", to_number(trim_prefix(key, "clusterAffinities/")), "exclude"], []) if {
	startswith(key, "clusterAffinities/")
	not contains(key, "/overflowAffinities/")
}

exclude_at(obj, key) := object.get(obj.spec.placement.clusterAffinities[to_number(parts[1])].overflowAffinities[to_number(parts[3])], "exclude", []) if {
	parts := split(key, "/")
	count(parts) == 4
	parts[0] == "clusterAffinities"
	parts[2] == "overflowAffinities"
}

test_a_narrowed_binding_has_its_exclusions if {
	once := admitted(binding("eu", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	doc := packs(once).karmada
	doc.clusters["us-1"].exclusion == "has"
	doc.clusters["us-1"].flags == ["excluded: the binding has it"]
	doc.annotated == ["us-1"]
	l := list_named(doc, "clusterAffinity")
	l.has == l.after
	l.added == []
	endswith(doc.summary, "; the binding's exclude lists already hold them")
}

test_an_exclusion_taken_back_and_the_users_own if {
	once := admitted(binding("strict", {"clusterAffinity": {"exclude": ["zz-user", "eu-1"]}}))
	upgraded := object.union(clusters, {"eu-2": cluster("eu-2", "europe-west4", "3")})
	doc := explain.packs.karmada with input as once with data.kubernetes.clusters as upgraded with data.kubernetes.deployments as templates
	doc.clusters["eu-2"].exclusion == "taken back"
	doc.clusters["eu-2"].excluded == false
	doc.clusters["eu-1"].exclusion == "user"
	doc.clusters["eu-1"].eligible == true
	doc.clusters["us-1"].exclusion == "has"
	l := list_named(doc, "clusterAffinity")
	l.removed == ["eu-2"]
	l.user == ["zz-user", "eu-1"]
	l.policy == ["us-1"]
	endswith(doc.summary, "; the decision takes back 1 exclusion(s)")
}

test_every_affinity_term_listed if {
	doc := packs(binding("strict", {"clusterAffinities": [
		{"affinityName": "primary", "clusterNames": ["us-1"]},
		{"affinityName": "backup", "exclude": ["eu-2"]},
	]})).karmada
	[l.list | some l in doc.exclusions] == ["clusterAffinities/0", "clusterAffinities/1"]
	list_named(doc, "clusterAffinities/0").added == ["eu-2", "us-1"]
	list_named(doc, "clusterAffinities/1").added == ["us-1"]

	# eu-2 is excluded but one list lacks it: the decision adds it there
	doc.clusters["eu-2"].exclusion == "added"
}

test_a_binding_without_affinity_gets_a_list if {
	doc := packs(binding("eu", null)).karmada
	doc.exclusions == [{
		"list": "clusterAffinity", "path": "/spec/placement/clusterAffinity/exclude",
		"has": [], "after": ["us-1"], "added": ["us-1"], "removed": [], "policy": ["us-1"], "user": [],
	}]
}

test_scheduled_clusters_are_flagged if {
	b := json.patch(binding("eu", null), [{"op": "add", "path": "/spec/clusters", "value": [{"name": "us-1", "replicas": 2}]}])
	doc := packs(b).karmada
	doc.clusters["us-1"].scheduled == true
	doc.clusters["us-1"].flags == ["excluded: the decision adds it", "scheduled"]
	doc.clusters["eu-1"].scheduled == false
}

test_no_cluster_allowed_stands_out if {
	doc := packs(binding("nowhere", null)).karmada
	doc.every_cluster_excluded == true
	count({name | some name, c in doc.clusters; c.eligible}) == 0
	contains(doc.summary, "every cluster excluded (0 of 3 allowed): the workload can run nowhere")
	c := check(doc.clusters["eu-1"], "pci-compliance-level")
	[c.value, c.required, c.ok] == ["3", "PCI compliance level >= 9", false]
}

test_template_not_replicated if {
	doc := packs(binding("missing", null)).karmada
	doc.template.replicated == false
	doc.requirements == []
	check(doc, "template").ok == false
	doc.every_cluster_excluded == true
	every _, c in doc.clusters {
		c.checks == []
		c.excluded == true
	}
	contains(doc.summary, "Deployment shop/missing: template Deployment shop/missing not replicated (yet)")
}

test_malformed_template_annotations if {
	doc := packs(binding("broken", null)).karmada
	doc.requirements == []
	some c in doc.checks
	c.requirement == "annotations"
	c.ok == false
	contains(c.value, "must be a whole number")
	doc.every_cluster_excluded == true
}

test_unconstrained_template_excludes_nothing if {
	doc := packs(binding("free", {"clusterAffinity": {"exclude": ["zz-user"]}})).karmada
	doc.excluded == []
	doc.requirements == []
	doc.clusters["eu-1"].checks == []
	doc.clusters["eu-1"].eligible == true
	doc.summary == "Deployment shop/free has no placement requirements: no cluster excluded"
}

test_binding_of_a_kind_the_policy_does_not_know if {
	b := json.patch(binding("eu", null), [{"op": "replace", "path": "/spec/resource/kind", "value": "FlinkDeployment"}])
	p := packs(b)
	p.karmada.applies == false
	contains(p.karmada.summary, "leaves bindings of FlinkDeployment alone")
	not p.placement
}

test_cluster_resource_binding if {
	crb := {
		"apiVersion": "work.karmada.io/v1alpha2",
		"kind": "ClusterResourceBinding",
		"metadata": {"name": "gate-ingressclass"},
		"spec": {"resource": {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "name": "gate"}, "placement": {}},
	}
	ingress_class := {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "gate", "annotations": {eu_key: "true"}}}
	doc := explain.packs.karmada with input as crb
		with data.kubernetes.clusters as clusters
		with data.kubernetes.ingressclasses as {"gate": ingress_class}
		with data.io.k8s.federation.placement.settings.karmada_templates as {"IngressClass": "ingressclasses"}
	doc.template == {"kind": "IngressClass", "namespace": "", "name": "gate", "replicated": true}
	doc.excluded == ["us-1"]
	startswith(doc.summary, "IngressClass gate: ")
}

# Malformed data never makes the explanation fail (a builtin error would be an
# evaluation error in the engine and an undefined document in OPA).
test_odd_cluster_data_is_tolerated if {
	odd := {
		"a": {"spec": {"region": 5}, "metadata": {"labels": {"pci-compliance-level": 7}}},
		"b": {"status": {"region": "eu-west-1"}},
		"c": {},
	}
	b := json.patch(binding("strict", null), [{"op": "add", "path": "/spec/clusters", "value": [{"name": 3}, "x"]}])
	doc := explain.packs.karmada with input as b with data.kubernetes.clusters as odd with data.kubernetes.deployments as templates
	check(doc.clusters.a, "eu-jurisdiction").ok == false
	check(doc.clusters.a, "eu-jurisdiction").value == null
	check(doc.clusters.a, "pci-compliance-level").value == null
	check(doc.clusters.a, "pci-compliance-level").ok == false
	check(doc.clusters.b, "eu-jurisdiction").ok == true
	check(doc.clusters.c, "pci-compliance-level").value == null
	count(doc.clusters) == 3
}

# -- templates and other objects on Karmada ------------------------------------------------------

template_packs(obj) := p if {
	p := explain.packs with input as obj
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as karmada_settings
}

test_template_on_karmada if {
	p := template_packs(templates.shop.strict)
	not p.placement
	doc := p.karmada
	doc.applies == true
	{r.name | some r in doc.requirements} == {"eu-jurisdiction", "pci-compliance-level"}
	every r in doc.requirements {
		startswith(r.source, "annotation ")
	}
	doc.clusters["eu-1"].eligible == true
	doc.clusters["eu-2"].eligible == false
	check(doc.clusters["eu-2"], "pci-compliance-level").ok == false
	doc.summary == "EU jurisdiction required, PCI compliance level >= 3: 1 of 3 clusters allowed; its bindings exclude the others"
}

test_template_explanation_agrees_with_the_decision if {
	every _, t in templates.shop {
		doc := template_packs(t).karmada
		d := admission with input as t
			with data.kubernetes.clusters as clusters
			with data.io.k8s.federation.placement.settings as karmada_settings
		denied := count(d.errors) > 0
		denied == contains(doc.summary, "the template is denied")
		eligible := data.io.k8s.federation.placement.eligible_clusters with input as t with data.kubernetes.clusters as clusters
		every n, c in doc.clusters {
			allowed := n in eligible
			c.eligible == allowed
		}
	}
}

test_denied_template_says_so if {
	doc := template_packs(templates.shop.nowhere).karmada
	doc.summary == "EU jurisdiction required, PCI compliance level >= 9: no cluster satisfies them (0 of 3): the template is denied"
	broken := template_packs(templates.shop.broken).karmada
	startswith(broken.summary, "placement errors: the template is denied")
	broken.checks[0].ok == false
}

test_other_objects_on_karmada if {
	p := template_packs({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
	not p.placement
	p.karmada.applies == false
	contains(p.karmada.summary, "this is a Pod")
	contains(p.karmada.summary, "ConfigMap, DaemonSet, Deployment")
}

# Under federation-v1 (the default) a template kind is the placement pack's; a
# binding is this pack's in both.
test_one_pack_explains_each_object if {
	d := packs(templates.shop.strict)
	d.placement.applies == true
	not d.karmada
	b := packs(binding("eu", null))
	not b.placement
	b.karmada.applies == true
	on_karmada := explain.packs with input as binding("eu", null)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.io.k8s.federation.placement.settings as karmada_settings
	not on_karmada.placement
	on_karmada.karmada == b.karmada
}

# -- (Cluster)PropagationPolicies --------------------------------------------------------------

propagation_policy(placement) := {
	"apiVersion": "policy.karmada.io/v1alpha1",
	"kind": "PropagationPolicy",
	"metadata": {"name": "shop-eu", "namespace": "shop"},
	"spec": {
		"resourceSelectors": [
			{"apiVersion": "apps/v1", "kind": "Deployment", "name": "eu"},
			{"apiVersion": "apps/v1", "kind": "Deployment", "name": "free"},
		],
		"placement": placement,
	},
}

test_policy_checks_agree_with_the_decision if {
	every placement in [
		{"clusterAffinity": {"clusterNames": ["us-1"]}},
		{"clusterAffinity": {"clusterNames": ["us-1", "eu-1"]}},
		{"clusterAffinity": {"labelSelector": {"matchLabels": {"a": "b"}}}},
		{"clusterAffinities": [{"affinityName": "a", "clusterNames": ["us-1"]}, {"affinityName": "b", "clusterNames": ["eu-2"]}]},
	] {
		pp := propagation_policy(placement)
		doc := packs(pp).karmada
		d := decide(pp)
		not packs(pp).placement
		count(d.errors) == count([c | some c in doc.checks; not c.ok])
		count(doc.checks) == 1 # "free" asks for nothing: not judged
	}
}

test_policy_naming_only_forbidden_clusters if {
	doc := packs(propagation_policy({"clusterAffinity": {"clusterNames": ["us-1"]}})).karmada
	doc.checks == [{
		"requirement": "allowed-cluster",
		"label": "Deployment shop/eu",
		"value": "clusterNames us-1",
		"required": "an allowed cluster (EU jurisdiction required: eu-1, eu-2)",
		"ok": false,
	}]
	startswith(doc.summary, "denied: ")
}

test_a_kept_binding_explains_what_it_keeps if {
	once := admitted(binding("eu", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	rewritten := json.patch(once, [{"op": "replace", "path": "/spec/placement", "value": {"clusterAffinity": {"exclude": ["zz-user"]}}}])
	doc := explain.packs.karmada with input as rewritten
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as {}
	doc.excluded == ["us-1"]
	doc.annotated == ["us-1"]
	doc.every_cluster_excluded == false
	contains(doc.summary, "stay excluded")
	[l] := doc.exclusions
	l.after == ["zz-user", "us-1"]
	l.user == ["zz-user"]
	l.policy == ["us-1"]
}
