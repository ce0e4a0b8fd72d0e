"""The catalog: items (``items``), their vectors (``fusion``: multi-modal fusion, ``text_encoder``,
``item_vectors``), the vector store that is their system of record (``vector_store``),
ingest of the sample catalog and of catalogs of your own (``ingest``, ``sample``), the
in-memory index (``item_index``, its coarse index ``relevance.coarse_index``), blue-green
rebuilds (``rebuild``), model deployments (``deployment``), what catalog changes
announce to the edges (``events``), and several origins over one catalog: who holds the
store and what to reload (``replication``), the catalog's wire format to a replica
(``snapshot``) and a replica's client of the catalog origin (``replica``).

Imports no other room of the origin; only the origin's base, ``protocol``, ``config``,
``coordination``, ``resilience`` and ``sync``.
"""
