# The placement decision's part in the admission decision (Rego v1).
#
# Placement rules (placement.rego, selector.rego, policies/karmada/) write
# data.io.k8s.federation.placement.decision: annotations, errors, patches
# ({pack: JSON Patch operations}) and events (Events the webhook records on
# other objects). The admission decision is that document plus what the other
# packs add; remediation (policies/lib/remediation.rego) evaluates the placement
# decision alone, so another pack's verdict on an object never blocks its
# re-placement.
package io.k8s.federation.admission

import data.io.k8s.federation.placement.decision

annotations[key] := value if some key, value in decision.annotations

errors contains msg if some msg in decision.errors

patches[pack] := ops if some pack, ops in decision.patches

events contains event if some event in decision.events
