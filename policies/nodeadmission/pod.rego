# What a node admission decision reads about the pod and the node (Rego v1).
#
# input: {"pod": <a core/v1 Pod>, "node": <the node's facts>}, as fedplace-node-admit
# sends it, where any field may have any type (a static pod manifest on a node is
# not validated). Every helper type-checks before it calls a builtin: on a builtin
# error OPA's server makes the expression undefined, silently changing a decision,
# and an evaluator with strict builtin errors fails the query.
package io.k8s.node.pod

# The pod's spec; undefined when the pod or its spec is not an object.
spec := input.pod.spec if {
	is_object(input.pod)
	is_object(input.pod.spec)
}

# The pod's pod-level securityContext, or {}.
security_context := sc if {
	sc := spec.securityContext
	is_object(sc)
} else := {}

container_fields := ["initContainers", "containers", "ephemeralContainers"]

# Every container of every kind, with the field path that names it in messages:
# {"path": "spec.containers[0]", "name": "app", "container": {…}}.
containers contains {"path": sprintf("spec.%s[%d]", [field, i]), "name": name, "container": c} if {
	some field in container_fields
	list := spec[field]
	is_array(list)
	some i, c in list
	is_object(c)
	name := container_name(c)
}

container_name(c) := c.name if is_string(c.name)

else := ""

# A container's securityContext, or {}.
container_security(c) := c.securityContext if is_object(c.securityContext)

else := {}

# A value as message text: strings as they are, anything else as JSON.
text(x) := x if is_string(x)

else := json.marshal(x)

# -- facts about the node ------------------------------------------------------------

# The strings of the list input.node[key]; undefined when the node states no such fact.
fact_list(key) := [v | some v in input.node[key]; is_string(v)] if {
	is_object(input.node)
	is_array(input.node[key])
}

# -- capabilities --------------------------------------------------------------------

# The capabilities a container runtime grants by default (Pod Security Standards,
# baseline): adding one of them elevates nothing.
default_capabilities := {
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

# "cap_net_admin" and "NET_ADMIN" name the same capability.
capability(name) := trim_prefix(upper(name), "CAP_") if is_string(name)

# The capabilities containers may add: the node's allowedCapabilities when it states
# them, else the runtime defaults.
allowed_capabilities := {capability(c) | some c in fact_list("allowedCapabilities")} if {
	fact_list("allowedCapabilities")
} else := default_capabilities

# The capabilities a container adds beyond what is allowed (as text; non-strings as JSON).
elevated_capabilities(c) := {text(cap) |
	adds := container_security(c).capabilities.add
	is_array(adds)
	some cap in adds
	not allowed_capability(cap)
}

allowed_capability(cap) if capability(cap) in allowed_capabilities

# -- sysctls -------------------------------------------------------------------------

# Namespaced sysctls Kubernetes considers safe (Pod Security Standards, baseline).
safe_sysctls := {
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ping_group_range",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.tcp_wmem",
}

# A sysctl name may use "/" as its separator ("kernel/shm_rmid_forced"); like the
# kubelet, when the first separator is a "/", the two separators are swapped.
sysctl_name(name) := concat(".", [replace(part, ".", "/") | some part in split(name, "/")]) if {
	is_string(name)
	slash_first(name)
} else := name if is_string(name)

slash_first(name) if {
	indexof(name, "/") >= 0
	indexof(name, ".") < 0
}

slash_first(name) if {
	slash := indexof(name, "/")
	slash >= 0
	slash < indexof(name, ".")
}

# The node allows an unsafe sysctl by name or by a pattern ending in "*" ("kernel.msg*").
node_allows_sysctl(name) if name in fact_list("allowedUnsafeSysctls")

node_allows_sysctl(name) if {
	some pattern in fact_list("allowedUnsafeSysctls")
	endswith(pattern, "*")
	startswith(name, trim_suffix(pattern, "*"))
}

# The pod's sysctls that are neither safe nor allowed by the node (as written in the pod).
unsafe_sysctls contains name if {
	sysctls := security_context.sysctls
	is_array(sysctls)
	some s in sysctls
	name := sysctl_text(s)
	not allowed_sysctl(s)
}

sysctl_text(s) := text(object.get(s, "name", null)) if is_object(s)

else := text(s)

allowed_sysctl(s) if {
	is_object(s)
	name := sysctl_name(s.name)
	name in safe_sysctls
}

allowed_sysctl(s) if {
	is_object(s)
	name := sysctl_name(s.name)
	node_allows_sysctl(name)
}

# -- hostPath volumes ------------------------------------------------------------------

# The node allows a hostPath at or below one of its allowedHostPaths ("/var/log"
# allows "/var/log" and "/var/log/app", not "/var/logs").
node_allows_host_path(path) if {
	is_string(path)
	some prefix in fact_list("allowedHostPaths")
	base := trim_suffix(prefix, "/")
	base != ""
	allowed_under(path, base)
}

allowed_under(path, base) if path == base

allowed_under(path, base) if startswith(path, concat("", [base, "/"]))

# The hostPath volumes the node does not allow: {"name", "path"} (as text).
host_path_volumes contains {"name": text(object.get(v, "name", "")), "path": text(path)} if {
	volumes := spec.volumes
	is_array(volumes)
	some v in volumes
	is_object(v)
	is_object(v.hostPath)
	path := object.get(v.hostPath, "path", "")
	not node_allows_host_path(path)
}
