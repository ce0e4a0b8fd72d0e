"""The configuration page's notes on the LLM tier: models, servers, budgets, caching
and the local model server.

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

LLM_NOTES: dict[str, Note] = {
    "PERSO_LLM_SMALL_MODEL": Note(
        "origin",
        "the model for simple explanations",
        default="`perso up --llm local`: `smollm2-135m-instruct`, and the large one too",
    ),
    "PERSO_LLM_LARGE_MODEL": Note(
        "origin", "the model for complex reasoning (cold start, cross-domain, conversational)"
    ),
    "PERSO_LLM_LARGE_BASE_URL": Note(
        "origin", "where the large model runs, if elsewhere", default="`LLM_BASE_URL`"
    ),
    "PERSO_LLM_TIMEOUT_MS": Note(
        "origin",
        "the model call's deadline (the LLM latency budget), a retry included",
        default="`perso up --llm local`: `10000`",
    ),
    "PERSO_LLM_DAILY_BUDGET_USD": Note(
        "origin", "spend per UTC day across all origins; then templates only"
    ),
    "PERSO_LLM_SMALL_USD_PER_1K_TOKENS": Note(
        "origin", "the small model's price, input and output tokens alike"
    ),
    "PERSO_LLM_LARGE_USD_PER_1K_TOKENS": Note("origin", "the large model's price"),
    "PERSO_LLM_RATE_PER_S": Note(
        "origin", "model calls per second per origin process (then templates)"
    ),
    "PERSO_LLM_CACHE_TTL_S": Note(
        "origin, edge",
        "prompt and response caches; at an edge, how long a segment explanation is cached",
    ),
    "PERSO_LLM_PRECOMPUTE_EVERY_S": Note(
        "origin", "how often the elected origin warms segment explanations (0: never)"
    ),
    "PERSO_LLM_OUTPUT_CONSTRAINT": Note(
        "origin",
        "how the model is held to the explanation's JSON: OpenAI's JSON mode (any server), or "
        "`gbnf`, a grammar of its exact shape in llama.cpp's `grammar` field ([LLM "
        "tier](architecture/llm-tier.md))",
        default="`perso up --llm local`: `gbnf`",
    ),
    "PERSO_LLM_SPECULATE": Note(
        "origin",
        "start the model for a personalize request's likeliest top item while it ranks "
        "(speculative execution); off for a model slower than a personalize request may "
        "wait",
        default="`perso up --llm local`: `false`",
    ),
    "PERSO_LLM_LOCAL_THREADS": Note(
        "up",
        "threads of the local model server of `perso up --llm local` (decoding and prompt reading)",
    ),
}
