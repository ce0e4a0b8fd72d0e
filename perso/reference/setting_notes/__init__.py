"""What the configuration page says of each setting, by environment variable: which
processes read it, what it means, and what the commands set it to when that differs from
the code's default (``perso up --demo``, ``--llm local``, ...). Written for readers of the
docs (first copied from the README's table); ``settings_page`` takes the variable's name,
default and bounds from the code, and ``tests/unit/docs`` fails for a setting with no note
here and no ``description`` of its own, or a note here for a setting that is gone.

This package is data: one table per area of ``config.settings``, each with one entry per
setting in the order of ``config.settings``; ``NOTES`` is their union, the one lookup.
"""

from __future__ import annotations

from perso.reference.setting_notes.credentials import CREDENTIALS_NOTES
from perso.reference.setting_notes.edge import EDGE_NOTES
from perso.reference.setting_notes.llm import LLM_NOTES
from perso.reference.setting_notes.note import Note
from perso.reference.setting_notes.places import PLACES_NOTES
from perso.reference.setting_notes.ranking import RANKING_NOTES
from perso.reference.setting_notes.streams import STREAMS_NOTES
from perso.reference.setting_notes.workers import WORKERS_NOTES

__all__ = ["NOTES", "Note"]

NOTES: dict[str, Note] = {
    **PLACES_NOTES,
    **RANKING_NOTES,
    **STREAMS_NOTES,
    **EDGE_NOTES,
    **CREDENTIALS_NOTES,
    **LLM_NOTES,
    **WORKERS_NOTES,
}
