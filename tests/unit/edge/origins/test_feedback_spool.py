"""The spool's rules for what it cannot hand on (``edge.origins.feedback_spool``): what the
origin refuses is dropped and counted, what fails for a reason of ours is set aside, kept
on disk; neither stops the requests behind it. The forwarding function is the spool's
injected dependency (the origin's client in the edge; tests/integration has the real one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from edge.exceptions import OriginRejected
from edge.origins.feedback_spool import SET_ASIDE, FeedbackSpool


async def handed(spool: FeedbackSpool) -> None:
    stop = asyncio.Event()
    running = asyncio.create_task(spool.run(stop))
    for _ in range(200):
        if not len(spool):
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(running, 5)


async def test_refused_is_dropped_failed_is_set_aside_the_rest_goes_on(tmp_path: Path) -> None:
    sent: list[bytes] = []

    async def forward(body: bytes) -> object:
        if body == b"refused":
            raise OriginRejected(400, b'{"error":"invalid_request"}')
        if body == b"bug":
            raise RuntimeError("a bug of ours")
        sent.append(body)
        return None

    spool = FeedbackSpool(tmp_path, forward, retry_s=0.01)
    for body in (b"refused", b"bug", b"fine"):
        assert await spool.hold(body)
    await handed(spool)
    assert sent == [b"fine"]
    assert (spool.counters.forwarded, spool.counters.dropped, spool.counters.set_aside) == (
        1,
        1,
        1,
    )
    kept = list(spool.own.glob(f"*{SET_ASIDE}"))
    assert [p.read_bytes() for p in kept] == [b"bug"]
    spool.close()
    assert spool.own.exists()  # what was set aside stays for a person to look at


async def test_a_full_spool_holds_nothing_more(tmp_path: Path) -> None:
    async def never(body: bytes) -> object:
        raise AssertionError("not sent")

    spool = FeedbackSpool(tmp_path, never, max_held=2)
    assert await spool.hold(b"1")
    assert await spool.hold(b"2")
    assert not await spool.hold(b"3")
    assert (len(spool), spool.counters.full) == (2, 1)
    spool.close()
