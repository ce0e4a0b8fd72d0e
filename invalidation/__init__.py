"""Layered invalidation of edge entries: time, events, lazy refresh.

Layer 1, time: ``ttl`` (how long an entry may be served). Layer 2, events: ``rules`` (which
event invalidates what, as data: surrogate tags, model epochs, segments). Layer 3 (lazy
refresh, pre-warming) is the edge's (``edge.cache.freshness``, ``edge.cache.prewarm``).
"""
