"""JSON from untrusted callers, parsed within bounds — pure functions.

:func:`loads_bounded` is ``json.loads`` for request bodies:

* the nesting depth is measured **before** parsing (a linear scan outside
  strings) and refused above ``max_depth``: Python's parser recurses per
  level and fails with ``RecursionError`` near 1,000 levels, and everything
  downstream that copies or walks the document (JSON Patch, deep copies)
  recurses too;
* ``NaN``, ``Infinity``, ``-Infinity`` (which Python accepts and JSON does
  not) and numbers too large for a float (``1e400`` would become
  ``Infinity``) are refused: forwarded to OPA they make the input invalid.

Every refusal is a :class:`JsonRejected` (a ``ValueError``) whose message
says what is wrong, for a 400 answer.

Speed (a request's hot path): the depth is bounded first by counting brackets
(a count of ``[`` and ``{`` not above the limit bounds the depth without a
scan); only bodies with more are scanned. Parsing is ``orjson``'s, which
refuses NaN, Infinity and overflowing numbers itself; anything it refuses
goes through the standard parser, which gives the message (or accepts what
only it accepts, such as lone surrogate escapes), and integers of 19 digits
or more are left to the standard parser too, which keeps them exact (orjson
turns integers beyond 64 bits into floats).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = ["DEFAULT_MAX_DEPTH", "JsonRejected", "dumps", "finite", "json_depth", "loads", "loads_bounded"]

DEFAULT_MAX_DEPTH = 100

# A string (with escapes); the unrolled loop keeps long strings linear.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_OPENING = (ord("["), ord("{"))
# 19 digits in a row: maybe an integer orjson would not keep exact (beyond 64 bits). Found by
# mapping every digit to "0" and anything else to " " (a regular expression takes 20x longer).
_DIGITS_TO_ZERO = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_NINETEEN_DIGITS = b"0" * 19


def _long_digits(raw: bytes) -> bool:
    return _NINETEEN_DIGITS in raw.translate(_DIGITS_TO_ZERO)


class JsonRejected(ValueError):
    """The document is refused; the message says why."""


def json_depth(body: bytes, limit: int) -> int:
    """The deepest nesting of ``[``/``{`` in ``body`` outside strings, scanning no further than
    the first level beyond ``limit`` (returns ``limit + 1`` then)."""
    depth = deepest = 0
    if not (b"[" in body or b"{" in body):
        return 0
    for c in _STRING.sub(b"", body).translate(None, _NOT_BRACKETS):
        if c in _OPENING:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        else:
            depth -= 1
    return deepest


def _too_deep(body: bytes, limit: int) -> bool:
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # no more opening brackets than the limit, even counting those in strings
    return json_depth(body, limit) > limit


def _no_constant(name: str) -> Any:
    raise JsonRejected(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected(f"number {text[:40]} is too large")
    return value


def loads_bounded(body: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse ``body``; :class:`JsonRejected` when too deep, non-finite or not JSON at all."""
    raw = body.encode() if isinstance(body, str) else body
    if _too_deep(raw, max_depth):
        raise JsonRejected(f"JSON nested deeper than {max_depth} levels")
    if not _long_digits(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the standard parser says why (or accepts it)
    try:
        return json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except JsonRejected:
        raise
    except RecursionError as exc:  # not reached within max_depth; a last line of defence
        raise JsonRejected("JSON nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonRejected(f"not valid JSON: {exc}") from exc


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in arrays and objects too) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """Compact JSON (UTF-8) of a document parsed from JSON; ``orjson``'s, or the standard
    library's for what orjson refuses (integers beyond 64 bits, lone surrogates). Always valid
    JSON: a NaN or infinite float (``1e400`` once parsed) is written ``null`` either way."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(finite(value), separators=(",", ":")).encode()


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)``, the same document, faster: ``orjson``'s parse where it gives the
    same (no 19-digit runs), the standard parser for anything orjson refuses."""
    if not _long_digits(raw.encode() if isinstance(raw, str) else raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)
