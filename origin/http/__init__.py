"""The origin's HTTP API: one router per resource (personalize, feedback, explain,
preferences, tokens, admin, purge, coordination, replicas, metrics, health) and what one request
runs end to end, with the credential check (``auth``), the body parsing (``inputs``) and
the published description (``openapi``).

May import every other room of the origin, ``origin.runtime`` (what a running origin
holds) and the origin's base; nothing but ``origin.app`` imports it.
"""
