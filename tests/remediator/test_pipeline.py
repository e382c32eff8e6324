"""The patch pipeline's pacing: the rate limiter spaces patches, but not those a replica that
lost its lease will not send."""

from __future__ import annotations

import time

from fedplace.remediator.pipeline import PatchPipeline
from fedplace.remediator.plan import PatchAction, Plan


def actions(n: int) -> list[PatchAction]:
    return [PatchAction("replicasets", "ns", f"rs-{i}", {"k": "v"}, {"k": None}) for i in range(n)]


async def run_pass(send, n: int, rate: float) -> tuple[float, PatchPipeline]:
    pipeline = PatchPipeline(send, lambda _: None, total=n, unevaluated=n, max_fraction=1.0,
                             rate=rate, concurrency=2, dry_run=False)
    t0 = time.monotonic()
    pipeline.add(Plan(actions=actions(n)), n)
    await pipeline.finish()
    return time.monotonic() - t0, pipeline


async def test_patches_are_spaced_by_the_rate() -> None:
    sent: list[float] = []

    async def send(_: PatchAction) -> str:
        sent.append(time.monotonic())
        return "patched"

    elapsed, pipeline = await run_pass(send, 6, rate=20.0)
    assert pipeline.result.patched == 6
    assert elapsed >= 5 / 20.0 * 0.9  # six patches: five intervals of 50 ms


async def test_after_leadership_is_lost_the_rest_is_not_paced() -> None:
    calls: list[str] = []

    async def send(a: PatchAction) -> str:
        calls.append(a.name)
        return "patched" if len(calls) <= 2 else "not_leader"

    elapsed, pipeline = await run_pass(send, 40, rate=4.0)  # paced, 40 patches would take ~10 s
    assert len(calls) == 40  # every one handed to send, which counts and logs it
    assert pipeline.result.patched == 2
    assert pipeline.result.not_leading == 38
    assert elapsed < 2.0, elapsed  # three paced sends (0.5 s), then none waits
