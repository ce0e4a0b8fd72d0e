"""What the origin has learned, as it is kept in Redis: the items' engagement posteriors per
context cell and for all contexts (``posteriors``), the users' models and the worker's
state of each user (``user_models``), and position bias (``examination``). Written by the
stream workers from the joined decisions and feedback, read by ranking. Beside them, what
users stated rather than what was learnt: their category preferences as stored
(``stated_preferences``; changing them is ``origin.ranking.preferences``'s), read by
ranking, the user-state route and the workers that send them to the edges.

The arithmetic is ``relevance``'s; this room holds the keys' layouts, the Lua scripts and
the codecs. Imports only ``relevance``, ``protocol`` and the origin's base: the rooms that
read and write it (``origin.ranking``, ``origin.worker``) both may import it.
"""
