"""Origin-to-edge synchronisation over ``edge_sync:{region}`` Redis streams.

Empty until the sync issue: the publisher, the edge-side subscriber with resumable cursors
and gap detection, and the msgpack wire format of sync messages will live here.
"""
