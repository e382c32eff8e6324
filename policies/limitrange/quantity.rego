# Kubernetes resource quantities in Rego (v1), parsed and compared the way
# k8s.io/apimachinery/pkg/api/resource does it.
#
# Why not units.parse: it accepts what Kubernetes refuses ("1K", "1ki", "1mi"
# are all valid to it, invalid to the API server), does not know "n" and "u",
# and returns an OPA number, which is exact only as an integer of up to 64
# bits (beyond that, and for fractions, OPA computes in binary floating
# point). Here a quantity is matched against Kubernetes' grammar first, then
# turned into whole numbers with string operations and integer arithmetic
# that stays within 64 bits:
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

# The forms quantities usually take ("250m", "0.5", "512Mi", "1.5Gi"): up to
# 15 digits without leading zeros, up to 6 decimals, a common suffix or none.
# Their value is read off their digits (_short_nanos); every other form goes
# through the full grammar. Both give the same value.
short_grammar := `^(0|[1-9][0-9]{0,14})(?:\.([0-9]{1,6}))?(m|k|M|G|T|Ki|Mi|Gi|Ti|)$`

# The zeros that turn the digits of a value with a decimal suffix and no
# decimals into nanounits ("250m": "250" + "000000").
short_zeros := {
	"m": "000000", "": "000000000", "k": "000000000000", "M": "000000000000000",
	"G": "000000000000000000", "T": "000000000000000000000",
}

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
# {"ok": false, "text", "error"}.
parse(v) := q if {
	is_string(v)
	[[_, ip, fp, suffix]] := regex.find_all_string_submatch_n(short_grammar, v, 1)
	q := _from_nanos(v, _short_nanos(ip, fp, suffix))
	q.small
} else := q if {
	t := text(v)
	t != ""
	[[_, sign, ip, fp, suffix]] := regex.find_all_string_submatch_n(grammar, t, 1)
	q := _checked(t, sign, _value(ip, fp, suffix))
} else := {"ok": false, "text": shown(v), "error": "is not a valid quantity"}

# The value of a quantity in the short form, as the decimal digits of its
# nanounits: for a decimal suffix its digits followed by zeros (the decimals
# take the place of as many zeros); for a binary suffix the digits times the
# factor, then zeros for the decimals the factor did not absorb. (A binary
# mantissa of more than 19 digits takes the full grammar, which refuses it.)
_short_nanos(ip, fp, suffix) := concat("", [ip, fp, substring(short_zeros[suffix], count(fp), -1)]) if {
	short_zeros[suffix]
} else := concat("", [format_int(units.parse(digits) * binary_factor[suffix], 10), substring("000000000", count(fp), -1)]) if {
	digits := concat("", [ip, fp])
	count(digits) <= 19
}

# The quantity whose exact value in nanounits has the decimal digits s.
# (Nine zeros in front give s at least ten digits: whole units, then the
# three digits of milli-units and the six below them. units.parse reads
# digits with leading zeros, which to_number refuses.)
_from_nanos(t, s) := _quantity(t, whole, nano, milli) if {
	[[_, w, m, n]] := regex.find_all_string_submatch_n(`^([0-9]+)([0-9]{3})([0-9]{6})$`, concat("", ["000000000", s]), 1)
	whole := units.parse(w)
	nano := units.parse(concat("", [m, n]))
	milli := _up(units.parse(concat("", [w, m])), n)
}

# MilliValue rounded up: one more when there is anything below a milli-unit.
_up(x, "000000") := x

_up(x, rest) := x + 1 if rest != "000000"

# A parsed quantity with the values comparisons need: MilliValue only when
# small (Kubernetes never compares larger values in milli-units).
_quantity(t, whole, nano, milli) := {
	"ok": true, "text": t, "whole": whole, "nano": nano,
	"units": units, "small": true, "milli": milli,
} if {
	units := _units(whole, nano)
	units <= max_milli_value
} else := {"ok": true, "text": t, "whole": whole, "nano": nano, "units": _units(whole, nano), "small": false}

# Value(): whole units, rounded up.
_units(whole, 0) := whole

_units(whole, nano) := whole + 1 if nano != 0

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

else := _quantity(t, value.whole, value.nano, (value.whole * 1000) + ceil(value.nano / 1000000))

# {"whole", "nano"} of the digits ip.fp followed by suffix, or {"error"}.
_value(ip, fp, suffix) := _binary(_digits(ip, fp), count(fp), factor) if factor := binary_factor[suffix]

else := _nano(_digits(ip, fp), (_exponent(suffix) - count(fp)) + 9)

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
# exact) times the factor is an exact integer, written out by format_int; the
# decimal point is then placed by _nano.
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

else := _split(kept, 1) if regex.match("[1-9]", dropped)

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

# -- plain quantities ----------------------------------------------------------

# The MilliValue of each plain quantity of the collection vs, {v: milli}: a
# string in the short form that is a whole number of milli-units and at most
# MaxMilliValue units ("250m", "0.5", "512Mi", "1.5Gi": how quantities are
# usually written); the others are left out. Computed from the digits alone
# (milli is parse(v).milli): ip.fp x factor x 1000 is the digits of ip.fp
# times milli_factor[suffix][decimals], a whole number where the table has an
# entry. Without decimals (most values) the digits are ip, which to_number
# reads (the short form has no leading zeros there); with decimals they may
# start with zeros, as in "0.5", which only units.parse reads.
plain_milli(vs) := object.union(
	{v: milli |
		some [v, ip, "", suffix] in matches
		milli := to_number(ip) * milli_factor[suffix][0]
		milli <= 9223372036854775000 # MaxMilliValue in milli-units
	},
	{v: milli |
		some [v, ip, fp, suffix] in matches
		fp != ""
		milli := units.parse(concat("", [ip, fp])) * milli_factor[suffix][count(fp)]
		milli <= 9223372036854775000
	},
) if {
	matches := [m | some v in vs; is_string(v); [m] := regex.find_all_string_submatch_n(short_grammar, v, 1)]
}

# Per suffix, 1000 x factor / 10^decimals for the numbers of decimals that
# keep it whole.
milli_factor := {
	"m": [1],
	"": [1000, 100, 10, 1],
	"k": [1000000, 100000, 10000, 1000, 100, 10, 1],
	"M": [1000000000, 100000000, 10000000, 1000000, 100000, 10000, 1000],
	"G": [1000000000000, 100000000000, 10000000000, 1000000000, 100000000, 10000000, 1000000],
	"T": [1000000000000000, 100000000000000, 10000000000000, 1000000000000, 100000000000, 10000000000, 1000000000],
	"Ki": [1024000, 102400, 10240, 1024],
	"Mi": [1048576000, 104857600, 10485760, 1048576],
	"Gi": [1073741824000, 107374182400, 10737418240, 1073741824],
	"Ti": [1099511627776000, 109951162777600, 10995116277760, 1099511627776],
}

# -- values, comparisons, sums -------------------------------------------------

# Exact order (Quantity.Cmp).
less(a, b) if [a.whole, a.nano] < [b.whole, b.nano]

# The exact sum of parsed quantities (Quantity.Add; no cap, as in Kubernetes);
# its text is written by format when a message needs it.
total(qs) := _quantity("", whole, nano, (whole * 1000) + ceil(nano / 1000000)) if {
	nanos := sum([q.nano | some q in qs])
	nano := nanos % nano_per_unit
	whole := sum([q.whole | some q in qs]) + ((nanos - nano) / nano_per_unit)
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
