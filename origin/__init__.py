"""The origin: HTTP API, catalog and its vectors, retrieval and ranking, feedback intake,
and the streaming embedding worker. Edges call it on a cache miss and to forward feedback."""
