# Kubernetes resource quantities in Rego (v1), parsed and compared the way
# k8s.io/apimachinery/pkg/api/resource does it, identically under OPA and the
# devstack engine (regorus).
#
# Why not units.parse: it accepts what Kubernetes refuses ("1K", "1ki", "1mi"
# are all valid to it, invalid to the API server), does not know "n" and "u",
# and its result is a decimal in OPA but a binary float in regorus, so
# comparisons could differ between the two. Here a quantity is matched
# against Kubernetes' grammar first, then turned into whole numbers with
# string operations and integer arithmetic only:
#
#   parse("1.5Gi") = {"ok": true, "text": "1.5Gi", "whole": 1610612736, "nano": 0,
#                     "units": 1610612736, "milli": 1610612736000, "small": true}
#
# whole units plus nanounits (0 <= nano < 10^9) are the exact value at
# Kubernetes' own precision: it rounds a value up to the next nanounit when
# parsing and caps it at 2^63-1 units. units and milli are Value() and
# MilliValue() (rounded up); small says units <= resource.MaxMilliValue, and
# milli is only there when it is. Anything else is {"ok": false, "text",
# "error"}: parse is never undefined and never fails, so a malformed quantity
# becomes a denial that names it instead of an evaluation error.
#
# The LimitRanger compares in milli-units when every value involved is small,
# else in whole units (requestLimitEnforcedValues); sums (pod totals) are
# exact, as Quantity.Add is.
#
# Where this is stricter than Kubernetes: a negative quantity is an error
# here (the API server refuses negative requests, limits and LimitRange
# bounds anyway), and a binary-suffixed quantity may have at most 19
# significant digits ("1.5Gi" yes, a 25-digit mantissa before "Gi" no).
package io.k8s.federation.limitrange.quantity

# 2^63-1: the cap Kubernetes puts on a parsed quantity, in units.
max_units := 9223372036854775807

# resource.MaxMilliValue: above it Kubernetes compares whole units.
max_milli_value := 9223372036854775

nano_per_unit := 1000000000

# <sign><digits>[.<digits>]<suffix>, suffix one of the binary SI suffixes, the
# decimal SI suffixes (n u m "" k M G T P E) or a decimal exponent (e3, E-2).
grammar := `^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$`

