"""Origin-to-edge synchronisation over ``edge_sync:{region}`` Redis streams.

``messages`` (what is said, and its msgpack wire format), ``publisher`` (the origin side:
sequences, every region or none), ``subscriber`` (the edge side: in order, resumable
cursors in ``cursor``, continuity rules in ``gaps``), ``exceptions``; and the decision
log's writer (``decision_log``), with which edges and origins append the answers they
serve for the workers to join.
"""
