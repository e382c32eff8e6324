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
# it lists (a listed "*" is a name like any other, and names none). A
# ServiceAccount subject without a namespace, in a RoleBinding, is that
# binding's namespace's. A RoleBinding may reference a Role of its own namespace or a
# ClusterRole; a ClusterRoleBinding only a ClusterRole.
package io.k8s.federation.schedulingpolicy.rbac

import data.io.k8s.federation.podspec
import data.io.k8s.federation.replicated

api_group := "scheduling.fedplace.io"

resource := "schedulingpolicies"

# The replicated RBAC collections the decision reads.
collections := ["clusterrolebindings", "clusterroles", "rolebindings", "roles"]

# Those opa-kube-sync does not replicate (the decision cannot be made without them).
missing := set() if {
	# all there: the common case, without iterating
	is_object(replicated.collection("clusterrolebindings"))
	is_object(replicated.collection("clusterroles"))
	is_object(replicated.collection("rolebindings"))
	is_object(replicated.collection("roles"))
} else := {plural | some plural in collections; not replicated_collection(plural)}

replicated_collection(plural) if is_object(replicated.collection(plural))

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

username := concat("", ["system:serviceaccount:", namespace, ":", service_account])

groups := {"system:serviceaccounts", concat("", ["system:serviceaccounts:", namespace]), "system:authenticated"}

# Every name a subject standing for the service account can have.
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

# In a RoleBinding (of the pod's namespace) a ServiceAccount subject without a
# namespace stands for that account in the binding's own namespace, as the RBAC
# authorizer reads it (a ClusterRoleBinding's must name one: the API server
# refuses it otherwise).
namespace_subject_is(s) if subject_is(s)

namespace_subject_is(s) if {
	s.kind == "ServiceAccount"
	s.name == service_account
	object.get(s, "namespace", "") == ""
}

# ---- bindings and grants ------------------------------------------------------

# The roles bound to the service account, as [kind, name]: ClusterRoles bound
# by a ClusterRoleBinding, and ClusterRoles or Roles (of the pod's namespace)
# bound by a RoleBinding of the pod's namespace. A binding counts when one of
# its subjects is the service account; the bindings naming one of its subject
# names are looked up in opa-kube-sync's subject index
# (replicated.subject_index) when it is there; without it, every binding is
# read. The rules read the replicated data where it is (a real OPA server
# converts stored data as it is read, but all of it when it is passed to a
# function or kept in a set): they keep the roles' names, not the bindings.
bound_roles contains ["ClusterRole", binding.roleRef.name] if {
	index := replicated.subject_index("clusterrolebindings")
	bindings := replicated.collection("clusterrolebindings")
	some subject in subject_names
	some name, _ in index[subject]
	binding := bindings[name]
	binding.roleRef.kind == "ClusterRole"
	some s in binding.subjects
	subject_is(s)
}

bound_roles contains ["ClusterRole", binding.roleRef.name] if {
	not replicated.subject_index("clusterrolebindings")
	names := subject_names
	bindings := replicated.collection("clusterrolebindings")
	some name
	names[bindings[name].subjects[_].name]
	binding := bindings[name]
	binding.roleRef.kind == "ClusterRole"
	some s in binding.subjects
	subject_is(s)
}

bound_roles contains [binding.roleRef.kind, binding.roleRef.name] if {
	index := replicated.subject_index("rolebindings")[namespace]
	bindings := replicated.collection("rolebindings")[namespace]
	some subject in subject_names
	some name, _ in index[subject]
	binding := bindings[name]
	some s in binding.subjects
	namespace_subject_is(s)
}

bound_roles contains [binding.roleRef.kind, binding.roleRef.name] if {
	not replicated.subject_index("rolebindings")
	names := subject_names
	bindings := replicated.collection("rolebindings")[namespace]
	some name
	names[bindings[name].subjects[_].name]
	binding := bindings[name]
	some s in binding.subjects
	namespace_subject_is(s)
}

# Policy names ("*" for all) granted to the service account: those of the
# rules of its roles that allow `use` (or `*`) on schedulingpolicies (or `*`)
# in our API group (or `*`).
granted contains name if {
	some [kind, role_name] in bound_roles
	some rule in role(kind, role_name).rules
	listed(rule.verbs, "use")
	listed(rule.apiGroups, api_group)
	listed(rule.resources, resource)
	some name in resource_names(rule)
}

role("ClusterRole", name) := replicated.collection("clusterroles")[name]

role("Role", name) := replicated.collection("roles")[namespace][name]

listed(list, want) if want in list

listed(list, _) if "*" in list

# Listed names are matched exactly, as the RBAC authorizer does: a "*" among
# them names no SchedulingPolicy (no object can be called that), so it grants
# nothing; only a rule without resourceNames grants every policy.
resource_names(rule) := {n | some n in rule.resourceNames; is_string(n); n != "*"} if {
	is_array(rule.resourceNames)
	rule.resourceNames != []
} else := {"*"}
