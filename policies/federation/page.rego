# What the placement rules say about one object, for the placement page
# (opa-kube-sync's --placement-page and `fedplace report`), read from the
# placement-rules contract (contract.rego) alone (Rego v1).
#
# Query: POST /v1/data/io/k8s/federation/page/answer with {"input": <object>}
# (a workload, or a Karmada binding's template, as admission sees it):
#
#   {"asks": true,                          # some rule set requires or forbids something of its clusters
#    "errors": ["…"],                       # its request is malformed, or a rule set breaks the contract
#    "requires": "EU jurisdiction required, PCI compliance level >= 2",
#    "eligible": 2,                         # how many clusters it may use
#    "forbidden": {"gce-us-central1": [{"set": "eu_pci", "id": "eu-jurisdiction",
#                                       "requires": "EU jurisdiction required", "imposed_by": "workload",
#                                       "source": "…", "value": "us-central1"}], …}}
#
# "forbidden" names every cluster some rule forbids, with each failed
# requirement and forbid (contract.rego's cluster_reasons); a cluster it does
# not name is eligible. Linear in clusters: only evaluated when asked (the
# webhook and the remediator never read it).
package io.k8s.federation.page

import data.io.k8s.federation.placement

default asks := false

asks if placement.asks_placement

answer := {
	"asks": asks,
	"errors": sort(placement.constraint_errors),
	"requires": placement.requirements_text,
	"eligible": count(placement.eligible_clusters),
	"forbidden": {name: reasons |
		some name, reasons in placement.cluster_reasons
		count(reasons) > 0
	},
}
