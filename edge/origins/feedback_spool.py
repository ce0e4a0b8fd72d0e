"""Feedback an edge accepted while no origin could make it durable, held on the edge's disk
and handed on when one can: the feedback spool.

A click a shop's page sends once (``navigator.sendBeacon``: no retry, no answer read) and
the edge refuses is lost. So when the origin cannot take a valid, authorized, in-limit
feedback request (every origin down or overloaded, their Redis failing over: the client's
``OriginUnavailable``), the edge writes the request's body to this spool, each request a
file of its own, written under a temporary name, flushed to disk (``fsync``) and renamed,
and only then answers (202, ``"status": "held"``): acknowledged once durable somewhere.
A forwarder sends the held requests to the origin in the order they came, one at a time,
and deletes each once the origin acknowledged it (durable in the event log); while the
origin still cannot, it waits ``retry_s`` (doubling to ``MAX_RETRY_S``). Forwarding twice
is harmless: the origin recognises a repeated request's interactions
(``FeedbackItem.interaction_id``, derived from the request when the shop sends none).
What the origin refuses (a 4xx but its overload's 429, which is an outage like a 503:
``edge.origins.link.OUTAGE_STATUSES``) is dropped, counted and logged, never retried; one
that fails to be sent for any other reason (a bug) is renamed ``*.set-aside`` beside the
others, counted and logged, for a person to look at.

Each edge process keeps its own directory under the spool's (``p-<random>``), holding an
exclusive ``flock`` on its ``.lock`` while it lives; a process that starts adopts the
directories whose lock it can take (their process is gone: a crash, a restart) and
forwards their requests too, then removes them. The processes of a PoP share the spool's
directory (``PERSO_EDGE_FEEDBACK_SPOOL_DIR``); a request is in one directory only, so only
one process sends it. Bounded: ``max_held`` requests in this process's directory (then the
edge refuses with 503, as without a spool).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import logging
import os
import secrets
import shutil
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from edge.exceptions import OriginRejected, OriginUnavailable

log = logging.getLogger(__name__)

LOCK = ".lock"
SUFFIX = ".json"
SET_ASIDE = ".set-aside"  # a held request that could not be handed on for a reason of ours
RETRY_S = 1.0
MAX_RETRY_S = 30.0
MAX_HELD = 100_000

Forward = Callable[[bytes], Awaitable[object]]


@dataclass
class SpoolCounters:
    held: int = 0  # requests written to the spool
    forwarded: int = 0  # handed on: the origin acknowledged them
    dropped: int = 0  # refused by the origin (4xx), not retried
    full: int = 0  # refused by the spool: over max_held
    adopted: int = 0  # held requests found in a gone process's directory
    set_aside: int = 0  # failed to be handed on for another reason (a bug): kept, not sent


class FeedbackSpool:
    def __init__(
        self,
        directory: Path,
        forward: Forward,
        *,
        max_held: int = MAX_HELD,
        retry_s: float = RETRY_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_held <= 0:
            raise ValueError(f"max_held must be positive, not {max_held}")
        self.root = directory
        self._forward = forward
        self._max_held = max_held
        self._retry_s = retry_s
        self._sleep = sleep
        self.root.mkdir(parents=True, exist_ok=True)
        self.own = self.root / f"p-{secrets.token_hex(8)}"
        self.own.mkdir()
        self._lock_fd = _locked(self.own / LOCK)
        assert self._lock_fd is not None  # a directory just made is nobody else's
        self._sequence = itertools.count(1)
        # The names of the requests in this process's directory, in the order to send them.
        self._queue: deque[str] = deque()
        self._waiting = asyncio.Event()  # set when a request is held
        self.counters = SpoolCounters()

    def __len__(self) -> int:
        """Requests held in this process's own directory (adopted ones included)."""
        return len(self._queue)

    async def hold(self, body: bytes) -> bool:
        """Write ``body`` durably to this process's directory; False (nothing written)
        when ``max_held`` requests are held already."""
        if len(self._queue) >= self._max_held:
            self.counters.full += 1
            return False
        name = f"{next(self._sequence):012d}{SUFFIX}"
        await asyncio.to_thread(_write_durably, self.own, name, body)
        self._queue.append(name)
        self.counters.held += 1
        self._waiting.set()
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Forward what is held, oldest first: this process's requests and those of gone
        processes (adopted), until ``stop`` is set."""
        delay = self._retry_s
        while not stop.is_set():
            if not self._queue and not await asyncio.to_thread(self._adopt_one):
                self._waiting.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._waiting.wait(), timeout=self._retry_s)
                continue
            sent = await self._send(self._queue[0])
            if sent:
                delay = self._retry_s
            else:
                await self._sleep(delay)
                delay = min(delay * 2, MAX_RETRY_S)

    def close(self) -> None:
        """Release this process's directory (what it holds stays, for the next process to
        adopt); an empty one is removed."""
        if self._lock_fd is None:
            return
        if not any(p.name != LOCK for p in self.own.iterdir()):
            shutil.rmtree(self.own, ignore_errors=True)  # nothing held, nothing set aside
        os.close(self._lock_fd)
        self._lock_fd = None

    def _adopt_one(self) -> bool:
        """Move the held requests of one gone process (its directory's lock free) into this
        process's directory, in their order, and remove its directory; whether any were
        moved. Runs in a worker thread while this process's queue is empty: names come
        from the same atomic counter as ``hold``'s."""
        for directory in sorted(self.root.glob("p-*")):
            if directory == self.own or not directory.is_dir():
                continue
            fd = _locked(directory / LOCK)
            if fd is None:
                continue  # its process lives: it sends them itself
            try:
                moved = []
                for path in sorted(directory.glob(f"*{SUFFIX}")):
                    name = f"{next(self._sequence):012d}{SUFFIX}"
                    os.replace(path, self.own / name)
                    moved.append(name)
                for path in directory.glob(f"*{SET_ASIDE}"):  # kept, not sent
                    os.replace(path, self.own / f"{next(self._sequence):012d}{SET_ASIDE}")
                shutil.rmtree(directory, ignore_errors=True)
            finally:
                os.close(fd)
            if moved:
                self._queue.extend(moved)
                self.counters.adopted += len(moved)
                log.info("adopted %d held feedback requests of a gone edge process", len(moved))
                return True
        return False

    async def _send(self, name: str) -> bool:
        """Hand the oldest held request on; True when it is done with (acknowledged, or
        refused for good), False when the origin cannot take it yet."""
        path = self.own / name
        try:
            body = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            self._queue.popleft()
            return True
        try:
            await self._forward(body)
        except OriginUnavailable as exc:
            log.log(exc.log_level, "held feedback not handed on yet: %s", exc)
            return False
        except OriginRejected as exc:
            self.counters.dropped += 1
            log.warning(
                "held feedback refused by the origin (%d), dropped: %s",
                exc.status,
                exc.body[:200].decode(errors="replace"),
            )
        except Exception:
            # A bug, not the origin's answer: kept aside for a person to look at (neither
            # lost nor blocking the requests behind it).
            self.counters.set_aside += 1
            log.exception("held feedback %s could not be handed on: set aside", path)
            await asyncio.to_thread(os.replace, path, path.with_suffix(SET_ASIDE))
            self._queue.popleft()
            return True
        else:
            self.counters.forwarded += 1
        await asyncio.to_thread(path.unlink, missing_ok=True)
        self._queue.popleft()
        return True


def _locked(path: Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (created if missing), its descriptor held; None
    when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _write_durably(directory: Path, name: str, body: bytes) -> None:
    """``body`` as ``directory / name``: written under a temporary name, flushed to disk,
    renamed, and the directory flushed (the name durable too)."""
    temporary = directory / f".{name}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, directory / name)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
