"""Banks of runs, for edge ranking: a user's ranking at the edge drawn once, served over their
next requests.

Ranking a pool for a user runs the policy 1 + ``draws`` (64) times on independent draws
(``edge.ranking.pool_ranking.pool_runs``, ``relevance.slate.runs``): one run is served, and each
shown item's propensity at its position is the share of all the runs that put it there.
Almost all of a personal answer's CPU is those draws. A bank keeps the runs of one user
over one pool and serves the user's next requests over that pool the runs not served yet,
in turn, each with its propensities from all the bank's runs, until every run has been
served; the next request draws a new bank. What an answer shows of every run (its items'
probabilities and propensities) is computed once, when the bank is drawn
(``edge.ranking.pool_ranking.Drawn``): a request served from a bank only renders its
items.

Why it is the same policy: each run is an independent draw of the policy, so each served
slate has the policy's distribution, and the share of the bank's runs is the propensity of
what was actually randomised given the bank (which of its runs a request gets), estimated
as well as when one request drew all the runs. What differs: the requests served from one
bank are not independent of each other (the 64 served are exactly the bank's runs, and
their propensities come from the same 64 runs), where requests that each drew their own
runs were.

A bank is its user's alone: held under their id, it records that id and the very state it
was drawn from (``HeldModel``, a new object whenever the user's model or preferences
change), and it is served only to the same id with the same state object. It is void
(dropped, and drawn anew) when its runs are used up, when the user's held model is not the one
it was drawn from (a model update, fetched or pushed; a preference change), when the pool
entry is another (its key or its fill's generation: a refresh, a purge) or when the
request's policy differs (``Policy``: count, exploration, diversity, value weight, the
rules). Requests with exclusions are never banked: they are drawn for themselves.

Bounded by a memory budget (``PERSO_EDGE_RUN_BANKS_MB``): least recently used banks go
first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from edge.ranking.pool_ranking import Drawn, Policy
from edge.ranking.user_models import HeldModel

# What one bank costs beyond its arrays' numbers (measured with tracemalloc on CPython 3.11
# over 10,000 banks of 64 runs of 20 items: 197 bytes for the bank and the table's slot,
# 449 for the runs' object and its arrays' headers). The user's model is charged too: a
# bank keeps the model it was drawn from alive after an update, until it is dropped.
BANK_OVERHEAD_BYTES = 650


@dataclass(frozen=True, slots=True)
class BankKey:
    """What a bank's runs were drawn for besides its user's held model: the pool entry (its
    cache key, its fill's generation, when the origin built the pool and the version of its
    items' posteriors), the request's
    policy and the label of the ranking policy live then (``protocol.policies``: a
    promotion voids the banks)."""

    pool_key: str
    pool_generation: int
    pool_built_ms: int
    policy: Policy
    ranking_policy: str = ""
    # the pool's item terms as brought up to date by the workers' stream
    # (``edge.cache.prepared_pool.PreparedPool.terms_version``)
    pool_terms: int = 0
    # the rows held of the users' own candidates over the pool, and their terms' version
    # (``edge.ranking.own_candidates.OwnCandidates.version``)
    own: tuple[int, int] = (0, 0)


@dataclass(slots=True, eq=False)
class Bank:
    user_id: str
    state: HeldModel  # the user's held model the runs were drawn from (this very object)
    key: BankKey
    runs: Drawn
    served: int  # runs served so far, in order: the next one is ``runs``' ``served``-th

    @property
    def cost(self) -> int:
        model = self.state.model
        return self.runs.nbytes + model.mean.nbytes + model.var.nbytes + BANK_OVERHEAD_BYTES


@dataclass
class BankCounters:
    drawn: int = 0  # banks drawn (each served its first run at once)
    served: int = 0  # later requests served a bank's run
    used_up: int = 0  # banks drawn anew because every run had been served
    void: int = 0  # banks dropped for another state, pool entry or policy
    evicted: int = 0  # banks dropped to stay within the budget


class RunBanks:
    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be positive, not {budget_bytes}")
        self._budget = budget_bytes
        self._banks: OrderedDict[str, Bank] = OrderedDict()
        self._bytes = 0
        self.counters = BankCounters()

    def __len__(self) -> int:
        return len(self._banks)

    @property
    def bytes(self) -> int:
        """What the banks held cost, by this table's estimate."""
        return self._bytes

    def next_run(self, user_id: str, state: HeldModel, key: BankKey) -> tuple[Drawn, int] | None:
        """The runs of ``user_id``'s bank and the one to serve now (counted as served),
        when they hold a bank drawn from ``state`` for ``key`` with a run not yet served;
        else None, and a bank they held is dropped."""
        bank = self._banks.get(user_id)
        if bank is None:
            return None
        if bank.user_id != user_id or bank.state is not state or bank.key != key:
            self._drop(user_id)
            self.counters.void += 1
            return None
        if bank.served >= len(bank.runs):
            self._drop(user_id)
            self.counters.used_up += 1
            return None
        run = bank.served
        bank.served += 1
        self._banks.move_to_end(user_id)
        self.counters.served += 1
        return bank.runs, run

    def put(self, user_id: str, state: HeldModel, key: BankKey, runs: Drawn) -> None:
        """Hold ``runs``, drawn from ``state`` for ``key``, as ``user_id``'s bank, its first
        run served already."""
        self._drop(user_id)
        bank = Bank(user_id, state, key, runs, served=1)
        self._banks[user_id] = bank
        self._bytes += bank.cost
        self.counters.drawn += 1
        while self._bytes > self._budget and len(self._banks) > 1:
            _, gone = self._banks.popitem(last=False)
            self._bytes -= gone.cost
            self.counters.evicted += 1

    def forget(self, user_id: str) -> None:
        self._drop(user_id)

    def _drop(self, user_id: str) -> None:
        bank = self._banks.pop(user_id, None)
        if bank is not None:
            self._bytes -= bank.cost


@dataclass(slots=True, eq=False)
class _SegmentBank:
    runs: Drawn
    served: int


class SegmentBanks:
    """Banks of the segment's own ranking over a pool (no user's model: what users of whom
    nothing is known are ranked by), served to the segment's users in turn: each request
    gets the next run of the bank of its pool entry, its policy and its pool's item terms
    (``BankKey``), so that consecutive new users see different draws of the policy, each
    with its propensities, and the draws cost one bank per pool and change of its terms
    rather than one per request. Bounded: least recently used banks go first."""

    def __init__(self, max_banks: int = 256) -> None:
        if max_banks <= 0:
            raise ValueError(f"max_banks must be positive, not {max_banks}")
        self._max = max_banks
        self._banks: OrderedDict[BankKey, _SegmentBank] = OrderedDict()
        self.counters = BankCounters()

    def __len__(self) -> int:
        return len(self._banks)

    def next_run(self, key: BankKey) -> tuple[Drawn, int] | None:
        """The runs of ``key``'s bank and the one to serve now, when one is left; else
        None (a used-up bank is dropped)."""
        bank = self._banks.get(key)
        if bank is None:
            return None
        if bank.served >= len(bank.runs):
            del self._banks[key]
            self.counters.used_up += 1
            return None
        run = bank.served
        bank.served += 1
        self._banks.move_to_end(key)
        self.counters.served += 1
        return bank.runs, run

    def put(self, key: BankKey, runs: Drawn) -> None:
        """Hold ``runs`` as ``key``'s bank, its first run served already."""
        self._banks[key] = _SegmentBank(runs, served=1)
        self._banks.move_to_end(key)
        self.counters.drawn += 1
        while len(self._banks) > self._max:
            self._banks.popitem(last=False)
            self.counters.evicted += 1
