# A list's digest is the SHA-256 of the list's JSON exactly as json.marshal
# writes it, whether the list is joined directly or marshalled: records
# written before keep matching.
package io.k8s.federation.karmada.digest_test

import data.io.k8s.federation.karmada

lists := [
	[],
	["member1"],
	["c0", "c1.example-2", "zz-user-a"],
	[sprintf("c%d", [i]) | some i in numbers.range(0, 2999)],
	["a\"b", "c"],
	["a\\b"],
	["a<b", "a>b", "a&b"],
	["é", "z"],
	["a\u2028b"],
	["tab\there"],
	[1, "a"],
	["a", {"b": 1}],
	[null],
]

test_list_json_is_json_marshal if {
	every l in lists {
		karmada.list_json(l) == json.marshal(l)
	}
}

test_list_digest_is_the_json_sha256_prefix if {
	every l in lists {
		karmada.list_digest(l) == substring(crypto.sha256(json.marshal(l)), 0, 16)
	}
}

test_all_strings_only_when_every_element_is_one if {
	karmada.all_strings(["b", "a"])
	not karmada.all_strings(["b", 1, "a"])
	not karmada.all_strings(["b", ["a"]])
	not karmada.all_strings([null, "a"])
	not karmada.all_strings(["a", {"b": 1}])
}
