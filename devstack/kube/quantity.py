"""Kubernetes resource quantities, parsed and printed as kube-apiserver 1.24 does.

A port of ``k8s.io/apimachinery/pkg/api/resource`` (``ParseQuantity``,
``CanonicalizeBytes``, ``RoundUp``) on exact fractions:

* Grammar (``parseQuantityString``): optional sign, digits, optional ``.`` and
  digits, then a suffix — ``Ki Mi Gi Ti Pi Ei`` (BinarySI), ``n u m k M G T P E``
  or none (DecimalSI), ``e``/``E`` and an integer (DecimalExponent). Anything
  else raises :class:`QuantityError` with apimachinery's message.
* Text kept verbatim: like Go, a quantity parsed on the int64 fast path keeps the
  client's string when it is already canonical enough (``1e3``, ``+1``,
  ``1500e-3``, ``100m``, ``1023Ki``); otherwise it prints canonically: the
  largest power-of-1000 suffix leaving an integer mantissa (``1000`` → ``1k``,
  ``0.5`` → ``500m``, ``1000M`` → ``1G``), BinarySI by powers of 1024 when the
  value is an integer of at least 1024 (``1.5Gi`` → ``1536Mi``; ``1.1Mi`` →
  ``1153433600m``).
* Values off the fast path are rounded up (away from zero) to a nano-unit;
  BinarySI values are capped at 2^63-1.
* :meth:`Quantity.round_up_milli` is ``SetDefaults_ResourceList``: every quantity
  in a ResourceList (container resources, LimitRange items, pod overhead) is
  rounded up to a milli-unit when stored (``0.0001`` → ``1m``).

All measured against kube-apiserver 1.24 (tests/kube/test_defaults.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["Quantity", "QuantityError", "parse", "resource_list_value"]

FORMAT_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_MESSAGE = "unable to parse quantity's suffix"
DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"
MAX_ALLOWED = 2**63 - 1
MAX_MILLI_VALUE = MAX_ALLOWED // 1000
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {e: s for s, e in _DECIMAL.items()}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX = {e // 10: s for s, e in _BINARY.items()}
_SUFFIX_CHARS = "eEinumkKMGTP"
_DIGITS = "0123456789"


class QuantityError(ValueError):
    """Not a quantity; the message is apimachinery's."""


@dataclass(frozen=True)
class Quantity:
    """An exact value, its format, and — like Go's cached ``s`` — the text it prints as, when kept."""

    value: Fraction
    format: str
    text: str | None = None
    scale: int | None = None  # int64Amount's scale on the fast path; None: an inf.Dec value

    def __str__(self) -> str:
        return self.text if self.text is not None else _canonical(self.value, self.format)

    def round_up_milli(self) -> "Quantity":
        """``Quantity.RoundUp(-3)`` (``SetDefaults_ResourceList``)."""
        if self.scale is not None and self.scale >= -3:
            return self
        rounded = _round_away(self.value, 3)
        return Quantity(rounded, self.format, None, -3 if self.scale is not None else None)

    def milli_value(self) -> int:
        """``MilliValue()``: thousandths, rounded up."""
        return _ceil_away(self.value * 1000)

    def int_value(self) -> int:
        """``Value()``: whole units, rounded up."""
        return _ceil_away(self.value)


def _ceil_away(x: Fraction) -> int:
    return math.ceil(x) if x >= 0 else -math.ceil(-x)


def _round_away(x: Fraction, digits: int) -> Fraction:
    """``x`` rounded away from zero to ``digits`` decimal places."""
    scaled = x * 10**digits
    return Fraction(_ceil_away(scaled), 10**digits)


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value text, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, text, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_MESSAGE)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, or QuantityError."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], DECIMAL_SI
    if suffix in _BINARY:
        return 2, _BINARY[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            return 10, int(digits), DECIMAL_EXPONENT
    raise QuantityError(SUFFIX_MESSAGE)


def parse(raw: Any) -> Quantity:
    """A JSON value (string or number) as ``Quantity.UnmarshalJSON`` reads it."""
    if raw is None:
        return Quantity(Fraction(0), DECIMAL_SI, None, 0)
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise QuantityError(FORMAT_MESSAGE)
    text = (raw if isinstance(raw, str) else repr(raw) if isinstance(raw, float) else str(raw)).strip()
    if not text:
        raise QuantityError(FORMAT_MESSAGE)
    if text == "0":
        return Quantity(Fraction(0), DECIMAL_SI, "0", 0)
    positive, value_text, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    fast = _fast_path(text, positive, num, denom, base, exponent, fmt)
    if fast is not None:
        return fast
    return _slow_path(value_text, base, exponent, fmt)


def _fast_path(text: str, positive: bool, num: str, denom: str, base: int, exponent: int,
               fmt: str) -> Quantity | None:
    """ParseQuantity's int64 path: None when Go would fall back to inf.Dec."""
    mantissa = 1
    if fmt == BINARY_SI:
        if exponent < 0 or denom:
            return None
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        scale = 0
    else:
        precision = 18 - (len(num) + len(denom))
        scale = exponent
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < -9:
        return None
    shifted = num + denom
    value = int(shifted)
    result = value * mantissa
    if result > MAX_ALLOWED:
        return None
    if not positive:
        result = -result
    if fmt == BINARY_SI:
        keep = exponent % 10 == 0 and value & 0x07 != 0
    else:
        keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    return Quantity(Fraction(result) * Fraction(10) ** scale, fmt, text if keep else None, scale)


def _slow_path(value_text: str, base: int, exponent: int, fmt: str) -> Quantity:
    digits = value_text.lstrip("+-")
    amount = Fraction(value_text) if digits not in ("", ".") else Fraction(0)
    amount *= Fraction(10) ** exponent if base == 10 else 2**exponent
    negative = amount < 0
    amount = abs(amount)
    if amount:
        amount = _round_away(amount, 9)
    if fmt == BINARY_SI and amount > MAX_ALLOWED:
        amount = Fraction(MAX_ALLOWED)
    if fmt == BINARY_SI and 0 < amount < 1:
        fmt = DECIMAL_SI
    return Quantity(-amount if negative else amount, fmt, None, None)


def _canonical(value: Fraction, fmt: str) -> str:
    """``CanonicalizeBytes`` of a value that kept no text."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI
    sign = "-" if value < 0 else ""
    value = abs(value)
    if fmt == BINARY_SI:
        whole, power = int(value), 0
        while whole % 1024 == 0:
            whole //= 1024
            power += 1
        return f"{sign}{whole}{_BINARY_SUFFIX.get(power, '')}"
    exponent = 0
    while value.denominator != 1:
        value *= 10
        exponent -= 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX.get(exponent, '')}"


def resource_list_value(raw: Any) -> str:
    """How a ResourceList entry is stored: parsed, rounded up to a milli-unit, printed."""
    return str(parse(raw).round_up_milli())
