"""A user's bank of runs at the edge: its runs served in turn with the propensities of all
of them, the same slates ``decide`` serves for the same draws, void whenever what it was
drawn from changes, never anyone else's, within its budget."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edge.cache.prepared_pool import PreparedPool
from edge.ranking.pool_ranking import (
    Drawn,
    Policy,
    PoolRanking,
    pool_runs,
    rank_pool,
    ranking_of,
)
from edge.ranking.run_banks import BankKey, RunBanks, SegmentBanks
from edge.ranking.user_models import HeldModel, UserModels
from relevance.slate import DRAWS, Candidates, decide
from relevance.user_model import UserModel
from tests.pools import make_pool

DIM = 8
POLICY = Policy(count=6, spread=1 / 3, value_weight=1.0)
KEY = BankKey("pool-key", pool_generation=7, pool_built_ms=1_000, policy=POLICY)
PREPARED = PreparedPool.of(make_pool(60, DIM, 0))


def model(seed: int = 1) -> UserModel:
    rng = np.random.default_rng(seed)
    return UserModel(rng.normal(0, 0.5, DIM).astype(np.float32), np.full(DIM, 0.05, np.float32))


def held(users: UserModels, user_id: str, seed: int = 1) -> HeldModel:
    return users.complete(user_id, 1, model(seed), {}, 1)


def drawn(state: HeldModel, seed: int = 3, policy: Policy = POLICY) -> Drawn:
    return Drawn.of(
        pool_runs(
            PREPARED,
            state.model,
            policy,
            exclude=(),
            preferences=state.preferences or {},
            rng=np.random.default_rng(seed),
        )
    )


def served(banks: RunBanks, user_id: str, state: HeldModel, key: BankKey) -> PoolRanking | None:
    banked = banks.next_run(user_id, state, key)
    return None if banked is None else ranking_of(PREPARED, *banked)


def test_a_bank_serves_each_of_its_runs_once_in_turn_then_is_drawn_anew() -> None:
    users, banks = UserModels(1 << 20, DIM), RunBanks(1 << 20)
    state = held(users, "ann")
    every = drawn(state)
    assert len(every) == DRAWS + 1
    banks.put("ann", state, KEY, every)  # its first run served as it was drawn
    runs_served = [0]
    for _ in range(DRAWS):
        banked = banks.next_run("ann", state, KEY)
        assert banked is not None
        assert banked[0] is every
        runs_served.append(banked[1])
    assert runs_served == list(range(DRAWS + 1))
    slates = {tuple(every.runs.scores[k].tolist()) for k in runs_served}
    assert len(slates) == DRAWS + 1  # 64 distinct runs, each its own draws
    assert banks.next_run("ann", state, KEY) is None  # used up: the caller draws anew
    assert len(banks) == 0
    counters = banks.counters
    assert (counters.drawn, counters.served, counters.used_up, counters.void) == (1, DRAWS, 1, 0)


@pytest.mark.parametrize("run", [0, 1, 30, DRAWS])
def test_a_banked_run_is_served_as_decide_serves_the_same_draws(run: int) -> None:
    """Run 0 of a bank is what ranking the request directly serves (``rank_pool``, which is
    ``decide``'s run 0) for the same seed; any run is served with the propensities
    ``decide`` gives its served run: the share of all the runs that put each of its items
    at its position."""
    state = held(UserModels(1 << 20, DIM), "ann")
    every = drawn(state, seed=5)
    out = ranking_of(PREPARED, every, run)
    if run == 0:
        direct = rank_pool(
            PREPARED,
            state.model,
            count=POLICY.count,
            exclude=(),
            preferences={},
            spread=POLICY.spread,
            value_weight=POLICY.value_weight,
            rng=np.random.default_rng(5),
        )
        assert out == direct
        terms = PREPARED.terms
        slate = decide(
            Candidates.with_terms(terms, np.zeros(len(PREPARED))),
            state.model,
            POLICY.count,
            np.random.default_rng(5),
            spread=POLICY.spread,
        )
        assert list(out.rows) == slate.rows.tolist()
        assert list(out.propensities) == slate.propensities.tolist()
    rows = every.runs.rows
    assert list(out.rows) == rows[run].tolist()
    shares = [float(np.mean(rows[:, j] == rows[run, j])) for j in range(POLICY.count)]
    assert list(out.propensities) == shares
    assert all(p >= 1 / (DRAWS + 1) for p in out.propensities)


def test_the_bank_of_a_request_with_exclusions_is_not_what_it_is_served_from() -> None:
    """``pool_runs`` with exclusions draws over the rows left, mapped back to the pool's."""
    state = held(UserModels(1 << 20, DIM), "ann")
    gone = PREPARED.pool.item_ids[:10]
    every = pool_runs(
        PREPARED,
        state.model,
        POLICY,
        exclude=gone,
        preferences={},
        rng=np.random.default_rng(1),
    )
    shown = {PREPARED.pool.item_ids[int(r)] for r in every.rows.ravel()}
    assert not shown & set(gone)


def changed_model(users: UserModels, state: HeldModel) -> HeldModel:
    users.apply("ann", state.version + 1, model(9))
    fresh = users.ready("ann")
    assert fresh is not None
    return fresh


def changed_preferences(users: UserModels, state: HeldModel) -> HeldModel:
    users.apply("ann", state.version, state.model, {"books": 1.0}, state.preferences_version + 1)
    fresh = users.ready("ann")
    assert fresh is not None
    return fresh


def refetched(users: UserModels, state: HeldModel) -> HeldModel:
    """Forgotten (a preference change), then asked of the origin again: the same numbers,
    another state."""
    users.forget_preferences("ann")
    return users.complete("ann", state.version, state.model, {}, state.preferences_version + 1)


STATE_CHANGES = {
    "model-version": changed_model,
    "preferences": changed_preferences,
    "preferences-refetched": refetched,
}

KEY_CHANGES = {
    "pool-refilled": dataclasses.replace(KEY, pool_generation=8),
    "pool-rebuilt": dataclasses.replace(KEY, pool_built_ms=2_000),
    "other-pool": dataclasses.replace(KEY, pool_key="another-segment"),
    "count": dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, count=7)),
    "exploration": dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, spread=0.5)),
    "diversity": dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, diversity=0.2)),
    "value-weight": dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, value_weight=0)),
    "preselect": dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, preselect=20)),
    "draws": dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, draws=7)),
}


