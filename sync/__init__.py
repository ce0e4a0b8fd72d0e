"""Origin-to-edge synchronisation over ``edge_sync:{region}`` Redis streams.

``messages`` (what is said), ``codec`` (its msgpack wire format), ``publisher`` (the
origin side: sequences, every region or none), ``subscriber`` (the edge side: in order,
resumable cursors in ``cursor``, continuity rules in ``gaps``), ``exceptions``. The decision log's
writer, which edges and origins also share, is ``decision_log.writer``'s.
"""
