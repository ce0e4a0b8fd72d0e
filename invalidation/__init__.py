"""Layered invalidation of edge entries (seed 000, "Bottleneck 3").

Layer 1, time: ``ttl`` (how long an entry may be served). Layers 2 (event-driven purges,
surrogate tags, model epochs) and 3 (lazy refresh, pre-warming) come with the sync issue.
"""
