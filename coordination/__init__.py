"""Coordination between processes: leases on named resources, fencing tokens, fenced writes.

``lock`` holds the interface every backend implements (``Lock``, ``Lease``, ``locked``,
``with_lock``), ``retry`` the backoff policies, ``redis_lock`` the Redis backend,
``redlock`` the quorum backend over N independent Redis nodes, ``heartbeat`` the automatic
lease renewal and ``fencing`` the stores that refuse stale holders.
"""
