"""A replica's client of the catalog origin, over httpx's ``MockTransport`` (the seam at
the transport): what it asks, what it takes, and how long it waits at start."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from origin.catalog.item_index import ItemIndex
from origin.catalog.replica import RETRY_CAP_S, CatalogOrigin, load_at_start
from origin.catalog.replication import CatalogMark
from origin.catalog.snapshot import ITEMS_PATH, MEDIA_TYPE, SNAPSHOT_PATH, encode_frames
from origin.exceptions import CatalogOriginError
from tests.fakes import FakeClock
from tests.unit.catalogs import make_catalog

DIM = 16
MARK = CatalogMark(5, "items")
INDEX: ItemIndex = make_catalog(40, seed=1, dim=DIM).index()


def snapshot_response(rows: list[int] | None = None) -> httpx.Response:
    body = b"".join(encode_frames(INDEX, MARK, rows))
    return httpx.Response(200, content=body, headers={"content-type": MEDIA_TYPE})


def client(handler: httpx.MockTransport, token: str | None = "svc") -> CatalogOrigin:
    return CatalogOrigin("http://catalog-origin/", dim=DIM, token=token, transport=handler)


async def test_everything_and_some_items_are_asked_as_the_routes_want() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == SNAPSHOT_PATH:
            return snapshot_response()
        ids = json.loads(request.content)["item_ids"]
        return snapshot_response([INDEX.row_of[i] for i in ids if i in INDEX.row_of])

    source = client(httpx.MockTransport(answer))
    whole = await source.snapshot()
    assert (whole.mark, whole.items) == (MARK, INDEX.items)
    wanted = [INDEX.items[3].item_id, "gone"]
    some = await source.items(wanted)
    assert [i.item_id for i in some.items] == [INDEX.items[3].item_id]
    await source.aclose()
    assert [(r.method, r.url.path) for r in seen] == [("GET", SNAPSHOT_PATH), ("POST", ITEMS_PATH)]
    for request in seen:
        assert request.headers["authorization"] == "Bearer svc"
        assert request.headers["accept"] == MEDIA_TYPE
    assert json.loads(seen[1].content) == {"item_ids": wanted}


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (httpx.Response(401, json={"error": "unauthorized"}), "answered 401 to GET"),
        (httpx.Response(200, content=b"\xc1"), "not msgpack"),
        (httpx.Response(200, content=b""), "cut short"),
    ],
)
async def test_an_answer_that_is_no_catalog_is_an_error(
    response: httpx.Response, problem: str
) -> None:
    source = client(httpx.MockTransport(lambda _: response))
    with pytest.raises(CatalogOriginError, match=problem):
        await source.snapshot()
    await source.aclose()


def refusing_then_answering(failures: int) -> tuple[httpx.MockTransport, list[int]]:
    calls = [0]

    def answer(request: httpx.Request) -> httpx.Response:
        calls[0] += 1
        if calls[0] <= failures:
            raise httpx.ConnectError("connection refused", request=request)
        return snapshot_response()

    return httpx.MockTransport(answer), calls


class Sleeps:
    """``sleep`` for the code under test: records each pause and moves the clock by it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.tick(seconds)


@pytest.mark.parametrize("failures", [0, 1, 4, 12])
async def test_a_starting_replica_asks_again_until_the_catalog_origin_answers(
    failures: int,
) -> None:
    transport, calls = refusing_then_answering(failures)
    clock = FakeClock()
    sleeps = Sleeps(clock)
    source = client(transport)
    snapshot = await load_at_start(source, 60.0, clock=clock, sleep=sleeps, rng=random.Random(1))
    await source.aclose()
    assert snapshot.items == INDEX.items
    assert calls[0] == failures + 1
    assert len(sleeps.pauses) == failures
    # equal jitter on a doubling step from 0.1 s: at least half of each step, at most the cap
    for attempt, pause in enumerate(sleeps.pauses):
        step = min(RETRY_CAP_S, 0.1 * 2**attempt)
        assert step / 2 <= pause <= step


async def test_a_starting_replica_gives_up_after_its_wait() -> None:
    transport, calls = refusing_then_answering(10**6)
    clock = FakeClock()
    sleeps = Sleeps(clock)
    source = client(transport)
    started = clock()
    with pytest.raises(CatalogOriginError, match=r"within 5s \(PERSO_CATALOG_ORIGIN_WAIT_S\)"):
        await load_at_start(source, 5.0, clock=clock, sleep=sleeps, rng=random.Random(1))
    await source.aclose()
    assert clock() - started == pytest.approx(5.0)  # the last pause cut to what was left
    assert calls[0] == len(sleeps.pauses) + 1
