"""The edge (PoP) node: answers from the entries it holds, calls an origin on a miss and
to forward feedback. Deployed alone: nothing here imports ``origin`` or ``perso``.

``app`` builds the app (its lifespan the node's resources), ``asgi`` serves the hot POSTs
without a framework, ``node`` is the node itself (``build_edge``), ``personalize``,
``feedback`` and ``explain`` answer their endpoints, ``fill`` keys, looks up and fills
entries (``cache_key``: Algorithm 5 per audience; ``coalesce``; ``prewarm``),
``cache``, ``entry_store``, ``redis_entry_store`` and ``entry_codec`` keep entries,
``freshness`` says how an entry may be used now, ``sync_apply`` applies the region's sync
messages, ``origin_client`` calls the origins (``origin_pool``: which one, ejection,
panic; ``origin_link``: one origin; ``origin_answers``: what their headers say), and
``identity``, ``rate_limit``,
``http_cache``, ``render``, ``popular``, ``geo``, ``user_view``, ``explain_cache``,
``dependencies``, ``metrics``, ``openapi`` and ``exceptions`` do what they say.
"""
