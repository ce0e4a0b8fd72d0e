"""Offline evaluation of ranking policies: what a candidate policy's engagement would have been,
estimated from a log of another policy's slates with their propensities and rewards.

Pure mathematics over arrays (``estimators``): no Redis, no HTTP, no clock. Imports only
``protocol`` and ``relevance`` of ours.
"""
