"""Fixtures of the fake model server (``tests.llm_server``), a real process on a free port.

``llm_server`` starts it once per session; ``llm`` gives a test the same server set back
to good answers with its counts at zero. Loaded for every test by ``tests/conftest.py``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from perso.process import free_port

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 20.0


@dataclass
class LlmServer:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``LLM_BASE_URL`` would be set to."""
        return f"{self.url}/v1"

    async def control(self, **config: Any) -> None:
        """Replace the server's behaviour (see ``tests.llm_server``)."""
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{self.url}/control", json=config)
            response.raise_for_status()

    async def stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.url}/stats")
            response.raise_for_status()
            stats: dict[str, Any] = response.json()
            return stats


def start_llm_server(log_path: Path) -> LlmServer:
    """``python -m tests.llm_server`` on a free port, once it answers ``/health``."""
    for _ in range(5):
        port = free_port()
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.llm_server", "--port", str(port)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        server = LlmServer(process, port)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{server.url}/health", timeout=0.5).status_code == 200:
                    return server
            except httpx.TransportError:
                time.sleep(0.05)
        stop_llm_server(server)
        # Exited: most likely the port was taken between our probe and its bind; try again.
    pytest.fail(f"the fake model server did not start:\n{log_path.read_text(errors='replace')}")


def stop_llm_server(server: LlmServer) -> None:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmServer]:
    server = start_llm_server(tmp_path_factory.mktemp("llm") / "llm_server.log")
    yield server
    stop_llm_server(server)


@pytest.fixture
async def llm(llm_server: LlmServer) -> LlmServer:
    await llm_server.control(mode="good", reset_stats=True)
    return llm_server
