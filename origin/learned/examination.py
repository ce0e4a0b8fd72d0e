"""Position bias in Redis (``relevance.examination``): the tally of expected examinations
and impressions per position, ``model:examination`` (fields ``x:<k>`` and ``n:<k>``),
added to by every worker as it closes joins, and read back as the estimate.

The estimate is read at most every ``REFRESH_S`` per process: it moves slowly, and every
close of every batch needs it. The tally is scaled down as a whole when a position passes
``relevance.examination.MAX_IMPRESSIONS`` (one script), so it follows a changing layout.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from protocol import keys
from redis_client.client import RedisClient
from relevance.examination import MAX_IMPRESSIONS, MAX_POSITIONS, Tally, estimate

REFRESH_S = 5.0

# KEYS[1] the tally   ARGV[1] the cap   ARGV[2..] field, increment pairs
# Adds, then scales every field down when the largest impression count passed the cap.
ADD = """
local top = 0
for i = 2, #ARGV, 2 do
  local v = tonumber(redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1]))
  if string.sub(ARGV[i], 1, 2) == 'n:' and v > top then top = v end
end
local cap = tonumber(ARGV[1])
if top > cap then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    redis.call('HSET', KEYS[1], all[i], tostring(tonumber(all[i + 1]) * cap / top))
  end
end
return 1
"""


class ExaminationStore:
    def __init__(self, redis: RedisClient, clock: Callable[[], float]) -> None:
        self._redis = redis
        self._clock = clock
        self._add = redis.register_script(ADD)
        self._estimate = estimate(Tally.empty())
        self._read_at = -float("inf")

    async def estimate(self) -> np.ndarray:
        """e_k for k = 1..MAX_POSITIONS, from the tally read at most ``REFRESH_S`` ago."""
        now = self._clock()
        if now - self._read_at >= REFRESH_S:
            self._estimate = estimate(await self.read())
            self._read_at = now
        return self._estimate

    async def read(self) -> Tally:
        fields = await self._redis.hgetall(keys.EXAMINATION)
        tally = Tally.empty()
        for name, value in fields.items():
            text = name.decode() if isinstance(name, bytes) else str(name)
            kind, _, position = text.partition(":")
            if not position.isdigit() or not 1 <= int(position) <= MAX_POSITIONS:
                continue
            target = tally.examined if kind == "x" else tally.shown if kind == "n" else None
            if target is not None:
                target[int(position) - 1] = float(value)
        return tally

    async def add(self, tally: Tally) -> None:
        """Add a batch's expected examinations and impressions."""
        args: list[str | float] = [MAX_IMPRESSIONS]
        for k in np.flatnonzero(tally.shown):
            args += [f"x:{k + 1}", float(tally.examined[k]), f"n:{k + 1}", float(tally.shown[k])]
        if len(args) > 1:
            await self._add(keys=[keys.EXAMINATION], args=args)
