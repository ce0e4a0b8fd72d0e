"""Offline evaluation over the real logs: a real origin (in process, over the suite's
Redis) logs every decision's context (``PERSO_CONTEXT_LOG_RATE`` 1), a real stream worker
(``origin.worker.app.run_worker``, a reward wait of a fraction of a second) joins the
decisions to the clicks sent for them and writes what each earned to ``rewards:{p}``, and
``perso evaluate`` reads the window back and estimates the references on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import msgpack
import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.offline import last_evaluation
from origin.worker.app import run_worker
from perso import evaluate as evaluate_command
from protocol import keys
from protocol.api import PersonalizeResponse
from protocol.contexts import RankedContext, decode_context
from protocol.decisions import DECISION_FIELD, POLICY_HEADER, decode_entry
from protocol.rewards import REWARD_FIELD, decode_reward
from tests.apps import serving

pytestmark = pytest.mark.cluster


USERS = ("u-a", "u-b", "u-c", "u-d")
ANSWERS_PER_USER = 3
COUNT = 5


async def until(condition: Callable[[], Awaitable[bool]], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def entries(redis: Redis, stream: str, name: str | bytes) -> list[bytes]:
    field = name.encode() if isinstance(name, str) else name
    page = cast(list[tuple[bytes, dict[bytes, bytes]]], await redis.xrange(stream))
    return [fields[field] for _, fields in page]


async def contexts(redis: Redis, partitions: int) -> list[RankedContext]:
    out = []
    for p in range(partitions):
        for raw in await entries(redis, keys.contexts_stream(p), DECISION_FIELD):
            payload = msgpack.unpackb(raw, raw=False)
            records = payload if isinstance(payload, list) else [raw]
            out += [decode_context(r) for r in records]
    return out


async def request_ids(redis: Redis, partitions: int) -> set[str]:
    return {
        d.request_id
        for p in range(partitions)
        for raw in await entries(redis, keys.decisions_stream(p), DECISION_FIELD)
        for d in decode_entry(raw)
    }


async def rewarded(redis: Redis, partitions: int) -> dict[str, int]:
    """Clicks per slate by request id, as the worker wrote them."""
    out = {}
    for p in range(partitions):
        for raw in await entries(redis, keys.rewards_stream(p), REWARD_FIELD):
            r = decode_reward(raw)
            out[r.request_id] = len(r.engaged)
    return out


def arguments(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    evaluate_command.add_arguments(parser)
    return parser.parse_args(["--json", "--samples", "50", *argv])


@dataclass
class Served:
    answers: list[PersonalizeResponse]
    clicks: dict[str, int]  # by request id
    policy_header: str


@pytest.fixture
def settings(origin_settings: Settings) -> Settings:
    return origin_settings.model_copy(
        update={
            "context_log_rate": 1.0,
            "reward_wait_s": 0.3,
            "freshness_active_s": 0.0,
            "freshness_casual_s": 0.0,
            "worker_claim_idle_ms": 1000,
        }
    )


@pytest.fixture
async def served(settings: Settings, redis: Redis) -> AsyncIterator[Served]:
    """Answers for a few users, clicks on some of what they were shown, every join closed."""
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(settings, "w-eval", stop))
    try:
        app = create_app(settings, rng=np.random.default_rng(5))
        async with serving(app, "http://origin") as client:
            answers, clicks, header = [], {}, ""
            for n in range(ANSWERS_PER_USER):
                for u, user in enumerate(USERS):
                    body = {
                        "user_id": user,
                        "context": {"page_type": "home", "device": "desktop"},
                        "constraints": {"count": COUNT},
                    }
                    response = await client.post("/v1/personalize", json=body)
                    assert response.status_code == 200, response.text
                    header = response.headers[POLICY_HEADER]
                    answer = PersonalizeResponse.model_validate_json(response.content)
                    answers.append(answer)
                    # user u clicks (u + n) % 3 of the items shown: 0, 1 or 2 per slate
                    picked = [i.item_id for i in answer.items[: (u + n) % 3]]
                    clicks[answer.request_id] = len(picked)
                    if picked:
                        feedback = {
                            "user_id": user,
                            "request_id": answer.request_id,
                            "feedback": [
                                {"item_id": i, "action": "click", "interaction_id": f"{i}-{n}"}
                                for i in picked
                            ],
                        }
                        sent = await client.post("/v1/feedback", json=feedback)
                        assert sent.status_code == 200, sent.text

            async def all_closed() -> bool:
                return set(await rewarded(redis, settings.event_partitions)) >= set(clicks)

            await until(all_closed)
        yield Served(answers, clicks, header)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 10)


async def test_each_decision_logs_its_context_and_its_reward(
    served: Served, settings: Settings, redis: Redis
) -> None:
    partitions = settings.event_partitions
    logged = {c.request_id: c for c in await contexts(redis, partitions)}
    ids = {a.request_id for a in served.answers}
    assert set(logged) == ids == await request_ids(redis, partitions)
    for answer in served.answers:
        c = logged[answer.request_id]
        assert c.user_id == answer.user_id
        assert c.count == COUNT
        assert c.retrieved >= len(c.items) >= COUNT
        assert {i.item_id for i in answer.items} <= set(c.items)  # the shown were kept
    assert await rewarded(redis, partitions) == served.clicks


async def test_perso_evaluate_estimates_the_references_on_the_window(
    served: Served, settings: Settings, redis: Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert await evaluate_command.run(settings, redis, arguments("--since", "1h")) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    n = len(served.answers)
    assert report["window"] == {
        "decisions": n,
        "with_context": n,
        "joined": n,
        "malformed": 0,
        "missing_vectors": 0,
        "policies": {served.policy_header: n},
    }
    assert report["live"]["policy"] == "configured/1" == served.policy_header
    on_policy = report["live"]["on_policy"]
    assert on_policy["value"] == pytest.approx(sum(served.clicks.values()) / n)
    assert on_policy["low"] <= on_policy["value"] <= on_policy["high"]
    assert report["positions"] == COUNT
    by_policy = {c["policy"]: c for c in report["candidates"]}
    assert set(by_policy) == {"random/ref", "popular/ref"}
    for candidate in by_policy.values():
        assert set(candidate["estimates"]) == {"ips", "snips", "dr", "dm"}
        for e in candidate["estimates"].values():
            assert e["low"] <= e["value"] <= e["high"]
            assert e["level"] == 0.95
        assert 0.0 <= candidate["support"] <= 1.0
    # kept for the operations page: what it printed, the last run's
    kept = await last_evaluation.read(redis)
    assert kept is not None
    assert (kept.live, kept.live_value, kept.joined) == ("configured/1", on_policy["value"], n)
    assert {(e.policy, e.estimator, e.value) for e in kept.estimates} == {
        (c["policy"], name, e["value"])
        for c in report["candidates"]
        for name, e in c["estimates"].items()
    }


async def test_an_empty_window_is_a_clear_error_with_exit_code_2(
    redis: Redis, redis_url: str, settings: Settings
) -> None:
    """``perso evaluate`` as run from a shell, on a Redis with nothing logged."""
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "PERSO_EVENT_PARTITIONS": str(settings.event_partitions),
        "PERSO_DATA_DIR": str(settings.data_dir),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "perso",
        "evaluate",
        "--json",
        "--since",
        "1h",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert out == b""
    assert b"perso: no decision to evaluate in the window" in err
