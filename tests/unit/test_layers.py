"""The layer rules of the house, checked over every module's imports (``ast``; no module
is imported to check it).

- ``protocol`` is the leaf: it imports no package of ours.
- ``web`` (what the HTTP servers share: error bodies, body limits, request parsing, health,
  JSON answers, the API documents' shared parts) sits above it and imports only
  ``protocol``; ``edge`` and ``origin`` may import it, ``protocol`` may not.
- ``config`` imports only ``protocol`` and ``redis_client``; ``relevance`` (the
  learning's pure mathematics) only ``protocol``; ``evaluation`` (offline evaluation's)
  only ``relevance`` and ``protocol``.
- ``resilience`` and ``redis_client`` (connections to a Redis node or cluster) import
  nothing of ours; ``coordination`` only ``protocol``, ``resilience`` and ``redis_client``.
- ``edge`` never imports ``origin``: an edge is deployed alone.
- ``decision_log`` (the decision log's writer, which edges and origins both append with)
  imports only ``protocol``, ``config`` and ``redis_client``.
- No package of the product imports ``perso`` (the command, supervisor and demo sit on top;
  benchmarks and tests, which drive the product, may).
- The origin's rooms import one way, http → ranking | llm → learned | catalog, worker →
  learned | catalog, and http | worker → event_streams: ``origin.catalog``,
  ``origin.learned`` (what the loop has learned, as stored) and ``origin.event_streams``
  (the event streams both origin processes use) import no other room; ``origin.ranking``
  only ``origin.learned`` and ``origin.catalog``; ``origin.worker`` only those two and
  ``origin.event_streams``; ``origin.offline`` (offline evaluation over the logs) only
  ``origin.learned`` and ``origin.catalog``; ``origin.llm`` only ``origin.ranking`` and
  ``origin.catalog``; ``origin.policies`` (the ranking policies) only ``origin.ranking``'s
  rules; only ``origin.http`` and the origin's composition (``origin.app``,
  ``origin.runtime``) import ``origin.http``, and only ``origin.http`` imports
  ``origin.runtime`` (what a running origin holds). The stream worker is a process of its
  own: nothing of the origin outside ``origin.worker`` imports it (the HTTP process reaches
  the streams through ``origin.event_streams``). The origin's shared base
  (``origin.exceptions``, ``origin.locks``, ``origin.api_keys``,
  ``origin.service_identities``) may be imported by any room.
- The edge's rooms import one way, http → serve → ranking → cache → origins | limits:
  ``edge.origins`` (the client of the origins) and ``edge.limits`` (rate limits) import no
  other room; ``edge.cache`` only those two; ``edge.ranking`` only ``edge.cache``;
  ``edge.serve`` (the request paths) every room below it; ``edge.http`` every other room.
  The edge's composition sits at the top: ``edge.node`` (what a running edge holds) and
  ``edge.sync_apply`` import the rooms below ``edge.serve``, ``edge.app`` anything; only
  ``edge.serve`` and ``edge.http`` import ``edge.node``, only ``edge.http`` imports
  ``edge.sync_apply``, nothing imports ``edge.app``. The edge's shared base
  (``edge.exceptions``, ``edge.identity``, ``edge.geo``) imports no room and may be imported
  by any.
- matplotlib is imported by ``perso.plots`` alone (the house's look and its Agg backend, set
  once); ``perso demo``'s report and the benchmarks draw through it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {
    "protocol",
    "web",
    "config",
    "relevance",
    "evaluation",
    "resilience",
    "redis_client",
    "coordination",
    "sync",
    "decision_log",
    "invalidation",
    "edge",
    "origin",
    "perso",
    "loadtests",
    "benchmarks",
    "tests",
}
ORIGIN_BASE = {"origin.exceptions", "origin.locks", "origin.api_keys", "origin.service_identities"}
ROOMS = (
    "origin.http",
    "origin.ranking",
    "origin.llm",
    "origin.policies",
    "origin.worker",
    "origin.offline",
    "origin.learned",
    "origin.catalog",
    "origin.event_streams",
)
EDGE_BASE = {"edge.exceptions", "edge.identity", "edge.geo"}
EDGE_ROOMS = (
    "edge.http",
    "edge.serve",
    "edge.ranking",
    "edge.cache",
    "edge.origins",
    "edge.limits",
)
BELOW_SERVE = {"edge.ranking", "edge.cache", "edge.origins", "edge.limits"}
# What each of the edge's rooms may import of its other rooms.
EDGE_ROOM_MAY_IMPORT = {
    "edge.origins": set(),
    "edge.limits": set(),
    "edge.cache": {"edge.origins", "edge.limits"},
    "edge.ranking": {"edge.cache"},
    "edge.serve": BELOW_SERVE,
    "edge.http": {"edge.serve", *BELOW_SERVE},
}
# Which of the edge's composition modules each room may import.
EDGE_COMPOSITION_FOR = {
    "edge.serve": {"edge.node"},
    "edge.http": {"edge.node", "edge.sync_apply"},
}
# What each composition module may import of the rooms (edge.app: anything).
EDGE_COMPOSITION_MAY_IMPORT = {"edge.node": BELOW_SERVE, "edge.sync_apply": BELOW_SERVE}
# What each room may import of the other rooms.
ROOM_MAY_IMPORT = {
    "origin.catalog": set(),
    "origin.learned": set(),
    "origin.ranking": {"origin.learned", "origin.catalog"},
    "origin.worker": {"origin.learned", "origin.catalog", "origin.event_streams"},
    "origin.event_streams": set(),
    "origin.llm": {"origin.ranking", "origin.catalog"},
    "origin.offline": {"origin.learned", "origin.catalog"},
    "origin.policies": {"origin.ranking"},
    "origin.http": {
        "origin.offline",
        "origin.ranking",
        "origin.llm",
        "origin.policies",
        "origin.learned",
        "origin.catalog",
        "origin.event_streams",
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts ``a`` and ``a.b``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in out if name.split(".")[0] in OURS}


MODULES = {
    module_name(path): imported(path)
    for package in OURS - {"tests"}
    for path in sorted((ROOT / package).rglob("*.py"))
}


def room_of(module: str, rooms: tuple[str, ...] = ROOMS) -> str | None:
    return next((r for r in rooms if module == r or module.startswith(r + ".")), None)


# Which of our packages a package must not import (itself always may).
TOOLS = {"perso", "benchmarks", "tests"}
FORBIDDEN = {
    "protocol": OURS - {"protocol"},
    "web": OURS - {"web", "protocol"},
    "config": OURS - {"config", "protocol", "redis_client"},
    "relevance": OURS - {"relevance", "protocol"},
    "evaluation": OURS - {"evaluation", "relevance", "protocol"},
    "resilience": OURS - {"resilience"},
    "redis_client": OURS - {"redis_client"},
    "coordination": OURS - {"coordination", "protocol", "resilience", "redis_client"},
    "edge": TOOLS | {"origin"},
    "sync": TOOLS,
    "decision_log": OURS - {"decision_log", "protocol", "config", "redis_client"},
    "invalidation": TOOLS,
    "origin": TOOLS,
    "loadtests": TOOLS,
}


# Why nothing of the origin outside its worker imports ``origin.worker``.
WORKER_APART = (
    "the stream worker is a process of its own, which the origin's HTTP process must not"
    " import (what both use lives in origin.event_streams)"
)


def room_violation(module: str, name: str) -> str | None:
    """A rule of the origin's rooms that ``module`` importing ``name`` breaks."""
    room, other = room_of(module), room_of(name)
    if other == "origin.worker" and room != "origin.worker" and module.startswith("origin"):
        return f"{module} imports {name}: {WORKER_APART}"
    if room is None:
        composition = module in {"origin.app", "origin.runtime"}
        if other == "origin.http" and module.startswith("origin") and not composition:
            return f"{module} imports {name}"
        return None
    if other is not None:
        return None if other == room or other in ROOM_MAY_IMPORT[room] else f"{room} imports {name}"
    if name.startswith("origin."):
        base = ORIGIN_BASE | ({"origin.runtime"} if room == "origin.http" else set())
        if not any(name == b or name.startswith(b + ".") for b in base):
            return f"{room} imports {name} (the origin's composition)"
    return None


