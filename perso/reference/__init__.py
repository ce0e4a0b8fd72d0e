"""The documentation's reference pages, generated from the code so they cannot drift.

``python -m perso.reference`` rewrites the generated part of each page in ``docs/``
(between ``<!-- BEGIN GENERATED ... -->`` and ``<!-- END GENERATED -->``; the prose around it
is written by hand); ``tests/unit/docs`` fails when a committed page differs from what this
makes of the code. ``settings_page``: every setting of ``config.settings``;
``api_page``: every route of the origin's and the edge's OpenAPI documents;
``keys_page``: every key of ``protocol.keys``. ``pages`` ties each to its file.
"""
