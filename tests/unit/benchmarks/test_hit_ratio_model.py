from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence

import pytest

from benchmarks.edge_replay import START_S, Replay, Tokens, make_replay, origin_segment
from benchmarks.traffic_model import (
    INTERACTION,
    INTERACTIONS_PER_DAY,
    NEW,
    REQUEST,
    WARMUP_S,
    make_users,
    schedule,
    session,
    sessions_per_day,
    user_events,
    visitor_count,
    zipf_cum_weights,
    zipf_rank,
)
from config.settings import Settings
from loadtests.traffic import ACTIVITY, make_population
from protocol.api import PersonalizeRequest
from protocol.segments import Segment

DAY_S = 86_400.0

MakeReplay = Callable[[Settings], Replay]


@pytest.fixture
async def replays() -> AsyncIterator[MakeReplay]:
    """``make_replay`` with an origin latency of 50 ms; the replays made are closed."""
    made: list[Replay] = []

    def make(settings: Settings) -> Replay:
        made.append(make_replay([], settings, seed=1, origin_latency_ms=50))
        return made[-1]

    yield make
    for replay in made:
        await replay.aclose()


def personalize(user_id: str, page: str = "home") -> PersonalizeRequest:
    return PersonalizeRequest.model_validate(
        {
            "user_id": user_id,
            "context": {"page_type": page, "device": "mobile", "geo": {"country": "US"}},
            "constraints": {"count": 20},
        }
    )


@pytest.mark.parametrize(("s", "first_over_second"), [(0.0, 1.0), (1.0, 2.0), (1.5, 2**1.5)])
def test_zipf_weights_fall_as_a_power_of_the_rank(s: float, first_over_second: float) -> None:
    cum = zipf_cum_weights(100, s)
    assert len(cum) == 100
    assert cum[0] / (cum[1] - cum[0]) == pytest.approx(first_over_second)


def test_zipf_sampler_follows_the_distribution() -> None:
    n, draws = 1000, 60_000
    cum = zipf_cum_weights(n, 1.0)
    rng = random.Random(3)
    ranks = Counter(zipf_rank(rng, cum) for _ in range(draws))
    assert min(ranks) >= 1
    assert max(ranks) <= n
    harmonic = cum[-1]
    for rank in (1, 2, 10):
        assert ranks[rank] / draws == pytest.approx(1 / rank / harmonic, rel=0.1)
    # The head is heavy: the top 1% of ranks draw about 39% of the picks (H_10 / H_1000).
    top = sum(ranks[r] for r in range(1, 11)) / draws
    assert top == pytest.approx(cum[9] / harmonic, abs=0.02)


def test_zipf_needs_a_rank() -> None:
    with pytest.raises(ValueError, match="n must be"):
        zipf_cum_weights(0, 1.0)


@pytest.mark.parametrize(
    ("count", "hours", "share", "expected"),
    [
        (50_000, 3.0, 0.0, 0),
        (50_000, 3.0, 0.10, 2278),
        (50_000, 24.0, 0.10, 13_816),
        (1000, 3.0, 0.5, 300),
    ],
)
def test_visitors_make_their_share_of_the_visits(
    count: int, hours: float, share: float, expected: int
) -> None:
    visitors = visitor_count(count, hours, share)
    assert visitors == expected
    per_known_user = hours / 24 * sum(ACTIVITY[c][0] * sessions_per_day(c) for c in ACTIVITY)
    known_visits = (count - visitors) * per_known_user
    if visitors:
        assert visitors / (visitors + known_visits) == pytest.approx(share, abs=0.01)


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_visitor_share_is_a_fraction(share: float) -> None:
    with pytest.raises(ValueError, match="new_share"):
        visitor_count(100, 3.0, share)


