package io.k8s.node.admission_test

import data.io.k8s.node.admission

app := {"name": "app", "image": "registry.example/app:1"}

plain_pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": [app]}}

with_spec(extra) := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": object.union({"containers": [app]}, extra)}

denials(p, node) := d if {
	d := admission.deny with input as {"pod": p, "node": node}
}

reasons(p, node) := {v.reason | some v in denials(p, node)}

messages(p, node) := {v.message | some v in denials(p, node)}

test_a_plain_pod_is_admitted if {
	d := denials(plain_pod, {})
	count(d) == 0
}

test_a_plain_pod_is_admitted_without_node_facts if {
	d := admission.deny with input as {"pod": plain_pod}
	count(d) == 0
}

test_host_namespaces_are_forbidden if {
	r := reasons(with_spec({"hostNetwork": true, "hostPID": true, "hostIPC": true}), {})
	r == {"HostNetworkForbidden", "HostPIDForbidden", "HostIPCForbidden"}
}

test_host_namespaces_set_to_false_are_fine if {
	r := reasons(with_spec({"hostNetwork": false, "hostPID": false, "hostIPC": false}), {})
	r == set()
}

test_privileged_containers_of_every_kind_are_named if {
	priv := {"securityContext": {"privileged": true}}
	p := with_spec({
		"initContainers": [object.union({"name": "init"}, priv)],
		"containers": [app, object.union({"name": "side"}, priv)],
		"ephemeralContainers": [object.union({"name": "debug"}, priv)],
	})
	m := messages(p, {})
	m == {
		`container "init" (spec.initContainers[0]) is privileged`,
		`container "side" (spec.containers[1]) is privileged`,
		`container "debug" (spec.ephemeralContainers[0]) is privileged`,
	}
}

test_unprivileged_security_context_is_fine if {
	p := with_spec({"containers": [object.union(app, {"securityContext": {"privileged": false, "runAsNonRoot": true}})]})
	r := reasons(p, {})
	r == set()
}

test_host_path_volumes_are_forbidden if {
	p := with_spec({"volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "tmp", "emptyDir": {}}]})
	m := messages(p, {})
	m == {`volume "root" mounts the host path "/"`}
}

test_unsafe_sysctls_are_forbidden_safe_ones_are_not if {
	sysctls := [
		{"name": "kernel.shm_rmid_forced", "value": "1"},
		{"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
		{"name": "net.core.somaxconn", "value": "1024"},
		{"name": "kernel.msgmax", "value": "65536"},
	]
	m := messages(with_spec({"securityContext": {"sysctls": sysctls}}), {})
	m == {"the pod sets sysctls this node does not allow: kernel.msgmax, net.core.somaxconn"}
}

test_elevated_capabilities_are_forbidden if {
	caps := {"add": ["NET_BIND_SERVICE", "NET_ADMIN", "SYS_ADMIN"], "drop": ["ALL"]}
	p := with_spec({"containers": [object.union(app, {"securityContext": {"capabilities": caps}})]})
	d := denials(p, {})
	d == {{
		"reason": "CapabilityForbidden",
		"message": `container "app" (spec.containers[0]) adds capabilities this node does not allow: NET_ADMIN, SYS_ADMIN`,
	}}
}

test_runtime_defaults_are_not_elevated if {
	caps := {"add": ["CHOWN", "cap_kill", "NET_BIND_SERVICE"]}
	p := with_spec({"containers": [object.union(app, {"securityContext": {"capabilities": caps}})]})
	r := reasons(p, {})
	r == set()
}

test_all_problems_are_reported_at_once if {
	p := with_spec({
		"hostNetwork": true,
		"volumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}],
		"containers": [object.union(app, {"securityContext": {"privileged": true, "capabilities": {"add": ["ALL"]}}})],
		"securityContext": {"sysctls": [{"name": "kernel.sem", "value": "1"}]},
	})
	r := reasons(p, {})
	r == {
		"HostNetworkForbidden", "HostPathVolumeForbidden", "PrivilegedContainerForbidden", "CapabilityForbidden",
		"UnsafeSysctlForbidden",
	}
}

# -- node facts ------------------------------------------------------------------------

test_node_allowed_capabilities_replace_the_defaults if {
	caps := {"add": ["NET_ADMIN", "CHOWN"]}
	p := with_spec({"containers": [object.union(app, {"securityContext": {"capabilities": caps}})]})
	m := messages(p, {"allowedCapabilities": ["cap_net_admin"]})
	m == {`container "app" (spec.containers[0]) adds capabilities this node does not allow: CHOWN`}
}

test_node_allowed_sysctls_by_name_and_pattern if {
	sysctls := [{"name": "net.core.somaxconn", "value": "1"}, {"name": "kernel.msgmax", "value": "1"}]
	p := with_spec({"securityContext": {"sysctls": sysctls}})
	r := reasons(p, {"allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msg*"]})
	r == set()
	m := messages(p, {"allowedUnsafeSysctls": ["kernel.msg*"]})
	m == {"the pod sets sysctls this node does not allow: net.core.somaxconn"}
}

test_node_allowed_host_paths_match_whole_path_segments if {
	vols := [
		{"name": "logs", "hostPath": {"path": "/var/log"}},
		{"name": "app-logs", "hostPath": {"path": "/var/log/app"}},
		{"name": "other", "hostPath": {"path": "/var/logs"}},
	]
	m := messages(with_spec({"volumes": vols}), {"allowedHostPaths": ["/var/log/"]})
	m == {`volume "other" mounts the host path "/var/logs"`}
}

test_runtime_class_must_be_one_the_node_has if {
	p := with_spec({"runtimeClassName": "kata"})
	m := messages(p, {"runtimeClasses": ["runc", "gvisor"]})
	m == {`runtime class "kata" is not available on this node (it has: runc, gvisor)`}
	ok := reasons(with_spec({"runtimeClassName": "gvisor"}), {"runtimeClasses": ["runc", "gvisor"]})
	ok == set()
}

test_runtime_class_is_not_checked_when_the_node_states_none if {
	r := reasons(with_spec({"runtimeClassName": "kata"}), {"labels": {}})
	r == set()
}

# -- malformed input decides, never raises -----------------------------------------------

test_a_pod_without_an_object_spec_is_invalid if {
	every p in [null, "pod", 3, {"metadata": {}}, {"spec": "x"}, {"spec": []}] {
		r := reasons(p, {})
		r == {"InvalidPod"}
	}
}

test_no_input_at_all_is_invalid if {
	d := admission.deny with input as {}
	{v.reason | some v in d} == {"InvalidPod"}
}

test_odd_fields_are_skipped_not_fatal if {
	p := with_spec({
		"containers": "not a list",
		"initContainers": [3, {"securityContext": "x"}, {"name": 7, "securityContext": {"privileged": true}}],
		"volumes": [3, {"name": 1, "hostPath": {"path": 2}}, {"hostPath": "x"}],
		"securityContext": {"sysctls": [4, {"name": 5}, {"value": "1"}]},
	})
	m := messages(p, {"allowedHostPaths": [1, "/"], "allowedCapabilities": "all", "runtimeClasses": "x"})
	m == {
		`container "" (spec.initContainers[2]) is privileged`,
		`volume "1" mounts the host path "2"`,
		`the pod sets sysctls this node does not allow: 4, 5, null`,
	}
}

test_node_facts_of_the_wrong_type_are_ignored if {
	p := with_spec({"hostNetwork": true})
	r := reasons(p, "not an object")
	r == {"HostNetworkForbidden"}
}
