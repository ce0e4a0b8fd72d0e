"""The explanation's JSON as a GBNF grammar, for model servers that take one (llama.cpp's
``grammar`` field; ``PERSO_LLM_OUTPUT_CONSTRAINT=gbnf``).

Why a grammar rather than OpenAI's JSON-schema response format: measured on llama.cpp's
server with the small local model, a schema's ``maximum: 1`` let weights of 2.0 through
(which ``origin.llm.response`` then refuses) and its flexible whitespace spent tokens on
indentation. The grammar writes the one compact shape ``response.parse`` accepts: the
three keys in order, 1 to ``MAX_FACTORS`` factors, weights ``0.x``, ``0.xx`` or ``1.0``, and
strings without escapes of at most the ``*_CHARS`` below. Those are tighter than what the
parser accepts, on purpose: they bound how many tokens an answer can take, and so how long
a CPU model spends writing it (524 characters of text at most; 116 tokens at the median
measured).
"""

from __future__ import annotations

from origin.llm import response

HEADLINE_CHARS = 100
DETAILED_CHARS = 200
FACTOR_NAME_CHARS = 32
DESCRIPTION_CHARS = 80
MAX_FACTORS = 2

# A JSON string's character without escapes: no quote, no backslash, no control character.
_CHAR = r'[^"\\\x00-\x1f]'


def explanation_grammar(
    *,
    headline_chars: int = HEADLINE_CHARS,
    detailed_chars: int = DETAILED_CHARS,
    name_chars: int = FACTOR_NAME_CHARS,
    description_chars: int = DESCRIPTION_CHARS,
    max_factors: int = MAX_FACTORS,
) -> str:
    """The GBNF text; every answer it admits is one ``response.parse`` accepts."""
    if not (
        1 <= headline_chars <= response.MAX_HEADLINE_CHARS
        and 1 <= detailed_chars <= response.MAX_DETAILED_CHARS
        and 1 <= name_chars <= response.MAX_FACTOR_NAME_CHARS
        and 0 <= description_chars <= response.MAX_FACTOR_DESCRIPTION_CHARS
        and response.MIN_FACTORS <= max_factors <= response.MAX_FACTORS
    ):
        raise ValueError("the grammar's bounds must lie within what response.parse accepts")
    more = max_factors - 1
    return "\n".join(
        (
            r'root ::= "{\"headline\":\"" headline "\",\"detailed\":\"" detailed '
            r'"\",\"factors\":[" factor ("," factor){0,' + str(more) + r'} "]}"',
            r'factor ::= "{\"name\":\"" name "\",\"weight\":" weight '
            r'",\"description\":\"" description "\"}"',
            r'weight ::= "0." [0-9] [0-9]? | "1.0"',
            # A factor's name is a label (the prompt template's "factor_name"): lower case
            # and underscores.
            f"name ::= [a-z_]{{1,{name_chars}}}",
            # A first character that is not a space: parse() strips, and must not find it empty.
            f'headline ::= [^" \\\\\\x00-\\x1f] {_CHAR}{{0,{headline_chars - 1}}}',
            f'detailed ::= [^" \\\\\\x00-\\x1f] {_CHAR}{{0,{detailed_chars - 1}}}',
            f"description ::= {_CHAR}{{0,{description_chars}}}",
        )
    )


EXPLANATION_GRAMMAR = explanation_grammar()
