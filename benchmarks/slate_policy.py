"""The seam between ``benchmarks.learning``'s runner and whatever chooses slates.

A policy is asked for a slate, then told what the user did with it, request after request.
The in-process baselines (``benchmarks.learning_baselines``, ``benchmarks.vw_policy``) and
the product (a policy that calls the real HTTP API) fit the same protocol, so the runner
drives them all through the same world and the same requests. Async because the product's
calls are; the baselines compute in the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from benchmarks.click_model import Outcome
from benchmarks.shop_world import Request


class Policy(Protocol):
    @property
    def name(self) -> str:
        """The label in the report, the plot and the JSON (``random``, ``lin_ts``, ...)."""
        ...

    def configuration(self) -> dict[str, Any]:
        """What was run, as it goes into the JSON: the settings a reader needs to repeat it."""
        ...

    async def slate(self, request: Request) -> list[str]:
        """Up to ``request.count`` distinct item ids, best first."""
        ...

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        """What the user did with ``slate`` (the ids ``slate`` returned, in that order)."""
        ...

    async def aclose(self) -> None:
        """Release what the policy holds (a VW workspace, an HTTP client)."""
        ...
