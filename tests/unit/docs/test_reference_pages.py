"""The reference pages of the documentation (docs/configuration.md, docs/api.md,
docs/redis-keys.md) against the code they are generated from (``perso.reference``): a
setting, a route or a key that the committed pages do not show fails here, naming the
command that brings them up to date."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config.environment import env_name
from config.settings import Settings
from perso.reference import api_page, keys_page, settings_page
from perso.reference.markdown import (
    BEGIN,
    END,
    MarkersMissing,
    cell,
    generated_part,
    with_generated,
)
from perso.reference.pages import COMMAND, PAGES, ROOT, Page, expected
from web.openapi import Spec

BEHIND = f"is behind the code: run {COMMAND} and commit the pages"


def page_text(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def documents() -> dict[str, Spec]:
    return api_page.documents()


@pytest.mark.parametrize("page", PAGES, ids=[page.path for page in PAGES])
def test_each_page_is_what_the_generator_makes_of_the_code(page: Page) -> None:
    assert page_text(page.path) == expected(page), f"{page.path} {BEHIND}"


def test_every_setting_has_a_description() -> None:
    missing = settings_page.undescribed()
    assert not missing, (
        f"settings without a description: {', '.join(missing)}; give each a note in "
        f"perso/reference/setting_notes/ (or a Field description), then run {COMMAND}"
    )


def test_no_note_for_a_setting_that_is_gone() -> None:
    stale = settings_page.stale_notes()
    assert not stale, f"perso/reference/setting_notes/ describes no setting: {stale}"


def test_every_setting_is_on_the_configuration_page() -> None:
    text = generated_part(page_text("docs/configuration.md"))
    missing = [
        env_name(field) for field in Settings.model_fields if f"| `{env_name(field)}` |" not in text
    ]
    assert not missing, f"docs/configuration.md lacks {', '.join(missing)}: {BEHIND}"


def test_every_route_is_on_the_api_page(documents: dict[str, Spec]) -> None:
    text = generated_part(page_text("docs/api.md"))
    missing = [
        f"{service}: {method} {path}"
        for service, spec in documents.items()
        for method, path in api_page.routes(spec)
        if f"| {method} | `{path}` |" not in text
    ]
    assert not missing, f"docs/api.md lacks {', '.join(missing)}: {BEHIND}"


def test_both_services_have_routes(documents: dict[str, Spec]) -> None:
    routes = {service: api_page.routes(spec) for service, spec in documents.items()}
    assert ("POST", "/v1/auth/token") in routes["origin"]
    assert ("POST", "/v1/personalize") in routes["edge"]
    # the demo token route is listed (its summary says it is demo-only)
    assert ("POST", "/v1/demo/token") in routes["edge"]


def test_every_key_builder_is_on_the_keys_page() -> None:
    text = generated_part(page_text("docs/redis-keys.md"))
    missing = [
        builder.__name__
        for builder in keys_page.builders()
        if f"| `{keys_page.pattern(builder)}` | `{builder.__name__}(" not in text
    ]
    assert not missing, f"docs/redis-keys.md lacks {', '.join(missing)}: {BEHIND}"


def test_every_key_builder_has_a_docstring() -> None:
    bare = [builder.__name__ for builder in keys_page.builders() if not builder.__doc__]
    assert not bare, f"key builders of protocol/keys.py without a docstring: {bare}"


@pytest.mark.parametrize(
    ("builder", "pattern"),
    [
        ("user_record", "u:{<user_id>}:st"),
        ("events_stream", "events:{<partition>}"),
        ("user_decision", "u:{<user_id>}:dec:<request_id>"),
        ("process_registry", "ops:{ops}:registry"),
    ],
)
def test_a_key_pattern_shows_each_argument_by_name(builder: str, pattern: str) -> None:
    found = {function.__name__: function for function in keys_page.builders()}
    assert keys_page.pattern(found[builder]) == pattern


def test_a_function_that_reads_a_key_is_no_builder() -> None:
    names = {function.__name__ for function in keys_page.builders()}
    assert "consumer_of" not in names
    assert "partition_of" not in names  # returns a number


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (604_800.0, "604800"),
        (0.0002, "0.0002"),
        (("us-east", "eu-west"), "us-east,eu-west"),
        (Path(".perso"), ".perso"),
        (8100, "8100"),
    ],
)
def test_defaults_are_written_as_the_environment_takes_them(value: object, text: str) -> None:
    assert settings_page.env_value(value) == text


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("redis_url", "unset"),
        ("shadow_policy", "unset"),
        ("lock_redlock_urls", "unset"),
        ("origin_port", "`8100`"),
        ("edge_ranking", "`true`"),
    ],
)
def test_an_empty_default_is_unset(field: str, text: str) -> None:
    assert settings_page.default_text(Settings.model_fields[field]) == text


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("origin_port", "≥ 1, ≤ 65535"),
        ("edge_store", "`memory`, `redis`"),
        ("edge_ranking", "`true`, `false`"),
        ("host", ""),
    ],
)
def test_allowed_values_come_from_the_field(field: str, text: str) -> None:
    assert settings_page.allowed_text(Settings.model_fields[field]) == text


@pytest.mark.parametrize(
    ("operation", "text"),
    [
        ({"summary": "Healthz"}, "Healthz"),
        (
            {"summary": "Readyz", "description": "Ready once started. Then more."},
            "Readyz: Ready once started.",
        ),
        (
            {"description": "The items of ``item_ids``: in order. Then."},
            "The items of `item_ids`: in order.",
        ),
    ],
)
def test_a_route_summary_is_its_summary_and_first_sentence(
    operation: dict[str, Any], text: str
) -> None:
    assert api_page.summary(operation) == text


def test_a_cell_is_one_line_with_its_pipes_escaped() -> None:
    assert cell("a | b\n  c") == "a \\| b c"


def test_only_the_generated_part_is_replaced() -> None:
    page = f"# Title\n\nprose\n\n{BEGIN}\nold\n{END}\n\nmore prose\n"
    new = with_generated(page, "new\n")
    assert new == f"# Title\n\nprose\n\n{BEGIN}\nnew\n{END}\n\nmore prose\n"
    assert generated_part(new) == "new\n"


def test_a_page_without_markers_is_refused() -> None:
    with pytest.raises(MarkersMissing):
        with_generated("# no markers\n", "table\n")