def edge_violation(module: str, name: str) -> str | None:
    """A rule of the edge's rooms that ``module`` importing ``name`` breaks."""
    if not (module.startswith("edge.") and name.startswith("edge.")):
        return None
    room, other = room_of(module, EDGE_ROOMS), room_of(name, EDGE_ROOMS)
    if room is not None and other is not None:
        allowed = other == room or other in EDGE_ROOM_MAY_IMPORT[room]
        return None if allowed else f"{room} imports {name}"
    if room is not None:  # a room importing a module at the top of edge/ (or a name of one)
        top = ".".join(name.split(".")[:2])
        if top in EDGE_BASE or top in EDGE_COMPOSITION_FOR.get(room, set()):
            return None
        return f"{room} imports {name} (the edge's composition)"
    if other is None or module == "edge.app":
        return None
    if module in EDGE_BASE:
        return f"{module} imports {name} (the edge's base imports no room)"
    if other in EDGE_COMPOSITION_MAY_IMPORT.get(module, set()):
        return None
    return f"{module} imports {name}"


def violations(module: str, imports: set[str]) -> list[str]:
    top = module.split(".", maxsplit=1)[0]
    found = []
    for name in sorted(imports):
        if name.split(".", maxsplit=1)[0] in FORBIDDEN.get(top, set()):
            found.append(f"{top} imports {name}")
        for broken in (room_violation(module, name), edge_violation(module, name)):
            if broken is not None:
                found.append(broken)
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module: str) -> None:
    assert violations(module, MODULES[module]) == []


