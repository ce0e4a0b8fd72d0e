"""Contracts every process shares; the leaf of the house (imports no package of ours).

Wire schemas of the HTTP API (``api``) and its published description (``openapi``),
request bodies and their limits (``request_body``, ``body_limit``), client times and their
window (``client_time``), who an answer may be served to (``audience``), the action
vocabulary (``actions``), every Redis key and stream name (``keys``) and dedup key
(``dedup``), the feedback events' codec (``events``), vector bytes (``vectors``), user
activity segments (``segments``), user tokens (``identity``), rate-limit tiers
(``tiers``), error bodies (``problems``), health, readiness and dependencies (``health``),
JSON answers (``responses``), a latency histogram (``histogram``) and the exceptions
every process shares (``exceptions``).
"""
