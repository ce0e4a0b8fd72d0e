"""What a user is likely to engage with, as pure functions over numpy arrays: the model and
the arithmetic that origin and edge share, so that the two cannot drift.

- ``user_model``: a user's taste as a Bayesian probit model on the item vectors (a diagonal
  Gaussian posterior that engagements and examined-but-ignored items both move), its
  updates, its fading with time, its Thompson draw, and its bytes;
- ``item_posteriors``: the items' engagement rates as Beta posteriors, a context cell
  shrunk toward the item's all-context cell, and their draws on the probit scale;
- ``examination``: position bias, the chance that a position is looked at at all,
  estimated from the decision log by expectation-maximisation;
- ``slate``: one decision, Thompson sampling over the candidates' scores with optional
  relevance-weighted diversity, and the propensity of every shown (item, position) by
  re-sampling the same policy.

Imports only ``protocol`` and numpy: the edge (deployed alone) and the origin both import
it.
"""
