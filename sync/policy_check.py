"""Whether a policy module may reach OPA: pure checks, before OPA sees it.

A module is refused (:meth:`ModuleCheck.refusal`) when its size or rule count
is over :class:`Limits` (also the namespace's total), or when its package —
read by :mod:`fedplace.common.rego_scan`, a lexer following OPA's parser, never a
line match — is ``data.system…`` or cannot be read, unless allowed
(``allow_system``): ``data.system`` configures OPA itself (``system.authz``
decides who may call OPA's API), and write access to a policy ConfigMap must
not become control of OPA. Errors have OPA's shape (``code``, ``message``,
``location``), so the status annotation reads the same whoever refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

from fedplace.common.rego_scan import Outline, RegoScanError, RuleHead, outline, package_clause, rules_of

__all__ = ["Limits", "ModuleCheck", "data_hash", "module_error", "module_ids", "normalize_errors",
           "reserved_package_error"]


@dataclass(frozen=True)
class Limits:
    """What a module may be before OPA compiles it (OPA recompiles every module on each write,
    ~1 ms per rule). The defaults are ten times the largest shipped module."""

    max_module_bytes: int = 256 * 1024
    max_module_rules: int = 1000
    max_total_rules: int = 5000


def module_ids(namespace: str, name: str, data: dict[str, str] | None) -> dict[str, str]:
    """Module id → Rego source for one ConfigMap."""
    return {f"{namespace}/{name}/{key}": raw for key, raw in sorted((data or {}).items())}


def data_hash(data: dict[str, str] | None, binary_keys: Any = ()) -> str:
    """A digest of a ConfigMap's ``.data`` (and its ``binaryData`` keys): equal ⇒ nothing to reload."""
    doc = {"data": data or {}, "binary": sorted(binary_keys)} if binary_keys else (data or {})
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def module_error(code: str, message: str, module_id: str, row: int | None = None, col: int | None = None,
           **extra: Any) -> dict[str, Any]:
    location: dict[str, Any] = {"file": module_id}
    if row is not None:
        location.update(row=row, col=col or 1)
    return {"code": code, "message": message, "location": location, **extra}


def reserved_package_error(module_id: str, raw: str) -> dict[str, Any] | None:
    """An OPA-style error when ``raw`` declares a package under ``data.system``, else None
    (also None when the package cannot be read: :meth:`ModuleCheck.refusal` refuses that)."""
    try:
        clause = package_clause(raw)
    except RegoScanError:
        return None
    if not clause.reserved:
        return None
    return module_error("fedplace_reserved_package",
                  f"package {clause.text} is {clause.dotted()}, reserved: data.system configures OPA itself "
                  "(system.authz decides who may call its API, system.log masks decision logs); not loaded "
                  "from a policy ConfigMap (opa-kube-sync --allow-system-packages)",
                  module_id, clause.row, clause.col)


def normalize_errors(module_id: str, errors: list[Any]) -> list[dict[str, Any]]:
    """OPA's errors for one module, each with ``code``, ``message`` and ``location`` (``file`` at least)."""
    out: list[dict[str, Any]] = []
    for e in errors or [{}]:
        e = dict(e) if isinstance(e, dict) else {"message": str(e)}
        e.setdefault("code", "invalid_parameter")
        e.setdefault("message", "OPA refused the module")
        if not isinstance(e.get("location"), dict):
            e["location"] = {"file": module_id}
        out.append(e)
    return out


class ModuleCheck:
    """The checks of one policy namespace, with each module's outline cached by id and source."""

    def __init__(self, limits: Limits = Limits(), allow_system: bool = False) -> None:
        self.limits = limits
        self.allow_system = allow_system
        self._outlines: dict[str, tuple[str, Outline | RegoScanError, tuple[RuleHead, ...]]] = {}

    def outline(self, mid: str, raw: str) -> tuple[Outline | RegoScanError, tuple[RuleHead, ...]]:
        """The module's outline (or why it cannot be read) and its rule heads."""
        digest = hashlib.sha256(raw.encode()).hexdigest()
        cached = self._outlines.get(mid)
        if cached is None or cached[0] != digest:
            try:
                result: Outline | RegoScanError = outline(raw)
                heads = result.rules
            except RegoScanError as exc:
                result, heads = exc, rules_of(raw, ())
            cached = self._outlines[mid] = (digest, result, heads)
        return cached[1], cached[2]

    def rules(self, mid: str, raw: str) -> int:
        return len(self.outline(mid, raw)[1])

    def forget(self, mid: str) -> None:
        """Drop a deleted module's outline."""
        self._outlines.pop(mid, None)

    def refusal(self, mid: str, raw: str, others: Iterable[tuple[str, str]]) -> tuple[dict[str, Any], bool] | None:
        """Why ``raw`` must not reach OPA: (error, retry later?), or None. ``others``: the
        (id, source) of every other module the namespace has loaded (for the total)."""
        size = len(raw.encode())
        if size > self.limits.max_module_bytes:
            return module_error("fedplace_module_too_large",
                                f"module of {size} bytes exceeds the limit of {self.limits.max_module_bytes} bytes "
                                "(opa-kube-sync --policy-max-module-bytes): OPA recompiles every module on each "
                                "write; not sent to OPA", mid), False
        parsed, heads = self.outline(mid, raw)
        if isinstance(parsed, RegoScanError) and not self.allow_system:
            return module_error("fedplace_unreadable_package",
                                f"the package clause cannot be read ({parsed.message}); a module whose package is "
                                "not certain is not sent to OPA, since it might be under data.system",
                                mid, parsed.row, parsed.col), False
        if not isinstance(parsed, RegoScanError) and parsed.package.reserved and not self.allow_system:
            return reserved_package_error(mid, raw) or {}, False
        if len(heads) > self.limits.max_module_rules:
            return module_error("fedplace_too_many_rules",
                                f"module has {len(heads)} rules, more than the limit of "
                                f"{self.limits.max_module_rules} (opa-kube-sync --policy-max-module-rules); "
                                "not sent to OPA", mid), False
        total = len(heads) + sum(self.rules(m, r) for m, r in others if m != mid)
        if total > self.limits.max_total_rules:
            return module_error("fedplace_too_many_rules_total",
                                f"with this module's {len(heads)} rules the namespace would hold {total} "
                                f"rules, more than the limit of {self.limits.max_total_rules} "
                                "(opa-kube-sync --policy-max-total-rules); not sent to OPA", mid), True
        return None
