"""The stream workers: what feedback and served decisions teach the models.

``app`` builds one worker process; ``consumer`` reads the ``events:{p}`` and
``decisions:{p}`` streams in the ``embedder`` group; ``joins`` pairs each served decision
with what its user then did and, once its reward window closes, updates the items'
posteriors, the examination model and the user's negatives; ``batch`` applies
micro-batches of observations to the users' models (``relevance.user_model``) with a
version compare-and-set on their records (``origin.learned.user_models``);
``freshness_tiers`` decides what may wait; ``retention`` keeps the logs by age and size
under the floor a group needs (``origin.event_streams.streams``; the elected trimmer);
``edge_updates`` and ``qdrant_sink`` publish each batch; ``totals`` keeps the worker's
counters across restarts; ``learning`` is how the settings configure all of it.
``recompute`` computes the users' models again from the retained log (``retained_log`` reads it)
in a scratch keyspace, and ``recompute_comparison`` says how far the live ones are
(``perso recompute``).

The streams themselves (groups, entries, lag, the feedback append) are
``origin.event_streams``'s, which the HTTP process imports too: the worker is a process of
its own, and nothing else of the origin imports this room.

May import ``origin.event_streams``, ``origin.learned``, ``origin.catalog`` and the
origin's base; never ``origin.ranking``, ``origin.llm`` or ``origin.http``.
"""
