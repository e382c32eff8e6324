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
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "JsonRejected", "json_depth", "loads_bounded"]

DEFAULT_MAX_DEPTH = 100

# Strings (with escapes) or one bracket; the unrolled loop keeps long strings linear.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class JsonRejected(ValueError):
    """The document is refused; the message says why."""


def json_depth(body: bytes, limit: int) -> int:
    """The deepest nesting of ``[``/``{`` in ``body`` outside strings, scanning no further than
    the first level beyond ``limit`` (returns ``limit + 1`` then)."""
    depth = deepest = 0
    if not (b"[" in body or b"{" in body):
        return 0
    for m in _TOKENS.finditer(body):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif tok in (b"]", b"}"):
            depth -= 1
    return deepest


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
    depth = json_depth(raw, max_depth)
    if depth > max_depth:
        raise JsonRejected(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except JsonRejected:
        raise
    except RecursionError as exc:  # not reached within max_depth; a last line of defence
        raise JsonRejected("JSON nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonRejected(f"not valid JSON: {exc}") from exc
