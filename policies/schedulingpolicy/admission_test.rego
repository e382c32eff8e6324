# The pack's contribution to the one admission decision.
package io.k8s.federation.schedulingpolicy.admission_test

import data.io.k8s.federation.admission
import data.io.k8s.federation.schedulingpolicy.pods_test
import data.io.k8s.federation.schedulingpolicy.seed_test

kube := pods_test.seed_world(["single-priority"])

test_defaults_go_under_the_pack_s_own_patches_key if {
	p := admission.patches with data.kubernetes as kube with input as pods_test.pod({})
	p.schedulingpolicy == [{"op": "add", "path": "/spec/priorityClassName", "value": "high-priority"}]
}

test_no_patches_entry_when_nothing_is_defaulted if {
	p := object.get(admission, "patches", {}) with data.kubernetes as kube with input as pods_test.pod({"priorityClassName": "high-priority"})
	not p.schedulingpolicy
}

test_denials_are_admission_errors if {
	e := admission.errors with data.kubernetes as kube with input as pods_test.pod({"priorityClassName": "low"})
	some msg in e
	startswith(msg, "SchedulingPolicy: priorityClassName \"low\": required, one of \"high-priority\"")
}

test_a_schedulingpolicy_is_validated_at_its_own_admission if {
	bad := seed_test.policy("empty-required", {"required": {"priorityClassNames": []}})
	e := admission.errors with data.kubernetes as kube with input as bad
	some msg in e
	startswith(msg, "SchedulingPolicy \"empty-required\": spec.required.priorityClassNames: an empty list requires nothing")
	good := seed_test.policy("restricted", seed_test.specs.restricted)
	e2 := admission.errors with data.kubernetes as kube with input as good
	every msg in e2 {
		not startswith(msg, "SchedulingPolicy")
	}
}
