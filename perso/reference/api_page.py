"""The API page's tables: every route of the origin's and the edge's OpenAPI documents
(each service's app built in process, as its ``/openapi.json`` would answer), with its
method, path, the credential it wants and its summary."""

from __future__ import annotations

import logging
import re
from typing import Any

from config.settings import Settings
from edge.app import create_app as create_edge
from origin.app import create_app as create_origin
from perso.reference.markdown import cell, table
from web.openapi import Spec, operations

HEADER = ("method", "path", "credential", "summary")
# Only to build the apps: neither connects anywhere until it starts serving. The demo
# token route is on so that the edge's table lists it (its summary says it is demo-only).
_IDENTITY_KEY = "documentation-only-key-not-a-secret"
_REGION = "us-east"


def _settings() -> Settings:
    return Settings(
        redis_url="redis://127.0.0.1:1",
        identity_keys=_IDENTITY_KEY,
        demo_tokens=True,
        demo_api_key=_IDENTITY_KEY,
    )


def documents() -> dict[str, Spec]:
    """Each service's OpenAPI document, by service."""
    settings = _settings()
    origin: Spec = create_origin(settings).openapi()
    # Building an edge in demo mode warns that it is in demo mode: true of no server here.
    edge_log = logging.getLogger("edge.app")
    level = edge_log.level
    edge_log.setLevel(logging.ERROR)
    try:
        edge: Spec = create_edge(settings, region=_REGION).fastapi.openapi()
    finally:
        edge_log.setLevel(level)
    return {"origin": origin, "edge": edge}


def routes(spec: Spec) -> list[tuple[str, str]]:
    """(METHOD, path) of every operation of ``spec``, in its order."""
    return [(method.upper(), path) for path, method, _ in operations(spec)]


def summary(operation: dict[str, Any]) -> str:
    """The operation's summary, and the first sentence of its description when it has one."""
    text = str(operation.get("summary") or "")
    description = str(operation.get("description") or "").strip()
    if description:
        first = re.split(r"(?<=\.)\s", " ".join(description.split()), maxsplit=1)[0]
        text = f"{text}: {first}" if text else first
    return text.replace("``", "`")


def credential(operation: dict[str, Any]) -> str:
    names = sorted({name for need in operation.get("security") or [] for name in need})
    return ", ".join(names) or "none"


def render(spec: Spec) -> str:
    rows = [
        (method.upper(), f"`{path}`", credential(operation), cell(summary(operation)))
        for path, method, operation in operations(spec)
    ]
    return table(HEADER, rows)
