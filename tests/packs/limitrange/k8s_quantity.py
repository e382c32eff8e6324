"""Kubernetes' quantity parsing, re-stated in Python as the oracle for the Rego parser.

What ``resource.ParseQuantity`` (k8s.io/apimachinery/pkg/api/resource/quantity.go)
accepts and the value it holds, with exact fractions:

* grammar (``parseQuantityString``): optional sign, digits, optional ``.`` and
  digits, then one suffix — ``Ki Mi Gi Ti Pi Ei``, ``n u m k M G T P E`` or none,
  or ``e``/``E`` followed by a signed integer. The empty string is refused; a
  bare sign or ``.`` reads as 0, as in Kubernetes.
* value: exact, rounded up to the next nanounit, capped at 2^63-1 units.

Then the policy's own rules on top (documented in policies/limitrange/quantity.rego):
a negative non-zero value and a binary-suffixed mantissa of more than 19
significant digits are errors.

:func:`parse` returns ``(whole, nano)`` or raises :class:`Invalid`;
:func:`milli_value` / :func:`value` are ``MilliValue()`` / ``Value()`` (rounded up).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MAX_UNITS = 2**63 - 1
MAX_MILLI_VALUE = MAX_UNITS // 1000
GRAMMAR = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?\Z")
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


class Invalid(ValueError):
    pass


def parse(text: str) -> tuple[int, int]:
    text = text.strip()
    m = GRAMMAR.match(text)
    if not text or not m:
        raise Invalid(f"{text!r} is not a valid quantity")
    sign, ip, fp, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4) or ""
    digits = (ip + fp).lstrip("0")
    mantissa = Fraction(int(ip + fp or "0"), 10 ** len(fp))
    if suffix in BINARY:
        if len(digits) > 19:
            raise Invalid("more than 19 significant digits before a binary suffix")
        value = mantissa * 2 ** BINARY[suffix]
    elif suffix in DECIMAL:
        value = mantissa * Fraction(10) ** DECIMAL[suffix]
    else:
        exp = int(suffix[1:])
        if abs(exp) > 99999:  # as good as infinite, as the policy treats it
            exp = 100000 if exp > 0 else -100000
        if not mantissa or abs(exp) < 200:
            value = mantissa * Fraction(10) ** exp
        else:  # beyond the cap, or below a nanounit (rounded up to one)
            value = Fraction(MAX_UNITS + 1) if exp > 0 else Fraction(1, 10**10)
    if sign == "-" and value != 0:
        raise Invalid("must not be negative")
    nanos = math.ceil(value * 10**9)
    whole, nano = divmod(nanos, 10**9)
    if whole > MAX_UNITS or (whole == MAX_UNITS and nano):
        return MAX_UNITS, 0
    return whole, nano


def value(q: tuple[int, int]) -> int:
    return q[0] + (1 if q[1] else 0)


def milli_value(q: tuple[int, int]) -> int:
    return q[0] * 1000 + -(-q[1] // 10**6)


# -- how Kubernetes prints a quantity (Quantity.String, CanonicalizeBytes) -------------------

BINARY_SUFFIXES = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)]
DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def format_of(text: str) -> str:
    """The format a quantity keeps: BinarySI, DecimalExponent or DecimalSI (from its suffix)."""
    m = GRAMMAR.match(text.strip())
    suffix = (m.group(4) or "") if m else ""
    if suffix in BINARY:
        return "BinarySI"
    if suffix and suffix[0] in "eE" and len(suffix) > 1:
        return "DecimalExponent"
    return "DecimalSI"


def format_value(q: tuple[int, int], fmt: str) -> str:
    """The canonical text of a non-negative value (whole, nano) in format ``fmt``."""
    whole, nano = q
    nanos = whole * 10**9 + nano
    if nanos == 0:
        return "0"
    if fmt == "BinarySI" and nano == 0 and whole >= 1024:
        for suffix, exp in BINARY_SUFFIXES:
            if whole % (1 << exp) == 0:
                return f"{whole >> exp}{suffix}"
    if fmt == "BinarySI" and nano == 0 and whole < 1024:
        return str(whole)
    # DecimalSI / DecimalExponent: the largest power of 1000 leaving a whole mantissa
    exp = -9
    while exp < 18 and nanos % 10 ** (exp + 12) == 0:
        exp += 3
    mantissa = nanos // 10 ** (exp + 9)
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    return f"{mantissa}{DECIMAL_SUFFIXES[exp]}"


def canonical(text: str) -> str:
    """``resource.MustParse(text).String()``."""
    return format_value(parse(text), format_of(text))
