# Which SchedulingPolicies a pod's service account may use (Rego v1): the verb
# `use` on scheduling.fedplace.io schedulingpolicies, granted the way
# PodSecurityPolicy's `use` was, decided from replicated RBAC objects only (no
# API call on the request path).
#
# A grant counts when a ClusterRoleBinding, or a RoleBinding in the pod's
# namespace, binds a role whose rules allow `use` (or `*`) on
# `schedulingpolicies` (or `*`) in the API group `scheduling.fedplace.io` (or
# `*`) to one of the subjects the service account stands for:
#   - ServiceAccount <name> in <namespace>
#   - User system:serviceaccount:<namespace>:<name>
#   - Group system:serviceaccounts, system:serviceaccounts:<namespace>,
#     system:authenticated
# A rule without resourceNames grants every policy ("*"); otherwise the names
# it lists. A RoleBinding may reference a Role of its own namespace or a
# ClusterRole; a ClusterRoleBinding only a ClusterRole.
package io.k8s.federation.schedulingpolicy.rbac

import data.io.k8s.federation.podspec
import data.io.k8s.federation.replicated

api_group := "scheduling.fedplace.io"

resource := "schedulingpolicies"

# The replicated RBAC collections the decision reads.
collections := ["clusterrolebindings", "clusterroles", "rolebindings", "roles"]

# Those opa-kube-sync does not replicate (the decision cannot be made without them).
# (No `not f(x)` here: with x undefined it fails under OPA and holds under
# regorus.)
missing := {plural | some plural in collections} - {plural |
	some plural in collections
	is_object(replicated.collection(plural))
}

# The names a role's rules grant `use` of ("*": all of them).
grants(role) := {name |
	rule := role.rules[_]
	some name in rule_grants(rule)
}

rule_grants(rule) := names if {
	listed(rule, "verbs", "use")
	listed(rule, "apiGroups", api_group)
	listed(rule, "resources", resource)
	names := resource_names(rule)
}

listed(rule, field, want) if want in rule[field]

listed(rule, field, _) if "*" in rule[field]

resource_names(rule) := {n | some n in rule.resourceNames; is_string(n)} if {
	nonempty_array(rule.resourceNames)
} else := {"*"}

nonempty_array(x) if {
	is_array(x)
	count(x) > 0
}

# ---- the pod's service account ---------------------------------------------

namespace := ns if {
	ns := input.metadata.namespace
	is_string(ns)
} else := ""

service_account := sa if {
	sa := podspec.spec.serviceAccountName
	is_string(sa)
	sa != ""
} else := sa if {
	# the deprecated alias, still accepted by the API server
	sa := podspec.spec.serviceAccount
	is_string(sa)
	sa != ""
} else := "default"

username := sprintf("system:serviceaccount:%s:%s", [namespace, service_account])

groups := {"system:serviceaccounts", sprintf("system:serviceaccounts:%s", [namespace]), "system:authenticated"}

# Every name a subject standing for the service account can have (a cheap
# first filter; subject_is then checks the kind).
subject_names := groups | {username, service_account}

subject_is(s) if {
	s.kind == "ServiceAccount"
	s.name == service_account
	s.namespace == namespace
}

subject_is(s) if {
	s.kind == "User"
	s.name == username
}

subject_is(s) if {
	s.kind == "Group"
	s.name in groups
}

# ---- bindings and grants ------------------------------------------------------
#
# Evaluated on every admission over every replicated binding, so written for
# speed: regorus (the devstack engine) pays about a microsecond per iteration
# step and far more per call of a user function. A binding is kept by a
# subject's name (one set lookup) before any function runs; role rules are
# read only for the few bindings left, so the cost does not grow with the
# number of roles.

cluster_roles := replicated.collection("clusterroles")

# ClusterRoleBindings to the service account.
cluster_bindings contains binding if {
	names := subject_names
	bindings := replicated.collection("clusterrolebindings")
	some name
	names[bindings[name].subjects[_].name]
	binding := bindings[name]
	s := binding.subjects[_]
	subject_is(s)
}

# RoleBindings of the pod's namespace to the service account.
namespace_bindings contains binding if {
	names := subject_names
	bindings := replicated.collection("rolebindings")[namespace]
	some name
	names[bindings[name].subjects[_].name]
	binding := bindings[name]
	s := binding.subjects[_]
	subject_is(s)
}

# Policy names ("*" for all) granted to the service account.
granted contains name if {
	some binding in cluster_bindings
	binding.roleRef.kind == "ClusterRole"
	some name in grants(cluster_roles[binding.roleRef.name])
}

granted contains name if {
	some binding in namespace_bindings
	some name in grants(referenced_role(binding.roleRef))
}

referenced_role(ref) := cluster_roles[ref.name] if ref.kind == "ClusterRole"

referenced_role(ref) := role if {
	ref.kind == "Role"
	role := replicated.collection("roles")[namespace][ref.name]
}

