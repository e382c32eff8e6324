"""Deciding what a remediation pass patches. Pure functions, no I/O.

A *notification* is what the policy says one object's annotations should be:
``{"resource", "namespace", "name", "annotations", "errors"?, "stuck"?}`` (the shape of
the remediation library's output and of ``POST /v1/notifications``). The plan
compares each with the live object's annotations through the canonical
serialisation shared with admission, so values never flap.

A pass is evaluated in chunks of objects (:func:`chunks`, growing sizes) so
patches can start while OPA still evaluates the rest; :func:`guard_verdict`
says when the max-fraction guard can no longer trip, i.e. when patches may
start without breaking its "nothing patched" promise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence, TypeVar

from fedplace.common.annotations import annotations_to_change

__all__ = ["Notification", "PatchAction", "Plan", "Stuck", "chunks", "guard_verdict", "parse_notifications",
           "parse_stuck", "plan_pass"]

T = TypeVar("T")
Verdict = Literal["hold", "release", "trip"]


@dataclass(frozen=True)
class Stuck:
    """The object's current placement still uses ``targets`` the policy forbids, and no patch
    can change that (the policy's ``stuck``): reported on the object and on ``related``
    (involved-object references) with ``reason`` and ``message``."""

    targets: tuple[str, ...]
    reason: str
    message: str
    related: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class Notification:
    resource: str
    namespace: str
    name: str
    annotations: Mapping[str, Any]
    errors: tuple[str, ...] = ()
    stuck: Stuck | None = None


@dataclass(frozen=True)
class PatchAction:
    """Set ``changes`` on one object's annotations; ``old`` holds the values replaced (None if absent)."""

    resource: str
    namespace: str
    name: str
    changes: dict[str, str]
    old: dict[str, str | None]


@dataclass
class Plan:
    actions: list[PatchAction] = field(default_factory=list)
    in_sync: int = 0
    missing: int = 0
    unsatisfiable: list[Notification] = field(default_factory=list)
    stuck: list[Notification] = field(default_factory=list)
    total: int = 0
    guard_tripped: bool = False
    would_patch: int = 0


def parse_notifications(doc: Any) -> list[Notification]:
    """Validate a list of notification dicts; raises ValueError with the reason."""
    if isinstance(doc, dict) and "notifications" in doc:
        doc = doc["notifications"]
    if not isinstance(doc, list):
        raise ValueError("notifications must be a JSON array")
    out: list[Notification] = []
    for i, item in enumerate(doc):
        if not isinstance(item, dict):
            raise ValueError(f"notification {i}: not an object")
        for key in ("resource", "name"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise ValueError(f"notification {i}: {key!r} must be a non-empty string")
        namespace = item.get("namespace") or ""
        if not isinstance(namespace, str):
            raise ValueError(f"notification {i}: 'namespace' must be a string")
        annotations = item.get("annotations")
        annotations = {} if annotations is None else annotations
        if not isinstance(annotations, dict):
            raise ValueError(f"notification {i}: 'annotations' must be an object")
        errors = item.get("errors")
        errors = [] if errors is None else errors
        if not isinstance(errors, list):
            raise ValueError(f"notification {i}: 'errors' must be an array")
        out.append(Notification(item["resource"], namespace, item["name"], annotations,
                                tuple(str(e) for e in errors), parse_stuck(item.get("stuck"), i)))
    return out


def parse_stuck(doc: Any, i: int = 0) -> Stuck | None:
    """A notification's ``stuck`` (None when absent); raises ValueError with the reason."""
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ValueError(f"notification {i}: 'stuck' must be an object")
    targets, related = doc.get("targets"), doc.get("related") or []
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise ValueError(f"notification {i}: 'stuck.targets' must be a non-empty array of strings")
    for key in ("reason", "message"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise ValueError(f"notification {i}: 'stuck.{key}' must be a non-empty string")
    if not isinstance(related, list) or not all(isinstance(r, dict) and isinstance(r.get("kind"), str)
                                                and isinstance(r.get("name"), str) for r in related):
        raise ValueError(f"notification {i}: 'stuck.related' must be an array of object references")
    return Stuck(tuple(sorted(targets)), doc["reason"], doc["message"],
                 tuple({k: str(v) for k, v in r.items() if isinstance(v, (str, int))} for r in related))


LiveLookup = Callable[[str, str, str], Mapping[str, Any] | None]


def plan_pass(
    notifications: Iterable[Notification],
    live: LiveLookup,
    total_objects: int,
    max_fraction: float,
) -> Plan:
    """Compare desired with live annotations and list the patches a pass sends.

    ``live(resource, namespace, name)`` returns the live object or None (deleted).
    When more than ``max_fraction`` of ``total_objects`` would be patched the
    plan is marked ``guard_tripped`` and carries no actions.
    """
    plan = Plan(total=total_objects)
    for n in notifications:
        if n.errors:
            plan.unsatisfiable.append(n)
        if n.stuck is not None:
            plan.stuck.append(n)
        if not n.annotations:
            continue
        obj = live(n.resource, n.namespace, n.name)
        if obj is None:
            plan.missing += 1
            continue
        current = (obj.get("metadata") or {}).get("annotations") or {}
        changes = annotations_to_change(current, n.annotations)
        if not changes:
            plan.in_sync += 1
            continue
        old = {k: current.get(k) for k in changes}
        plan.actions.append(PatchAction(n.resource, n.namespace, n.name, changes, old))
    if plan.actions and len(plan.actions) > max_fraction * max(total_objects, 1):
        plan.guard_tripped = True
        plan.would_patch = len(plan.actions)
        plan.actions = []
    return plan


def chunks(items: Sequence[T], first: int, largest: int) -> Iterator[Sequence[T]]:
    """``items`` in consecutive chunks of ``first``, then twice the previous size, at
    most ``largest`` (both ≥ 1): a small first chunk starts the patches early, larger
    ones keep the number of queries low."""
    size, start = max(1, first), 0
    while start < len(items):
        yield items[start:start + size]
        start += size
        size = min(max(1, largest), size * 2)


def guard_verdict(planned: int, unevaluated: int, total: int, max_fraction: float) -> Verdict:
    """What the max-fraction guard says part-way through a pass.

    ``planned`` patches so far, ``unevaluated`` objects still to be evaluated,
    ``total`` objects of the remediated kinds. ``trip``: the pass patches more
    than ``max_fraction`` of ``total`` whatever the rest says; ``release``: it
    cannot, even if every unevaluated object needs a patch, so patches may be
    sent; ``hold``: not known yet (nothing may be sent). Once ``release``,
    evaluating more never turns it into ``trip``: each object evaluated moves
    from ``unevaluated`` to at most one planned patch.
    """
    allowed = max_fraction * max(total, 1)
    if planned > allowed:
        return "trip"
    if planned + unevaluated <= allowed:
        return "release"
    return "hold"
