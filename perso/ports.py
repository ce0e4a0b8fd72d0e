"""Which ports the HTTP processes of a stack listen on (``perso.stack``)."""

from __future__ import annotations


def port_plan(
    origin_port: int, edge_port_base: int, origins: int, edges: int
) -> tuple[list[int], int]:
    """The origins' ports (consecutive from ``origin_port``) and the edges' first port:
    ``edge_port_base``, unless the origins would take one of the edges' ports (the
    defaults, 8100 and 8101, with a second origin): then the edges follow the last origin,
    and ``perso up`` prints where they are."""
    if origins < 1 or edges < 0:
        raise ValueError(f"need at least one origin and no negative edges: {origins}, {edges}")
    ports = list(range(origin_port, origin_port + origins))
    edge_ports = range(edge_port_base, edge_port_base + edges)
    if any(port in edge_ports for port in ports):
        return ports, origin_port + origins
    return ports, edge_port_base
