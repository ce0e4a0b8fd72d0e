from __future__ import annotations

import pytest

from perso.ports import port_plan


@pytest.mark.parametrize(
    ("origin_port", "edge_port_base", "origins", "edges", "expected"),
    [
        # one origin: exactly as before
        (8100, 8101, 1, 3, ([8100], 8101)),
        # a second origin would take the first edge's port: the edges follow the origins
        (8100, 8101, 2, 3, ([8100, 8101], 8102)),
        (8100, 8101, 4, 3, ([8100, 8101, 8102, 8103], 8104)),
        # edges elsewhere stay where they were configured
        (8100, 9000, 3, 3, ([8100, 8101, 8102], 9000)),
        (8100, 8103, 3, 3, ([8100, 8101, 8102], 8103)),
        # edges below the origins, overlapping the last of them
        (8103, 8101, 2, 3, ([8103, 8104], 8105)),
        (8103, 8101, 1, 2, ([8103], 8101)),
        (8100, 8101, 1, 0, ([8100], 8101)),
    ],
)
def test_port_plan(
    origin_port: int,
    edge_port_base: int,
    origins: int,
    edges: int,
    expected: tuple[list[int], int],
) -> None:
    assert port_plan(origin_port, edge_port_base, origins, edges) == expected


@pytest.mark.parametrize(("origins", "edges"), [(0, 3), (-1, 3), (1, -1)])
def test_a_stack_has_an_origin(origins: int, edges: int) -> None:
    with pytest.raises(ValueError, match="at least one origin"):
        port_plan(8100, 8101, origins, edges)
