"""Contracts every process shares; the leaf of the house (imports no package of ours).

Wire schemas of the HTTP API (``api``), client times and their window (``client_time``),
who an answer may be served to (``audience``), the action vocabulary (``actions``), every
Redis key and stream name (``keys``; the names inside a PoP's entry store,
``edge_entry_keys``) and dedup key (``dedup``), the feedback events' codec
(``events``), vector bytes (``vectors``), user activity segments (``segments``), user
tokens (``identity``), rate-limit tiers (``tiers``), a latency histogram (``histogram``)
and the exceptions every process shares (``exceptions``). The HTTP servers' own plumbing
(error bodies, body limits, request parsing, health, JSON answers, the API documents'
shared parts) sits above it, in ``web``.
"""
