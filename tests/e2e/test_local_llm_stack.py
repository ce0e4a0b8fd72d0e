"""``perso up --llm local`` as a real process: the local model server is a supervised child
of the stack, the origin's LLM tier answers through it (asked at an edge, with a user
token), a killed model server is restarted on its port and answers again, and Ctrl-C
stops it with the rest. Opt-in like every ``llm_local`` test (``make llm-deps``)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from perso.local_llm import LocalLlmError, check_installed
from tests.e2e.conftest import RunningStack, child_pid, start_stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.llm_local,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

# Items of one category (Beauty) in the 1,000-item sample catalog: four to click, then the
# ones to ask about.
CLICKED = ["it-000000", "it-000018", "it-000022", "it-000028"]
ASKED = ["it-000051", "it-000059"]
PATIENT_MS = 30_000
LLM_LINE = re.compile(r"^llm +http://127\.0\.0\.1:(\d+) ", re.MULTILINE)


@pytest.fixture
def stack(tmp_path: Path) -> RunningStack:
    try:
        check_installed()
    except LocalLlmError as exc:
        pytest.skip(str(exc))
    return start_stack(
        tmp_path,
        "--llm",
        "local",
        "--regions",
        "us-east",
        ports=2,
        PERSO_LLM_PRECOMPUTE_EVERY_S="0",  # the model's one slot for the test's requests
        # Patient (the local default is 10 s): a machine shared with other work delays the
        # test rather than failing it. Given explicitly, it is kept, and the edges wait
        # a second longer.
        PERSO_LLM_TIMEOUT_MS=str(PATIENT_MS),
    )


async def explain(client: httpx.AsyncClient, stack: RunningStack, item: str) -> dict[str, object]:
    headers = await stack.user_headers(client, "u-local")
    answer = await client.post(
        f"{stack.edges['us-east']}/v1/explain",
        json={
            "user_id": "u-local",
            "item_id": item,
            "context": {"page_type": "item_detail", "explanation_style": "concise"},
        },
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    explanation: dict[str, object] = answer.json()["explanation"]
    return explanation


async def test_the_stack_runs_the_model_restarts_it_and_stops_it(stack: RunningStack) -> None:
    log = stack.log()
    assert f"deadline {PATIENT_MS} ms (PERSO_LLM_TIMEOUT_MS), edges wait {PATIENT_MS + 1000}" in log
    found = LLM_LINE.search(log)
    assert found is not None, log
    port = found.group(1)
    try:
        async with httpx.AsyncClient(timeout=PATIENT_MS / 1000 + 5) as client:
            feedback = [{"item_id": item, "action": "click"} for item in CLICKED]
            clicked = await client.post(
                f"{stack.origin_url}/v1/feedback",
                json={"user_id": "u-local", "feedback": feedback},
                headers=stack.origin_headers,
            )
            assert clicked.status_code == 200, clicked.text
            first = await explain(client, stack, ASKED[0])
            assert first["llm_generated"] is True, first

            killed = child_pid(stack.process.pid, "perso.local_llm_server")
            os.kill(killed, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while "llm was killed by SIGKILL" not in stack.log() or (
                "llm restarted" not in stack.log()
            ):
                assert time.monotonic() < deadline, stack.log()
                await asyncio.sleep(0.2)
            restarted = child_pid(stack.process.pid, "perso.local_llm_server")
            assert restarted != killed
            health = f"http://127.0.0.1:{port}/health"
            while True:  # on its port again: the origin's LLM_BASE_URL still holds
                try:
                    if (await client.get(health)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, stack.log()
                await asyncio.sleep(0.2)
            second = await explain(client, stack, ASKED[1])
            assert second["llm_generated"] is True, second
    finally:
        stack.process.send_signal(signal.SIGINT)
        assert stack.process.wait(timeout=60) == 0, stack.log()
    with pytest.raises(ProcessLookupError):  # stopped with the rest
        os.kill(restarted, 0)
