"""The event streams both of the origin's processes use: the HTTP process appends to them
and reads how far the workers trail them, the stream workers read them.

``event_log`` (the durable, deduplicated append of feedback to ``events:{p}``),
``streams`` (the entries of ``events:{p}`` and ``decisions:{p}``, the workers' consumer
groups, the oldest entry a group still needs, lag) and ``standing`` (what the workers
stand at now, as Redis holds it, for the origin's ``/metrics``).

The stream worker is a process of its own, so the HTTP side imports this room and never
``origin.worker``. Imports only ``protocol``, ``redis_client`` and the origin's base; no
other room.
"""
