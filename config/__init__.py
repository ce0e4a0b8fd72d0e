"""Typed settings of every process, read once from the environment at start-up.

A leaf: imports only ``protocol``. Edge, origin, workers and the ``perso`` command all
read their configuration from here, so an edge deployed alone needs no CLI package.
"""
