"""What the HTTP servers of edge and origin share, above the wire contracts of
``protocol``: the error body every 4xx/5xx carries and its FastAPI wiring (``problems``),
request bodies parsed into their models (``request_body``) and bounded in size
(``body_limit``), JSON answers (``responses``), health, readiness and dependencies
(``health``), and what the API documents add to FastAPI's (``openapi``).

Imports only ``protocol`` of ours (and the web framework: Starlette, FastAPI, pydantic);
``edge`` and ``origin`` import it, ``protocol`` never does.
"""
