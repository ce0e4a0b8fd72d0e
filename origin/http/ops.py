"""The operations page: ``GET /ops`` serves its shell, ``GET /v1/admin/ops``
its data (admin token).

The shell (``ops_page/``: one HTML page, a stylesheet, a JavaScript module, an icon) is public and
holds no figure: it asks for the admin token, keeps it in the tab's ``sessionStorage``, and
polls ``/v1/admin/ops`` with it every two seconds. Its files are read once when the module
is imported and served from memory at exactly these paths, with a strong ``ETag``,
``Cache-Control: no-cache``, ``nosniff`` and a Content-Security-Policy that allows this
origin alone (no inline script or style, nothing third-party).

``/v1/admin/ops`` is ``origin.http.ops_scrape``'s report: every registered edge and
origin process scraped now, as JSON.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from origin.http.ops_scrape import OpsScraper
from protocol.exceptions import ApiError

PAGE_DIR = Path(__file__).with_name("ops_page")
PAGE_PATH = "/ops"
ASSET_PREFIX = "/ops/"
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
CONTENT_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "ops.js": "text/javascript; charset=utf-8",
    "ops.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}

ops_router = APIRouter()


@dataclass(frozen=True, slots=True)
class PageFile:
    body: bytes
    content_type: str
    etag: str


def _load() -> dict[str, PageFile]:
    """URL path -> file: the page at ``/ops``, the others at ``/ops/<name>``."""
    out = {}
    for name, content_type in CONTENT_TYPES.items():
        body = (PAGE_DIR / name).read_bytes()
        path = PAGE_PATH if name == "index.html" else ASSET_PREFIX + name
        out[path] = PageFile(body, content_type, f'"{hashlib.sha256(body).hexdigest()[:32]}"')
    return out


PAGE_FILES = _load()


def page_answer(file: PageFile, if_none_match: str | None) -> Response:
    headers = {
        "etag": file.etag,
        "cache-control": "no-cache",
        "x-content-type-options": "nosniff",
    }
    if file.content_type.startswith("text/html"):
        headers |= {"content-security-policy": PAGE_POLICY, "referrer-policy": "no-referrer"}
    tags = [t.strip().removeprefix("W/") for t in (if_none_match or "").split(",")]
    if file.etag in tags or "*" in tags:
        return Response(status_code=304, headers=headers)
    return Response(file.body, media_type=file.content_type, headers=headers)


@ops_router.get(PAGE_PATH, include_in_schema=False)
async def ops_page(request: Request) -> Response:
    return page_answer(PAGE_FILES[PAGE_PATH], request.headers.get("if-none-match"))


@ops_router.get(ASSET_PREFIX + "{name}", include_in_schema=False)
async def ops_asset(name: str, request: Request) -> Response:
    file = PAGE_FILES.get(ASSET_PREFIX + name)
    if file is None:  # never reached through ``Access``, which opens only the table's paths
        raise ApiError(404, "not_found", f"no file {name!r} of the operations page", field="path")
    return page_answer(file, request.headers.get("if-none-match"))


@ops_router.get("/v1/admin/ops")
async def ops_report(request: Request) -> dict[str, Any]:
    """Every registered edge and origin process, scraped now: per region and per edge
    process requests/s, the share answered with no origin call, p50/p99, stale and
    fallback answers, breaker state, sync lag and gaps; per origin the LLM tier's calls,
    fallbacks and spend; the workers' events/s, backlog and freshness p99; the learning
    curve; the last shadow comparison. An unreachable process is listed with why."""
    scraper: OpsScraper = request.app.state.ops
    return await scraper.report()
