from __future__ import annotations

import json

import pytest

from origin.exceptions import InvalidLlmResponse, OriginError
from origin.llm.model import Completion, Explanation, Factor
from origin.llm.response import from_completion, parse

FIRST: dict[str, object] = {
    "name": "category_affinity",
    "weight": 0.4,
    "description": "You viewed 15 of these",
}
SECOND: dict[str, object] = {"name": "price_match", "weight": 1, "description": ""}
GOOD: dict[str, object] = {
    "headline": "Recommended because you love electronics",
    "detailed": "It matches your preference for mid-range electronics.",
    "factors": [FIRST, SECOND],
}
GOOD_TEXT = json.dumps(GOOD)
EXPECTED = Explanation(
    headline="Recommended because you love electronics",
    detailed="It matches your preference for mid-range electronics.",
    factors=(
        Factor("category_affinity", 0.4, "You viewed 15 of these"),
        Factor("price_match", 1.0, ""),
    ),
    llm_generated=True,
    model="llama-3.1-8b-instruct",
)


def with_(**changes: object) -> str:
    return json.dumps({**GOOD, **changes})


def with_factor(**changes: object) -> str:
    return with_(factors=[{**FIRST, **changes}])


def without_factor_key(key: str) -> str:
    factor = dict(FIRST)
    del factor[key]
    return with_(factors=[factor])


@pytest.mark.parametrize(
    "content",
    [
        GOOD_TEXT,
        f"  \n{GOOD_TEXT}\n\n",
        f"```json\n{GOOD_TEXT}\n```",
        f"```\n{GOOD_TEXT}\n```",
        f"\n```json\n{json.dumps(GOOD, indent=2)}\n```  \n",
        f"```json {GOOD_TEXT}```",
        with_(extra="ignored"),
        with_(headline="  Recommended because you love electronics  "),
    ],
)
def test_valid(content: str) -> None:
    assert parse(content, model="llama-3.1-8b-instruct") == EXPECTED


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "empty message"),
        ("   ", "empty message"),
        ("```json\n```", "empty message"),
        ("Sure! Here it is: " + GOOD_TEXT, "not JSON"),
        (GOOD_TEXT + "\nHope this helps!", "not JSON"),
        (f"```json\n{GOOD_TEXT}\n``` Hope this helps", "code fence"),
        (f"```json\n{GOOD_TEXT}", "code fence"),
        ("{'headline': 'single quotes'}", "not JSON"),
        ('{"headline": NaN}', "not JSON: NaN"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('"a string"', "expected a JSON object, got str"),
        ("null", "expected a JSON object, got NoneType"),
        # headline and detailed
        (with_(headline=None), "headline: expected a string"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "headline"}), "headline: expected"),
        (with_(headline=""), "headline: empty"),
        (with_(headline="  \n "), "headline: empty"),
        (with_(headline=7), "headline: expected a string"),
        (with_(headline="x" * 201), "headline: 201 chars, at most 200"),
        (with_(detailed=["a"]), "detailed: expected a string"),
        (with_(detailed=""), "detailed: empty"),
        (with_(detailed="x" * 1001), "detailed: 1001 chars, at most 1000"),
        # factors
        (json.dumps({k: v for k, v in GOOD.items() if k != "factors"}), "factors: expected a list"),
        (with_(factors={"name": "x"}), "factors: expected a list"),
        (with_(factors=[]), "factors: expected 1 to 8, got 0"),
        (with_(factors=[FIRST] * 9), "factors: expected 1 to 8, got 9"),
        (with_(factors=["category_affinity"]), "factors[0]: expected an object"),
        (with_factor(name=""), "factors[0].name: empty"),
        (with_factor(name=3), "factors[0].name: expected a string"),
        (with_factor(name="x" * 65), "factors[0].name: 65 chars, at most 64"),
        (without_factor_key("name"), "factors[0].name: expected a string"),
        (with_factor(weight=True), "factors[0].weight: expected a number"),
        (with_factor(weight="0.4"), "factors[0].weight: expected a number"),
        (with_factor(weight=None), "factors[0].weight: expected a number"),
        (without_factor_key("weight"), "factors[0].weight: expected a number"),
        (with_factor(weight=1.01), "factors[0].weight: 1.01 outside [0, 1]"),
        (with_factor(weight=-0.1), "factors[0].weight: -0.1 outside [0, 1]"),
        (with_factor(weight=2), "factors[0].weight: 2 outside [0, 1]"),
        (with_factor(weight=1e400), "not JSON: Infinity"),
        (with_factor(description=None), "factors[0].description: expected a string"),
        (without_factor_key("description"), "factors[0].description: expected a string"),
        (with_factor(description="x" * 301), "factors[0].description: 301 chars, at most 300"),
        (
            with_(factors=[FIRST, {**SECOND, "weight": "high"}]),
            "factors[1].weight: expected a number",
        ),
    ],
)
def test_invalid(content: str, reason: str) -> None:
    with pytest.raises(InvalidLlmResponse) as caught:
        parse(content, model="m")
    assert reason in str(caught.value)


def test_invalid_response_is_an_origin_error() -> None:
    assert issubclass(InvalidLlmResponse, OriginError)


@pytest.mark.parametrize(("weight", "expected"), [(0, 0.0), (0.0, 0.0), (1, 1.0), (0.25, 0.25)])
def test_weights_become_floats(weight: float, expected: float) -> None:
    explanation = parse(with_factor(weight=weight), model="m")
    assert explanation.factors[0].weight == expected
    assert type(explanation.factors[0].weight) is float


@pytest.mark.parametrize(
    ("finish_reason", "accepted"),
    [("stop", True), (None, True), ("length", False)],
)
def test_a_completion_cut_at_max_tokens_is_refused_even_when_it_parses(
    finish_reason: str | None, accepted: bool
) -> None:
    completion = Completion(
        content=GOOD_TEXT,
        model="llama-3.1-8b-instruct",
        input_tokens=10,
        output_tokens=500,
        elapsed_ms=1.0,
        finish_reason=finish_reason,
    )
    if accepted:
        assert from_completion(completion) == EXPECTED
    else:
        with pytest.raises(InvalidLlmResponse, match="cut at max_tokens"):
            from_completion(completion)
