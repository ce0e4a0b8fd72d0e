"""A decision's join as Redis holds it (``u:{user}:dec:<request_id>``, a hash;
``origin.worker.joins`` says what it is for): its fields, the scripts that change it
atomically (and claim the due ones), and reading it back.

Its fields: ``d`` the decision record, ``cell`` its context cell, ``e:<item>`` an
engagement's best grade, ``x:<item>`` a dismiss, ``w:<item>`` an item's impression weight
(set when its decision came), ``k:<item>`` the item's state since, and ``c`` once it is
closed (a tombstone: its context cell).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from protocol.actions import ENGAGED_ACTIONS, grade_of
from protocol.api import Action
from protocol.decisions import Decision, decode_decision
from protocol.events import FeedbackEvent
from protocol.exceptions import MalformedMessage

log = logging.getLogger(__name__)

# A join read to close: user, request id, its decision (None: its record never came), the
# engagements noted (each item's best grade), the items dismissed (``parse_join``).
JoinRecord = tuple[str, str, Decision | None, dict[str, float], set[str]]

DECISION = b"d"
CLOSED = "c"
ENGAGED = "e:"
DISMISSED = "x:"
WEIGHT = "w:"  # an item's impression weight, set when its decision came
SEP = "\x1f"

# An item's state in a join whose impressions were counted (its ``k:<item>`` field).
ENGAGED_FIRST = "o"  # engaged before its decision came: counted as a success then
DISMISSED_FIRST = "x"  # dismissed before it came: a whole failure then
CONVERTED = "e"  # an engagement converted its impression
DISMISS_CONVERTED = "d"  # a dismiss made its impression a whole failure


# KEYS[1] the join
# ARGV[1] its field ('e:<item>' an engagement, 'x:<item>' a dismiss)   ARGV[2] the action's grade
# ARGV[3] an open join's TTL s   ARGV[4] the item
# A field holds the best grade noted for it. Where the item's impression was counted when
# its decision came (its 'w:<item>' weight), the first engagement converts it and a dismiss
# makes it a whole failure, once ('k:<item>' says which: 'e', 'd'; 'o' and 'x' when they
# came before the decision, counted with the impressions then); a redelivery gets the same
# reply, which its mark makes a no-op. Replies:
#   {'convert', cell, weight, grade}   take the impression back, count an engagement
#   {'dismiss', cell, weight}          count the rest of a whole failure
#   {'gain', cell, grade gained}       a better action on an engagement counted
#   {'late', cell}                     a join closed before impressions were counted: an
#                                      engagement nobody counted yet
#   {'undecided'}                      an open join whose decision has not come
#   nil                                nothing to count
NOTE = """
local closed = redis.call('HGET', KEYS[1], 'c')
local grade = tonumber(ARGV[2])
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local before = stored and tonumber(stored)
local better = (not before) or grade > before
local engagement = string.sub(ARGV[1], 1, 2) == 'e:'
local weight = redis.call('HGET', KEYS[1], 'w:' .. ARGV[4])
if weight then
  local cell = redis.call('HGET', KEYS[1], 'cell')
  if better then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
  if not closed then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
  local state = redis.call('HGET', KEYS[1], 'k:' .. ARGV[4])
  if not state then
    if engagement then
      redis.call('HSET', KEYS[1], 'k:' .. ARGV[4], 'e')
      return {'convert', cell, weight, ARGV[2]}
    end
    redis.call('HSET', KEYS[1], 'k:' .. ARGV[4], 'd')
    return {'dismiss', cell, weight}
  end
  if engagement and (state == 'e' or state == 'o') then
    if before and grade > before then return {'gain', cell, tostring(grade - before)} end
    if state == 'e' then return {'convert', cell, weight, stored or ARGV[2]} end
    return nil
  end
  if (not engagement) and state == 'd' then return {'dismiss', cell, weight} end
  return nil
end
if closed then
  if not stored then return {'late', closed} end
  if before and grade > before then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    return {'gain', closed, tostring(grade - before)}
  end
  return nil
