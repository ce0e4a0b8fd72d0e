"""Times that clients send (``context.timestamp``, ``feedback[].timestamp``) and the window in
which they are believed.

A client's clock is input like any other: ``0001-01-01T00:00:00+23:59`` and
``9999-12-31T23:59:59Z`` are valid ISO 8601 and valid JSON Schema ``date-time``, yet the
first cannot even be converted to UTC, and both would decay, bucket and key interactions
nonsensically. A time is accepted when

- its UTC offset is one a real time zone has (within +-14 h; naive times are UTC), and
- it lies within ``MAX_AGE_S`` before and ``MAX_AHEAD_S`` after the receiver's clock
  (30 days back covers clients that buffer events offline; a day ahead covers clocks set
  to the wrong zone).

Anything else is a 400 naming the field. ``check`` is pure (the caller says what time it
is); the request models call it with the clock passed in their validation context
(``{"now": seconds}``), and with the wall clock when there is none.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

MAX_AGE_S = 30 * 86_400
MAX_AHEAD_S = 86_400
MAX_UTC_OFFSET = timedelta(hours=14)

# The validation context's key for the receiver's clock (seconds since the epoch).
NOW = "now"


def check(moment: datetime, now_s: float) -> datetime:
    """``moment``, unchanged, if it is a time to believe at ``now_s`` (a naive one is read
    as UTC); ValueError saying why otherwise (pydantic turns it into the field's 400)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    offset = aware.utcoffset()
    if offset is not None and abs(offset) > MAX_UTC_OFFSET:
        raise ValueError("UTC offset must be within +-14:00")
    try:
        at = aware.timestamp()
    except (OverflowError, ValueError, OSError):
        raise ValueError("timestamp is out of range") from None
    if at < now_s - MAX_AGE_S:
        raise ValueError(f"timestamp must not be more than {MAX_AGE_S // 86_400} days old")
    if at > now_s + MAX_AHEAD_S:
        raise ValueError(f"timestamp must not be more than {MAX_AHEAD_S // 3600} h ahead")
    return moment


def now_of(context: Any) -> float:
    """The receiver's clock from a validation context, the wall clock without one."""
    if isinstance(context, dict):
        now = context.get(NOW)
        if isinstance(now, int | float):
            return float(now)
    return time.time()
