from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from edge.cache.coalesce import Coalescer


class Origin:
    """A fetch that counts its calls and answers when released."""

    def __init__(self, answer: str = "answer") -> None:
        self.answer = answer
        self.calls = 0
        self.release = asyncio.Event()
        self.error: Exception | None = None

    async def fetch(self) -> str:
        self.calls += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return f"{self.answer}-{self.calls}"


async def settle() -> None:
    """Lets every task that can run, run."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_hundred_callers_of_a_cold_key_make_one_fetch() -> None:
    coalescer: Coalescer[str] = Coalescer()
    origin = Origin()
    callers = [asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10)) for _ in range(100)]
    await settle()
    origin.release.set()
    results = await asyncio.gather(*callers)
    assert origin.calls == 1
    assert {value for value, _ in results} == {"answer-1"}
    assert [led for _, led in results].count(True) == 1
    assert (coalescer.leaders, coalescer.followers, coalescer.timeouts) == (1, 99, 0)
    assert len(coalescer) == 0


async def test_the_key_is_free_once_the_fetch_is_over() -> None:
    coalescer: Coalescer[str] = Coalescer()
    origin = Origin()
    origin.release.set()
    assert await coalescer.run("k", origin.fetch, wait_s=10) == ("answer-1", True)
    assert await coalescer.run("k", origin.fetch, wait_s=10) == ("answer-2", True)
    assert coalescer.leaders == 2


async def test_the_leaders_failure_reaches_the_waiting_followers_and_frees_the_key() -> None:
    coalescer: Coalescer[str] = Coalescer()
    origin = Origin()
    origin.error = ConnectionError("origin down")
    callers = [asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10)) for _ in range(5)]
    await settle()
    origin.release.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(o, ConnectionError) for o in outcomes)
    assert origin.calls == 1
    origin.error = None
    assert await coalescer.run("k", origin.fetch, wait_s=10) == ("answer-2", True)


async def test_a_follower_waits_at_most_wait_s_then_fetches_for_itself() -> None:
    coalescer: Coalescer[str] = Coalescer()
    hung = Origin("hung")
    leader = asyncio.create_task(coalescer.run("k", hung.fetch, wait_s=10))
    await settle()
    own = Origin("own")
    own.release.set()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await coalescer.run("k", own.fetch, wait_s=0.05) == ("own-1", False)
    assert 0.05 <= loop.time() - started < 1.0
    assert coalescer.timeouts == 1
    assert not leader.done()  # the slow fetch goes on for whoever still waits
    hung.release.set()
    assert await leader == ("hung-1", True)


async def test_different_keys_do_not_coalesce() -> None:
    coalescer: Coalescer[str] = Coalescer()
    a, b = Origin("a"), Origin("b")
    first = asyncio.create_task(coalescer.run("a", a.fetch, wait_s=10))
    second = asyncio.create_task(coalescer.run("b", b.fetch, wait_s=10))
    await settle()
    a.release.set()
    b.release.set()
    assert await first == ("a-1", True)
    assert await second == ("b-1", True)
    assert coalescer.leaders == 2


async def test_a_cancelled_follower_does_not_cancel_the_fetch() -> None:
    coalescer: Coalescer[str] = Coalescer()
    origin = Origin()
    leader = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    await settle()
    leaving = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    staying = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    await settle()
    leaving.cancel()
    await settle()
    assert leaving.cancelled()
    origin.release.set()
    assert await leader == ("answer-1", True)
    assert await staying == ("answer-1", False)
    assert origin.calls == 1


async def test_a_cancelled_leader_leaves_the_fetch_to_its_followers() -> None:
    coalescer: Coalescer[str] = Coalescer()
    origin = Origin()
    leader = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    await settle()
    follower = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    await settle()
    leader.cancel()
    await settle()
    assert leader.cancelled()
    joining = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    await settle()
    origin.release.set()
    assert await follower == ("answer-1", False)
    assert await joining == ("answer-1", False)
    assert origin.calls == 1
    assert len(coalescer) == 0


async def test_a_failure_nobody_waits_for_is_not_reported_as_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coalescer: Coalescer[str] = Coalescer()
    origin = Origin()
    origin.error = ConnectionError("origin down")
    leader = asyncio.create_task(coalescer.run("k", origin.fetch, wait_s=10))
    await settle()
    leader.cancel()
    await settle()
    origin.release.set()
    await settle()
    assert len(coalescer) == 0
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        gc.collect()
        await settle()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
