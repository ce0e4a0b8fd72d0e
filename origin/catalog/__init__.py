"""The catalog: items (``items``), their vectors (``fusion``: Algorithm 3, ``text_encoder``,
``item_vectors``), the vector store that is their system of record (``vector_store``),
ingest of the sample catalog and of catalogs of your own (``ingest``, ``sample``), the
in-memory index and its coarse index (``item_index``, ``coarse_index``), blue-green
rebuilds (``rebuild``), model deployments (``deployment``) and what catalog changes
announce to the edges (``events``).

Imports no other room of the origin; only the origin's base, ``protocol``, ``config``,
``coordination`` and ``sync``.
"""
