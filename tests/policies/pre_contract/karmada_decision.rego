# Test fixture (tests/policies/test_eu_pci_differential.py): policies/karmada/decision.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# The Karmada pack's part of the placement decision (Rego v1); the logic is in
# karmada.rego (package io.k8s.federation.karmada).
#
#   annotations  on a binding: fedplace.io/excluded-clusters (a list, or
#                {"allExcept": [...]}) and fedplace.io/placement (compared by
#                remediation)
#   patches      on a binding: patches["karmada"], the narrowed exclude lists and
#                the fedplace.io/exclusions-added record
#   events       a Warning PlacementUnsatisfiable on the template of a binding no
#                cluster is allowed for
#   stuck        on a binding whose spec.clusters holds a cluster the decision
#                forbids (stuck.rego): {"targets", "reason", "message",
#                "related": [the template]}, what remediation reports
#   errors       templates (control_plane "karmada") and PropagationPolicies
#                only: a binding is never denied
package pre_contract.io.k8s.federation.placement.decision

import data.pre_contract.io.k8s.federation.karmada

annotations[karmada.excluded_key] := karmada.excluded_value if karmada.decided

annotations[karmada.why_key] := karmada.why if karmada.decided

patches["karmada"] := karmada.patch if count(karmada.patch) > 0

stuck := karmada.stuck_report if karmada.stuck

events contains karmada.unsatisfiable_event if karmada.unsatisfiable

errors contains msg if some msg in karmada.template_errors

errors contains msg if some msg in karmada.policy_errors
