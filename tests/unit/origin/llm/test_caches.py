"""The response cache's explanation codec and the caches' key digests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from origin.llm.caches import (
    decode_explanation,
    encode_explanation,
    prompt_digest,
    response_digest,
)
from origin.llm.model import Explanation, Factor, Prompt

EXPLANATION = Explanation(
    headline="Aurora Headphones — made for you",
    detailed="Close to what you viewed.",
    factors=(Factor("category_match", 0.8, "Matches"), Factor("popularity", 1, "Popular")),
    llm_generated=True,
    model="small-model",
)


@pytest.mark.parametrize(
    "explanation",
    [
        EXPLANATION,
        Explanation("Trending now", "Popular today.", (), llm_generated=False, model=None),
    ],
)
def test_round_trip(explanation: Explanation) -> None:
    assert decode_explanation(encode_explanation(explanation)) == explanation


def good() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(encode_explanation(EXPLANATION))
    return data


def variant(**changes: Any) -> bytes:
    data = good()
    for key, value in changes.items():
        if value is ...:
            del data[key]
        else:
            data[key] = value
    return json.dumps(data).encode()


def factor(**changes: Any) -> bytes:
    data = good()
    data["factors"][0].update(changes)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x80\x81", id="not utf-8"),
        pytest.param(b"[]", id="list"),
        pytest.param(variant(v=2), id="other version"),
        pytest.param(variant(v=True), id="bool version"),
        pytest.param(variant(headline=...), id="missing field"),
        pytest.param(variant(extra=1), id="unknown field"),
        pytest.param(variant(headline=3), id="headline not str"),
        pytest.param(variant(llm_generated="yes"), id="flag not bool"),
        pytest.param(variant(model=5), id="model not str"),
        pytest.param(variant(factors={}), id="factors not list"),
        pytest.param(factor(weight=1.5), id="weight above 1"),
        pytest.param(factor(weight=-0.1), id="weight below 0"),
        pytest.param(factor(weight=True), id="weight bool"),
        pytest.param(factor(weight="0.5"), id="weight str"),
        pytest.param(factor(name=None), id="factor name"),
        pytest.param(factor(extra="x"), id="factor unknown field"),
        pytest.param(
            b'{"v":1,"headline":"h","detailed":"d","factors":[{"name":"n","weight":NaN,'
            b'"description":"d"}],"llm_generated":true,"model":null}',
            id="weight NaN",
        ),
    ],
)
def test_anything_else_decodes_to_none(raw: bytes) -> None:
    assert decode_explanation(raw) is None


def test_digests_separate_their_parts() -> None:
    assert response_digest("ab", "c", "s", "concise") != response_digest("a", "bc", "s", "concise")
    assert response_digest("a", "b", "s", "concise") != response_digest("a", "b", "s", "detailed")
    prompt = Prompt("sys", "user", 100, 10)
    assert prompt_digest(prompt, "small") != prompt_digest(prompt, "large")
    assert prompt_digest(prompt, "small") != prompt_digest(Prompt("sys", "user", 200, 10), "small")
    assert prompt_digest(prompt, "small") == prompt_digest(Prompt("sys", "user", 100, 99), "small")
