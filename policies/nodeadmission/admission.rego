# Node-level pod admission (KEP-2823's motivating case): a managed or serverless
# node refuses pods that would reach into the host — its network, PID or IPC
# namespace, privileged containers, hostPath volumes, unsafe sysctls, elevated
# capabilities — and pods asking for a runtime class the node does not have.
#
# Asked by fedplace-node-admit at data.io.k8s.node.admission with
# input {"pod": <Pod>, "node": <facts>}; the decision is `deny`, a set of
# {"reason": <CamelCase>, "message": <text>}. Empty → the pod is admitted.
# Node facts relax the checks where a node allows more (see pod.rego):
# allowedCapabilities, allowedUnsafeSysctls, allowedHostPaths, runtimeClasses.
package io.k8s.node.admission

import data.io.k8s.node.pod

violation(reason, message) := {"reason": reason, "message": message}

deny contains violation("InvalidPod", "the pod or its spec is not an object") if not pod.spec

deny contains violation("HostNetworkForbidden", "the pod uses the host's network namespace (spec.hostNetwork)") if {
	pod.spec.hostNetwork == true
}

deny contains violation("HostPIDForbidden", "the pod uses the host's PID namespace (spec.hostPID)") if {
	pod.spec.hostPID == true
}

deny contains violation("HostIPCForbidden", "the pod uses the host's IPC namespace (spec.hostIPC)") if {
	pod.spec.hostIPC == true
}

deny contains violation("PrivilegedContainerForbidden", msg) if {
	some c in pod.containers
	pod.container_security(c.container).privileged == true
	msg := sprintf("container %q (%s) is privileged", [c.name, c.path])
}

deny contains violation("CapabilityForbidden", msg) if {
	some c in pod.containers
	caps := pod.elevated_capabilities(c.container)
	count(caps) > 0
	msg := sprintf(
		"container %q (%s) adds capabilities this node does not allow: %s",
		[c.name, c.path, concat(", ", sort(caps))],
	)
}

deny contains violation("HostPathVolumeForbidden", msg) if {
	some v in pod.host_path_volumes
	msg := sprintf("volume %q mounts the host path %q", [v.name, v.path])
}

deny contains violation("UnsafeSysctlForbidden", msg) if {
	count(pod.unsafe_sysctls) > 0
	msg := sprintf("the pod sets sysctls this node does not allow: %s", [concat(", ", sort(pod.unsafe_sysctls))])
}

deny contains violation("RuntimeClassUnsupported", msg) if {
	classes := pod.fact_list("runtimeClasses")
	name := pod.spec.runtimeClassName
	is_string(name)
	not name in classes
	msg := sprintf("runtime class %q is not available on this node (it has: %s)", [name, concat(", ", classes)])
}
