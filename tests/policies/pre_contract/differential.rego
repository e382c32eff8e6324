# Test fixture (tests/policies/test_eu_pci_differential.py): many placement
# decisions in one query, each made twice — by the shipped policies (the
# placement-rules contract with the EU/PCI rule set) and by the pre-contract
# policies beside this file (packages pre_contract.…).
#
# POST /v1/data/fedplace_test/eu_pci_differential/results with
#   {"input": {"sets": [{"kubernetes": <data.kubernetes>, "index": <data.kubernetes_index>,
#                        "settings": <the placement settings>, "objects": [<object>, …]}, …]}}
# answers, per set and per object, in order, {"new": <view>, "old": <view>}: a
# view is the decision's {"annotations", "errors", "patches"} and the clusters
# the object may use, {"eligible", "karmada_eligible"} ("<undefined>" when the
# policies leave it undefined, "<asks nothing>" / "<errors>" for a binding whose
# template asks for no placement or is malformed: then no decision reads them), evaluated once with the object as input and the
# set's documents as data (`with`: nothing is written to the store, so the
# server never recompiles between sets).
package fedplace_test.eu_pci_differential

results := [set_results(s) | some s in input.sets]

# The set's documents replace the stored ones once for all its objects; each
# object is then the input of both views at once.
set_results(s) := r if {
	r := [pair |
		some obj in s.objects
		pair := {"new": new_view, "old": old_view} with input as obj
	]
		with data.kubernetes as s.kubernetes
		with data.kubernetes_index as s.index
		with data.io.k8s.federation.placement.settings as s.settings
}

# -- the shipped policies ------------------------------------------------------------

new_view := {
	"annotations": data.io.k8s.federation.placement.decision.annotations,
	"errors": data.io.k8s.federation.placement.decision.errors,
	"patches": data.io.k8s.federation.placement.decision.patches,
	"eligible": new_eligible,
	"karmada_eligible": new_karmada_eligible,
}

new_eligible := x if {
	x := data.io.k8s.federation.placement.eligible_clusters
} else := "<undefined>"

# A binding's allowed clusters, compared when its template asks for placement
# (otherwise no decision reads them, and the contract does not compute them).
new_karmada_eligible := "<asks nothing>" if {
	not data.io.k8s.federation.karmada.asks
} else := "<errors>" if {
	count(data.io.k8s.federation.karmada.requirement_errors) > 0
} else := x if {
	x := data.io.k8s.federation.karmada.eligible
} else := "<undefined>"

# -- the pre-contract policies ------------------------------------------------------------

old_view := {
	"annotations": data.pre_contract.io.k8s.federation.placement.decision.annotations,
	"errors": data.pre_contract.io.k8s.federation.placement.decision.errors,
	"patches": data.pre_contract.io.k8s.federation.placement.decision.patches,
	"eligible": old_eligible,
	"karmada_eligible": old_karmada_eligible,
}

old_eligible := x if {
	x := data.pre_contract.io.k8s.federation.placement.eligible_clusters
} else := "<undefined>"

old_karmada_eligible := "<asks nothing>" if {
	not data.pre_contract.io.k8s.federation.karmada.asks
} else := "<errors>" if {
	count(data.pre_contract.io.k8s.federation.karmada.requirement_errors) > 0
} else := x if {
	x := data.pre_contract.io.k8s.federation.karmada.eligible
} else := "<undefined>"
