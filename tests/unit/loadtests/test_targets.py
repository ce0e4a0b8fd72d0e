from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadtests.exceptions import TargetsError
from loadtests.targets import (
    Targets,
    from_stack,
    is_loopback,
    make_targets,
    parse_edges,
    read_stack,
    route,
)

STACK: dict[str, Any] = {
    "origin_url": "http://127.0.0.1:8100",
    "api_key": "demo",
    "edges": {"us-east": "http://127.0.0.1:8101", "eu-west": "http://127.0.0.1:8102"},
}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        # No edge_urls (a stack file before the PoPs): one edge per region.
        ({}, {"us-east": ("http://127.0.0.1:8101",), "eu-west": ("http://127.0.0.1:8102",)}),
        # edge_urls present: every process of a region, in order; edges is ignored.
        (
            {
                "edge_urls": {
                    "us-east": ["http://127.0.0.1:8101", "http://127.0.0.1:8111/"],
                    "eu-west": ["http://127.0.0.1:8102"],
                }
            },
            {
                "us-east": ("http://127.0.0.1:8101", "http://127.0.0.1:8111"),
                "eu-west": ("http://127.0.0.1:8102",),
            },
        ),
        # An empty edge_urls falls back to edges.
        ({"edge_urls": {}}, {"us-east": ("http://127.0.0.1:8101",), "eu-west": ("http://127.0.0.1:8102",)}),
    ],
)  # fmt: skip
def test_a_stack_file_names_every_edge_of_each_region(
    extra: dict[str, Any], expected: dict[str, tuple[str, ...]]
) -> None:
    targets = from_stack({**STACK, **extra}, "stack.json")
    assert dict(targets.edges) == expected
    assert targets.origin_url == "http://127.0.0.1:8100"
    assert targets.api_key == "demo"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"edges": {}}, "neither 'edge_urls' nor 'edges'"),
        ({"origin_url": ""}, "no 'origin_url'"),
        ({"api_key": None}, "no 'api_key'"),
        ({"edges": {"us east": "http://127.0.0.1:1"}}, "region 'us east'"),
        ({"edges": {"us-east": "127.0.0.1:8101"}}, "edge of us-east: '127.0.0.1:8101'"),
        ({"edges": {"us-east": "ftp://127.0.0.1:8101"}}, "is not an http(s) URL"),
        ({"edges": {"us-east": "http://127.0.0.1:1?x=1"}}, "has a query"),
        ({"origin_url": "http://"}, "origin: 'http://'"),
        ({"edge_urls": {"us-east": []}}, "region us-east has no edge URL"),
        (
            {"edge_urls": {"a": ["http://127.0.0.1:1"], "b": ["http://127.0.0.1:1/"]}},
            "edge http://127.0.0.1:1 is listed twice",
        ),
    ],
)
def test_a_bad_stack_file_is_refused_naming_the_fault(change: dict[str, Any], message: str) -> None:
    with pytest.raises(TargetsError, match=r"^stack\.json: ") as caught:
        from_stack({**STACK, **change}, "stack.json")
    assert message in str(caught.value)


def test_read_stack_says_what_is_wrong_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(TargetsError, match="not found: start the stack with `perso up`"):
        read_stack(tmp_path / "stack.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(TargetsError, match="not a readable JSON stack file"):
        read_stack(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(TargetsError, match="not a JSON object"):
        read_stack(tmp_path / "list.json")
    (tmp_path / "ok.json").write_text(json.dumps(STACK))
    assert read_stack(tmp_path / "ok.json").regions == ["us-east", "eu-west"]


def test_targets_written_as_a_stack_file_read_back_the_same() -> None:
    targets = make_targets(
        {"us-east": ["http://127.0.0.1:1", "http://127.0.0.1:2"], "eu-west": ["http://[::1]:3"]},
        "http://127.0.0.1:4",
        "key",
        source="options",
    )
    assert from_stack(targets.to_json(), "targets.json") == targets
    assert targets.to_json()["edges"] == {
        "us-east": "http://127.0.0.1:1",
        "eu-west": "http://[::1]:3",
    }


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["us-east=http://a:1"], {"us-east": ["http://a:1"]}),
        (
            ["us-east=http://a:1, http://a:2,", "eu-west = http://b:1"],
            {"us-east": ["http://a:1", "http://a:2"], "eu-west": ["http://b:1"]},
        ),
        ([], {}),
    ],
)
def test_parse_edges(values: list[str], expected: dict[str, list[str]]) -> None:
    assert parse_edges(values) == expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["http://a:1"], "expected REGION=URL"),
        (["us-east="], "expected REGION=URL"),
        (["=http://a:1"], "expected REGION=URL"),
        (["us-east=http://a:1", "us-east=http://a:2"], "region us-east given twice"),
    ],
)
def test_parse_edges_refuses(values: list[str], message: str) -> None:
    with pytest.raises(TargetsError, match=message):
        parse_edges(values)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("localhost", True),
        ("::1", True),
        ("10.0.0.1", False),
        ("0.0.0.0", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_not_loopback_lists_every_far_address() -> None:
    targets = make_targets(
        {"us-east": ["http://127.0.0.1:1", "https://edge.example.com"]},
        "https://origin.example.com",
        "key",
        source="options",
    )
    assert targets.not_loopback() == ["https://origin.example.com", "https://edge.example.com"]


TWO_REGIONS = Targets(
    {"us-east": ("http://e1", "http://e2", "http://e3"), "eu-west": ("http://w1",)},
    "http://origin",
    "key",
)


@pytest.mark.parametrize(
    ("only_region", "numbers", "expected"),
    [
        # A region's worker: every user in its region, over its edge processes in turn.
        (
            "us-east",
            range(4),
            [("us-east", "http://e1"), ("us-east", "http://e2"), ("us-east", "http://e3"),
             ("us-east", "http://e1")],
        ),
        ("eu-west", range(3), [("eu-west", "http://w1")] * 3),
        # One process for all regions: regions in turn, then each region's edges in turn.
        (
            None,
            range(6),
            [("us-east", "http://e1"), ("eu-west", "http://w1"), ("us-east", "http://e2"),
             ("eu-west", "http://w1"), ("us-east", "http://e3"), ("eu-west", "http://w1")],
        ),
    ],
)  # fmt: skip
def test_route_keeps_a_workers_users_in_its_region(
    only_region: str | None, numbers: range, expected: list[tuple[str, str]]
) -> None:
    assert [route(TWO_REGIONS, only_region, n) for n in numbers] == expected


def test_route_refuses_a_region_without_edges() -> None:
    with pytest.raises(TargetsError, match="ap-south is not one of us-east, eu-west"):
        route(TWO_REGIONS, "ap-south", 0)
