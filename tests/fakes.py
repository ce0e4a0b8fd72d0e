"""Test doubles for things outside the code under test: time."""

from __future__ import annotations


class FakeClock:
    """A clock that only moves when told: ``clock()`` reads it, ``tick(s)`` advances it."""

    def __init__(self, now: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self.now = now

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds
