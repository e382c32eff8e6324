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
missing := {plural | some plural in collections; not replicated_collection(plural)}

replicated_collection(plural) if is_object(replicated.collection(plural))

# ---- the pod's service account ---------------------------------------------

namespace := ns if {
	ns := input.metadata.namespace
	is_string(ns)
} else := ""

service_account := sa if {
	sa := podspec.spec.serviceAccountName
	nonempty_string(sa)
} else := sa if {
	# the deprecated alias, still accepted by the API server
	sa := podspec.spec.serviceAccount
	nonempty_string(sa)
} else := "default"

nonempty_string(x) if {
	is_string(x)
	x != ""
}

username := sprintf("system:serviceaccount:%s:%s", [namespace, service_account])

groups := {"system:serviceaccounts", sprintf("system:serviceaccounts:%s", [namespace]), "system:authenticated"}

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

subject_is(s) if {
	s.kind == "Group"
	s.name in groups
}

# ---- bindings and grants ------------------------------------------------------

# ClusterRoleBindings, and RoleBindings of the pod's namespace, to the service
# account: the bindings naming one of its subject names, then each binding's
# subjects checked. The names are looked up in opa-kube-sync's subject index
# (replicated.subject_index) when it is there; without it, every binding is
# read. The rules read the replicated data where it is: a real OPA server
# converts stored data as it is read, but all of it when it is passed to a
# function.
cluster_bindings contains binding if {
	bindings := replicated.collection("clusterrolebindings")
	some name in cluster_binding_names
	binding := bindings[name]
	some s in binding.subjects
	subject_is(s)
}

namespace_bindings contains binding if {
	bindings := replicated.collection("rolebindings")[namespace]
	some name in namespace_binding_names
	binding := bindings[name]
	some s in binding.subjects
	namespace_subject_is(s)
}

# The names of the bindings naming one of the subject names.
cluster_binding_names contains name if {
	index := replicated.subject_index("clusterrolebindings")
	some subject in subject_names
	some name, _ in index[subject]
}

cluster_binding_names contains name if {
	not replicated.subject_index("clusterrolebindings")
	names := subject_names
	bindings := replicated.collection("clusterrolebindings")
	some name
	names[bindings[name].subjects[_].name]
}

namespace_binding_names contains name if {
	index := replicated.subject_index("rolebindings")
	some subject in subject_names
	some name, _ in index[namespace][subject]
}

namespace_binding_names contains name if {
	not replicated.subject_index("rolebindings")
	names := subject_names
	bindings := replicated.collection("rolebindings")[namespace]
	some name
	names[bindings[name].subjects[_].name]
}

cluster_roles := replicated.collection("clusterroles")

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

referenced_role(ref) := replicated.collection("roles")[namespace][ref.name] if ref.kind == "Role"

# The names a role's rules grant `use` of ("*": all of them).
grants(role) := {name |
	some rule in role.rules
	listed(rule.verbs, "use")
	listed(rule.apiGroups, api_group)
	listed(rule.resources, resource)
	some name in resource_names(rule)
}

listed(list, want) if want in list

listed(list, _) if "*" in list

# Listed names are matched exactly, as the RBAC authorizer does: a "*" among
# them names no SchedulingPolicy (no object can be called that), so it grants
# nothing; only a rule without resourceNames grants every policy.
resource_names(rule) := {n | some n in rule.resourceNames; is_string(n); n != "*"} if {
	is_array(rule.resourceNames)
	count(rule.resourceNames) > 0
} else := {"*"}
