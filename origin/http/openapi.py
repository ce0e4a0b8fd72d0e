"""The origin's ``/openapi.json``: FastAPI's document, completed (``web.openapi``).

- request bodies that routes parse themselves (``origin.http.inputs.JsonBody``), with the 400
  and 413 of every body;
- every operation's security from ``origin.http.auth.credential_for``, the table ``Access``
  enforces, with its 401: a bearer service token, a bearer admin token on ``/v1/admin/*``,
  ``X-API-Key`` on ``/v1/auth/token``;
- our 400 and error body where FastAPI declares its 422.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from origin.http.auth import API_KEY_HEADER, Credential, credential_for
from origin.http.inputs import JsonBody
from web.openapi import (
    Spec,
    drop_fastapi_errors,
    error_responses,
    json_content,
    operations,
    publish,
    replace_422,
    schema_ref,
)

SECURITY_SCHEMES: Spec = {
    "ServiceToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "PERSO_ORIGIN_TOKEN, which edges present (the API is open when unset).",
    },
    "AdminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "PERSO_ADMIN_TOKEN (admin endpoints answer 401 when it is unset).",
    },
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": API_KEY_HEADER,
        "description": "A customer backend's key from PERSO_API_KEYS.",
    },
}
SCHEME_OF = {
    Credential.SERVICE: "ServiceToken",
    Credential.ADMIN: "AdminToken",
    Credential.API_KEY: "ApiKey",
}


def body_of(route: APIRoute) -> JsonBody[object] | None:
    for dependency in route.dependant.dependencies:
        if isinstance(dependency.call, JsonBody):
            body: JsonBody[object] = dependency.call
            return body
    return None


def complete(app: FastAPI, spec: Spec) -> None:
    bodies = {
        (context.path, method.lower()): body
        for context in iter_route_contexts(app.routes)
        if isinstance(context.original_route, APIRoute)
        and (body := body_of(context.original_route)) is not None
        for method in context.methods or ()
    }
    spec.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for path, method, operation in operations(spec):
        replace_422(spec, operation)
        responses = operation["responses"]
        body = bodies.get((path, method))
        if body is not None:
            operation["requestBody"] = {
                "required": not body.optional,
                "content": json_content(schema_ref(spec, body.shape, body.name)),
            }
            responses.update(error_responses(spec, [400, 413]))
        credential = credential_for(path)
        if credential is Credential.NONE:
            operation["security"] = []
        else:
            operation["security"] = [{SCHEME_OF[credential]: []}]
            responses.update(error_responses(spec, [401]))
        operation["responses"] = dict(sorted(responses.items()))
    drop_fastapi_errors(spec)


def install(app: FastAPI) -> None:
    publish(app, lambda spec: complete(app, spec))
