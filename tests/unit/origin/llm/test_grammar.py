"""The explanation's GBNF grammar: its bounds, and the largest answer it admits is one the
parser accepts (llama.cpp itself runs it in tests/integration/test_local_llm.py)."""

from __future__ import annotations

import json

import pytest

from origin.llm import grammar, response
from origin.llm.grammar import EXPLANATION_GRAMMAR, explanation_grammar


def test_the_grammar_writes_the_three_keys_in_order_with_bounded_strings() -> None:
    rules = dict(line.split(" ::= ", 1) for line in EXPLANATION_GRAMMAR.splitlines())
    assert set(rules) == {"root", "factor", "weight", "name", "headline", "detailed", "description"}
    assert rules["root"].startswith(r'"{\"headline\":\"" headline "\",\"detailed\":\"" detailed')
    assert f"{{0,{grammar.MAX_FACTORS - 1}}}" in rules["root"]
    assert rules["weight"] == r'"0." [0-9] [0-9]? | "1.0"'
    assert rules["name"].endswith(f"{{1,{grammar.FACTOR_NAME_CHARS}}}")
    assert rules["headline"].endswith(f"{{0,{grammar.HEADLINE_CHARS - 1}}}")
    assert rules["detailed"].endswith(f"{{0,{grammar.DETAILED_CHARS - 1}}}")
    assert rules["description"].endswith(f"{{0,{grammar.DESCRIPTION_CHARS}}}")


@pytest.mark.parametrize("weight", ["0.0", "0.05", "0.99", "1.0"])
def test_the_largest_answer_the_grammar_admits_parses(weight: str) -> None:
    factor = (
        f'{{"name":"{"n" * grammar.FACTOR_NAME_CHARS}","weight":{weight},'
        f'"description":"{"d" * grammar.DESCRIPTION_CHARS}"}}'
    )
    answer = (
        f'{{"headline":"{"h" * grammar.HEADLINE_CHARS}",'
        f'"detailed":"{"x" * grammar.DETAILED_CHARS}",'
        f'"factors":[{",".join([factor] * grammar.MAX_FACTORS)}]}}'
    )
    explanation = response.parse(answer, model="local")
    assert len(explanation.factors) == grammar.MAX_FACTORS
    assert explanation.factors[0].weight == json.loads(weight)


@pytest.mark.parametrize(
    "bounds",
    [
        {"headline_chars": response.MAX_HEADLINE_CHARS + 1},
        {"detailed_chars": 0},
        {"name_chars": response.MAX_FACTOR_NAME_CHARS + 1},
        {"description_chars": response.MAX_FACTOR_DESCRIPTION_CHARS + 1},
        {"max_factors": response.MAX_FACTORS + 1},
        {"max_factors": 0},
    ],
)
def test_bounds_beyond_what_the_parser_accepts_are_refused(bounds: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=r"within what response\.parse accepts"):
        explanation_grammar(**bounds)
