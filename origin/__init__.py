"""The origin: the learning and control plane that edges call on a miss and for feedback.

Its rooms, each a sub-package whose docstring says what it holds, import one way
(checked by ``tests/unit/test_layers.py``)::

    http  ->  ranking | llm | worker  ->  catalog  ->  protocol, config, coordination, ...
              (llm may read ranking's vocabulary)
    http, worker  ->  event_streams  (the worker is a process of its own: http never
                                      imports it)

- ``origin.http``: the routers, one per resource, and the request flows they run;
- ``origin.ranking``: retrieval, the bandit and its posteriors, re-ranking, emotion,
  context features, preferences' effect on scores, explanations, user history, the
  response;
- ``origin.llm``: the LLM tier, what the model is told, speculation and pre-computation;
- ``origin.worker``: the stream worker (a process of its own: only it
  imports this room);
- ``origin.event_streams``: the event streams both processes use: the feedback append,
  the consumer groups and lag, the workers' standing as stored;
- ``origin.catalog``: items, fusion, text encoder, vector store, ingest, the in-memory
  index, the sample catalog, rebuilds, model deployment (and the live ranking policy the
  deployment pointer holds), catalog replicas (roles, the snapshot format, the client);
- ``origin.policies``: the registry of ranking policies and what a live one makes of the
  ranking's rules (imports ``origin.ranking``'s rules alone).

Beside them: ``app`` (the composition root: ``create_app``, with ``catalog_source``, where
the catalog comes from, and ``background_jobs``, the jobs beside the app), ``runtime``
(what a running origin holds, for the routers), ``control`` and ``catalog_follower``
(what an origin hears from the other origins, and the catalog reloads that calls for:
part of the composition, they import ``runtime``), and the base any room may use:
``exceptions``, ``locks`` (the configured lock backend), ``api_keys``.
"""
