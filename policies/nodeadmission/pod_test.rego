package io.k8s.node.pod_test

import data.io.k8s.node.pod

test_containers_of_every_kind_with_their_paths if {
	spec := {
		"initContainers": [{"name": "i"}],
		"containers": [{"name": "a"}, {"name": "b"}],
		"ephemeralContainers": [{"name": "e"}],
	}
	cs := pod.containers with input as {"pod": {"spec": spec}}
	{[c.path, c.name] | some c in cs} == {
		["spec.initContainers[0]", "i"], ["spec.containers[0]", "a"], ["spec.containers[1]", "b"],
		["spec.ephemeralContainers[0]", "e"],
	}
}

test_capability_names_are_normalised if {
	pod.capability("cap_net_raw") == "NET_RAW"
	pod.capability("SYS_TIME") == "SYS_TIME"
	not pod.capability(3)
}

test_sysctl_names_with_slashes_are_converted_like_the_kubelet if {
	pod.sysctl_name("kernel/shm_rmid_forced") == "kernel.shm_rmid_forced"
	pod.sysctl_name("net/ipv4/conf/eno2.100/rp_filter") == "net.ipv4.conf.eno2/100.rp_filter"
	pod.sysctl_name("net.ipv4.conf.eno2/100.rp_filter") == "net.ipv4.conf.eno2/100.rp_filter"
	pod.sysctl_name("net.ipv4.tcp_syncookies") == "net.ipv4.tcp_syncookies"
	not pod.sysctl_name(3)
}

test_slash_separated_safe_sysctls_are_safe if {
	sysctls := [{"name": "kernel/shm_rmid_forced", "value": "1"}, {"name": "net/core/somaxconn", "value": "1"}]
	unsafe := pod.unsafe_sysctls with input as {"pod": {"spec": {"securityContext": {"sysctls": sysctls}}}}
	unsafe == {"net/core/somaxconn"}
}

test_allowed_capabilities_default_to_the_runtime_set if {
	caps := pod.allowed_capabilities with input as {"pod": {"spec": {}}}
	caps == pod.default_capabilities
	node := pod.allowed_capabilities with input as {"node": {"allowedCapabilities": ["cap_bpf", 3]}}
	node == {"BPF"}
}

test_fact_list_keeps_strings_only if {
	facts := pod.fact_list("allowedHostPaths") with input as {"node": {"allowedHostPaths": ["/a", 1, null, "/b"]}}
	facts == ["/a", "/b"]
	not pod.fact_list("allowedHostPaths") with input as {"node": {"allowedHostPaths": "/a"}}
	not pod.fact_list("allowedHostPaths") with input as {"node": []}
}

test_host_path_prefixes_match_segments if {
	pod.node_allows_host_path("/var/log/x") with input as {"node": {"allowedHostPaths": ["/var/log"]}}
	pod.node_allows_host_path("/var/log") with input as {"node": {"allowedHostPaths": ["/var/log/"]}}
	not pod.node_allows_host_path("/var/logs") with input as {"node": {"allowedHostPaths": ["/var/log"]}}
	not pod.node_allows_host_path("/etc") with input as {"node": {"allowedHostPaths": ["/"]}}
	not pod.node_allows_host_path(3) with input as {"node": {"allowedHostPaths": ["/var"]}}
}