def test_user_mix_follows_seed_000_and_the_demo_model() -> None:
    users = make_users(20_000, seed=5, hours=3.0)
    classes = Counter(u.activity for u in users)
    assert classes[NEW] == visitor_count(20_000, 3.0, 0.10)
    known = len(users) - classes[NEW]
    for activity, (share, _, _) in ACTIVITY.items():
        assert classes[activity] / known == pytest.approx(share, abs=0.02)
    assert classes["casual"] / known == pytest.approx(0.30, abs=0.02)  # seed 000
    assert len({u.user_id for u in users}) == len(users)


@pytest.mark.parametrize("activity", list(INTERACTIONS_PER_DAY))
def test_interactions_a_day_fall_in_the_seed_ranges(activity: str) -> None:
    user = dataclasses.replace(make_population(1, ["us-east"], seed=1)[0], activity=activity)
    rng = random.Random(9)
    cum = zipf_cum_weights(1000, 1.0)
    users, days = 40, 20
    interactions = sum(
        kind == INTERACTION
        for _ in range(users)
        for _, kind, _ in user_events(user, rng, 0.0, days * DAY_S, cum)
    )
    low, high = INTERACTIONS_PER_DAY[activity]
    assert interactions / users / days == pytest.approx((low + high) / 2, rel=0.15)


def test_an_interaction_comes_before_the_next_page_view() -> None:
    rng = random.Random(2)
    cum = zipf_cum_weights(100, 1.0)
    for n in range(200):
        events = session(rng, float(n), chance=0.6, cum_weights=cum)
        assert events[0] == (float(n), REQUEST, -1)
        assert [t for t, _, _ in events] == sorted(t for t, _, _ in events)
        assert all(item >= 1 for _, kind, item in events if kind == INTERACTION)


def test_schedule_is_determined_by_its_seed() -> None:
    users = make_users(300, seed=4, hours=1.0)
    events = schedule(users, seed=4, hours=1.0)
    assert events == schedule(users, seed=4, hours=1.0)
    assert events != schedule(users, seed=5, hours=1.0)
    assert events == sorted(events)
    assert all(t < 3600.0 for t, _, _, _ in events)
    assert all(t >= -WARMUP_S for t, kind, _, _ in events if kind == REQUEST)
    first_time = {n for n, u in enumerate(users) if u.activity == NEW}
    assert all(t >= 0 for t, _, n, _ in events if n in first_time)


@pytest.mark.parametrize(
    ("hours_ago", "expected"),
    [
        ([], Segment.NEW),
        ([23.0], Segment.CASUAL),
        ([25.0], Segment.NEW),  # the origin's record went 24 h after the last interaction
        ([30.0, 30.0, 30.0, 1.0], Segment.CASUAL),  # kept, but only the last day counts
        ([5.0, 4.0, 3.0], Segment.ACTIVE),
        ([n / 10 for n in range(11, 0, -1)], Segment.POWER),
        ([-1.0], Segment.NEW),  # not yet happened
    ],
)
def test_a_token_carries_the_segment_the_origin_records(
    hours_ago: list[float], expected: Segment
) -> None:
    now = START_S
    interactions_ms = sorted(int((now - h * 3600) * 1000) for h in hours_ago)
    assert origin_segment(interactions_ms, now) is expected


def test_a_token_is_issued_per_visit_and_when_it_expires() -> None:
    tokens = Tokens(ttl_s=3600, visit_idle_s=1800)
    tokens.record("u", 0.0)
    assert tokens.present("u", 10.0) is Segment.CASUAL
    for n in range(5):
        tokens.record("u", 20.0 + n)
    assert tokens.present("u", 100.0) is Segment.CASUAL  # the visit's token
    assert tokens.present("u", 1901.0) is Segment.ACTIVE  # a new visit, a new token
    for t in (2900.0, 3900.0, 4900.0):
        tokens.present("u", t)
    assert tokens.issued == 2
    tokens.present("u", 1901.0 + 3600)  # expired
    assert tokens.issued == 3


