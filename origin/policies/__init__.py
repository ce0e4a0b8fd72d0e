"""Ranking policies as the origin keeps them: the registry of named, versioned
configurations (``registry``) and what a live policy makes of the ranking's rules and a
user's model (``live``). Promoting one is a deployment (``origin.catalog.deployment``).

Imports no other room of the origin except ``origin.ranking``'s rules it configures; only
the origin's base, ``protocol``, ``config`` and ``relevance``.
"""
