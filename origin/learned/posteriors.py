"""Items' engagement posteriors in Redis (``relevance.item_posteriors``): per context cell,
and for all contexts together.

Layout (``protocol.keys``): one hash per cell, ``bandit:{<cell>}`` (a cell is
``<device>_<daypart>``, or ``all``), field item id -> alpha, beta and the time of the last
change (ms), three little-endian doubles. Alpha counts engagements and beta examined
impressions without one, both on top of the prior Beta(1, 1), and both decay toward it with
a half-life (an item not seen for weeks is uncertain again). The ``all`` cell also keeps
``bandit:{all}:rank``, its items by a cautious estimate of their rate: what ranking
retrieves as "what everybody engages with", and ``bandit:{all}:value``, the graded reward
of their engagements (``relevance.item_value``): item id -> engagements counted, the sum
of their grades and the time of the last change, three doubles decayed with the same
half-life.

- ``ADD`` (one script per cell and joined decision): for each item, decay then add its
  (engagements, failures) and, in the ``all`` cell, its (engagements, grades); the
  decision's mark makes a replay change nothing;
- ``READ`` (one script per hash): the items' rows in order, 24 zero bytes where there is
  none, parsed in place by numpy.

A cell, its marks and (for ``all``) the rank and the values share one hash tag, so each
script touches one slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from protocol import dedup, keys
from redis_client.client import RedisClient, RedisPipeline, queue_script
from relevance.item_posteriors import (
    RANK_PRIOR_MEAN,
    PosteriorConfig,
    Posteriors,
    decayed,
    effective,
    with_cold_priors,
)
from relevance.item_value import mean_values

ALL_CONTEXTS = "all"
Array = npt.NDArray[np.float64]

__all__ = [
    "ALL_CONTEXTS",
    "RANK_PRIOR_MEAN",
    "ItemOutcome",
    "ItemValues",
    "PosteriorConfig",
    "PosteriorStore",
    "Posteriors",
    "Stored",
    "decayed",
    "effective",
    "with_cold_priors",
]

# KEYS[1] cell hash   KEYS[2] applied mark   KEYS[3] the cell's rank zset   KEYS[4] its values
# ARGV[1] now ms   ARGV[2] prior alpha   ARGV[3] prior beta   ARGV[4] half-life ms (0: none)
# ARGV[5] mark TTL s   ARGV[6] rank prior strength (0: keep no rank)   ARGV[7] rank prior mean
# ARGV[8] 1: keep the items' values (KEYS[4]), 0: not
# ARGV[9..] item id, engagements, failures, grades (quadruples); failures may be negative.
# Returns 1 when applied, 0 when the mark says it was before.
ADD = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local now, pa, pb, half = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local strength, m0, values = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
local function aged(updated)
  if half > 0 and now > updated then return math.pow(0.5, (now - updated) / half) end
  return 1
end
for i = 9, #ARGV, 4 do
  local item = ARGV[i]
  local engaged, failed = math.max(0, tonumber(ARGV[i + 1])), tonumber(ARGV[i + 2])
  local grades = math.max(0, tonumber(ARGV[i + 3]))
  if engaged > 0 or failed ~= 0 then
    local alpha, beta = pa, pb
    local packed = redis.call('HGET', KEYS[1], item)
    if packed and #packed == 24 then
      local updated
      alpha, beta, updated = struct.unpack('<ddd', packed)
      local factor = aged(updated)
      alpha = pa + factor * (alpha - pa)
      beta = pb + factor * (beta - pb)
    end
    -- A negative failure takes back an impression counted as one (a click converts it):
    -- never below the prior, whatever decay did to it meanwhile.
    alpha, beta = alpha + engaged, math.max(pb, beta + failed)
    redis.call('HSET', KEYS[1], item, struct.pack('<ddd', alpha, beta, now))
    if strength > 0 then
      local rate = (alpha - pa + strength * m0) / (alpha - pa + beta - pb + strength)
      redis.call('ZADD', KEYS[3], rate, item)
    end
  end
  if values and (engaged > 0 or grades > 0) then
    local count, total = 0, 0
    local packed = redis.call('HGET', KEYS[4], item)
    if packed and #packed == 24 then
      local updated
      count, total, updated = struct.unpack('<ddd', packed)
      local factor = aged(updated)
      count, total = factor * count, factor * total
    end
    redis.call('HSET', KEYS[4], item, struct.pack('<ddd', count + engaged, total + grades, now))
  end
end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[5])
return 1
"""