async def test_the_replay_refreshes_ahead_of_expiry_and_coalesces_origin_calls(
    replays: MakeReplay,
) -> None:
    # the cache path (PERSO_EDGE_RANKING off): the origin ranks, the edge caches
    replay = replays(
        Settings(edge_ranking=False, edge_ttl_casual_s=300, edge_stale_if_error_s=3600)
    )
    edge = replay.edges["us-east"]
    body = personalize("u-1")
    # An unknown user: segment new, 300 s TTL from when the fill completes (0.05 s), the
    # refresh window its last 30 s.
    hits: list[int] = []
    for t in (0.0, 0.01, 280.0, 280.01, 310.0, 600.0):
        await replay.advance(START_S + t)
        await replay.request(edge, "new", body, counted=True)
        hits.append(replay.tally.hits["all"] - sum(hits))
    assert hits == [0, 0, 1, 1, 1, 0]
    events = replay.tally.events
    assert (events["fill"], events["refresh"], events["refreshes started"]) == (2, 1, 1)
    assert events["refresh read"] == 1  # the request at 310 s read the refreshed entry
    assert replay.tally.misses == {
        "first of a shared key in its 15-min bucket (coarse)": 1,
        "waited for the key's fill in flight (coarse)": 1,
        "expired: segment TTL (coarse)": 1,
    }
    assert replay.tally.calls_per_request() == 0.5


HIT = "hit"
FIRST = "first of this page for the user in its 15-min bucket (fine)"
SHARED_FIRST = "first of a shared key in its 15-min bucket (coarse)"
REKEYED = "re-keyed since the user's last such page (interactions, segment) (fine)"
IN_FLIGHT = "waited for the key's fill in flight (fine)"
SETTLING = "expired: settle window (fine)"
SESSION_CAP = "expired: session cap (fine)"
# The replay's counts of pre-warms ("prewarm": their origin calls; "read": their entries
# read before they expired).
COUNTS = (
    "prewarm scheduled",
    "prewarm over budget",
    "prewarm filled",
    "prewarm already filled",
    "prewarm",
    "prewarm read",
)
# (seconds from START_S, "click" or a page type to request, user)
Script = Sequence[tuple[float, str, str]]


async def play(replay: Replay, history: int, script: Script) -> list[str]:
    """``history`` interactions of every user of ``script`` an hour before it, the script,
    then an hour; each request's outcome: "hit" or why it missed."""
    edge = replay.edges["us-east"]
    for user in sorted({user for _, _, user in script}):
        for n in range(history):
            await replay.advance(START_S - 3600 + n)
            replay.feedback(edge, user, f"it-{n}", counted=False)
    outcomes = []
    for t, what, user in script:
        await replay.advance(START_S + t)
        if what == "click":
            replay.feedback(edge, user, f"it-{t}", counted=True)
            continue
        before = Counter(replay.tally.misses)
        await replay.request(edge, "power", personalize(user, what), counted=True)
        causes = list((replay.tally.misses - before).elements())
        outcomes.append(causes[0] if causes else HIT)
    await replay.advance(START_S + 3600)  # what is still due
    return outcomes


