"""The edge's HTTP surface: the ASGI front, access checks, the storefront's files, the OpenAPI
document, metrics, demo tokens, the held-state route and the dependency checks."""
