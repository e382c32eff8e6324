package io.k8s.federation.page_test

import data.io.k8s.federation.page

clusters := {
	"a": {"metadata": {"name": "a", "labels": {"gpu": "a100"}}, "status": {"region": "europe-west1"}},
	"b": {"metadata": {"name": "b", "labels": {"gpu": "t4"}}, "status": {"region": "us-east1"}},
	"c": {"metadata": {"name": "c"}, "status": {"region": "europe-west4"}},
}

rules := {"hw": {
	"require": {{"id": "gpu", "requires": "gpu a100", "imposed_by": "workload", "cluster": {"label": "gpu", "in": ["a100"]}}},
	"forbid": {{"cluster": "c", "id": "no-c", "requires": "not c", "value": "c"}},
}}

test_the_answer_names_each_forbidden_cluster_with_its_reasons if {
	a := page.answer with data.kubernetes.clusters as clusters with data.fedplace.rules as rules
	a.asks
	a.errors == []
	a.eligible == 1
	a.requires == "gpu a100, not c"
	object.keys(a.forbidden) == {"b", "c"}
	a.forbidden.b == [{"set": "hw", "id": "gpu", "requires": "gpu a100", "imposed_by": "workload", "source": "", "value": "t4"}]
	{r.id | some r in a.forbidden.c} == {"gpu", "no-c"}
}

test_no_rule_set_asks_nothing if {
	a := page.answer with data.kubernetes.clusters as clusters with data.fedplace.rules as {}
	not a.asks
	a.forbidden == {}
	a.eligible == 3
}

test_a_rule_set_breaking_the_contract_is_an_error if {
	a := page.answer with data.kubernetes.clusters as clusters
		with data.fedplace.rules as {"bad": {"require": {{"id": "x", "cluster": {"label": "gpu"}}}}}
	count(a.errors) == 1
	startswith(a.errors[0], "placement rule set bad: requirement \"x\"")
}
