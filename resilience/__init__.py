"""Protection against dependencies that fail or drown, shared by every process: the
circuit breaker (``circuit_breaker``) of the edge's origin calls and the LLM tier's calls,
and the back-off of every retry loop (``backoff``: lock retries, the edge's origin client,
the sync subscriber, the LLM gateway's 429s, the stream worker's loop and its
compare-and-set rounds, the Qdrant user-vector sink), and the token bucket of every
per-process limit (``token_bucket``: the edge's rate limits and pre-warm budget, the LLM
gateway's ``llm_rate_per_s``). Imports only the standard library."""
