package io.k8s.federation.schedulingpolicy.rbac_test

import data.io.k8s.federation.schedulingpolicy.rbac

pod(ns, spec) := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}, "spec": object.union({"containers": [{"name": "c"}]}, spec)}

web := pod("team-a", {"serviceAccountName": "web"})

use_rule(names) := {"apiGroups": ["scheduling.fedplace.io"], "resources": ["schedulingpolicies"], "verbs": ["use"], "resourceNames": names}

cluster_role(name, rules) := {"metadata": {"name": name}, "rules": rules}

binding(name, ns, kind, role, subjects) := {
	"metadata": {"name": name, "namespace": ns},
	"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
	"subjects": subjects,
}

sa(name, ns) := {"kind": "ServiceAccount", "name": name, "namespace": ns}

group(name) := {"kind": "Group", "name": name, "apiGroup": "rbac.authorization.k8s.io"}

user(name) := {"kind": "User", "name": name, "apiGroup": "rbac.authorization.k8s.io"}

roles := {
	"sp:gold": cluster_role("sp:gold", [use_rule(["gold"])]),
	"sp:silver": cluster_role("sp:silver", [use_rule(["silver"])]),
	"view": cluster_role("view", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
}

# data.kubernetes with these ClusterRoleBindings and RoleBindings ({ns: {name: b}}).
world(crbs, rbs) := {
	"clusterroles": roles,
	"clusterrolebindings": {b.metadata.name: b | some b in crbs},
	"roles": {"team-a": {"local": {"metadata": {"name": "local", "namespace": "team-a"}, "rules": [use_rule(["bronze"])]}}},
	"rolebindings": {ns: {b.metadata.name: b | some b in rbs; b.metadata.namespace == ns} | some b0 in rbs; ns := b0.metadata.namespace},
}

# opa-kube-sync's subject index of these bindings (data.kubernetes_index).
index(crbs, rbs) := {
	"clusterrolebindings": {n: {b.metadata.name: true | some b in crbs; some s in b.subjects; s.name == n} |
		some b0 in crbs
		some s0 in b0.subjects
		n := s0.name
	},
	"rolebindings": {ns: {n: {b.metadata.name: true | some b in rbs; b.metadata.namespace == ns; some s in b.subjects; s.name == n} |
		some b1 in rbs
		b1.metadata.namespace == ns
		some s1 in b1.subjects
		n := s1.name
	} |
		some b0 in rbs
		ns := b0.metadata.namespace
	},
}

# What is granted, decided by reading every binding and through the index alike.
granted(crbs, rbs, obj) := g if {
	g := rbac.granted with data.kubernetes as world(crbs, rbs) with input as obj
	indexed := rbac.granted with data.kubernetes as world(crbs, rbs) with data.kubernetes_index as index(crbs, rbs) with input as obj
	g == indexed
}

test_the_index_narrows_the_bindings_read_and_their_subjects_still_decide if {
	crbs := [binding("b", "", "ClusterRole", "sp:gold", [sa("web", "team-b")])]

	# an index entry for the pod's name whose binding names another namespace's account
	stale := {"clusterrolebindings": {"web": {"b": true}}, "rolebindings": {}}
	g1 := rbac.granted with data.kubernetes as world(crbs, []) with data.kubernetes_index as stale with input as web
	g1 == set()

	# a binding the index does not list (not written yet) is not found through it
	ok := [binding("c", "", "ClusterRole", "sp:gold", [sa("web", "team-a")])]
	g2 := rbac.granted with data.kubernetes as world(ok, []) with data.kubernetes_index as index([], []) with input as web
	g2 == set()
	g3 := rbac.granted with data.kubernetes as world(ok, []) with data.kubernetes_index as index(ok, []) with input as web
	g3 == {"gold"}
}

test_cluster_role_binding_to_the_service_account if {
	g := granted([binding("b", "", "ClusterRole", "sp:gold", [sa("web", "team-a")])], [], web)
	g == {"gold"}
}

test_service_account_of_another_namespace_or_name_is_not_the_pod_s if {
	g1 := granted([binding("b", "", "ClusterRole", "sp:gold", [sa("web", "team-b")])], [], web)
	g1 == set()
	g2 := granted([binding("b", "", "ClusterRole", "sp:gold", [sa("api", "team-a")])], [], web)
	g2 == set()
}

test_the_service_account_user_name if {
	g := granted([binding("b", "", "ClusterRole", "sp:gold", [user("system:serviceaccount:team-a:web")])], [], web)
	g == {"gold"}
	g2 := granted([binding("b", "", "ClusterRole", "sp:gold", [user("web")])], [], web)
	g2 == set()
}

test_service_account_groups if {
	every name in ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"] {
		g := granted([binding("b", "", "ClusterRole", "sp:gold", [group(name)])], [], web)
		g == {"gold"}
	}
	g := granted([binding("b", "", "ClusterRole", "sp:gold", [group("system:serviceaccounts:team-b")])], [], web)
	g == set()
}

test_role_binding_in_the_pod_namespace if {
	g := granted([], [binding("rb", "team-a", "ClusterRole", "sp:silver", [sa("web", "team-a")])], web)
	g == {"silver"}

	# a Role of the namespace
	g2 := granted([], [binding("rb", "team-a", "Role", "local", [group("system:serviceaccounts:team-a")])], web)
	g2 == {"bronze"}
}

