"""Label and field selectors: parsing (query-string syntax and LabelSelector
objects) and matching. Pure functions, no HTTP.

Label selector syntax (apimachinery/pkg/labels): comma-separated requirements
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``,
``k>N``, ``k<N``. ``!=`` and ``notin`` also match objects without the key.
Field selectors: ``path=v``, ``path==v``, ``path!=v`` joined by commas, over a
per-resource set of supported dotted paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                     r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class SelectorError(ValueError):
    """The selector text does not parse; the server answers 400."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("gt", "lt"):
            try:
                have, want = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.op == "gt" else have < want
        return False


LabelSelector = tuple[Requirement, ...]


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str) -> str:
    if not key or len(key) > 316 or not _KEY_RE.match(key):
        raise SelectorError(f"unable to parse requirement: invalid label key \"{key}\"")
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError(f"unable to parse requirement: invalid label value: \"{value}\"")
    return value


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse the ``labelSelector`` query value; empty → matches everything."""
    if text is None or not text.strip():
        return ()
    reqs: list[Requirement] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise SelectorError(f"unable to parse requirement: found '', expected: identifier (in {text!r})")
        m = _SET_RE.match(part)
        if m:
            values = tuple(_check_value(v.strip()) for v in m.group(3).split(",")) if m.group(3).strip() else ()
            if not values:
                raise SelectorError("unable to parse requirement: for 'in', 'notin' operators, values set can't be empty")
            reqs.append(Requirement(_check_key(m.group(1)), m.group(2), values))
            continue
        for token, op in (("!=", "!="), ("==", "="), ("=", "="), (">", "gt"), ("<", "lt")):
            if token in part:
                key, _, value = part.partition(token)
                value = value.strip()
                if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", value):
                    raise SelectorError("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer")
                reqs.append(Requirement(_check_key(key.strip()), op, (_check_value(value),)))
                break
        else:
            if part.startswith("!"):
                reqs.append(Requirement(_check_key(part[1:].strip()), "!exists"))
            elif " " in part or "(" in part or ")" in part:
                raise SelectorError(f"unable to parse requirement: found unexpected token in {part!r}")
            else:
                reqs.append(Requirement(_check_key(part), "exists"))
    return tuple(reqs)


def label_selector_from_object(sel: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions) as requirements.

    ``None`` or ``{}`` matches everything (as webhook selectors do).
    """
    if not sel:
        return ()
    if not isinstance(sel, Mapping):
        raise SelectorError("label selector must be an object")
    reqs = [Requirement(str(k), "=", (str(v),)) for k, v in (sel.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in sel.get("matchExpressions") or []:
        op = ops.get(expr.get("operator"))
        if op is None:
            raise SelectorError(f"{expr.get('operator')!r} is not a valid label selector operator")
        reqs.append(Requirement(str(expr.get("key")), op, tuple(str(v) for v in expr.get("values") or ())))
    return tuple(reqs)


def labels_match(selector: LabelSelector, labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in selector)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    negate: bool


FieldSelector = tuple[FieldRequirement, ...]


def parse_field_selector(text: str | None, supported: Iterable[str]) -> FieldSelector:
    """Parse ``fieldSelector``; a path outside ``supported`` is an error (400)."""
    if text is None or not text.strip():
        return ()
    allowed = set(supported)
    reqs = []
    for raw in text.split(","):
        part = raw.strip()
        for token, neg in (("!=", True), ("==", False), ("=", False)):  # noqa: B007 - neg is read after the break
            if token in part:
                path, _, value = part.partition(token)
                path = path.strip()
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        if path not in allowed:
            raise SelectorError(f'field label not supported: {path}')
        reqs.append(FieldRequirement(path, value.strip(), neg))
    return tuple(reqs)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(selector: FieldSelector, obj: Mapping[str, Any]) -> bool:
    for req in selector:
        equal = field_value(obj, req.path) == req.value
        if equal == req.negate:
            return False
    return True


def single_name(selector: FieldSelector) -> str | None:
    """The name a ``metadata.name=x`` selector pins, if any (lets lists skip a scan)."""
    for req in selector:
        if req.path == "metadata.name" and not req.negate:
            return req.value
    return None


Matcher = Callable[[Mapping[str, Any]], bool]
