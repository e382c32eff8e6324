# Unit tests of the quantity parser; run by `opa test policies/` and by the
# project's suite (OPA's evaluator in process). tests/packs/limitrange/test_quantity.py
# checks the parser against a re-statement of Kubernetes' own on many more values.
package io.k8s.federation.limitrange.quantity_test

import data.io.k8s.federation.limitrange.quantity

value(v) := [q.whole, q.nano] if {
	q := quantity.parse(v)
	q.ok
}

test_kubernetes_forms if {
	value("250m") == [0, 250000000]
	value("0.5") == [0, 500000000]
	value("1Gi") == [1073741824, 0]
	value("1G") == [1000000000, 0]
	value("1e3") == [1000, 0]
	value("129e6") == [129000000, 0]
	value("1Ki") == [1024, 0]
	value("100M") == [100000000, 0]
	value("1.5Gi") == [1610612736, 0]
	value("0.1Ki") == [102, 400000000]
	value("1E") == [1000000000000000000, 0]
	value("2.5e-3") == [0, 2500000]
	value("100n") == [0, 100]
	value("1u") == [0, 1000]
	value("+1") == [1, 0]
	value(".5") == [0, 500000000]
	value("1.") == [1, 0]
	value(" 1Gi ") == [1073741824, 0]
	value("e3") == [0, 0] # a bare exponent is zero to Kubernetes too
}

test_rounded_up_to_a_nanounit_and_capped if {
	value("1e-12") == [0, 1]
	value("1.0000000001") == [1, 1]
	value("1.9999999999") == [2, 0]
	value("1e30") == [9223372036854775807, 0]
	value("8Ei") == [9223372036854775807, 0]
	value("7Ei") == [8070450532247928832, 0]
}

test_what_kubernetes_refuses if {
	every v in ["1K", "1ki", "1mi", "1MI", "abc", "", "1.5.5", "1 Gi", "1Gi1", "1e", "0x10", "1,5"] {
		q := quantity.parse(v)
		not q.ok
		q.error == "is not a valid quantity"
		q.text == trim_space(v)
	}
}

test_negative_quantities_are_refused if {
	q := quantity.parse("-1")
	not q.ok
	q.error == "must not be negative"
	value("-0") == [0, 0]
}

test_numbers_null_and_other_json if {
	value(2) == [2, 0]
	value(0.25) == [0, 250000000]
	value(null) == [0, 0]
	q := quantity.parse({"cpu": 1})
	not q.ok
	q.text == `{"cpu":1}`
	b := quantity.parse(true)
	not b.ok
}

test_kubernetes_values_for_comparison if {
	q := quantity.parse("1500m")
	q.units == 2
	q.milli == 1500
	q.small
	half := quantity.parse("0.5m")
	half.milli == 1
	big := quantity.parse("10Pi")
	not big.small
	not big.milli
	big.units == 11258999068426240
}

test_exact_order_and_sum if {
	quantity.less(quantity.parse("999Mi"), quantity.parse("1Gi"))
	not quantity.less(quantity.parse("1Gi"), quantity.parse("1024Mi"))
	not quantity.less(quantity.parse("1024Mi"), quantity.parse("1Gi"))
	quantity.less(quantity.parse("1G"), quantity.parse("1Gi"))
	t := quantity.total([quantity.parse("1.5"), quantity.parse("750m"), quantity.parse("0.75")])
	[t.whole, t.nano] == [3, 0]
	quantity.total([]).whole == 0
}

# A total is a quantity like parse's: Value() and MilliValue() rounded up from
# the exact sum, and no MilliValue beyond MaxMilliValue.
test_total_rounds_the_exact_sum if {
	one_n := quantity.parse("1n")
	quantity.total([one_n, one_n, one_n]) == {"ok": true, "text": "", "whole": 0, "nano": 3, "units": 1, "small": true, "milli": 1}
	carried := quantity.total([quantity.parse("0.6"), quantity.parse("0.7")])
	[carried.whole, carried.nano, carried.units, carried.milli] == [1, 300000000, 2, 1300]
	big := quantity.total([quantity.parse("8P"), quantity.parse("8P"), quantity.parse("1m")])
	[big.whole, big.nano, big.units, big.small] == [16000000000000000, 1000000, 16000000000000001, false]
	not big.milli
}

test_format if {
	quantity.format({"whole": 3221225472, "nano": 0}, "memory") == "3Gi"
	quantity.format({"whole": 1500000000, "nano": 0}, "memory") == "1500M"
	quantity.format({"whole": 1, "nano": 500000000}, "cpu") == "1500m"
	quantity.format({"whole": 2, "nano": 0}, "cpu") == "2"
	quantity.format({"whole": 0, "nano": 1}, "cpu") == "1n"
	quantity.format({"whole": 123, "nano": 0}, "memory") == "123"
	quantity.format({"whole": 0, "nano": 0}, "memory") == "0"
}

# The short form is read off its digits; the full grammar gives every such
# value the same quantity.
test_the_short_form_is_the_grammar_value if {
	every v in [
		"250m", "0.5", "1.25", "1.5Gi", "0.125Gi", "100k", "7T", "0.5Ki", "0.000001", "1.000001m",
		"0.123456m", "999999999999999", "0", "0m", "1001m", "922337203685477m", "2", "512Mi",
		"876543210987654.321987m", "999999999999999.999999m", "123456.123456Gi", "0.05", "1000000m",
	] {
		regex.match(quantity.short_grammar, v)
		[[_, sign, ip, fp, suffix]] := regex.find_all_string_submatch_n(quantity.grammar, v, 1)
		quantity.parse(v) == quantity._checked(v, sign, quantity._value(ip, fp, suffix))
	}
}

# Values of the short form beyond MaxMilliValue take the full grammar.
test_large_short_values_take_the_grammar if {
	q := quantity.parse("999999999999999Ti")
	[q.whole, q.nano, q.small] == [9223372036854775807, 0, false]
}
