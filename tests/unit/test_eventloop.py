"""common/eventloop.py: the loop a service runs on."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from fedplace.common.eventloop import loop_name, run


async def _which() -> str:
    await asyncio.sleep(0)
    return loop_name(asyncio.get_running_loop())


@pytest.mark.parametrize(("kind", "expected"), [("asyncio", "asyncio"), ("uvloop", "uvloop"), ("auto", "uvloop")])
def test_run_uses_the_loop_asked_for(kind: str, expected: str) -> None:
    assert run(_which(), kind) == expected


def test_an_unknown_loop_is_refused_and_the_coroutine_is_not_left_unawaited() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be a RuntimeWarning
        with pytest.raises(ValueError, match="unknown event loop 'trio'"):
            run(_which(), "trio")


def test_the_result_and_exceptions_of_the_coroutine_come_back() -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        run(boom(), "uvloop")
