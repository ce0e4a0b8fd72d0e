"""The configuration page's table: every field of ``config.settings.Settings``, by its
environment variable, with its default and bounds from the code and its description from
``setting_notes`` (written for readers of the docs), else the field's own ``description``."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from config.environment import env_name
from config.settings import Settings
from perso.reference.markdown import cell, table
from perso.reference.setting_notes import NOTES, Note

HEADER = ("variable", "default", "allowed", "used by", "meaning")


def default_text(info: FieldInfo) -> str:
    """The default as one would write it in the environment; ``unset`` for none."""
    value = info.default
    if value is None or value is PydanticUndefined or value in ("", ()):
        return "unset"
    return f"`{env_value(value)}`"


def env_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, tuple):
        return ",".join(env_value(part) for part in value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def allowed_text(info: FieldInfo) -> str:
    """The bounds (``ge``, ``le``, ...) or the choices of a ``Literal``; empty for neither."""
    choices = literal_choices(info.annotation)
    if choices:
        return ", ".join(f"`{env_value(choice)}`" for choice in choices)
    bounds: list[str] = []
    for meta in info.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            bound = getattr(meta, attribute, None)
            if bound is not None:
                bounds.append(f"{sign} {env_value(bound)}")
        pattern = getattr(meta, "pattern", None)
        if pattern is not None:
            bounds.append(f"`{pattern}`")
        min_length = getattr(meta, "min_length", None)
        if min_length:
            bounds.append(f"length ≥ {min_length}")
        max_length = getattr(meta, "max_length", None)
        if max_length is not None:
            bounds.append(f"length ≤ {max_length}")
    if info.annotation is bool:
        return "`true`, `false`"
    return ", ".join(bounds)


def literal_choices(annotation: Any) -> tuple[object, ...]:
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return ()


def note_of(field: str, info: FieldInfo) -> Note | None:
    """What the page says of a setting: the hand-written note, else the field's own
    description; None when it has neither (``tests/unit/docs`` fails on that)."""
    note = NOTES.get(env_name(field))
    if note is not None:
        return note
    if info.description:
        return Note("", info.description)
    return None


def undescribed() -> list[str]:
    """The variables of the settings the page has no words for."""
    return [
        env_name(field)
        for field, info in Settings.model_fields.items()
        if note_of(field, info) is None
    ]


def stale_notes() -> list[str]:
    """Notes in ``setting_notes`` for a variable no setting has."""
    known = {env_name(field) for field in Settings.model_fields}
    return sorted(set(NOTES) - known)


def render() -> str:
    rows = []
    for field, info in Settings.model_fields.items():
        note = note_of(field, info) or Note("", "")
        default = default_text(info)
        if note.default:
            default = f"{default} ({note.default})"
        rows.append(
            (f"`{env_name(field)}`", default, allowed_text(info), note.used_by, note.meaning)
        )
    return table(HEADER, [tuple(cell(text) for text in row) for row in rows])
