"""Geo buckets of the segment cache key: where a request comes from, coarse enough to share
entries."""

from __future__ import annotations

from protocol.api import Geo

GLOBAL = "global"

_US_WEST = frozenset("WA OR CA NV AZ UT ID MT WY CO NM AK HI".split())
_US_CENTRAL = frozenset("TX OK KS NE SD ND MN IA MO AR LA WI IL".split())

_COUNTRY_BUCKETS: dict[str, str] = {
    **dict.fromkeys("CA".split(), "canada"),
    **dict.fromkeys("MX BR AR CL CO PE UY EC VE BO PY CR PA GT DO".split(), "latam"),
    **dict.fromkeys("GB IE FR ES PT BE NL LU".split(), "eu-west"),
    **dict.fromkeys("DE AT CH IT PL CZ HU SK SI HR RO BG GR".split(), "eu-central"),
    **dict.fromkeys("SE NO FI DK IS EE LV LT".split(), "eu-north"),
    **dict.fromkeys("AE SA IL TR EG ZA NG KE MA QA KW".split(), "mea"),
    **dict.fromkeys("IN PK BD LK SG MY TH ID PH VN".split(), "ap-south"),
    **dict.fromkeys("JP KR CN TW HK".split(), "ap-northeast"),
    **dict.fromkeys("AU NZ".split(), "oceania"),
}

BUCKETS = frozenset({"us-west", "us-central", "us-east", GLOBAL, *_COUNTRY_BUCKETS.values()})


def geo_bucket(geo: Geo | None, default: str) -> str:
    """The bucket of a request's location; ``default`` (the edge's own) when it has none."""
    if geo is None or geo.country is None:
        return default
    if geo.country == "US":
        region = (geo.region or "").upper()
        if region in _US_WEST:
            return "us-west"
        if region in _US_CENTRAL:
            return "us-central"
        return "us-east"
    return _COUNTRY_BUCKETS.get(geo.country, GLOBAL)


def default_bucket(region: str) -> str:
    """The bucket an edge assumes for requests without a location: its region's, if the
    region is named like a bucket."""
    return region if region in BUCKETS else GLOBAL
