"""The Redis keys page's tables: every key builder of ``protocol.keys`` (its pattern, made
by calling it with placeholders, and its docstring) and every name it spells as a constant
(with the comment above it), under the module's own section headings."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

from perso.reference.markdown import cell, table
from protocol import keys

HEADER = ("key", "in `protocol.keys`", "what it holds")
# Functions of the module that return a string but build no key.
NOT_BUILDERS = frozenset({"consumer_of"})  # reads the consumer out of a key
_SECTION = re.compile(r"^# --- (?P<title>.+?) -+$")


@dataclass(frozen=True, slots=True)
class Key:
    pattern: str
    name: str  # how the code spells it: ``user_record(user_id)``, ``CATALOG_MANIFEST``
    holds: str
    section: str


def builders() -> list[Callable[..., str]]:
    """The key builders: the module's public functions that return a key, in source order."""
    found = [
        function
        for name, function in inspect.getmembers(keys, inspect.isfunction)
        if function.__module__ == keys.__name__
        and not name.startswith("_")
        and name not in NOT_BUILDERS
        and function.__annotations__.get("return") == "str"
    ]
    return sorted(found, key=lambda function: function.__code__.co_firstlineno)


def pattern(builder: Callable[..., str]) -> str:
    """The key ``builder`` makes, each argument shown as ``<its name>``."""
    params = inspect.signature(builder).parameters
    return builder(*(f"<{name}>" for name in params))


def all_keys() -> list[Key]:
    """Every key of ``protocol.keys``, builders and constants, in source order."""
    source = inspect.getsource(keys)
    lines = source.splitlines()
    sections = _sections(lines)
    found: list[tuple[int, Key]] = []
    for builder in builders():
        line = builder.__code__.co_firstlineno
        params = ", ".join(inspect.signature(builder).parameters)
        holds = inspect.getdoc(builder) or ""
        key = Key(pattern(builder), f"{builder.__name__}({params})", holds, sections(line))
        found.append((line, key))
    for node in ast.parse(source).body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            continue
        holds = _comment_above(lines, node.lineno)
        key = Key(node.value.value, node.targets[0].id, holds, sections(node.lineno))
        found.append((node.lineno, key))
    return [key for _, key in sorted(found, key=lambda pair: pair[0])]


def _sections(lines: list[str]) -> Callable[[int], str]:
    """The title of the ``# --- title ---`` heading above a (1-based) line."""
    headings = [
        (number, match["title"])
        for number, line in enumerate(lines, 1)
        if (match := _SECTION.match(line))
    ]

    def section(line: int) -> str:
        titles = [title for number, title in headings if number < line]
        return titles[-1] if titles else "named keys"

    return section


def _comment_above(lines: list[str], lineno: int) -> str:
    """The comment lines right above a (1-based) line, up to a blank line or a heading."""
    comment: list[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].startswith("#") and not _SECTION.match(lines[index]):
        comment.insert(0, lines[index].lstrip("#").strip())
        index -= 1
    return " ".join(comment)


def _text(docstring: str) -> str:
    """A docstring as Markdown: reST's double backticks single, no control characters."""
    printable = "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in docstring)
    return cell(printable.replace("``", "`"))


def render() -> str:
    parts: list[str] = []
    current: list[Key] = []
    for key in all_keys():
        if current and key.section != current[0].section:
            parts.append(_section_table(current))
            current = []
        current.append(key)
    if current:
        parts.append(_section_table(current))
    return "\n".join(parts)


def _section_table(section: list[Key]) -> str:
    title = section[0].section
    rows = [(f"`{key.pattern}`", f"`{key.name}`", _text(key.holds)) for key in section]
    return f"### {title[0].upper()}{title[1:]}\n\n" + table(HEADER, rows)
