"""Where the operations page's scraper may go (``protocol.scrape_networks``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from config.settings import Settings
from protocol.scrape_networks import (
    DEFAULT_NETWORKS,
    host_of,
    literal_address,
    parse_networks,
    refusal,
)

DEFAULT = parse_networks(DEFAULT_NETWORKS)
OUTSIDE = "is outside PERSO_OPS_SCRAPE_NETWORKS"


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1:8101", "127.0.0.1"),
        ("https://edge-1.perso.internal", "edge-1.perso.internal"),
        ("http://[::1]:8100", "::1"),
        ("http://u:p@127.0.0.1:8101", None),  # credentials
        ("http://u@10.0.0.5", None),
        ("ftp://10.0.0.5", None),
        ("file:///etc/passwd", None),
        ("http://", None),
        ("http://[::1", None),  # not a URL
    ],
)
def test_the_host_of_a_url_the_scraper_takes(url: str, host: str | None) -> None:
    assert host_of(url) == host


@pytest.mark.parametrize(
    ("addresses", "outside"),
    [
        (["127.0.0.1"], None),
        (["10.1.2.3", "192.168.0.9"], None),
        (["172.16.0.1"], None),
        (["172.32.0.1"], "172.32.0.1"),  # past 172.16/12
        (["::1"], None),
        (["fd00::5"], None),  # unique local
        (["::ffff:10.0.0.1"], None),  # IPv4-mapped: read as the IPv4 address
        (["::ffff:169.254.169.254"], "169.254.169.254"),
        (["fe80::1%eth0"], "fe80::1"),  # link-local, zone dropped
        (["169.254.169.254"], "169.254.169.254"),  # a cloud's metadata service
        (["8.8.8.8"], "8.8.8.8"),
        (["10.0.0.1", "8.8.8.8"], "8.8.8.8"),  # a name is taken only if all its are in
    ],
)
def test_an_address_outside_the_default_networks_is_refused(
    addresses: list[str], outside: str | None
) -> None:
    why = refusal(addresses, DEFAULT)
    assert why == (None if outside is None else f"{outside} {OUTSIDE}")


def test_a_name_without_address_is_refused() -> None:
    assert refusal([], DEFAULT) == "no address"


@pytest.mark.parametrize(
    ("host", "literal"), [("10.0.0.1", True), ("::1", True), ("edge-1", False), ("1.2.3", False)]
)
def test_a_literal_address_is_told_from_a_name(host: str, literal: bool) -> None:
    assert (literal_address(host) is not None) is literal


def test_networks_are_parsed_and_a_bad_one_is_named() -> None:
    assert [str(n) for n in parse_networks([" 10.0.0.0/8", "192.0.2.7", "fd00::/8"])] == [
        "10.0.0.0/8",
        "192.0.2.7/32",
        "fd00::/8",
    ]
    assert str(parse_networks(["10.1.2.3/8"])[0]) == "10.0.0.0/8"  # host bits dropped
    with pytest.raises(ValueError, match="not an IP network: 'ten'"):
        parse_networks(["10.0.0.0/8", "ten"])


def test_the_setting_is_a_comma_separated_list_checked_at_start() -> None:
    settings = Settings(ops_scrape_networks="10.0.0.0/8, 127.0.0.1")  # type: ignore[arg-type]
    assert settings.ops_scrape_networks == ("10.0.0.0/8", "127.0.0.1")
    assert Settings().ops_scrape_networks == DEFAULT_NETWORKS
    with pytest.raises(ValidationError, match="ops_scrape_networks"):
        Settings(ops_scrape_networks="10.0.0.0/8,nope")  # type: ignore[arg-type]
