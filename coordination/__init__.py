"""Coordination between processes: leases on named resources, fencing tokens, fenced
writes, leader election and single-flight runs.

- ``lock``: the interface every backend implements (``Lock``, ``Lease``, ``locked``,
  ``with_lock``); ``retry``: the backoff policies;
- backends: ``redis_lock`` (one Redis), ``redlock`` (a quorum of N independent Redis
  nodes), ``postgres_lock`` (PostgreSQL advisory locks);
- on top of any backend: ``heartbeat`` (lease renewal with a lost signal), ``leader``
  (leader election), ``instrumented`` and ``lock_metrics`` (figures for ``/metrics``);
- ``fencing``: the stores that refuse a holder older than one they have seen (a fenced
  pointer, fenced hashes);
- ``single_flight`` and ``flight_record``: one run per key, its JSON result shared.

Imports only ``protocol`` and ``resilience``.
"""
