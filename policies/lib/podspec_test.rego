package io.k8s.federation.podspec_test

import data.io.k8s.federation.podspec

pod_spec := {"containers": [{"name": "app", "image": "nginx"}]}

test_pod if {
	podspec.pointer == "/spec" with input as {"kind": "Pod", "spec": pod_spec}
	podspec.spec == pod_spec with input as {"kind": "Pod", "spec": pod_spec}
}

test_template_kinds if {
	every kind in ["ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job"] {
		podspec.pointer == "/spec/template/spec" with input as {"kind": kind}
		podspec.spec == pod_spec with input as {"kind": kind, "spec": {"template": {"spec": pod_spec}}}
	}
}

test_cronjob if {
	obj := {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": pod_spec}}}}}
	podspec.pointer == "/spec/jobTemplate/spec/template/spec" with input as obj
	podspec.spec == pod_spec with input as obj
	podspec.applies with input as obj
}

test_other_kinds_and_missing_specs_do_not_apply if {
	not podspec.applies with input as {"kind": "ConfigMap", "data": {}}
	not podspec.pointer with input as {"kind": "Secret"}
	not podspec.applies with input as {"kind": "Deployment", "spec": {"replicas": 1}}
	not podspec.applies with input as {"kind": "Pod", "spec": "not an object"}
	not podspec.applies with input as "not an object"
}

test_only_a_pod_carrying_a_phase_exists if {
	podspec.existing_pod with input as {"kind": "Pod", "spec": pod_spec, "status": {"phase": "Pending"}}
	not podspec.existing_pod with input as {"kind": "Pod", "spec": pod_spec}
	not podspec.existing_pod with input as {"kind": "Pod", "spec": pod_spec, "status": {}}
	not podspec.existing_pod with input as {"kind": "ReplicaSet", "spec": {"template": {"spec": pod_spec}}, "status": {"phase": "Running"}}
}
