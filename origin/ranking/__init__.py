"""Ranking: from a request's candidates to the ranked items and their explanations.

Retrieval (``retrieval``), the request's context cell and the user's profile
(``profile``), the pipeline from candidates to a ranking (``pipeline``: the slate itself is
``relevance.slate``'s Thompson-sampling decision over the item posteriors and the user's
model kept in ``origin.learned``), emotion-aware score shifts (``emotion``, ``rerank``),
explicit preferences' effect on scores and their fenced store (``preferences``), template
explanations (``explanations``), the user's recent interactions and context (``history``)
and the items of the API's answer (``response``). Mostly pure functions over numpy arrays.

May import ``origin.learned``, ``origin.catalog`` and the origin's base; never
``origin.worker``, ``origin.llm`` or ``origin.http``.
"""
