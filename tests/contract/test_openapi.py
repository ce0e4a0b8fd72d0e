"""Both services held to their own OpenAPI documents (issue 15 item 7).

schemathesis reads each ``/openapi.json`` and sends what it generates from it (valid bodies
and invalid ones, each documented status's preconditions, requests without credentials,
other methods) to real processes: ``perso up`` with Redis, the origin over a 1,000-item
catalog and one edge, speaking HTTPS to each other and to schemathesis (certificates made
by ``trustme``, ``tests.pki``: the contract tier is also the TLS tier's). It checks every
answer against the document: no 5xx, only documented statuses, content types, bodies and
headers as documented, invalid input refused, valid input accepted, credentials required,
405s with ``Allow``. What it runs and why some of it is left out is in
``schemathesis.toml``; the edge's per-user tokens and the client times that JSON Schema
cannot bound are in ``hooks.py``.

Bounded: 50 cases per operation and phase, about two minutes on two cores for both
services. Deselect with ``-m "not contract"``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.credentials import IDENTITY_KEY
from tests.e2e.conftest import RunningStack, start_stack
from tests.pki import Pki, make_pki

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("schemathesis.toml")
RUN_TIMEOUT_S = 240
# Stack start-up and both runs fit well within this (about 35 s on two cores).
pytestmark = [pytest.mark.contract, pytest.mark.timeout(RUN_TIMEOUT_S + 120)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("contract"),
        tls=pki,
        PERSO_REGIONS="us-east",
        PERSO_WORKERS="0",
        PERSO_TEXT_ENCODER="hashing",
        # The edge's tokens, for whichever user a generated body names, are signed here.
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
    )
    yield running
    if running.process.poll() is None:
        running.process.send_signal(signal.SIGINT)
        running.process.wait(timeout=60)


def run_schemathesis(stack: RunningStack, pki: Pki, base_url: str, answers: Path) -> None:
    """``schemathesis run`` over ``base_url``'s document, the certificate verified against
    ``pki``'s CA; fails the test on any finding."""
    endpoints = stack.endpoints
    assert base_url.startswith("https://"), base_url
    env = {
        **os.environ,
        # what the hooks' own calls (a user's token from the origin) trust
        "SSL_CERT_FILE": str(pki.ca),
        "PYTHONPATH": str(ROOT),
        "PERSO_CONTRACT_ORIGIN_TOKEN": str(endpoints["origin_token"]),
        "PERSO_CONTRACT_ADMIN_TOKEN": str(endpoints["admin_token"]),
        "PERSO_CONTRACT_API_KEY": str(endpoints["api_key"]),
        "PERSO_CONTRACT_ANSWERS": str(answers),
    }
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--no-color",
        "--config-file",
        str(CONFIG),
        "run",
        "--tls-verify",
        str(pki.ca),
        f"{base_url}/openapi.json",
    ]
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"schemathesis did not finish in {RUN_TIMEOUT_S} s:\n{exc.stdout!r}")
    report = done.stdout + done.stderr
    print(report)  # shown with -rP, and on failure
    assert done.returncode == 0, report
    exercised(answers.read_text(), report)


# Operations whose success needs state the run does not make (a lock held by someone, a
# rebuild that ran, a policy defined under the generated name): they are exercised when
# they answer their 404 past the credentials.
NEED_STATE = {
    "DELETE /v1/admin/locks/{resource}",
    "GET /v1/admin/catalog/rebuild/{rebuild_id}",
    "GET /v1/admin/policies/{name}",
    "POST /v1/admin/policies/{name}/promote",
}


def exercised(answers: str, report: str) -> None:
    """Each operation was exercised past its credentials, not a wall of 401s: it answered
    2xx at least once (those of ``NEED_STATE``: anything but 401 and 405)."""
    seen: set[str] = set()
    handled: set[str] = set()
    for line in answers.splitlines():
        method, path, status = line.split()
        operation = f"{method} {path}"
        seen.add(operation)
        if status.startswith("2") or (operation in NEED_STATE and status not in ("401", "405")):
            handled.add(operation)
    assert seen, report
    missed = sorted(seen - handled)
    assert missed == [], f"never exercised past their credentials: {missed}\n{report}"


def test_the_origin_answers_as_its_document_says(
    stack: RunningStack, pki: Pki, tmp_path: Path
) -> None:
    run_schemathesis(stack, pki, stack.origin_url, tmp_path / "answers")


def test_the_edge_answers_as_its_document_says(
    stack: RunningStack, pki: Pki, tmp_path: Path
) -> None:
    run_schemathesis(stack, pki, stack.edges["us-east"], tmp_path / "answers")