# KEYS[1] cell hash   ARGV[1] item ids joined by "\\n"
# Returns the items' packed rows in order (24 zero bytes for a missing one). HMGET in
# slices of 1,000: Lua's unpack takes a few thousand values at most ("too many results to
# unpack"), and a worker closing a backlog of joins reads tens of thousands at once.
READ = r"""
local ids = {}
for id in string.gmatch(ARGV[1], '[^\n]+') do ids[#ids + 1] = id end
if #ids == 0 then return '' end
local missing = string.rep('\0', 24)
local out = {}
for first = 1, #ids, 1000 do
  local last = math.min(first + 999, #ids)
  local values = redis.call('HMGET', KEYS[1], unpack(ids, first, last))
  for i = first, last do
    local v = values[i - first + 1]
    if v and #v == 24 then out[i] = v else out[i] = missing end
  end
end
return table.concat(out)
"""


@dataclass(frozen=True, slots=True)
class ItemValues:
    """The graded reward of some items' engagements, aligned with them: engagements
    counted, the sum of their grades, the time of the last change (0: none stored)."""

    engagements: Array
    grades: Array
    updated_ms: Array

    @classmethod
    def from_rows(cls, rows: Array) -> ItemValues:
        return cls(rows[:, 0], rows[:, 1], rows[:, 2])

    def relative(self, now_ms: float, config: PosteriorConfig) -> Array:
        """Each item's expected grade of an engagement as of ``now_ms`` (decayed like the
        posteriors), relative to a click's: 1 for an item with no graded evidence."""
        factor = np.ones_like(self.updated_ms)
        if config.decay_half_life_s > 0:
            age_s = np.maximum(now_ms - self.updated_ms, 0.0) / 1000.0
            factor = np.power(0.5, age_s / config.decay_half_life_s)
        return mean_values(factor * self.engagements, factor * self.grades)


@dataclass(frozen=True, slots=True)
class Stored:
    """What a decision reads of its candidates: their posteriors in its context cell and
    over all contexts, and what their engagements are worth."""

    cell: Posteriors
    everywhere: Posteriors
    values: ItemValues


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """What one decision taught about one item: engagements, (weighted) failures and the
    sum of the engagements' grades (``protocol.actions.grade_of``; for a late, better
    action on an engagement counted already, what it adds)."""

    item_id: str
    engagements: float
    failures: float  # negative: an impression counted as a failure taken back
    grades: float = 0.0


