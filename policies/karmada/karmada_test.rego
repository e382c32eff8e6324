package io.k8s.federation.karmada_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.karmada
import data.io.k8s.federation.remediation

eu_key := "policy.federation.alpha.kubernetes.io/eu-jurisdiction-required"

pci_key := "policy.federation.alpha.kubernetes.io/pci-compliance-level"

cluster(name, region, level) := {
	"apiVersion": "cluster.karmada.io/v1alpha1",
	"kind": "Cluster",
	"metadata": {"name": name, "labels": {"pci-compliance-level": level}},
	"spec": {"region": region, "provider": "aws"},
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
	"spec": {"replicas": 2},
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
		"spec": {
			"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": template, "uid": concat("-", ["uid", template])},
			"replicas": 2,
			"placement": {},
		},
	}
	b := json.patch(base, [{"op": "add", "path": "/spec/placement", "value": placement} | placement != null])
}

decide(obj) := d if {
	d := admission with input as obj with data.kubernetes.clusters as clusters with data.kubernetes.deployments as templates
}

# The binding after the webhook's patch: annotations merged first, then the patches.
admitted(obj) := after if {
	d := decide(obj)
	annotated := object.union(obj, {"metadata": object.union(obj.metadata, {"annotations": object.union(
		object.get(obj, ["metadata", "annotations"], {}),
		{k: json.marshal(v) | some k, v in d.annotations; not is_string(v)},
	)})})
	after := json.patch(annotated, object.get(d, ["patches", "karmada"], []))
}

karmada_settings := {"control_plane": "karmada"}

test_empty_placement_gets_cluster_affinity if {
	d := decide(binding("eu", null))
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
	d.patches.karmada[0] == {"op": "add", "path": "/spec/placement/clusterAffinity", "value": {"exclude": ["us-1"]}}
	after := admitted(binding("eu", null))
	json.unmarshal(after.metadata.annotations["fedplace.io/exclusions-added"]) == {"clusterAffinity": {"user": 0, "digest": karmada.list_digest(["us-1"])}}
	count(d.errors) == 0
}

test_placement_without_affinity_gets_one if {
	after := admitted(binding("pci", {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}))
	after.spec.placement == {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}, "clusterAffinity": {"exclude": ["eu-2"]}}
}

test_user_exclusions_and_everything_else_kept if {
	placement := {"clusterAffinity": {"clusterNames": ["us-1", "eu-1"], "exclude": ["zz-user"], "labelSelector": {"matchLabels": {"tier": "a"}}}, "spreadConstraints": [{"spreadByField": "region", "maxGroups": 2}]}
	after := admitted(binding("eu", placement))
	after.spec.placement.clusterAffinity == {"clusterNames": ["us-1", "eu-1"], "exclude": ["zz-user", "us-1"], "labelSelector": {"matchLabels": {"tier": "a"}}}
	json.unmarshal(after.metadata.annotations["fedplace.io/exclusions-added"]) == {"clusterAffinity": {"user": 1, "digest": karmada.list_digest(["zz-user", "us-1"])}}
	after.spec.placement.spreadConstraints == placement.spreadConstraints
	after.spec.resource == binding("eu", placement).spec.resource
}

test_every_affinity_term_narrowed if {
	placement := {"clusterAffinities": [
		{"affinityName": "primary", "clusterNames": ["us-1"]},
		{"affinityName": "backup", "exclude": ["eu-1"]},
	]}
	after := admitted(binding("strict", placement))
	after.spec.placement.clusterAffinities == [
		{"affinityName": "primary", "clusterNames": ["us-1"], "exclude": ["eu-2", "us-1"]},
		{"affinityName": "backup", "exclude": ["eu-1", "eu-2", "us-1"]},
	]
	not after.spec.placement.clusterAffinity
	json.unmarshal(after.metadata.annotations["fedplace.io/exclusions-added"]) == {
		"clusterAffinities/0": {"user": 0, "digest": karmada.list_digest(["eu-2", "us-1"])},
		"clusterAffinities/1": {"user": 1, "digest": karmada.list_digest(["eu-1", "eu-2", "us-1"])},
	}
}

