"""Contracts shared by edge, origin and workers.

Wire schemas of the HTTP API (`api`), every Redis key and stream name (`keys`), the event
codec of the feedback streams (`events`), the vector byte codec (`vectors`), user activity
segments (`segments`) and the shape of error bodies (`errors`). Nothing here imports
`edge`, `origin` or `perso`.
"""
