"""Parsing the model's answer (the response parser): the JSON explanation the prompt
asks for, validated strictly, or ``InvalidLlmResponse`` naming what was wrong (the tier
then retries once and falls back to templates).

An answer the server cut at ``max_tokens`` (``finish_reason == "length"``) is refused
whatever its text: it is not the whole answer, even when what was written happens to parse
(a model held to a grammar can be cut inside a string and still close nothing, or be cut
after a complete object it meant to continue).

Tolerated: whitespace around the object, and one Markdown code fence around it (models add
both). Anything else around the object is an error. Keys other than the three asked for
are ignored: only validated fields reach the explanation.
"""

from __future__ import annotations

import json
import math
import re

from origin.exceptions import InvalidLlmResponse
from origin.llm.model import Completion, Explanation, Factor

MAX_HEADLINE_CHARS = 200
MAX_DETAILED_CHARS = 1000
MAX_FACTOR_NAME_CHARS = 64
MAX_FACTOR_DESCRIPTION_CHARS = 300
MIN_FACTORS = 1
MAX_FACTORS = 8

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)


def from_completion(completion: Completion) -> Explanation:
    """The explanation in a model server's answer: a whole answer (not cut at
    ``max_tokens``) that ``parse`` accepts."""
    if completion.finish_reason == "length":
        raise InvalidLlmResponse(
            f"cut at max_tokens (finish_reason length, {completion.output_tokens} tokens)"
        )
    return parse(completion.content, model=completion.model)


def parse(content: str, *, model: str) -> Explanation:
    """The explanation in ``content``, written by ``model`` (``llm_generated``)."""
    data = _load(content)
    if not isinstance(data, dict):
        raise InvalidLlmResponse(f"expected a JSON object, got {type(data).__name__}")
    headline = _text(data, "headline", MAX_HEADLINE_CHARS)
    detailed = _text(data, "detailed", MAX_DETAILED_CHARS)
    factors = data.get("factors")
    if not isinstance(factors, list):
        raise InvalidLlmResponse("factors: expected a list")
    if not MIN_FACTORS <= len(factors) <= MAX_FACTORS:
        raise InvalidLlmResponse(
            f"factors: expected {MIN_FACTORS} to {MAX_FACTORS}, got {len(factors)}"
        )
    return Explanation(
        headline=headline,
        detailed=detailed,
        factors=tuple(_factor(i, f) for i, f in enumerate(factors)),
        llm_generated=True,
        model=model,
    )


def _load(content: str) -> object:
    body = content.strip()
    if body.startswith("```"):
        fenced = _FENCE.fullmatch(body)
        if fenced is None:
            raise InvalidLlmResponse("an unterminated code fence, or text after it")
        body = fenced.group(1).strip()
    if not body:
        raise InvalidLlmResponse("empty message")
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidLlmResponse(f"not JSON: {exc.msg} at char {exc.pos}") from exc


def _reject_constant(name: str) -> object:
    raise InvalidLlmResponse(f"not JSON: {name}")


def _text(data: dict[str, object], key: str, limit: int, *, where: str = "") -> str:
    value = data.get(key)
    label = f"{where}{key}"
    if not isinstance(value, str):
        raise InvalidLlmResponse(f"{label}: expected a string")
    text = value.strip()
    if not text:
        raise InvalidLlmResponse(f"{label}: empty")
    if len(text) > limit:
        raise InvalidLlmResponse(f"{label}: {len(text)} chars, at most {limit}")
    return text


def _factor(index: int, value: object) -> Factor:
    where = f"factors[{index}]."
    if not isinstance(value, dict):
        raise InvalidLlmResponse(f"factors[{index}]: expected an object")
    name = _text(value, "name", MAX_FACTOR_NAME_CHARS, where=where)
    weight = value.get("weight")
    # bool is an int to Python, not a number to JSON.
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise InvalidLlmResponse(f"{where}weight: expected a number")
    if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
        raise InvalidLlmResponse(f"{where}weight: {weight} outside [0, 1]")
    description = value.get("description")
    if not isinstance(description, str):
        raise InvalidLlmResponse(f"{where}description: expected a string")
    description = description.strip()
    if len(description) > MAX_FACTOR_DESCRIPTION_CHARS:
        raise InvalidLlmResponse(
            f"{where}description: {len(description)} chars, at most {MAX_FACTOR_DESCRIPTION_CHARS}"
        )
    return Factor(name=name, weight=float(weight), description=description)