@pytest.mark.parametrize(
    ("module", "imports", "expected"),
    [
        ("edge.node", {"origin.runtime"}, ["edge imports origin.runtime"]),
        ("protocol.api", {"edge.cache"}, ["protocol imports edge.cache"]),
        ("protocol.api", {"web.problems"}, ["protocol imports web.problems"]),
        ("web.request_body", {"protocol.client_time"}, []),
        ("web.health", {"origin.locks"}, ["web imports origin.locks"]),
        ("edge.serve.feedback", {"web.request_body"}, []),
        ("origin.http.feedback", {"web.problems"}, []),
        ("config.settings", {"origin.locks"}, ["config imports origin.locks"]),
        ("sync.publisher", {"perso.stack"}, ["sync imports perso.stack"]),
        ("edge.node", {"decision_log.writer"}, []),
        ("origin.runtime", {"decision_log.writer"}, []),
        ("decision_log.writer", {"config.settings", "protocol.decisions"}, []),
        ("decision_log.writer", {"edge.node"}, ["decision_log imports edge.node"]),
        ("decision_log.writer", {"origin.locks"}, ["decision_log imports origin.locks"]),
        (
            "origin.ranking.pipeline",
            {"origin.worker.batch"},
            [f"origin.ranking.pipeline imports origin.worker.batch: {WORKER_APART}"],
        ),
        (
            "origin.catalog.items",
            {"origin.ranking.pipeline"},
            ["origin.catalog imports origin.ranking.pipeline"],
        ),
        (
            "origin.llm.tier",
            {"origin.runtime"},
            ["origin.llm imports origin.runtime (the origin's composition)"],
        ),
        (
            "origin.learned.posteriors",
            {"origin.worker.batch"},
            [f"origin.learned.posteriors imports origin.worker.batch: {WORKER_APART}"],
        ),
        ("relevance.slate", {"origin.learned"}, ["relevance imports origin.learned"]),
        ("origin.worker.joins", {"origin.learned.posteriors", "relevance.slate"}, []),
        ("origin.http.feedback", {"origin.event_streams.streams", "origin.runtime"}, []),
        ("origin.worker.consumer", {"origin.event_streams.streams"}, []),
        (
            "origin.http.metrics",
            {"origin.worker.totals"},
            [f"origin.http.metrics imports origin.worker.totals: {WORKER_APART}"],
        ),
        (
            "origin.app",
            {"origin.worker.consumer"},
            [f"origin.app imports origin.worker.consumer: {WORKER_APART}"],
        ),
        (
            "origin.event_streams.streams",
            {"origin.learned.posteriors"},
            ["origin.event_streams imports origin.learned.posteriors"],
        ),
        ("perso.stack", {"origin.catalog.ingest"}, []),
        ("benchmarks.faults", {"perso.stack"}, []),
        ("edge.cache.popular", {"edge.origins.client"}, []),
        (
            "edge.cache.render",
            {"edge.ranking.run_banks"},
            ["edge.cache imports edge.ranking.run_banks"],
        ),
        (
            "edge.origins.client",
            {"edge.cache.entry"},
            ["edge.origins imports edge.cache.entry"],
        ),
        (
            "edge.ranking.run_banks",
            {"edge.node"},
            ["edge.ranking imports edge.node (the edge's composition)"],
        ),
        ("edge.serve.fill", {"edge.node", "edge.geo", "edge.cache.key"}, []),
        (
            "edge.serve.fill",
            {"edge.http.access"},
            ["edge.serve imports edge.http.access"],
        ),
        ("edge.node", {"edge.serve.fill"}, ["edge.node imports edge.serve.fill"]),
        (
            "edge.geo",
            {"edge.cache.entry"},
            ["edge.geo imports edge.cache.entry (the edge's base imports no room)"],
        ),
        ("edge.app", {"edge.http.asgi", "edge.serve.fill"}, []),
    ],
)
def test_the_rules_catch_what_they_should(
    module: str, imports: set[str], expected: list[str]
) -> None:
    assert violations(module, imports) == expected


def matplotlib_importers() -> list[str]:
    found = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if any(n.split(".")[0] == "matplotlib" for n in names):
                    found.append(module_name(path))
                    break
    return sorted(found)


def test_only_the_house_plotting_module_imports_matplotlib() -> None:
    assert matplotlib_importers() == ["perso.plots"]
