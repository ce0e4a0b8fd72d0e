"""One setting's note on the configuration page: which processes read it, what it means,
and what the commands set it to when that differs from the code's default."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Note:
    used_by: str  # the processes or commands that read it: origin, edge, worker, up, ...
    meaning: str
    default: str = ""  # what a command sets instead of the default, or what unset means
