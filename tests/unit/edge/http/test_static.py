"""The storefront's files as an edge serves them (``edge.http.static``): which file is at which
path, conditional requests, methods, and what loading a folder leaves out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edge.http.static import (
    ALLOWED_METHODS,
    CONTENT_TYPES,
    PAGE_POLICY,
    SITE_DIR,
    StaticFile,
    StaticSite,
    matches,
    url_path,
)

JS = StaticFile.of(b"export const x = 1;\n", CONTENT_TYPES[".js"])
HTML = StaticFile.of(b"<!doctype html>", CONTENT_TYPES[".html"])


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("index.html", "/"),
        ("storefront.js", "/static/storefront.js"),
        ("storefront.css", "/static/storefront.css"),
        ("favicon.svg", "/static/favicon.svg"),
        ("other.html", "/static/other.html"),
        # not a type the edge serves, or hidden: not served at all
        ("notes.md", None),
        ("app.py", None),
        ("README", None),
        (".index.html", None),
        (".env", None),
    ],
)
def test_where_a_file_is_served(name: str, path: str | None) -> None:
    assert url_path(name) == path


@pytest.mark.parametrize(
    ("header", "hit"),
    [
        (None, False),
        ("", False),
        (JS.etag, True),
        (f"W/{JS.etag}", True),
        (f'"other", {JS.etag}', True),
        ("*", True),
        ('"other"', False),
        (JS.etag.strip('"'), False),  # unquoted: not the same tag
    ],
)
def test_if_none_match(header: str | None, hit: bool) -> None:
    assert matches(header, JS.etag) is hit


@pytest.mark.parametrize(
    ("method", "if_none_match", "status", "body"),
    [
        ("GET", None, 200, JS.body),
        ("HEAD", None, 200, b""),
        ("GET", JS.etag, 304, b""),
        ("HEAD", JS.etag, 304, b""),
        ("GET", '"stale"', 200, JS.body),
        ("POST", None, 405, None),
        ("PUT", JS.etag, 405, None),
        ("DELETE", None, 405, None),
    ],
)
def test_answers(method: str, if_none_match: str | None, status: int, body: bytes | None) -> None:
    answer = StaticSite({"/static/x.js": JS}).answer(JS, method, if_none_match)
    assert answer.status == status
    headers = dict(answer.headers)
    if status == 405:
        assert headers["allow"] == ALLOWED_METHODS
        assert b"method_not_allowed" in answer.body
        return
    assert answer.body == body
    assert headers["etag"] == JS.etag
    assert headers["cache-control"] == "no-cache"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-type"] == "text/javascript; charset=utf-8"
    # a HEAD says the length a GET would send; a 304 sends none
    assert headers.get("content-length") == (None if status == 304 else str(len(JS.body)))
    assert "content-security-policy" not in headers  # the page's alone


def test_the_page_gets_a_policy_that_allows_this_edge_only() -> None:
    headers = dict(StaticSite({"/": HTML}).answer(HTML, "GET", None).headers)
    assert headers["content-security-policy"] == PAGE_POLICY
    assert headers["referrer-policy"] == "no-referrer"
    directives = dict(part.strip().split(" ", 1) for part in PAGE_POLICY.split(";"))
    assert directives["default-src"] == "'none'"
    # nothing inline, nothing from elsewhere: each source is this edge alone
    for name in ("script-src", "style-src", "img-src", "connect-src"):
        assert directives[name] == "'self'"


def test_the_same_bytes_have_the_same_etag_anywhere() -> None:
    again = StaticFile.of(JS.body, JS.content_type)
    assert again.etag == JS.etag
    assert StaticFile.of(JS.body + b" ", JS.content_type).etag != JS.etag


def test_loading_a_folder_takes_its_own_servable_files_only(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html>")
    (tmp_path / "app.js").write_text("1;")
    (tmp_path / "notes.md").write_text("not served")
    (tmp_path / ".hidden.js").write_text("2;")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.js").write_text("3;")
    (tmp_path / "folder.js").mkdir()  # a folder named like a file
    secret = tmp_path.parent / "secret.js"
    secret.write_text("4;")
    (tmp_path / "link.js").symlink_to(secret)
    site = StaticSite.load(tmp_path)
    assert site.paths == ["/", "/static/app.js"]
    app = site.get("/static/app.js")
    assert app is not None
    assert (app.body, app.content_type) == (b"1;", "text/javascript; charset=utf-8")
    for path in ("/static/", "/static", "/static/sub/deep.js", "/static/link.js", "/index.html"):
        assert site.get(path) is None, path


def test_the_storefront_is_every_file_of_its_folder() -> None:
    """Nothing in ``edge/http/storefront`` is left unserved by mistake, and the page's links and
    the modules' imports all name files the edge serves."""
    site = StaticSite.load()
    names = sorted(p.name for p in SITE_DIR.iterdir())
    assert site.paths == sorted("/" if n == "index.html" else f"/static/{n}" for n in names)
    page = (SITE_DIR / "index.html").read_text()
    linked = set(re.findall(r'(?:href|src)="(/static/[^"]+)"', page))
    assert linked
    imported = {
        "/static/" + name
        for script in SITE_DIR.glob("*.js")
        for name in re.findall(r'from "\./([^"]+)"', script.read_text())
    }
    assert imported
    assert linked | imported <= set(site.paths)
    # no third-party anything: every URL the page or a module names is this edge's
    text = page + "".join(p.read_text() for p in SITE_DIR.glob("*.[jc]s*"))
    assert re.findall(r"https?://", text) == []