class PosteriorStore:
    def __init__(self, redis: RedisClient, config: PosteriorConfig) -> None:
        self._redis = redis
        self.config = config
        self._read = redis.register_script(READ)
        self._add = redis.register_script(ADD)
        # (cell, item) of every add queued since the last ``drain_touched``: what the
        # workers tell the edges about (``origin.worker.item_updates``).
        self._touched: set[tuple[str, str]] = set()

    async def read(self, cell: str, item_ids: Sequence[str] | npt.NDArray[np.object_]) -> Stored:
        """The items' posteriors in ``cell`` and for all contexts, and their values: one
        round trip."""
        ids = "\n".join(item_ids)
        hashes = [
            keys.bandit_posteriors(cell),
            keys.bandit_posteriors(ALL_CONTEXTS),
            keys.bandit_values(ALL_CONTEXTS),
        ]
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in hashes:
                await queue_script(pipe, self._read, [name], [ids])
            packed = await pipe.execute()
        here, everywhere, values = (_rows(raw, len(item_ids)) for raw in packed)
        return Stored(
            Posteriors.from_rows(here, self.config),
            Posteriors.from_rows(everywhere, self.config),
            ItemValues.from_rows(values),
        )

    def prior(self, n: int) -> Stored:
        """What a decision ranks ``n`` candidates by when nothing could be read."""
        nothing = Posteriors.prior(n, self.config)
        return Stored(nothing, nothing, ItemValues.from_rows(np.zeros((n, 3))))

    def drain_touched(self) -> set[tuple[str, str]]:
        """The (cell, item) pairs of the adds queued since the last call."""
        touched, self._touched = self._touched, set()
        return touched

    async def read_rows(self, cells: dict[str, list[str]]) -> dict[str, Array]:
        """Per cell, its items' stored rows as Redis holds them (alpha, beta, last change
        in ms; zeros for none), in the given order: one round trip."""
        names = list(cells)
        async with self._redis.pipeline(transaction=False) as pipe:
            for cell in names:
                ids = "\n".join(cells[cell])
                await queue_script(pipe, self._read, [keys.bandit_posteriors(cell)], [ids])
            packed = await pipe.execute()
        return {cell: _rows(raw, len(cells[cell])) for cell, raw in zip(names, packed, strict=True)}

    async def read_cell(
        self, cell: str, item_ids: Sequence[str] | npt.NDArray[np.object_]
    ) -> Posteriors:
        """The items' posteriors in one ``cell``: one script call."""
        raw = await self._read(keys=[keys.bandit_posteriors(cell)], args=["\n".join(item_ids)])
        return Posteriors.from_rows(_rows(raw, len(item_ids)), self.config)

    async def rates(self, item_ids: Sequence[str], now_ms: float) -> Array:
        """The items' engagement rates over all contexts as of ``now_ms`` (decayed): what
        the workers weigh misses by and update users' models against. Each item's evidence
        on top of ``cold_prior_strength`` pseudo-observations at the typical
        ``RANK_PRIOR_MEAN`` (as a decision's cold prior does, ``with_cold_priors``): an
        item shown once and left alone is not taken for one a third of everyone engages
        with, as the flat prior's mean would say."""
        p = decayed(await self.read_cell(ALL_CONTEXTS, item_ids), now_ms, self.config)
        c = self.config
        successes = np.maximum(p.alpha - c.prior_alpha, 0.0)
        evidence = successes + np.maximum(p.beta - c.prior_beta, 0.0)
        strength = c.cold_prior_strength
        rates: Array = (successes + strength * RANK_PRIOR_MEAN) / (evidence + strength)
        return np.where(p.observed, rates, RANK_PRIOR_MEAN)

    async def top(self, count: int) -> list[str]:
        """The items of the highest cautious rate over all contexts, best first."""
        found = await self._redis.zrevrange(keys.bandit_rank(ALL_CONTEXTS), 0, count - 1)
        return [f.decode() if isinstance(f, bytes) else str(f) for f in found]

    async def queue_add(
        self,
        pipe: RedisPipeline,
        cells: Sequence[str],
        mark: str,
        outcomes: Sequence[ItemOutcome],
        now_ms: int,
    ) -> None:
        """Queue one decision's outcomes for each of ``cells`` (its context cell and
        ``ALL_CONTEXTS``, which also keeps the items' values), each applied once under
        ``mark``."""
        if not outcomes:
            return
        c = self.config
        args: list[str | int | float] = [
            now_ms,
            repr(c.prior_alpha),
            repr(c.prior_beta),
            repr(c.decay_half_life_s * 1000.0),
            dedup.BANDIT_APPLIED_TTL_S,
            repr(c.rank_prior_strength),
            repr(RANK_PRIOR_MEAN),
            "0",
        ]
        for o in outcomes:
            args += [
                o.item_id,
                repr(float(o.engagements)),
                repr(float(o.failures)),
                repr(float(o.grades)),
            ]
        # A decision whose context cell is not known ("": an answer the origin sent
        # without naming one, a fallback's) teaches all contexts only; a cell named ""
        # would be a hash nobody reads (and, on a cluster, a key without its hash tag).
        for cell in dict.fromkeys(c for c in cells if c):
            self._touched.update((cell, o.item_id) for o in outcomes)
            # Only the all-context cell keeps a rank and the values.
            everywhere = cell == ALL_CONTEXTS
            args[5] = repr(c.rank_prior_strength) if everywhere else "0"
            args[7] = "1" if everywhere else "0"
            cell_keys = [
                keys.bandit_posteriors(cell),
                dedup.bandit_applied(cell, mark),
                keys.bandit_rank(cell),
                keys.bandit_values(cell),
            ]
            await queue_script(pipe, self._add, cell_keys, list(args))


def _rows(raw: bytes | None, n: int) -> Array:
    """``READ``'s reply as ``n`` rows of three doubles."""
    rows = np.frombuffer(raw or b"", dtype="<f8").reshape(-1, 3)
    if rows.shape[0] != n:
        raise ValueError(f"read {rows.shape[0]} rows for {n} items")
    return rows
