"""Protection against dependencies that fail or drown, shared by every process: the
circuit breaker (``circuit_breaker``) of the edge's origin calls and the LLM tier's calls,
and the back-off of every retry loop (``backoff``: lock retries, the edge's origin client,
the sync subscriber, the LLM gateway's 429s, the stream worker's loop and its
compare-and-set rounds, the Qdrant user-vector sink). Imports only the standard library."""
