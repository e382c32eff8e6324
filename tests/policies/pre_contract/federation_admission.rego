# Test fixture (tests/policies/test_eu_pci_differential.py): policies/federation/admission.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# The placement decision's part in the admission decision (Rego v1).
#
# Placement rules (placement.rego, selector.rego, policies/karmada/) write
# data.pre_contract.io.k8s.federation.placement.decision: annotations, errors, patches
# ({pack: JSON Patch operations}) and events (Events the webhook records on
# other objects). The admission decision is that document plus what the other
# packs add; remediation (policies/lib/remediation.rego) evaluates the placement
# decision alone, so another pack's verdict on an object never blocks its
# re-placement.
package pre_contract.io.k8s.federation.admission

import data.pre_contract.io.k8s.federation.placement.decision

annotations[key] := value if some key, value in decision.annotations

errors contains msg if some msg in decision.errors

patches[pack] := ops if some pack, ops in decision.patches

events contains event if some event in decision.events
