from __future__ import annotations

import asyncio

from edge.cache.prewarm import Prewarmer
from protocol.api import PersonalizeRequest
from tests.fakes import FakeClock


def request(user: str) -> PersonalizeRequest:
    return PersonalizeRequest.model_validate(
        {"user_id": user, "context": {"page_type": "home", "device": "mobile"}}
    )


async def test_only_users_with_a_request_are_prewarmed_once_at_a_time() -> None:
    warmed: list[str] = []

    async def warm(body: PersonalizeRequest) -> bool:
        warmed.append(body.user_id)
        return True

    prewarmer = Prewarmer(clock=FakeClock(), per_second=100, delay_s=0)
    assert not prewarmer.schedule("stranger", warm)  # never asked for anything here
    prewarmer.remember(request("ann"))
    assert prewarmer.schedule("ann", warm)
    assert prewarmer.schedule("ann", warm)  # replaces the pending one: still one per user
    await asyncio.sleep(0.01)
    assert warmed == ["ann"]
    assert (prewarmer.counters.scheduled, prewarmer.counters.rescheduled) == (1, 1)
    assert prewarmer.schedule("ann", warm)  # done: may be scheduled again
    await prewarmer.aclose()


async def test_the_budget_caps_prewarms_per_second() -> None:
    clock = FakeClock()
    prewarmer = Prewarmer(clock=clock, per_second=3, delay_s=60)

    async def warm(body: PersonalizeRequest) -> bool:
        return True

    for n in range(5):
        prewarmer.remember(request(f"u{n}"))
    assert [prewarmer.schedule(f"u{n}", warm) for n in range(5)] == [True] * 3 + [False] * 2
    assert prewarmer.counters.over_budget == 2
    clock.tick(1)
    assert prewarmer.schedule("u3", warm)
    await prewarmer.aclose()


async def test_outcomes_are_counted() -> None:
    prewarmer = Prewarmer(clock=FakeClock(), per_second=10, delay_s=0)
    outcomes = {"a": True, "b": False}

    async def warm(body: PersonalizeRequest) -> bool:
        if body.user_id == "c":
            raise RuntimeError("origin down")
        return outcomes[body.user_id]

    for user in "abc":
        prewarmer.remember(request(user))
        prewarmer.schedule(user, warm)
    await asyncio.sleep(0.01)
    c = prewarmer.counters
    assert (c.scheduled, c.filled, c.already_filled, c.failed) == (3, 1, 1, 1)


def test_disabled_with_no_budget() -> None:
    prewarmer = Prewarmer(clock=FakeClock(), per_second=0, delay_s=0)
    prewarmer.remember(request("ann"))

    async def warm(body: PersonalizeRequest) -> bool:
        return True

    assert not prewarmer.schedule("ann", warm)


def test_remembered_users_are_bounded() -> None:
    prewarmer = Prewarmer(clock=FakeClock(), per_second=1, delay_s=0, max_users=2)
    for user in "abc":
        prewarmer.remember(request(user))
    assert list(prewarmer._last) == ["b", "c"]
