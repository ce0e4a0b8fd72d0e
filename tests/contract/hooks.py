"""schemathesis hooks of the contract run (``schemathesis.toml`` names this module).

- The edge wants a token of the user its body names (403 otherwise): a case that carries
  the configured placeholder token gets one signed for that user with the test
  deployment's identity key. A case sent without credentials (the ``ignored_auth`` check)
  stays without.
- Client times must lie near the server's clock (``protocol.client_time``), which JSON
  Schema cannot say: valid cases get the time now, so that they test the rest of the body
  instead of being refused for their timestamp; invalid cases keep theirs.
- Valid deletes of catalog items name ids nothing ingested (``ABSENT_PREFIX``), so that they
  cannot take away the items other cases personalize and explain with; they answer 200
  with those ids ``absent``, which exercises the operation all the same.
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
ABSENT_PREFIX = "contract-absent-"
DELETE_ONE = "/v1/admin/catalog/items/{item_id}"
DELETE_MANY = "/v1/admin/catalog/items:delete"


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
    _absent_ids_in_valid_deletes(case)


def _absent(item_id: object) -> object:
    if not isinstance(item_id, str) or item_id.startswith(ABSENT_PREFIX):
        return item_id
    return (ABSENT_PREFIX + item_id)[:200]


def _absent_ids_in_valid_deletes(case: Case) -> None:
    if case.meta is None or case.meta.generation.mode is not GenerationMode.POSITIVE:
        return
    path = case.operation.path
    if path == DELETE_ONE and case.path_parameters:
        case.path_parameters["item_id"] = _absent(case.path_parameters.get("item_id"))
    elif path == DELETE_MANY and isinstance(case.body, dict):
        ids = case.body.get("item_ids")
        if isinstance(ids, list):
            case.body["item_ids"] = [_absent(i) for i in ids]


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
