"""A change signal other components in the process can await.

The sync calls :meth:`ChangeSignal.notify` after a data or policy change has
been written to OPA (``kind`` is ``"data:<plural>"`` or ``"policy"``);
listeners either register a callback (:meth:`subscribe`, called synchronously,
must not block) or await :meth:`wait` with the last generation they saw.
"""

from __future__ import annotations

import asyncio
from typing import Callable

__all__ = ["ChangeSignal"]


class ChangeSignal:
    def __init__(self) -> None:
        self.generation = 0
        self.last_kind = ""
        self._cond = asyncio.Condition()
        self._subscribers: list[Callable[[str], None]] = []

    def subscribe(self, callback: Callable[[str], None]) -> None:
        self._subscribers.append(callback)

    def notify(self, kind: str) -> None:
        self.generation += 1
        self.last_kind = kind
        for cb in self._subscribers:
            cb(kind)
        asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    async def wait(self, after: int) -> int:
        """Return the generation once it is greater than ``after``."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.generation > after)
            return self.generation