decimal_exponent := {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

binary_factor := {
	"Ki": 1024,
	"Mi": 1048576,
	"Gi": 1073741824,
	"Ti": 1099511627776,
	"Pi": 1125899906842624,
	"Ei": 1152921504606846976,
}

# 28 digits of nanounits hold every value up to the cap (9.2e27).
max_nano_digits := 28

zeros := "0000000000000000000000000000"

# -- parsing -------------------------------------------------------------------

# The quantity v (a string, a JSON number, or null as Kubernetes reads them):
# {"ok": true, "text", "whole", "nano", "units", "milli", "small"} (units and
# milli are Value() and MilliValue(); small: units <= MaxMilliValue), or
# {"ok": false, "text", "error"}. Plain forms ("512Mi", "250m", "2") take a
# shorter path than the full grammar; both give the same value.
parse(v) := {
	"ok": true, "text": v, "whole": whole, "nano": nano,
	"units": units, "small": true, "milli": (whole * 1000) + ceil(nano / 1000000),
} if {
	is_string(v)
	[[_, ip, fp, suffix]] := regex.find_all_string_submatch_n(short_grammar, v, 1)
	[factor, divisor] := short_factor[suffix]
	shift := _pow10[count(fp)]
	d := divisor * shift

	# ip.fp x factor / divisor = x / d; the "1" before fp keeps its leading zeros
	x := ((to_number(ip) * shift) + (to_number(concat("", ["1", fp])) - shift)) * factor
	rest := x % d
	whole := (x - rest) / d
	nano := rest * (nano_per_unit / d)
	units := whole + ceil(nano / nano_per_unit)
	units <= max_milli_value
} else := q if {
	t := text(v)
	t != ""
	[[_, sign, ip, fp, suffix]] := regex.find_all_string_submatch_n(grammar, t, 1)
	q := _checked(t, sign, _value(ip, fp, suffix))
} else := {"ok": false, "text": shown(v), "error": "is not a valid quantity"}

# Up to 15 digits without leading zeros, up to 6 decimals, and a common
# suffix (or none): ip.fp x factor / divisor, exactly in nanounits. (Written
# for regorus' speed: no helper calls, and no x[i][j] on arrays, which it is
# markedly slow at.)
short_grammar := `^(0|[1-9][0-9]{0,14})(?:\.([0-9]{1,6}))?(m|k|M|G|T|Ki|Mi|Gi|Ti|)$`

# Every value of the collection vs parsed: {v: parse(v)}. The strings in the
# short form are matched all at once, as the quoted strings of vs in JSON
# (both evaluators compile a pattern on every call, and a builtin call costs
# regorus more than the work it does); a match is a whole JSON string, so its
# text is a string the short form takes as a whole, and its value the one
# parse gives it: the same arithmetic, with what is constant left out for
# whole numbers ("512Mi", "2") and whole milli-units ("250m"), the usual
# forms, and ceil written with integer operations. The others go through
# parse. (A string holding an escaped quote may add the text after it as a
# key: a correct parse of its own text, never looked up unless it is a value
# itself.)
parse_all(vs) := object.union(short, {v: parse(v) | some v in vs; not short[v]}) if {
	short := parse_short(vs)
}

# The part of parse_all in the short form: {v: parse(v)} for the strings of vs
# the short form takes (and any extra key, see above). Every one is ok and
# small; a value missing here goes through parse.
parse_short(vs) := short if {
	matches := regex.find_all_string_submatch_n(short_quoted, json.marshal(vs), -1)
	factors := short_factor
	pow10 := _pow10
	short := object.union(object.union(
		{t: q |
			some m in matches
			m[3] == ""
			[factor, divisor] := factors[m[4]]
			divisor == 1
			whole := to_number(m[2]) * factor
			whole <= 9223372036854775 # max_milli_value
			t := m[1]
			q := {"ok": true, "text": t, "whole": whole, "nano": 0, "units": whole, "small": true, "milli": whole * 1000}
		},
		{t: q |
			some m in matches
			m[4] == "m"
			m[3] == ""
			x := to_number(m[2])
			rest := x % 1000
			whole := (x - rest) / 1000

			# ceil(rest / 1000), 0 or 1
			units := whole + (((rest + 999) - ((rest + 999) % 1000)) / 1000)
			units <= 9223372036854775 # max_milli_value
			t := m[1]
			q := {"ok": true, "text": t, "whole": whole, "nano": rest * 1000000, "units": units, "small": true, "milli": x}
		},
	), {t: q |
		some m in matches
		fp := m[3]
		fp != ""
		[factor, divisor] := factors[m[4]]
		shift := pow10[count(fp)]
		d := divisor * shift
		x := ((to_number(m[2]) * shift) + (to_number(concat("", ["1", fp])) - shift)) * factor
		rest := x % d
		whole := (x - rest) / d
		nano := rest * (1000000000 / d) # nano_per_unit / d

		# ceil(nano / nano_per_unit) and ceil(nano / 1000000), nano < nano_per_unit
		units := whole + (((nano + 999999999) - ((nano + 999999999) % 1000000000)) / 1000000000)
		units <= 9223372036854775 # max_milli_value
		t := m[1]
		q := {
			"ok": true, "text": t, "whole": whole, "nano": nano, "units": units, "small": true,
			"milli": (whole * 1000) + (((nano + 999999) - ((nano + 999999) % 1000000)) / 1000000),
		}
	})
}

# The strings of the collection vs in the short form that are whole numbers of
# milli-units and small (at most MaxMilliValue units), as their MilliValue:
# {v: milli}, the same as parse(v).milli for each. The LimitRange pack's
# common case compares only such values. Same matching as parse_short, and the
# same arithmetic, without building parsed quantities. (For every suffix,
# 1000 x factor is a multiple of the divisor: a whole number is always whole
# milli-units.)
short_milli(vs) := object.union(
	{m[1]: milli |
		some m in matches
		m[3] == ""
		milli := to_number(m[2]) * factors[m[4]]
		milli <= 9223372036854775000 # max_milli_value x 1000
	},
	{m[1]: milli |
		some m in matches
		m[3] != ""
		fp := m[3]
		[factor, divisor] := short_factor[m[4]]
		shift := pow10[count(fp)]
		d := divisor * shift

		# ip.fp x factor x 1000 / divisor, kept only when exact
		x := ((((to_number(m[2]) * shift) + (to_number(concat("", ["1", fp])) - shift)) * factor) * 1000)
		x % d == 0
		milli := x / d
		milli <= 9223372036854775000 # max_milli_value x 1000
	},
) if {
	matches := regex.find_all_string_submatch_n(short_quoted, json.marshal(vs), -1)
	factors := short_milli_factor
	pow10 := _pow10
}

# 1000 x factor / divisor of each short_factor.
short_milli_factor := {
	"m": 1, "": 1000, "k": 1000000, "M": 1000000000, "G": 1000000000000, "T": 1000000000000000,
	"Ki": 1024000, "Mi": 1048576000, "Gi": 1073741824000, "Ti": 1099511627776000,
}

# short_grammar, as a JSON string: the text, then ip, fp and suffix.
short_quoted := `"((0|[1-9][0-9]{0,14})(?:\.([0-9]{1,6}))?(m|k|M|G|T|Ki|Mi|Gi|Ti|))"`

_pow10 := [1, 10, 100, 1000, 10000, 100000, 1000000]

short_factor := {
	"m": [1, 1000], "": [1, 1], "k": [1000, 1], "M": [1000000, 1], "G": [1000000000, 1], "T": [1000000000000, 1],
	"Ki": [1024, 1], "Mi": [1048576, 1], "Gi": [1073741824, 1], "Ti": [1099511627776, 1],
}

# A parsed quantity with the values comparisons need. MilliValue only when
# small (Kubernetes never compares larger values in milli-units, and a number
# beyond 64 bits could not even leave regorus as JSON).
#
# (Constants written out in the functions evaluated per value: regorus looks a
# rule up again, ~1 µs, on every reference.)
_quantity(t, whole, nano) := {
	"ok": true, "text": t, "whole": whole, "nano": nano,
	"units": units, "small": true, "milli": (whole * 1000) + ceil(nano / 1000000),
} if {
	units := whole + ceil(nano / 1000000000) # nano_per_unit
	units <= 9223372036854775 # max_milli_value
} else := {"ok": true, "text": t, "whole": whole, "nano": nano, "units": whole + ceil(nano / 1000000000), "small": false}

# The text of a quantity: strings trimmed (Kubernetes trims JSON strings),
# numbers written out, null read as 0 (Quantity.UnmarshalJSON does the same).
text(v) := trim_space(v) if is_string(v)

text(v) := format_int(v, 10) if {
	is_number(v)
	v == floor(v)
}

text(v) := sprintf("%v", [v]) if {
	is_number(v)
	v != floor(v)
}

text(v) := "0" if is_null(v)

# How a value is named in a message.
shown(v) := v if is_string(v)

else := json.marshal(v)

_checked(t, sign, value) := {"ok": false, "text": t, "error": value.error} if value.error

else := {"ok": false, "text": t, "error": "must not be negative"} if {
	sign == "-"
	[value.whole, value.nano] != [0, 0]
}

else := _quantity(t, value.whole, value.nano)

# {"whole", "nano"} of the digits ip.fp followed by suffix, or {"error"}.
_value(ip, fp, suffix) := _binary(_digits(ip, fp), count(fp), factor) if factor := binary_factor[suffix]

else := _nano(_digits(ip, fp), _exponent(suffix) - count(fp) + 9)

# The significant digits of ip.fp (leading zeros dropped; "" for zero).
_digits(ip, fp) := trim_left(concat("", [ip, fp]), "0")

# The power of ten of a decimal suffix; exponents of more than 5 digits are as
# good as infinite (the value is capped, or rounded up to one nanounit).
_exponent(suffix) := e if e := decimal_exponent[suffix]

else := _signed(substring(suffix, 1, 1), _magnitude(trim_left(trim_left(substring(suffix, 1, -1), "+-"), "0")))

_magnitude(d) := 100000 if count(d) > 5

else := _number(d)

_signed(sign, m) := 0 - m if sign == "-"

else := m

# digits x 2^(10k) / 10^f: the mantissa (at most 19 digits, so to_number is
# exact in both evaluators) times the factor is an exact integer, written out
# by format_int; the decimal point is then placed by _nano.
_binary(digits, f, factor) := {"error": "has more than 19 significant digits before a binary suffix"} if {
	count(digits) > 19
}

else := {"whole": 0, "nano": 0} if digits == ""

else := _nano(format_int(_number(digits) * factor, 10), 9 - f)

# The value digits x 10^shift nanounits, rounded up to a whole nanounit and
# capped, as {"whole", "nano"}. Only string operations and to_number on at
# most 19 digits.
_nano(digits, shift) := {"whole": 0, "nano": 0} if digits == ""

else := _capped if {
	shift >= 0
	count(digits) + shift > max_nano_digits
}

else := _split(concat("", [digits, substring(zeros, 0, shift)]), 0) if shift >= 0

# Below one nanounit: rounded up to one.
else := {"whole": 0, "nano": 1} if count(digits) <= 0 - shift

else := _rounded(substring(digits, 0, count(digits) + shift), substring(digits, count(digits) + shift, -1))

_rounded(kept, dropped) := _capped if count(kept) > max_nano_digits

else := _split(kept, 1) if regex.match(`[1-9]`, dropped)

else := _split(kept, 0)

# A string of nanounits (at most 28 digits), plus one when rounding up, as
# {"whole", "nano"}, capped at max_units.
_split(s, up) := _carried(_number(substring(s, 0, count(s) - 9)), _number(substring(s, count(s) - 9, -1)) + up) if {
	count(s) > 9
}

else := _carried(0, _number(s) + up)

_carried(whole, nano) := _bounded(whole + 1, 0) if nano == nano_per_unit

else := _bounded(whole, nano)

_bounded(whole, nano) := _capped if whole > max_units

else := _capped if {
	whole == max_units
	nano > 0
}

else := {"whole": whole, "nano": nano}

_capped := {"whole": max_units, "nano": 0}

# A run of decimal digits as a number (to_number refuses leading zeros and "").
_number(d) := 0 if trim_left(d, "0") == ""

else := to_number(trim_left(d, "0"))

# -- values, comparisons, sums -------------------------------------------------

# Exact order (Quantity.Cmp).
less(a, b) if [a.whole, a.nano] < [b.whole, b.nano]

# The exact sum of parsed quantities (Quantity.Add; no cap, as in Kubernetes);
# its text is written by format when a message needs it.
# (_quantity written out for a small total, the usual one.)
total(qs) := {
	"ok": true, "text": "", "whole": whole, "nano": nano, "units": units, "small": true,
	"milli": (whole * 1000) + (((nano + 999999) - ((nano + 999999) % 1000000)) / 1000000),
} if {
	nanos := sum([q.nano | some q in qs])
	nano := nanos % 1000000000 # nano_per_unit
	whole := sum([q.whole | some q in qs]) + ((nanos - nano) / 1000000000)

	# ceil written with integer operations (nano < nano_per_unit)
	units := whole + (((nano + 999999999) - ((nano + 999999999) % 1000000000)) / 1000000000)
	units <= 9223372036854775 # max_milli_value
} else := _quantity("", whole, nanos % 1000000000) if {
	nanos := sum([q.nano | some q in qs])
	whole := sum([q.whole | some q in qs]) + floor(nanos / 1000000000) # nano_per_unit
}

# A computed quantity (a pod total) in the notation Kubernetes prints: cpu in
# cores or millicores; other resources with the largest binary suffix, else
# decimal suffix, that divides them exactly.
format(q, resource) := sprintf("%sn", [format_int((q.whole * nano_per_unit) + q.nano, 10)]) if {
	q.nano % 1000000 != 0
}

else := sprintf("%sm", [format_int((q.whole * 1000) + (q.nano / 1000000), 10)]) if q.nano != 0

else := format_int(q.whole, 10) if resource == "cpu"

else := _with_suffix(q.whole)

_with_suffix(w) := "0" if w == 0

# The shortest text among the suffixes dividing w exactly (plain digits last).
else := best[2] if {
	best := sort(array.concat(
		[[count(t), i, t] |
			some i, [s, f] in _suffixes
			w % f == 0
			t := sprintf("%s%s", [format_int(w / f, 10), s])
		],
		[[count(format_int(w, 10)), count(_suffixes), format_int(w, 10)]],
	))[0]
}

_suffixes := [
	["Ei", 1152921504606846976], ["Pi", 1125899906842624], ["Ti", 1099511627776],
	["Gi", 1073741824], ["Mi", 1048576], ["Ki", 1024],
	["E", 1000000000000000000], ["P", 1000000000000000], ["T", 1000000000000],
	["G", 1000000000], ["M", 1000000], ["k", 1000],
]
