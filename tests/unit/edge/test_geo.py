from __future__ import annotations

import pytest

from edge.geo import GLOBAL, default_bucket, geo_bucket
from protocol.api import Geo


@pytest.mark.parametrize(
    ("geo", "expected"),
    [
        (None, "us-east"),  # no location: the edge's own bucket
        (Geo(), "us-east"),
        (Geo(country="US", region="CA", city="San Francisco"), "us-west"),
        (Geo(country="US", region="tx"), "us-central"),
        (Geo(country="US", region="NY"), "us-east"),
        (Geo(country="US"), "us-east"),
        (Geo(country="CA"), "canada"),
        (Geo(country="GB"), "eu-west"),
        (Geo(country="de"), "eu-central"),
        (Geo(country="SE"), "eu-north"),
        (Geo(country="IN"), "ap-south"),
        (Geo(country="JP"), "ap-northeast"),
        (Geo(country="AU"), "oceania"),
        (Geo(country="BR"), "latam"),
        (Geo(country="ZA"), "mea"),
        (Geo(country="AQ"), GLOBAL),
    ],
)
def test_geo_bucket(geo: Geo | None, expected: str) -> None:
    assert geo_bucket(geo, default="us-east") == expected


@pytest.mark.parametrize(
    ("region", "expected"), [("us-east", "us-east"), ("eu-west", "eu-west"), ("mars-1", GLOBAL)]
)
def test_default_bucket(region: str, expected: str) -> None:
    assert default_bucket(region) == expected
