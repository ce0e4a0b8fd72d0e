from __future__ import annotations

import re

import pytest

from protocol import dedup, keys
from protocol.edge_entry_keys import EdgeEntryKeys

HASH_TAG = re.compile(r"\{([^}]*)\}")


def tag(key: str) -> str:
    match = HASH_TAG.search(key)
    assert match is not None, key
    return match.group(1)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (keys.user_record("u-1"), "u:{u-1}:st"),
        (keys.user_context("u-1"), "u:{u-1}:ctx"),
        (keys.user_interactions("u-1"), "u:{u-1}:ix"),
        (keys.bandit_posteriors("mobile_evening"), "bandit:{mobile_evening}"),
        (keys.bandit_rank("mobile_evening"), "bandit:{mobile_evening}:rank"),
        (keys.bandit_values("all"), "bandit:{all}:value"),
        (keys.item_vector("it-000001"), "item:{it-000001}:vec"),
        (keys.events_stream(3), "events:{3}"),
        (keys.dead_letters(3), "events:{3}:dead"),
        (keys.edge_sync_stream("eu-west"), "edge_sync:{sync}:region:eu-west"),
        (keys.edge_sync_last("eu-west"), "edge_sync:{sync}:region:eu-west:last"),
        (keys.edge_sync_cursor("eu-west-2"), "edge_sync:cursor:{eu-west-2}"),
        (keys.EDGE_SYNC_SEQ, "edge_sync:{sync}:seq"),
        (keys.ORIGINS_SYNC_STREAM, "edge_sync:{sync}:origins"),
        (keys.ORIGINS_SYNC_LAST, "edge_sync:{sync}:origins:last"),
        (keys.edge_entry_prefix("eu-west"), "edge:{eu-west}:"),
        (EdgeEntryKeys("edge:{eu-west}:").fill_lease("9f2c"), "edge:{eu-west}:fill:9f2c"),
        (keys.rate_limit_user("eu-west", "acme", "fill", "u-1"), "rl:{eu-west:acme}:u:fill:u-1"),
        (keys.rate_limit_total("eu-west", "acme", "fill"), "rl:{eu-west:acme}:t:fill"),
        (keys.worker_stats("w-0"), "worker:{w-0}:stats"),
        (keys.worker_totals("w-0"), "worker:{w-0}:totals"),
        (keys.worker_run("w-0", "9f2c"), "worker:{w-0}:run:9f2c"),
        (keys.WORKER_STATS_PATTERN, "worker:{*}:stats"),
        (keys.WORKER_TOTALS_PATTERN, "worker:{*}:totals"),
    ],
)
def test_key_names(key: str, expected: str) -> None:
    assert key == expected


@pytest.mark.parametrize(
    "key",
    [keys.worker_stats("host-0"), keys.worker_totals("host-0"), keys.worker_run("host-0", "r")],
)
def test_consumer_of_a_worker_key(key: str) -> None:
    assert keys.consumer_of(key) == "host-0"


def test_keys_a_script_touches_together_share_a_slot() -> None:
    user = [keys.user_record("a"), keys.user_interactions("a"), keys.user_preferences("a")]
    assert {tag(k) for k in user} == {"a"}
    bandit = [
        keys.bandit_posteriors("s"),
        keys.bandit_rank("s"),
        keys.bandit_values("s"),
        dedup.bandit_applied("s", "i"),
    ]
    assert {tag(k) for k in bandit} == {"s"}
    assert tag(keys.events_stream(5)) == tag(dedup.feedback_seen(5, "u", "ix")) == "5"
    assert tag(keys.dead_letters(5)) == "5"
    assert tag(keys.worker_totals("w")) == tag(keys.worker_run("w", "r")) == "w"
    assert tag(keys.POLICIES) == tag(keys.policy("ranker-b")) == "policies"
    # A rate-limit check takes from the user's limit and the API key's total together.
    limits = [
        keys.rate_limit_user("r", "acme", "fill", "u"),
        keys.rate_limit_total("r", "acme", "fill"),
    ]
    assert {tag(k) for k in limits} == {"r:acme"}
    # A fill lease lives in its PoP store's slot.
    prefix = keys.edge_entry_prefix("r")
    assert tag(EdgeEntryKeys(prefix).fill_lease("k")) == tag(prefix) == "r"
    # one publish script: the sequence, every region's pair and the origins' pair
    sync = [
        keys.EDGE_SYNC_SEQ,
        keys.edge_sync_stream("origins"),
        keys.edge_sync_last("origins"),
        keys.ORIGINS_SYNC_STREAM,
        keys.ORIGINS_SYNC_LAST,
    ]
    assert {tag(k) for k in sync} == {"sync"}


@pytest.mark.parametrize("region", ["origins", "us-east", "origins-1", "o"])
def test_no_region_stream_is_the_origins_stream(region: str) -> None:
    region_keys = {keys.edge_sync_stream(region), keys.edge_sync_last(region)}
    assert not region_keys & {keys.ORIGINS_SYNC_STREAM, keys.ORIGINS_SYNC_LAST}


@pytest.mark.parametrize(
    ("user_id", "partitions", "expected"),
    [
        # crc32 values, fixed: every process and every release must agree on them.
        ("u-1", 8, 0xDC8F297C % 8),
        ("alice", 8, 0x278EBC47 % 8),
        ("alice", 1, 0),
        ("bob", 100, 0xF5CBB140 % 100),
    ],
)
def test_partition_is_crc32_modulo(user_id: str, partitions: int, expected: int) -> None:
    assert keys.partition_of(user_id, partitions) == expected


def test_partitions_must_be_positive() -> None:
    with pytest.raises(ValueError, match="partitions"):
        keys.partition_of("u", 0)


def test_events_streams_lists_every_partition() -> None:
    assert keys.events_streams(3) == ["events:{0}", "events:{1}", "events:{2}"]
