"""The edge's ``/openapi.json``: FastAPI's document of health, readiness, metrics and the
internal routes, plus the three POST routes that ``edge.http.asgi`` serves without FastAPI
(``web.openapi``), and the demo token route when the edge runs it (``edge.http.demo_tokens``:
open to anyone, which is why it is off unless asked for).

Their request and response bodies are ``protocol.api``'s models, their errors the one
error body, their security the bearer user token that an edge verifies itself
(``edge.identity``). Documenting them here keeps FastAPI off the hot path: nothing of this
runs per request, the document is made once when first asked for. The internal routes
(``edge.http.access``) want the service token, with its 401.
"""

from __future__ import annotations

from pydantic import BaseModel

from edge.http.access import is_internal
from edge.http.demo_tokens import DEMO_TOKEN_PATH
from protocol.api import (
    DemoTokenRequest,
    ExplainRequest,
    ExplainResponse,
    FeedbackRequest,
    FeedbackResponse,
    PersonalizeRequest,
    PersonalizeResponse,
    TokenResponse,
)
from web.openapi import (
    Spec,
    drop_fastapi_errors,
    error_responses,
    json_content,
    operations,
    replace_422,
    schema_ref,
)

SECURITY_SCHEMES: Spec = {
    "UserToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "A user token from the origin's POST /v1/auth/token; the body's "
        "user_id must be the token's user.",
    },
    "ServiceToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "PERSO_ORIGIN_TOKEN, as the origin's (internal routes answer 401 "
        "when it is unset).",
    },
}

_X_CACHE = {
    "description": "HIT, MISS or STALE: how the edge's cache served the answer",
    "schema": {"type": "string", "enum": ["HIT", "MISS", "STALE"]},
}
_STRING = {"schema": {"type": "string"}}
# The CDN headers of a personalize answer (edge.http_cache).
_CACHE_HEADERS: Spec = {
    "ETag": {"description": "weak validator of the answer", **_STRING},
    "Cache-Control": {"description": "private; how long the answer stays fresh", **_STRING},
    "Vary": {"description": "Authorization", **_STRING},
    "Age": {"description": "seconds since the origin made the answer", **_STRING},
    "X-Cache": _X_CACHE,
}

# path -> (summary, request, answer, error statuses besides 401 and 413)
ROUTES: dict[str, tuple[str, type[BaseModel], type[BaseModel], tuple[int, ...]]] = {
    "/v1/personalize": (
        "Ranked items for the token's user",
        PersonalizeRequest,
        PersonalizeResponse,
        (400, 403, 412, 429, 503),
    ),
    "/v1/feedback": (
        "The user's interactions with items shown",
        FeedbackRequest,
        FeedbackResponse,
        (400, 403, 429, 503),
    ),
    "/v1/explain": (
        "Why an item suits the user",
        ExplainRequest,
        ExplainResponse,
        (400, 403, 404, 429, 503),
    ),
}


def post_operation(spec: Spec, path: str) -> Spec:
    summary, request, answer, errors = ROUTES[path]
    ok: Spec = {
        "description": "OK",
        "content": json_content(schema_ref(spec, answer, answer.__name__)),
    }
    operation: Spec = {
        "summary": summary,
        "operationId": path.removeprefix("/v1/") + "_post",
        "security": [{"UserToken": []}],
        "requestBody": {
            "required": True,
            "content": json_content(schema_ref(spec, request, request.__name__)),
        },
        "responses": {"200": ok},
    }
    responses = operation["responses"]
    if path == "/v1/personalize":
        ok["headers"] = _CACHE_HEADERS
        operation["parameters"] = [
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "description": (
                    "an ETag of an earlier answer: 412 while it is unchanged (a POST's failed "
                    "precondition, RFC 9110 13.1.2; the ETag is sent)"
                ),
                **_STRING,
            }
        ]
    elif path == "/v1/explain":
        ok["headers"] = {"X-Cache": _X_CACHE}
    elif path == "/v1/feedback":
        responses["202"] = {
            "description": "Held: no origin could take the feedback now, so the edge holds it "
            'on its disk and hands it on when one can (`"status": "held"`); nothing to resend',
            "content": ok["content"],
        }
    responses.update(error_responses(spec, sorted({*errors, 401, 413})))
    if "412" in responses:
        responses["412"]["headers"] = _CACHE_HEADERS
    operation["responses"] = dict(sorted(responses.items()))
    return operation


def demo_token_operation(spec: Spec) -> Spec:
    """``POST /v1/demo/token``: no credential (that is the point, and the danger)."""
    return {
        "summary": "A user token for any user id (demo mode only: PERSO_DEMO_TOKENS)",
        "description": "Asks the origin's POST /v1/auth/token with the edge's demo API key, "
        "as a shop's backend would, and returns its answer. Anyone who can reach the edge "
        "gets a token for any user: never on in production.",
        "operationId": "demo_token_post",
        "security": [],
        "requestBody": {
            "required": True,
            "content": json_content(schema_ref(spec, DemoTokenRequest, "DemoTokenRequest")),
        },
        "responses": {
            "200": {
                "description": "OK",
                "content": json_content(schema_ref(spec, TokenResponse, "TokenResponse")),
            },
            **error_responses(spec, [400, 413, 429, 503]),
        },
    }


def complete(spec: Spec, *, extra: tuple[str, ...] = ()) -> None:
    """``extra``: the paths ``edge.http.asgi`` serves besides the API's (the demo token route)."""
    spec.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for path, _method, operation in operations(spec):
        replace_422(spec, operation)
        if is_internal(path):
            operation["security"] = [{"ServiceToken": []}]
            responses = operation.setdefault("responses", {})
            responses.update(error_responses(spec, [401]))
            operation["responses"] = dict(sorted(responses.items()))
        else:
            operation["security"] = []  # health, readiness, metrics: open
    paths = spec.setdefault("paths", {})
    for path in ROUTES:
        paths[path] = {"post": post_operation(spec, path)}
    if DEMO_TOKEN_PATH in extra:
        paths[DEMO_TOKEN_PATH] = {"post": demo_token_operation(spec)}
    drop_fastapi_errors(spec)