test_a_narrowed_binding_is_left_alone if {
	once := admitted(binding("eu", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	d := decide(once)
	not d.patches.karmada
	admitted(once) == once
}

test_exclusions_taken_back_when_the_cluster_is_allowed_again if {
	once := admitted(binding("strict", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	once.spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]
	upgraded := object.union(clusters, {"eu-2": cluster("eu-2", "europe-west4", "3")})
	d := admission with input as once with data.kubernetes.clusters as upgraded with data.kubernetes.deployments as templates
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
	after := json.patch(
		json.patch(once, [{"op": "add", "path": "/metadata/annotations/fedplace.io~1excluded-clusters", "value": json.marshal(d.annotations["fedplace.io/excluded-clusters"])}]),
		d.patches.karmada,
	)
	after.spec.placement.clusterAffinity.exclude == ["zz-user", "us-1"]
	json.unmarshal(after.metadata.annotations["fedplace.io/exclusions-added"]) == {"clusterAffinity": {"user": 1, "digest": karmada.list_digest(["zz-user", "us-1"])}}
}

test_last_policy_exclusion_taken_back_removes_the_list if {
	once := admitted(binding("pci", {"clusterAffinity": {"clusterNames": ["eu-1"]}}))
	once.spec.placement.clusterAffinity.exclude == ["eu-2"]
	freed := object.union(once, {"spec": object.union(once.spec, {"resource": object.union(once.spec.resource, {"name": "free"})})})
	after := admitted(freed)
	after.spec.placement.clusterAffinity == {"clusterNames": ["eu-1"]}
	after.metadata.annotations["fedplace.io/exclusions-added"] == "{}"
}

test_a_detector_rewrite_is_narrowed_again if {
	once := admitted(binding("eu", {"clusterAffinity": {"exclude": ["zz-user"]}}))

	# Karmada's detector copies the PropagationPolicy's placement over it, annotations kept.
	rewritten := json.patch(once, [{"op": "replace", "path": "/spec/placement", "value": {"clusterAffinity": {"exclude": ["eu-2"]}}}])
	after := admitted(rewritten)
	after.spec.placement.clusterAffinity.exclude == ["eu-2", "us-1"]
	admitted(after) == after
}

test_a_user_exclusion_the_policy_also_wants_stays_the_users if {
	once := admitted(binding("eu", {"clusterAffinity": {"exclude": ["us-1"]}}))
	once.spec.placement.clusterAffinity.exclude == ["us-1"]
	not once.metadata.annotations["fedplace.io/exclusions-added"]
	freed := object.union(once, {"spec": object.union(once.spec, {"resource": object.union(once.spec.resource, {"name": "free"})})})
	admitted(freed).spec.placement.clusterAffinity.exclude == ["us-1"]
}

test_developer_cluster_names_do_not_get_forbidden_clusters if {
	after := admitted(binding("eu", {"clusterAffinity": {"clusterNames": ["us-1"]}}))
	"us-1" in after.spec.placement.clusterAffinity.exclude
}

test_no_cluster_allowed_excludes_all_and_says_why if {
	d := decide(binding("nowhere", null))
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": []}
	why := d.annotations["fedplace.io/placement"]
	contains(why, "no cluster satisfies the placement policy (EU jurisdiction required, PCI compliance level >= 9)")
	contains(why, ": eu-1 (label pci-compliance-level: 3); eu-2 (label pci-compliance-level: 1); us-1 (label pci-compliance-level: 3; region us-east-1)")
	count(d.errors) == 0
	some event in d.events
	event.object == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "nowhere", "uid": "uid-nowhere"}
	event.reason == "PlacementUnsatisfiable"
	event.type == "Warning"
}

test_cluster_values_capped if {
	many := {sprintf("c%02d", [i]): cluster(sprintf("c%02d", [i]), "us-east-1", "1") | some i in numbers.range(1, 25)}
	d := admission with input as binding("nowhere", null) with data.kubernetes.clusters as many with data.kubernetes.deployments as templates
	endswith(d.annotations["fedplace.io/placement"], "; and 5 more")
}

test_template_not_replicated_fails_closed if {
	d := decide(binding("missing", null))
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": []}
	contains(d.annotations["fedplace.io/placement"], "template Deployment shop/missing not replicated (yet)")
	count(d.errors) == 0
	count(d.events) == 0
}

test_malformed_requirements_fail_closed if {
	d := decide(binding("broken", null))
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": []}
	contains(d.annotations["fedplace.io/placement"], "has placement errors")
	count(d.errors) == 0
}

test_unconstrained_template_narrows_nothing if {
	d := decide(binding("free", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	d.annotations["fedplace.io/excluded-clusters"] == []
	d.annotations["fedplace.io/placement"] == "template Deployment shop/free has no placement requirements"
	not d.patches.karmada
}

test_binding_of_a_kind_the_policy_does_not_know_is_untouched if {
	b := json.patch(binding("eu", null), [{"op": "replace", "path": "/spec/resource/kind", "value": "FlinkDeployment"}])
	d := decide(b)
	count(d.annotations) == 0
	count(d.patches) == 0
}

test_cluster_resource_binding_reads_a_cluster_scoped_template if {
	crb := {
		"apiVersion": "work.karmada.io/v1alpha2",
		"kind": "ClusterResourceBinding",
		"metadata": {"name": "gate-ingressclass"},
		"spec": {"resource": {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "name": "gate"}, "placement": {}},
	}
	ingress_class := {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "gate", "annotations": {eu_key: "true"}}}
	d := admission with input as crb
		with data.kubernetes.clusters as clusters
		with data.kubernetes.ingressclasses as {"gate": ingress_class}
		with data.io.k8s.federation.placement.settings.karmada_templates as {"IngressClass": "ingressclasses"}
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
}

# -- templates and policies on Karmada ----------------------------------------------

test_template_no_cluster_satisfies_is_denied if {
	d := admission with input as templates.shop.nowhere
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as karmada_settings
	d.errors == {"no cluster satisfies the placement policy (EU jurisdiction required, PCI compliance level >= 9)"}
}

test_template_malformed_requirement_is_denied if {
	d := admission with input as templates.shop.broken
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as karmada_settings
	count(d.errors) == 1
	some msg in d.errors
	contains(msg, "must be a whole number")
}

test_satisfiable_template_admitted_untouched_on_karmada if {
	d := admission with input as templates.shop.strict
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as karmada_settings
	count(d.errors) == 0
	count(d.annotations) == 0
}

test_karmada_mode_stands_down_the_federation_v1_rules if {
	rs := object.union(templates.shop.strict, {"kind": "ReplicaSet"})
	d := admission with input as rs
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as karmada_settings
	count(d.annotations) == 0
	count(d.errors) == 0
}

test_unknown_control_plane_is_a_settings_error if {
	d := admission with input as templates.shop.eu
		with data.kubernetes.clusters as clusters
		with data.io.k8s.federation.placement.settings as {"control_plane": "kubefed"}
	some msg in d.errors
	contains(msg, "placement setting control_plane must be one of federation-v1, karmada")
}

propagation_policy(placement) := {
	"apiVersion": "policy.karmada.io/v1alpha1",
	"kind": "PropagationPolicy",
	"metadata": {"name": "shop-eu", "namespace": "shop"},
	"spec": {
		"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "eu"}],
		"placement": placement,
	},
}

decide_policy(obj) := d if {
	d := admission with input as obj with data.kubernetes.clusters as clusters with data.kubernetes.deployments as templates
}

test_policy_naming_only_forbidden_clusters_is_denied if {
	d := decide_policy(propagation_policy({"clusterAffinity": {"clusterNames": ["us-1"]}}))
	d.errors == {"PropagationPolicy shop-eu places Deployment shop/eu only on clusters the placement policy forbids (EU jurisdiction required): us-1"}
}

test_policy_naming_an_allowed_cluster_is_admitted if {
	d := decide_policy(propagation_policy({"clusterAffinity": {"clusterNames": ["us-1", "eu-1"]}}))
	count(d.errors) == 0
}

test_policy_without_cluster_names_is_admitted if {
	d := decide_policy(propagation_policy({"clusterAffinity": {"labelSelector": {"matchLabels": {"a": "b"}}}}))
	count(d.errors) == 0
}

test_policy_terms_one_with_an_allowed_cluster_is_admitted if {
	d := decide_policy(propagation_policy({"clusterAffinities": [
		{"affinityName": "a", "clusterNames": ["us-1"]},
		{"affinityName": "b", "clusterNames": ["eu-2"]},
	]}))
	count(d.errors) == 0
}

test_policy_terms_all_forbidden_is_denied if {
	policy := propagation_policy({"clusterAffinities": [
		{"affinityName": "a", "clusterNames": ["us-1"]},
		{"affinityName": "b", "clusterNames": ["us-1"]},
	]})
	count(decide_policy(policy).errors) == 1
}

test_cluster_policy_selects_by_labels_across_namespaces if {
	labelled := {"shop": {"eu": object.union(templates.shop.eu, {"metadata": object.union(templates.shop.eu.metadata, {"labels": {"app": "web"}})})}}
	policy := {
		"apiVersion": "policy.karmada.io/v1alpha1",
		"kind": "ClusterPropagationPolicy",
		"metadata": {"name": "web"},
		"spec": {
			"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}],
			"placement": {"clusterAffinity": {"clusterNames": ["us-1"]}},
		},
	}
	d := admission with input as policy with data.kubernetes.clusters as clusters with data.kubernetes.deployments as labelled
	count(d.errors) == 1
	unselected := json.patch(policy, [{"op": "replace", "path": "/spec/resourceSelectors/0/labelSelector/matchExpressions/0/values", "value": ["api"]}])
	e := admission with input as unselected with data.kubernetes.clusters as clusters with data.kubernetes.deployments as labelled
	count(e.errors) == 0
}

# -- remediation: placement alone ------------------------------------------------------

test_remediation_reads_bindings_placement_only if {
	stored := {"shop": {"nowhere-deployment": binding("nowhere", null)}}
	ns := remediation.notifications with input as {"resources": [{"plural": "resourcebindings", "namespaced": true}]}
		with data.kubernetes.resourcebindings as stored
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.io.k8s.federation.admission.errors as {"another pack objects"}
	some n in ns
	n.name == "nowhere-deployment"
	n.annotations["fedplace.io/excluded-clusters"] == {"allExcept": []}
	n.errors == []

	# The admission decision has the other pack's error; remediation ignores it.
	d := admission with input as binding("nowhere", null)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.io.k8s.federation.admission.errors as {"another pack objects"}
	d.errors == {"another pack objects"}
}

# -- overflow tiers ------------------------------------------------------------------

test_every_overflow_tier_narrowed if {
	placement := {"clusterAffinities": [{
		"affinityName": "eu",
		"clusterNames": ["eu-1"],
		"overflowAffinities": [
			{"affinityName": "us", "clusterNames": ["us-1"]},
			{"affinityName": "any", "exclude": ["zz-user"]},
		],
	}]}
	after := admitted(binding("strict", placement))
	term := after.spec.placement.clusterAffinities[0]
	term.exclude == ["eu-2", "us-1"]
	term.overflowAffinities == [
		{"affinityName": "us", "clusterNames": ["us-1"], "exclude": ["eu-2", "us-1"]},
		{"affinityName": "any", "exclude": ["zz-user", "eu-2", "us-1"]},
	]
	object.keys(json.unmarshal(after.metadata.annotations["fedplace.io/exclusions-added"])) == {
		"clusterAffinities/0",
		"clusterAffinities/0/overflowAffinities/0",
		"clusterAffinities/0/overflowAffinities/1",
	}
	admitted(after) == after
}

test_policy_overflow_tier_with_an_allowed_cluster_is_admitted if {
	d := decide_policy(propagation_policy({"clusterAffinities": [{
		"affinityName": "a", "clusterNames": ["us-1"],
		"overflowAffinities": [{"affinityName": "b", "clusterNames": ["eu-1"]}],
	}]}))
	count(d.errors) == 0
}

test_policy_overflow_tiers_all_forbidden_is_denied if {
	d := decide_policy(propagation_policy({"clusterAffinities": [{
		"affinityName": "a", "clusterNames": ["us-1"],
		"overflowAffinities": [{"affinityName": "b", "clusterNames": ["us-1"]}],
	}]}))
	d.errors == {"PropagationPolicy shop-eu places Deployment shop/eu only on clusters the placement policy forbids (EU jurisdiction required): us-1"}
}

test_policy_overflow_tier_selecting_by_labels_is_admitted if {
	d := decide_policy(propagation_policy({"clusterAffinities": [{
		"affinityName": "a", "clusterNames": ["us-1"],
		"overflowAffinities": [{"affinityName": "b", "labelSelector": {"matchLabels": {"x": "y"}}}],
	}]}))
	count(d.errors) == 0
}

# -- a binding decided before keeps what it cannot judge ---------------------------------

patch_of(d) := object.get(d, ["patches", "karmada"], [])

# The binding as Karmada's detector writes it again: the placement reset to the
# policy's, the annotations (fedplace's among them) kept.
detector_rewrite(obj, placement) := json.patch(obj, [{"op": "replace", "path": "/spec/placement", "value": placement}])

test_update_with_the_template_gone_keeps_the_last_exclusions if {
	once := admitted(binding("strict", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	once.spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]
	rewritten := detector_rewrite(once, {"clusterAffinity": {"exclude": ["zz-user"]}})
	d := admission with input as rewritten with data.kubernetes.clusters as clusters with data.kubernetes.deployments as {}
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": ["eu-1"]}
	d.annotations["fedplace.io/placement"] == "template Deployment shop/strict not replicated (yet): the 2 cluster(s) excluded when the binding was last decided stay excluded until it is"
	after := json.patch(rewritten, patch_of(d))
	after.spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]
	count(d.events) == 0
}

test_update_with_malformed_requirements_keeps_the_last_exclusions if {
	once := admitted(binding("eu", null))
	broken := json.patch(once, [{"op": "replace", "path": "/spec/resource/name", "value": "broken"}])
	d := decide(broken)
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
	contains(d.annotations["fedplace.io/placement"], "has placement errors")
	endswith(d.annotations["fedplace.io/placement"], "the 1 cluster(s) excluded when the binding was last decided stay excluded")
	not d.patches.karmada
}

test_update_with_a_broken_setting_keeps_the_last_exclusions if {
	once := admitted(binding("eu", {"clusterAffinity": {"exclude": ["zz-user"]}}))
	rewritten := detector_rewrite(once, {"clusterAffinity": {"exclude": ["zz-user"]}})
	d := admission with input as rewritten
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.io.k8s.federation.placement.settings.karmada_templates as {"Deployment": "Not A Plural"}
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
	startswith(d.annotations["fedplace.io/placement"], "placement setting karmada_templates names no valid plural for Deployment")
	json.patch(rewritten, patch_of(d)).spec.placement.clusterAffinity.exclude == ["zz-user", "us-1"]

	# Never decided: left alone, as before.
	e := admission with input as binding("eu", null)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.io.k8s.federation.placement.settings.karmada_templates as {"Deployment": "Not A Plural"}
	count(e.annotations) == 0
}

test_kept_exclusions_of_all_but_a_few_take_in_a_new_cluster if {
	nowhere := admitted(binding("nowhere", null))
	nowhere.metadata.annotations["fedplace.io/excluded-clusters"] == `{"allExcept":[]}`
	more := object.union(clusters, {"eu-3": cluster("eu-3", "eu-west-3", "3")})
	d := admission with input as nowhere with data.kubernetes.clusters as more with data.kubernetes.deployments as {}
	d.annotations["fedplace.io/excluded-clusters"] == {"allExcept": []}
	"eu-3" in json.patch(nowhere, patch_of(d)).spec.placement.clusterAffinity.exclude
}

test_remediation_keeps_a_decided_binding_it_cannot_judge if {
	decided_once := admitted(binding("strict", null))
	stored := {"shop": {"strict-deployment": decided_once}}
	ns := remediation.notifications with input as {"resources": [{"plural": "resourcebindings", "namespaced": true}]}
		with data.kubernetes.resourcebindings as stored
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as {}
	some n in ns
	n.name == "strict-deployment"
	n.annotations["fedplace.io/excluded-clusters"] == {"allExcept": ["eu-1"]}
	contains(n.annotations["fedplace.io/placement"], "stay excluded")
}

# -- the user's exclusions, exactly ----------------------------------------------------------

with_policy(obj) := json.patch(obj, [{"op": "add", "path": "/metadata/annotations", "value": object.union(
	object.get(obj, ["metadata", "annotations"], {}),
	{"propagationpolicy.karmada.io/name": "shop-eu", "propagationpolicy.karmada.io/namespace": "shop"},
)}])

policies_with(placement) := {"shop": {"shop-eu": propagation_policy(placement)}}

test_a_user_exclusion_added_after_fedplace_added_it_stays if {
	once := admitted(with_policy(binding("strict", {"clusterAffinity": {"exclude": ["zz-user"]}})))
	once.spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]

	# The user adds eu-2 to the policy; the detector writes the policy's list.
	mine := {"clusterAffinity": {"exclude": ["zz-user", "eu-2"]}}
	rewritten := admission with input as detector_rewrite(once, mine)
		with data.kubernetes.clusters as clusters
		with data.kubernetes.deployments as templates
		with data.kubernetes.propagationpolicies as policies_with(mine)
	after := json.patch(detector_rewrite(once, mine), patch_of(rewritten))
	after.spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]

	# eu-2 upgraded: allowed by the placement policy, still excluded by the user.
	upgraded := object.union(clusters, {"eu-2": cluster("eu-2", "europe-west4", "3")})
	d := admission with input as after
		with data.kubernetes.clusters as upgraded
		with data.kubernetes.deployments as templates
		with data.kubernetes.propagationpolicies as policies_with(mine)
	json.patch(after, patch_of(d)).spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]
}

