"""Protection against dependencies that fail or drown, shared by every process: the
circuit breaker (``circuit_breaker``) of the edge's origin calls and the LLM tier's calls."""