@pytest.mark.parametrize("change", list(STATE_CHANGES), ids=list(STATE_CHANGES))
def test_a_bank_is_void_once_the_users_state_changes(change: str) -> None:
    users, banks = UserModels(1 << 20, DIM), RunBanks(1 << 20)
    state = held(users, "ann")
    banks.put("ann", state, KEY, drawn(state))
    assert served(banks, "ann", state, KEY) is not None
    fresh = STATE_CHANGES[change](users, state)
    assert fresh is not state
    assert served(banks, "ann", fresh, KEY) is None
    assert len(banks) == 0
    assert banks.counters.void == 1
    # nor is it served to the old state again: it is gone
    assert served(banks, "ann", state, KEY) is None


@pytest.mark.parametrize("key", list(KEY_CHANGES.values()), ids=list(KEY_CHANGES))
def test_a_bank_is_void_for_another_pool_entry_or_policy(key: BankKey) -> None:
    users, banks = UserModels(1 << 20, DIM), RunBanks(1 << 20)
    state = held(users, "ann")
    banks.put("ann", state, KEY, drawn(state))
    assert served(banks, "ann", state, KEY) is not None
    assert served(banks, "ann", state, key) is None
    assert (len(banks), banks.counters.void, banks.bytes) == (0, 1, 0)


def test_a_users_bank_is_never_served_to_another_user() -> None:
    users, banks = UserModels(1 << 20, DIM), RunBanks(1 << 20)
    ann, bob = held(users, "ann", seed=1), held(users, "bob", seed=2)
    banks.put("ann", ann, KEY, drawn(ann))
    # bob has no bank: with his own state or even ann's, nothing of ann's is served
    assert served(banks, "bob", bob, KEY) is None
    assert served(banks, "bob", ann, KEY) is None
    # bob's own bank, drawn from his state, leaves ann's alone, and each gets their own
    bob_runs = drawn(bob, seed=4)
    banks.put("bob", bob, KEY, bob_runs)
    for_ann, for_bob = served(banks, "ann", ann, KEY), served(banks, "bob", bob, KEY)
    assert for_ann is not None
    assert for_bob is not None
    assert list(for_bob.rows) == bob_runs.runs.rows[1].tolist()
    assert list(for_ann.rows) != list(for_bob.rows)
    # ann's state with bob's id is not bob's bank's state: void, never served
    assert served(banks, "bob", ann, KEY) is None
    assert served(banks, "ann", ann, KEY) is not None


