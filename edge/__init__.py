"""The edge (PoP) node: answers from what it holds, ranks for the users it holds state for,
calls an origin on a miss and to forward feedback. Deployed alone: nothing here imports
``origin`` or ``perso``.

At the top: ``app`` builds the app (its lifespan the node's resources), ``node`` is the
node itself (``build_edge``), ``sync_apply`` applies the region's sync messages; the base
every room may use: ``identity`` (tokens), ``geo``, ``exceptions``. Six rooms, each
importing only those below it (``tests/unit/test_layers.py``):

- ``http``: the HTTP surface (``asgi`` serves the hot POSTs without a framework; access,
  the storefront's files, OpenAPI, metrics, demo tokens, held state, dependencies);
- ``serve``: what each endpoint does (personalize, feedback, explain, the origin fill, the
  answer ranked from a pool);
- ``ranking``: a pool ranked for a user, the banks of runs, the users' models and views,
  the items' live posteriors, the shadow evaluation;
- ``cache``: entries, keys, stores, codec, freshness, coalescing, fill leases, pre-warming,
  the popular list, removed items, explanations, prepared pools, rendered bytes, HTTP cache
  headers, the decision record;
- ``origins``: the client of the origins (which one, ejection, one origin's link, what their
  answers' headers say);
- ``limits``: rate limits, a process's own and the PoP's shared ones.
"""