end
if better then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
if redis.call('HEXISTS', KEYS[1], 'd') == 0 then return {'undecided'} end
return nil
"""
# NOTE's replies, by their first element.
CONVERT = "convert"
DISMISS = "dismiss"
GAIN = "gain"
LATE = "late"
UNDECIDED = "undecided"


# KEYS[1] a partition's due joins   ARGV[1] now ms   ARGV[2] claimed until, ms   ARGV[3] at most
# Returns the joins due, each claimed: due again at ARGV[2], so that no other worker closes
# it meanwhile (its closer removes it; were the closer to die, another closes it then).
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], member) end
return due
"""


# KEYS[1] the join   KEYS[2] the user's open decisions
# ARGV[1] the decision record   ARGV[2] request id   ARGV[3] served at, ms   ARGV[4] TTL s
# ARGV[5] its context cell   ARGV[6..] each shown item and its impression weight (pairs)
# Returns {0} for a join already closed, else {1, {request ids of the user's earlier
# ones}, {per shown item: its weight (the first delivery's), its state, its grade}}: state
# 'o' engaged before the decision came (grade: the best noted), 'x' dismissed before it,
# '' otherwise (or the conversion a note made since a first delivery: counted then as shown).
OPEN = """
if redis.call('HEXISTS', KEYS[1], 'c') == 1 then return {0} end
redis.call('HSET', KEYS[1], 'd', ARGV[1])
redis.call('HSETNX', KEYS[1], 'cell', ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
local earlier = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3])
local items = {}
for i = 6, #ARGV, 2 do
  local item = ARGV[i]
  redis.call('HSETNX', KEYS[1], 'w:' .. item, ARGV[i + 1])
  local state = redis.call('HGET', KEYS[1], 'k:' .. item)
  local grade = '0'
  if not state then
    local engaged = redis.call('HGET', KEYS[1], 'e:' .. item)
    if engaged then
      state = 'o'
    elseif redis.call('HEXISTS', KEYS[1], 'x:' .. item) == 1 then
      state = 'x'
    end
    if state then redis.call('HSET', KEYS[1], 'k:' .. item, state) end
  end
  if state == 'o' then
    grade = redis.call('HGET', KEYS[1], 'e:' .. item) or '0'
  elseif state ~= 'x' then
    state = ''
  end
  items[#items + 1] = redis.call('HGET', KEYS[1], 'w:' .. item)
  items[#items + 1] = state
  items[#items + 1] = grade
end
return {1, earlier, items}
"""


def field_of(e: FeedbackEvent) -> str | None:
    """The join's field for what ``e`` reports, None when it reports nothing joinable."""
    if e.action in ENGAGED_ACTIONS:
        return ENGAGED + e.item_id
    if e.action == Action.DISMISS:
        return DISMISSED + e.item_id
    return None


def member_of(user_id: str, request_id: str) -> str:
    """A join's member in its partition's due joins (``keys.decisions_due``)."""
    return f"{user_id}{SEP}{request_id}"


def as_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def parse_join(
    fields: Mapping[bytes, bytes],
) -> tuple[Decision | None, dict[str, float], set[str]]:
    """A join's decision (None when it has not come or cannot be read), the engagements
    noted (each item's best grade) and the items dismissed."""
    decision: Decision | None = None
    engaged: dict[str, float] = {}
    dismissed: set[str] = set()
    for name, value in fields.items():
        if name == CLOSED.encode():
            continue
        if name == DECISION:
            try:
                decision = decode_decision(value)
            except MalformedMessage as exc:
                log.warning("an unreadable decision in a join is skipped: %s", exc)
            continue
        text = as_text(name)
        if text.startswith(ENGAGED):
            engaged[text[len(ENGAGED) :]] = _grade(value)
        elif text.startswith(DISMISSED):
            dismissed.add(text[len(DISMISSED) :])
    return decision, engaged, dismissed


def kept_weights(fields: Mapping[bytes, bytes]) -> dict[str, float]:
    """The impression weights a join kept when its decision came (empty: a join of an
    older worker, whose items learn at its close)."""
    prefix = WEIGHT.encode()
    return {
        name[len(prefix) :].decode(): float(value)
        for name, value in fields.items()
        if name.startswith(prefix)
    }


def _grade(value: bytes) -> float:
    """A join field's grade (a join noted before grades were kept holds the action)."""
    text = as_text(value)
    try:
        return float(text)
    except ValueError:
        return grade_of(text)
