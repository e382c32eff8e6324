"""Which requested re-evaluations a pass already covered. Pure functions, no I/O.

Every change the remediator hears of gets a stamp from one counter (its
*clock*): a change that may affect every object asks for a full pass (the
stamp of the latest such request), a change to some remediated objects asks
for those (object key → stamp). The remediator hears of a change only once it
has reached OPA, and reads the clock just before it sends each chunk's query,
so an object evaluated at clock ``c`` reflects every change stamped ≤ ``c``.

After a pass, a request is still outstanding only for objects the pass
evaluated before the request (or did not evaluate at all): the objects of a
full pass that were evaluated after a cluster changed need no second look.
"""

from __future__ import annotations

from typing import Hashable, Mapping, TypeVar

__all__ = ["outstanding"]

K = TypeVar("K", bound=Hashable)


def outstanding(full_at: int | None, targets: Mapping[K, int], evaluated_at: Mapping[K, int],
                pass_was_full: bool) -> tuple[int | None, dict[K, int]]:
    """What is left to evaluate after a pass: ``(full request or None, targets)``.

    ``full_at``: stamp of a full-pass request made during the pass (None: none);
    ``targets``: objects requested during the pass, with their stamps;
    ``evaluated_at``: the clock at which the pass evaluated each object;
    ``pass_was_full``: whether it evaluated every object there was.

    A full request survives a targeted pass untouched; after a full pass it
    becomes a request for the objects evaluated before it. A target is covered
    once evaluated at or after its stamp. Objects created after a full pass
    listed its objects arrive as targets of their own, so nothing is lost.
    """
    if full_at is not None and not pass_was_full:
        return full_at, dict(targets)
    left: dict[K, int] = {}
    if full_at is not None:
        left = {key: full_at for key, at in evaluated_at.items() if at < full_at}
    for key, stamp in targets.items():
        at = evaluated_at.get(key)
        if at is None or at < stamp:
            left[key] = max(stamp, left.get(key, stamp))
    return None, left
