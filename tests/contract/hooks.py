"""schemathesis hooks of the contract run (``schemathesis.toml`` names this module).

- The edge wants a token of the user its body names (403 otherwise): a case that carries
  the configured placeholder token gets one signed for that user with the test
  deployment's identity key. A case sent without credentials (the ``ignored_auth`` check)
  stays without.
- Client times must lie near the server's clock (``protocol.client_time``), which JSON
  Schema cannot say: valid cases get the time now, so that they test the rest of the body
  instead of being refused for their timestamp; invalid cases keep theirs.
- Every answer's (method, path, status) is appended to ``PERSO_CONTRACT_ANSWERS``, so the
  test can tell that operations were exercised past their credentials.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

import schemathesis
from schemathesis import Case, GenerationMode, HookContext, Response

from tests.credentials import bearer, user_token

PLACEHOLDER = "Bearer replaced-per-case"


@schemathesis.hook
def before_call(context: HookContext, case: Case, kwargs: dict[str, Any]) -> None:
    headers = case.headers if case.headers is not None else {}
    for name, value in list(headers.items()):
        if name.lower() == "authorization" and value == PLACEHOLDER:
            body = case.body if isinstance(case.body, dict) else {}
            user = body.get("user_id")
            user_id = user if isinstance(user, str) else "u-contract"
            headers[name] = bearer(user_token(user_id, now_s=time.time()))["authorization"]
    _now_in_valid_cases(case)


def _now_in_valid_cases(case: Case) -> None:
    if case.meta is None or case.meta.generation.mode is not GenerationMode.POSITIVE:
        return
    if not isinstance(case.body, dict):
        return
    now = datetime.now(UTC).isoformat()
    context = case.body.get("context")
    if isinstance(context, dict) and context.get("timestamp") is not None:
        context["timestamp"] = now
    for item in case.body.get("feedback") or []:
        if isinstance(item, dict) and item.get("timestamp") is not None:
            item["timestamp"] = now


@schemathesis.hook
def after_call(context: HookContext, case: Case, response: Response) -> None:
    answers = os.environ.get("PERSO_CONTRACT_ANSWERS")
    if answers:
        with open(answers, "a") as out:
            out.write(
                f"{case.operation.method.upper()} {case.operation.path} {response.status_code}\n"
            )