test_role_binding_in_another_namespace_does_not_count if {
	g := granted([], [binding("rb", "team-b", "ClusterRole", "sp:silver", [sa("web", "team-a")])], web)
	g == set()
}

test_default_service_account if {
	b := binding("b", "", "ClusterRole", "sp:gold", [sa("default", "team-a")])
	g := granted([b], [], pod("team-a", {}))
	g == {"gold"}
	g2 := granted([b], [], pod("team-a", {"serviceAccountName": ""}))
	g2 == {"gold"}
	g3 := granted([binding("b", "", "ClusterRole", "sp:gold", [sa("old", "team-a")])], [], pod("team-a", {"serviceAccount": "old"}))
	g3 == {"gold"}
}

test_pod_templates_use_the_template_service_account if {
	deployment := {
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "team-a"},
		"spec": {"template": {"spec": {"serviceAccountName": "web", "containers": []}}},
	}
	g := granted([binding("b", "", "ClusterRole", "sp:gold", [sa("web", "team-a")])], [], deployment)
	g == {"gold"}
}

test_several_grants_add_up if {
	g := granted(
		[binding("b1", "", "ClusterRole", "sp:gold", [group("system:authenticated")]), binding("b2", "", "ClusterRole", "view", [group("system:authenticated")])],
		[binding("rb", "team-a", "ClusterRole", "sp:silver", [user("someone"), sa("web", "team-a")])],
		web,
	)
	g == {"gold", "silver"}
}

role_granting(rule) := {"clusterroles": {"r": cluster_role("r", [rule])}, "clusterrolebindings": {"b": binding("b", "", "ClusterRole", "r", [sa("web", "team-a")])}}

granted_by_rule(rule) := g if {
	g := rbac.granted with data.kubernetes as role_granting(rule) with input as web
}

test_rule_forms if {
	base := use_rule([])
	g1 := granted_by_rule(base)
	g1 == {"*"} # no resourceNames: every policy
	g2 := granted_by_rule(object.remove(base, ["resourceNames"]))
	g2 == {"*"}
	g3 := granted_by_rule(object.union(base, {"verbs": ["*"]}))
	g3 == {"*"}
	g4 := granted_by_rule(object.union(base, {"apiGroups": ["*"], "resources": ["*"], "resourceNames": ["a", "b"]}))
	g4 == {"a", "b"}
}

test_rules_that_do_not_grant_use if {
	base := use_rule(["gold"])
	every rule in [
		object.union(base, {"verbs": ["get", "list"]}),
		object.union(base, {"apiGroups": ["extensions"]}), # the seed's group is not ours
		object.union(base, {"resources": ["podsecuritypolicies"]}),
		object.remove(base, ["verbs"]),
	] {
		g := granted_by_rule(rule)
		g == set()
	}
}

test_a_cluster_role_binding_cannot_use_a_role if {
	g := granted([binding("b", "", "Role", "local", [sa("web", "team-a")])], [], web)
	g == set()
}

test_missing_rbac_collections if {
	m1 := rbac.missing with data.kubernetes as {}
	m1 == {"clusterrolebindings", "clusterroles", "rolebindings", "roles"}
	m2 := rbac.missing with data.kubernetes as world([], [])
	m2 == set()
}

# resourceNames are matched exactly, as the RBAC authorizer does: "*" names no policy.
test_a_star_in_resource_names_is_a_name_not_a_wildcard if {
	granted_by_rule(use_rule(["*"])) == set()
	granted_by_rule(use_rule(["gold", "*"])) == {"gold"}
}

# In a RoleBinding a ServiceAccount subject without a namespace is the binding's
# namespace's account (the authorizer's reading); in a ClusterRoleBinding it is nobody.
test_a_rolebinding_serviceaccount_subject_without_namespace if {
	bare := {"kind": "ServiceAccount", "name": "web"}
	granted([], [binding("rb", "team-a", "ClusterRole", "sp:gold", [bare])], web) == {"gold"}
	granted([], [binding("rb", "team-a", "ClusterRole", "sp:gold", [{"kind": "ServiceAccount", "name": "web", "namespace": ""}])], web) == {"gold"}
	granted([], [binding("rb", "team-a", "ClusterRole", "sp:gold", [{"kind": "ServiceAccount", "name": "api"}])], web) == set()
	granted([binding("crb", "", "ClusterRole", "sp:gold", [bare])], [], web) == set()
}

test_missing_some_rbac_collections if {
	m := rbac.missing with data.kubernetes as {"clusterroles": {}, "roles": {}}
	m == {"clusterrolebindings", "rolebindings"}
}

# A role bound by several bindings (cluster-wide and in the namespace) grants once.
test_a_role_bound_twice if {
	g := granted(
		[binding("b1", "", "ClusterRole", "sp:gold", [sa("web", "team-a")]), binding("b2", "", "ClusterRole", "sp:gold", [group("system:authenticated")])],
		[binding("rb", "team-a", "ClusterRole", "sp:gold", [sa("web", "team-a")])],
		web,
	)
	g == {"gold"}
}
