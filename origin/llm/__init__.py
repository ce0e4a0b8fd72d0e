"""The LLM reasoning tier: explanations and cold-start
reasoning from any OpenAI-compatible model server, with templates whenever it is skipped,
slow, failing or over budget.

- ``model``: the tier's data (what every module below passes around);
- ``triggers``: whether to invoke the model at all;
- ``context`` and ``prompt``: what the model is told (RAG within the token budget);
- ``response``: parsing and validating its JSON answer;
- ``fallback``: template and rule-based explanations (``llm_generated: false``);
- ``client``: the OpenAI-compatible HTTP client (deadline, typed errors);
- ``gateway``: rate limiter, model router, cost tracker, circuit breakers, retries;
- ``caches``: the prompt and response caches;
- ``tier``: the whole path, from an explain request to an explanation;
- ``summaries``: what the model is told about a user and an item, from the origin's state;
- ``speculation``: a personalize request's top item explained while the ranking runs;
- ``precompute``: segment explanations written ahead of time by an elected origin.

May import ``origin.ranking`` (its vocabulary: history, emotion, explanations,
preferences), ``origin.catalog`` and the origin's base; never ``origin.worker`` or
``origin.http``.
"""