test_a_user_list_equal_to_fedplaces_stays_the_users if {
	once := admitted(with_policy(binding("strict", {"clusterAffinity": {"exclude": ["zz-user"]}})))

	# The user copies the narrowed list into the policy: the detector's write
	# leaves the binding's list exactly as fedplace wrote it.
	mine := {"clusterAffinity": {"exclude": ["zz-user", "eu-2", "us-1"]}}
	upgraded := object.union(clusters, {"eu-2": cluster("eu-2", "europe-west4", "3")})
	d := admission with input as detector_rewrite(once, mine)
		with data.kubernetes.clusters as upgraded
		with data.kubernetes.deployments as templates
		with data.kubernetes.propagationpolicies as policies_with(mine)
	d.annotations["fedplace.io/excluded-clusters"] == ["us-1"]
	json.patch(once, patch_of(d)).spec.placement.clusterAffinity.exclude == ["zz-user", "eu-2", "us-1"]

	# Without the policy replicated, the list fedplace wrote is read by its record.
	e := admission with input as detector_rewrite(once, mine)
		with data.kubernetes.clusters as upgraded
		with data.kubernetes.deployments as templates
	json.patch(once, patch_of(e)).spec.placement.clusterAffinity.exclude == ["zz-user", "us-1"]
}

test_a_cluster_policy_is_read_too if {
	b := json.patch(binding("strict", {"clusterAffinity": {"exclude": ["eu-2"]}}), [{"op": "add", "path": "/metadata/annotations", "value": {"clusterpropagationpolicy.karmada.io/name": "all"}}])
	cpp := {"all": {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy", "metadata": {"name": "all"}, "spec": {"placement": {"clusterAffinity": {"exclude": ["eu-2"]}}}}}
	s := karmada.source_placement with input as b with data.kubernetes.clusterpropagationpolicies as cpp
	s == {"clusterAffinity": {"exclude": ["eu-2"]}}
}

test_an_older_record_of_names_is_still_read if {
	b := json.patch(binding("eu", {"clusterAffinity": {"exclude": ["zz-user", "eu-2", "us-1"]}}), [{"op": "add", "path": "/metadata/annotations", "value": {
		"fedplace.io/excluded-clusters": `["eu-2","us-1"]`,
		"fedplace.io/exclusions-added": `{"clusterAffinity":["eu-2","us-1"]}`,
	}}])
	d := decide(b)
	json.patch(b, patch_of(d)).spec.placement.clusterAffinity.exclude == ["zz-user", "us-1"]
}

# -- size at thousands of clusters ----------------------------------------------------------

# (5,000 clusters on real Karmada: tests/packs/karmada/test_real_karmada.py.)
test_all_but_one_of_1000_clusters_stays_small if {
	many := {sprintf("member%d", [i]): cluster(sprintf("member%d", [i]), "us-east-1", "1") | some i in numbers.range(1, 1000)}
	fleet := object.union(many, {"member1": cluster("member1", "eu-west-1", "3")})
	b := binding("strict", null)
	d := admission with input as b with data.kubernetes.clusters as fleet with data.kubernetes.deployments as templates
	after := json.patch(b, array.concat(
		[{"op": "add", "path": "/metadata/annotations", "value": {k: json.marshal(v) | some k, v in d.annotations; not is_string(v)}}],
		array.concat([{"op": "add", "path": "/metadata/annotations/fedplace.io~1placement", "value": d.annotations["fedplace.io/placement"]}], patch_of(d)),
	))
	count(after.spec.placement.clusterAffinity.exclude) == 999
	not "member1" in after.spec.placement.clusterAffinity.exclude
	after.metadata.annotations["fedplace.io/excluded-clusters"] == `{"allExcept":["member1"]}`
	why := after.metadata.annotations["fedplace.io/placement"]
	endswith(why, "999 of 1000 clusters, every one but member1")
	sum([count(after.metadata.annotations[k]) | some k in ["fedplace.io/excluded-clusters", "fedplace.io/placement", "fedplace.io/exclusions-added"]]) < 400
}

test_many_excluded_named_in_part if {
	many := {sprintf("c%02d", [i]): cluster(sprintf("c%02d", [i]), "us-east-1", "1") | some i in numbers.range(1, 50)}
	fleet := object.union(many, {sprintf("e%02d", [i]): cluster(sprintf("e%02d", [i]), "eu-west-1", "3") | some i in numbers.range(1, 60)})
	d := admission with input as binding("strict", null) with data.kubernetes.clusters as fleet with data.kubernetes.deployments as templates
	count(d.annotations["fedplace.io/excluded-clusters"]) == 50
	endswith(d.annotations["fedplace.io/placement"], ": 50 of 110 clusters: c01, c02, c03, c04, c05, c06, c07, c08, c09, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20 and 30 more")
}
