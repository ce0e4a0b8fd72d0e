from __future__ import annotations

import csv
from pathlib import Path

import pytest

from loadtests.report import (
    REGION_ROW,
    Figures,
    aggregated,
    exception_count,
    read_rows,
    region_figures,
    region_of,
    request_name,
    table,
)

# The header of Locust 2.47's ``*_stats.csv``, as it writes it.
HEADER = (
    "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
    "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
    "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%"
)
# Rows as a distributed run wrote them (two regions, one without requests: no row).
ROWS = [
    "region,ap-south,76,2,13,15.0,0.87,48.5,3705.1,7.60364854408737,0.2,13,17,20,24,32,39,48,49,49,49,49",
    "POST,ap-south feedback,21,0,7,8.9,3.7,25.9,54.0,2.1,0.0,7,8,9,11,15,17,26,26,26,26,26",
    "POST,ap-south personalize,55,2,16,17.3,0.9,48.5,5099,5.5,0.2,16,19,24,25,39,40,48,49,49,49,49",
    "POST,auth token,12,0,27,21.6,4.7,43.0,301.0,1.2,0.0,27,30,33,33,33,43,43,43,43,43,43",
    "region,eu-west,0,0,0,0,0,0,0,0.0,0.0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A",
    ",Aggregated,88,2,13,14.6,0.87,48.5,3424.8,8.8,0.2,13,17,20,23,32,39,43,48,50,50,50",
]  # fmt: skip


def rows() -> list[dict[str, str]]:
    return list(csv.DictReader([HEADER, *ROWS]))


def test_region_figures_are_the_region_rows_in_the_regions_order() -> None:
    assert region_figures(rows(), ["us-east", "ap-south", "eu-west"]) == [
        Figures("us-east", 0, 0, 0.0, None, None, None),  # no row at all: no request
        Figures("ap-south", 76, 2, 7.60364854408737, 13.0, 39.0, 49.0),
        Figures("eu-west", 0, 0, 0.0, None, None, None),  # Locust's N/A
    ]


def test_aggregated_is_locusts_total() -> None:
    assert aggregated(rows()) == Figures("all requests", 88, 2, 8.8, 13.0, 39.0, 48.0)
    assert aggregated(rows()[:-1]) is None


def test_rows_read_back_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "locust_stats.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n")
    assert read_rows(path) == rows()


@pytest.mark.parametrize(
    ("name", "region"),
    [
        ("us-east personalize", "us-east"),
        ("eu-west feedback", "eu-west"),
        ("auth token", None),  # to the origin, no region's
        ("us-east", None),  # a region row's own name, not a request
        ("ap-south personalize", None),  # not one of the regions given
        ("us-eastern personalize", None),
    ],
)
def test_region_of(name: str, region: str | None) -> None:
    assert region_of(name, ["us-east", "eu-west"]) == region


def test_request_names_carry_their_region() -> None:
    assert region_of(request_name("eu-west", "personalize"), ["eu-west"]) == "eu-west"
    assert REGION_ROW == "region"


@pytest.mark.parametrize(("counts", "expected"), [([], 0), (["3"], 3), (["3", "10"], 13)])
def test_exception_count(counts: list[str], expected: int) -> None:
    assert exception_count([{"Count": c, "Message": "boom"} for c in counts]) == expected


def test_table_lines_up_the_figures() -> None:
    text = table(
        [
            Figures("us-east", 1234, 5, 20.56, 12.0, 40.0, 81.0),
            Figures("eu-west", 0, 0, 0.0, None, None, None),
        ]
    )
    lines = text.splitlines()
    assert lines[0].split() == ["region", "requests", "failures", "rps", "p50", "ms", "p95", "ms",
                                "p99", "ms"]  # fmt: skip
    assert lines[2].split() == ["us-east", "1,234", "5", "20.6", "12", "40", "81"]
    assert lines[3].split() == ["eu-west", "0", "0", "0.0", "-", "-", "-"]
    assert len({len(line) for line in lines}) == 1