# The settle window is 2 s and the margin 0.25 s: a click at 5 s is pre-warmed at 7.25 s,
# its origin call completing at 7.30 s. 12 interactions make a power user, 3 an active one.
@pytest.mark.parametrize(
    ("per_s", "history", "script", "outcomes", "counts"),
    [
        pytest.param(
            50, 12, [(0, "home", "u"), (5, "click", "u"), (10, "home", "u")],
            [FIRST, HIT], (1, 0, 1, 0, 1, 1), id="power user: the next request hits",
        ),
        pytest.param(
            50, 3, [(0, "home", "u"), (5, "click", "u"), (10, "home", "u")],
            [FIRST, HIT], (1, 0, 1, 0, 1, 1), id="active user: likewise",
        ),
        pytest.param(
            50, 0, [(0, "home", "u"), (5, "click", "u"), (10, "home", "u")],
            [SHARED_FIRST, SHARED_FIRST], (0, 0, 0, 0, 0, 0), id="casual user: none",
        ),
        pytest.param(
            0, 12, [(0, "home", "u"), (5, "click", "u"), (10, "home", "u")],
            [FIRST, REKEYED], (0, 0, 0, 0, 0, 0), id="off",
        ),
        pytest.param(
            50, 12, [(5, "click", "u"), (10, "home", "u")],
            [FIRST], (0, 0, 0, 0, 0, 0), id="no request to model the next on",
        ),
        pytest.param(
            # its own fill lives to the end of the settle window: the pre-warm fills again
            50, 12, [(0, "home", "u"), (5, "click", "u"), (6, "home", "u")],
            [FIRST, REKEYED], (1, 0, 1, 0, 1, 0), id="a request before the delay misses",
        ),
        pytest.param(
            # past the settle window its fill lives 180 s: nothing left to pre-warm
            50, 12, [(0, "home", "u"), (5, "click", "u"), (7.1, "home", "u")],
            [FIRST, REKEYED], (1, 0, 0, 1, 0, 0), id="a request in the margin fills first",
        ),
        pytest.param(
            50, 12, [(0, "home", "u"), (5, "click", "u"), (7.27, "home", "u")],
            [FIRST, IN_FLIGHT], (1, 0, 1, 0, 1, 0), id="a request waits for the pre-warm",
        ),
        pytest.param(
            50, 12, [(0, "home", "u"), (5, "click", "u"), (10, "search", "u")],
            [FIRST, FIRST], (1, 0, 1, 0, 1, 0), id="another page than the last misses",
        ),
        pytest.param(
            50, 12, [(0, "home", "u"), (5, "click", "u"), (200, "home", "u")],
            [FIRST, SESSION_CAP], (1, 0, 1, 0, 1, 0), id="the entry expired (session cap)",
        ),
        pytest.param(
            # the second click pushes the pending pre-warm back to 8.25 s, past its own
            # settle window: the entry lives the session cap and the request hits
            50, 12, [(0, "home", "u"), (5, "click", "u"), (6, "click", "u"), (10, "home", "u")],
            [FIRST, HIT], (1, 0, 1, 0, 1, 1), id="a second click while one is pending",
        ),
        pytest.param(
            1, 12,
            [(0, "home", "a"), (0, "home", "b"), (5, "click", "a"), (5, "click", "b"),
             (10, "home", "a"), (10, "home", "b")],
            [FIRST, FIRST, HIT, REKEYED], (1, 1, 1, 0, 1, 1), id="the budget caps",
        ),
        pytest.param(
            1, 12,
            [(0, "home", "a"), (0, "home", "b"), (5, "click", "a"), (5, "click", "b"),
             (6.5, "click", "b"), (10, "home", "a"), (10, "home", "b")],
            [FIRST, FIRST, HIT, HIT], (2, 1, 2, 0, 2, 2), id="the budget refills",
        ),
    ],
)  # fmt: skip
async def test_prewarming_as_the_edge_does_it(
    replays: MakeReplay,
    *,
    per_s: float,
    history: int,
    script: Script,
    outcomes: list[str],
    counts: tuple[int, ...],
) -> None:
    replay = replays(Settings(edge_ranking=False, edge_prewarm_per_s=per_s))
    assert await play(replay, history, script) == outcomes
    events = replay.tally.events
    assert tuple(events[name] for name in COUNTS) == counts
    assert replay.tally.calls_per_request() == round(
        (events["fill"] + events["prewarm"]) / len(outcomes), 4
    )


@pytest.mark.parametrize("version", ["1", "7"])
async def test_with_ranking_at_the_edge_a_known_user_is_ranked_there(
    replays: MakeReplay, version: str
) -> None:
    # The simulated origin labels its pools with the live policy's label, as a real origin
    # does: an edge ranks only pools of the policy it holds (a pool labelled otherwise
    # would send every request to the origin, and the replay would measure nothing).
    replay = replays(Settings(edge_ranking=True, policy_version=version))
    await play(replay, 12, [(0, "home", "u"), (5, "click", "u"), (10, "home", "u")])
    events = replay.tally.events
    assert events["ranked at the edge"] == 2
    assert replay.tally.hits["all"] == 1  # the second ranked from the pool the first filled
