"""``python -m perso.reference``: rewrite the generated parts of the reference pages;
``--check``: change nothing, exit 1 naming the pages that are behind the code."""

from __future__ import annotations

import argparse
import sys

from perso.reference.pages import COMMAND, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perso.reference", description=__doc__)
    parser.add_argument("--check", action="store_true", help="report stale pages, write none")
    args = parser.parse_args(argv)
    if args.check:
        behind = stale()
        for path in behind:
            print(f"{path} is behind the code: run {COMMAND}", file=sys.stderr)
        return 1 if behind else 0
    for path in write():
        print(f"rewrote {path}")
    return 0


raise SystemExit(main())
