"""A change signal other components in the process can await.

The sync calls :meth:`ChangeSignal.notify` after a data or policy change has
been written to OPA (``kind`` is ``"data:<plural>"`` or ``"policy"``). A
listener keeps the last generation it saw and loops::

    gen = 0
    while True:
        new = await signal.wait(gen)
        for kind in signal.kinds_since(gen):
            react(kind)
        gen = new

Contract: ``notify`` never blocks and may be called from any coroutine of the
event loop; ``wait(after)`` returns as soon as ``generation > after``;
``kinds_since(after)`` names every kind notified after ``after`` (a listener
that falls behind loses no kind, only the count of repeats).
"""

from __future__ import annotations

import asyncio

__all__ = ["ChangeSignal"]


class ChangeSignal:
    def __init__(self) -> None:
        self.generation = 0
        self._last: dict[str, int] = {}  # kind → generation of its last notification
        self._cond: asyncio.Condition | None = None
        self._wakers: set[asyncio.Task[None]] = set()  # strong refs until done

    def _condition(self) -> asyncio.Condition:
        # Created lazily so the signal can be built outside a running loop.
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    def notify(self, kind: str) -> None:
        """Record a change of ``kind`` and wake every waiter."""
        self.generation += 1
        self._last[kind] = self.generation
        # Condition.notify_all needs the lock, which only a coroutine can take.
        task = asyncio.get_running_loop().create_task(self._wake())
        self._wakers.add(task)
        task.add_done_callback(self._wakers.discard)

    async def _wake(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()

    async def wait(self, after_generation: int) -> int:
        """Return the generation once it is greater than ``after_generation``."""
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.generation > after_generation)
            return self.generation

    def kinds_since(self, after_generation: int) -> list[str]:
        """Kinds notified after ``after_generation``, oldest first."""
        return [k for k, g in sorted(self._last.items(), key=lambda kv: kv[1]) if g > after_generation]