def test_the_banks_stay_within_their_budget_least_recently_used_first() -> None:
    users = UserModels(1 << 20, DIM)
    states = {u: held(users, u, seed=k) for k, u in enumerate(("ann", "bob", "cat"))}
    one = RunBanks(1 << 30)
    one.put("ann", states["ann"], KEY, drawn(states["ann"]))
    per_bank = one.bytes
    assert per_bank > drawn(states["ann"]).nbytes
    banks = RunBanks(int(2.5 * per_bank))
    banks.put("ann", states["ann"], KEY, drawn(states["ann"]))
    banks.put("bob", states["bob"], KEY, drawn(states["bob"]))
    assert served(banks, "ann", states["ann"], KEY) is not None  # ann now the most recent
    banks.put("cat", states["cat"], KEY, drawn(states["cat"]))
    assert len(banks) == 2
    assert banks.bytes <= int(2.5 * per_bank)
    assert banks.counters.evicted == 1
    assert served(banks, "bob", states["bob"], KEY) is None  # bob's went first
    assert served(banks, "ann", states["ann"], KEY) is not None
    assert served(banks, "cat", states["cat"], KEY) is not None


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        RunBanks(0)


def segment_runs(seed: int = 3) -> Drawn:
    """The segment's own ranking over the pool: nobody's model."""
    return Drawn.of(
        pool_runs(
            PREPARED, None, POLICY, exclude=(), preferences={}, rng=np.random.default_rng(seed)
        )
    )


def test_a_segment_bank_serves_its_runs_in_turn_to_whoever_asks_then_is_drawn_anew() -> None:
    banks = SegmentBanks()
    every = segment_runs()
    assert banks.next_run(KEY) is None
    banks.put(KEY, every)  # its first run served as it was drawn
    slates = [tuple(every.runs.rows[0])]
    for n in range(1, DRAWS + 1):
        banked = banks.next_run(KEY)
        assert banked is not None
        runs, run = banked
        assert runs is every
        assert run == n
        slates.append(tuple(ranking_of(PREPARED, runs, run).rows))
    assert len(set(slates)) > 1  # consecutive new users see different draws
    assert banks.next_run(KEY) is None  # used up: drawn anew
    assert (banks.counters.drawn, banks.counters.served, banks.counters.used_up) == (1, DRAWS, 1)


def test_a_segment_bank_is_the_pool_entrys_terms_and_policys_alone() -> None:
    banks = SegmentBanks()
    banks.put(KEY, segment_runs())
    for other in (
        dataclasses.replace(KEY, pool_generation=8),
        dataclasses.replace(KEY, pool_terms=1),  # the workers' stream moved its posteriors
        dataclasses.replace(KEY, policy=dataclasses.replace(POLICY, count=4)),
        dataclasses.replace(KEY, ranking_policy="promoted/2"),
    ):
        assert banks.next_run(other) is None
    assert banks.next_run(KEY) is not None


def test_segment_banks_keep_the_most_recently_used() -> None:
    banks = SegmentBanks(max_banks=2)
    keys = [dataclasses.replace(KEY, pool_key=f"pool-{n}") for n in range(3)]
    banks.put(keys[0], segment_runs())
    banks.put(keys[1], segment_runs())
    assert banks.next_run(keys[0]) is not None  # keys[0] used last
    banks.put(keys[2], segment_runs())
    assert len(banks) == 2
    assert banks.next_run(keys[1]) is None
    assert banks.next_run(keys[0]) is not None
    assert banks.counters.evicted == 1
    with pytest.raises(ValueError, match="positive"):
        SegmentBanks(max_banks=0)
