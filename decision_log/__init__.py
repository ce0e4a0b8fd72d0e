"""The decision log's writer (``writer``): edges and origins append every answer they serve
to ``decisions:{p}`` (with the context and shadow logs beside it), off the request path,
for the stream workers to join and offline evaluation to read.

Both edge and origin write it, and an edge never imports ``origin``, so it has a package of
its own. The records' codecs are ``protocol``'s (``protocol.decisions``,
``protocol.contexts``, ``protocol.shadows``). Imports only ``protocol``, ``config`` and
``redis_client``.
"""
