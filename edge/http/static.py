"""The storefront demo's page files, served by an edge from memory.

A shop evaluating perso clicks through a storefront the edge itself serves: ``/`` is
``edge/http/storefront/index.html``, ``/static/<name>`` each other file of that folder
(stylesheet, JavaScript modules, icon). They are plain files of the repository, read once
when the app is made, so a request never touches the file system: only the exact paths
of that table exist, which leaves nothing to list and no path to climb out of the folder
by (``..``, encoded or not, is simply not a key). A file whose type is not in
``CONTENT_TYPES`` is not served at all.

``edge.http.asgi`` looks a path up here only after the API's POST routes missed, so the hit
path pays nothing for the page. Answers carry a strong ``ETag`` and ``Cache-Control:
no-cache`` (a browser revalidates and gets a 304: a new release shows at once), and
``nosniff``; the page also gets a Content-Security-Policy that allows nothing but this
origin: no inline script or style, no third-party request of any kind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from edge.serve.answer import JSON, Answer
from web.problems import error_body

SITE_DIR = Path(__file__).with_name("storefront")
INDEX = "index.html"
STATIC_PREFIX = "/static/"
# The methods of the page's paths (a 405's ``Allow``).
ALLOWED_METHODS = "GET, HEAD"

CONTENT_TYPES: Mapping[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    # A module script must come with a JavaScript type, or the browser refuses it.
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}

# The page talks to this edge only (its API, its own files), and nothing may frame it.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str

    @classmethod
    def of(cls, body: bytes, content_type: str) -> StaticFile:
        # Strong validator: the bytes' own digest, the same on every edge of a release.
        return cls(body, content_type, f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def url_path(name: str) -> str | None:
    """Where the file ``name`` of the site's folder is served, None when it is not (a type
    not in ``CONTENT_TYPES``, a hidden file)."""
    if name.startswith(".") or Path(name).suffix not in CONTENT_TYPES:
        return None
    return "/" if name == INDEX else STATIC_PREFIX + name


def content_type_of(name: str) -> str:
    return CONTENT_TYPES[Path(name).suffix]


def matches(if_none_match: str | None, etag: str) -> bool:
    """Whether a request's ``If-None-Match`` names ``etag`` (or is ``*``); weak
    comparison, as RFC 9110 asks of a GET's conditional."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def headers_of(file: StaticFile, *, length: int | None) -> list[tuple[str, str]]:
    """What every answer about ``file`` says; ``length``: its content length (None: a 304,
    which has none)."""
    headers = [
        ("content-type", file.content_type),
        ("etag", file.etag),
        ("cache-control", "no-cache"),
        ("x-content-type-options", "nosniff"),
    ]
    if file.content_type.startswith("text/html"):
        headers += [("content-security-policy", PAGE_POLICY), ("referrer-policy", "no-referrer")]
    if length is not None:
        headers.append(("content-length", str(length)))
    return headers


class StaticSite:
    """The page's files by URL path; ``get`` then ``answer`` per request."""

    def __init__(self, files: Mapping[str, StaticFile]) -> None:
        self._files = dict(files)

    @classmethod
    def load(cls, directory: Path = SITE_DIR) -> StaticSite:
        """The regular files directly in ``directory`` that ``url_path`` serves (no
        sub-folder is walked, a symbolic link is not followed), read now."""
        return cls(dict(_read(directory, sorted(directory.iterdir()))))

    @property
    def paths(self) -> list[str]:
        return sorted(self._files)

    def get(self, path: str) -> StaticFile | None:
        return self._files.get(path)

    def answer(self, file: StaticFile, method: str, if_none_match: str | None) -> Answer:
        """GET: the file, or a 304 while the browser's copy is current; HEAD: the same
        without the body; any other method: 405 with ``Allow``."""
        if method not in ("GET", "HEAD"):
            return _not_allowed()
        if matches(if_none_match, file.etag):
            return Answer(304, b"", headers_of(file, length=None))
        body = file.body if method == "GET" else b""
        return Answer(200, body, headers_of(file, length=len(file.body)))


def _read(directory: Path, entries: Iterable[Path]) -> Iterable[tuple[str, StaticFile]]:
    for entry in entries:
        path = url_path(entry.name)
        if path is None or entry.is_symlink() or not entry.is_file():
            continue
        yield path, StaticFile.of(entry.read_bytes(), content_type_of(entry.name))


def _not_allowed() -> Answer:
    body = error_body("method_not_allowed", "Method Not Allowed")
    return Answer(405, body, [("content-type", JSON), ("allow", ALLOWED_METHODS)])
