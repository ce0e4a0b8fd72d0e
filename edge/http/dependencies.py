"""What an edge depends on and whether each answers now: for operators, not load balancers.

Readiness (``/readyz``) means "this edge can answer" (``web.health``). With the
origin down an edge still answers from its entries (stale-if-error) and its region's
popular list; a load balancer that took edges out of rotation whenever the origin failed
would take every edge out exactly when they are the only thing serving. So an edge is
ready once it has a popular list to fall back on, or while it can reach the origin; and
the state of each dependency is reported here, at ``GET /dependencies`` (always 200: the
body says what is up) and in ``/metrics`` (``perso_edge_dependency_up``):

- ``origin``: some origin answers its ``/healthz``; with the circuit's state over all
  origins, and each origin's: its last health check, ejected or not, its circuit;
- ``store``: the entry store answers (always, in process; a PoP-local Redis may not);
- ``sync``: the region's sync stream was read successfully last time (not configured
  without ``REDIS_URL``), with how far the cursor trails the stream.
"""

from __future__ import annotations

from edge.node import Edge
from sync.subscriber import SyncSubscriber
from web.health import Dependency


async def check(edge: Edge, subscriber: SyncSubscriber | None) -> list[Dependency]:
    """The state of each dependency now (the origin and store each asked once)."""
    client = edge.origin
    origins = {
        link.url: {
            "ready": link.standing.ready,
            "ejected": link.ejected(),
            "circuit": link.breaker.state.value,
        }
        for link in client.links
    }
    origin = Dependency(
        "origin",
        await client.healthy(),
        {"circuit": client.circuit_state().value, "origins": origins},
    )
    store = Dependency("store", await edge.store.ping(), {"store": repr(edge.store)})
    if subscriber is None:
        sync = Dependency("sync", False, {"configured": False})
    else:
        sync = Dependency(
            "sync",
            subscriber.stats.connected,
            {
                "configured": True,
                "behind_ms": await subscriber.behind_ms() if subscriber.stats.connected else None,
                "gaps": subscriber.stats.gaps,
                "last_seq": subscriber.stats.last_seq,
            },
        )
    return [origin, store, sync]
