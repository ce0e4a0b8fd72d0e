"""What the ``perso`` command prints: progress lines and plain-text tables."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO


def progress_line(
    label: str, stream: TextIO = sys.stderr, clock: Callable[[], float] = time.monotonic
) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback with rate and ETA: one redrawn line on a
    terminal, a line per 10% step in a log file."""
    started = clock()
    interactive = stream.isatty()
    last_step = -1

    def report(done: int, total: int) -> None:
        nonlocal last_step
        elapsed = max(clock() - started, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0.0
        pct = 100.0 * done / total if total else 100.0
        line = f"{label}: {done}/{total} ({pct:5.1f}%) {rate:,.0f}/s eta {eta:4.0f}s"
        if interactive:
            stream.write("\r" + line + ("\n" if done >= total else ""))
        elif int(pct // 10) > last_step:
            last_step = int(pct // 10)
            stream.write(line + "\n")
        stream.flush()

    return report


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, right-aligned others."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        )

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(row) for row in cells[1:]]
    return "\n".join(lines)
