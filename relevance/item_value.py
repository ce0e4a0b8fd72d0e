"""What an engagement with an item is worth: the graded reward, kept apart from the
engagement rate.

The item posteriors (``relevance.item_posteriors``) learn how often an examined item is
engaged with, a click or better each a success. What the engagement was worth to the shop
(a click, an add-to-cart, a purchase; ``protocol.actions``'s grades, or the client's
``reward_override``) is learnt beside it, per item over all contexts: the mean grade of its
engagements, each engagement counted once at its best grade, on top of
``VALUE_PRIOR_STRENGTH`` pseudo-engagements worth a click. A purchase never turns a click
into part of a failure, and an item engaged with only by clicks is worth exactly a click.

Ranking orders by expected value, P(engage) * E[grade | engage]: on the probit scale where
the slate's terms meet, an item's value is a shift of its score, the distance from its
mean engagement rate to that rate scaled by its value relative to a click (``value_shift``).
An item worth a click moves nowhere; one whose engagements end in purchases moves up as
if it were engaged with that much more often. The value is a posterior mean, not drawn:
exploration stays the engagement terms' (their draws' spread).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from protocol.actions import CLICK_GRADE
from relevance.normal import cdf, ppf

Array = npt.NDArray[np.float64]

# Pseudo-engagements worth a click that every item's value starts from: one purchase among
# a handful of engagements lifts an item, one lucky purchase does not make it a best seller.
VALUE_PRIOR_STRENGTH = 5.0
# The relative values a shift stays within (an item is at most this many times, or this
# fraction of, a click's worth): bounds what a few graded rewards can do to a score.
MAX_RELATIVE_VALUE = 8.0
# Engagement rates stay inside (0, 1) on the way back to the probit scale.
_RATE_EPS = 1e-6


def mean_values(engagements: Array, grades: Array, strength: float = VALUE_PRIOR_STRENGTH) -> Array:
    """Each item's expected grade of an engagement, relative to a click's: ``engagements``
    counted and the sum of their ``grades`` (decayed alike), on top of ``strength``
    pseudo-engagements at a click's grade."""
    engaged = np.maximum(engagements, 0.0)
    total = np.maximum(grades, 0.0) + strength * CLICK_GRADE
    mean = total / (engaged + strength)
    out: Array = np.clip(mean / CLICK_GRADE, 1.0 / MAX_RELATIVE_VALUE, MAX_RELATIVE_VALUE)
    return out


def value_shift(mean_score: Array, relative_value: Array, weight: float = 1.0) -> Array:
    """The probit-scale shift that ranks each item by its expected value: from
    ``mean_score`` (Φ⁻¹ of its mean engagement rate, the user's term included) to
    Φ⁻¹(rate * value^weight). ``weight`` 0 ranks by engagement alone; a value of 1 (a
    click's worth) moves nothing."""
    if weight == 0:
        return np.zeros_like(mean_score)
    rate = cdf(mean_score)
    valued = np.clip(rate * np.power(relative_value, weight), _RATE_EPS, 1 - _RATE_EPS)
    out: Array = np.where(relative_value == 1.0, 0.0, ppf(valued) - mean_score)
    return out
