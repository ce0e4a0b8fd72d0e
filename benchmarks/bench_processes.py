"""Processes of a benchmark's run, read from ``/proc``: a server's process tree, its CPU
time, pinning it to a core, and the tools it needs found (``benchmarks.edge_hit``,
``benchmarks.cluster_throughput``). Linux only."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is None:  # root's tools are in sbin, which a user's PATH may lack
        found = next(
            (p for d in ("/usr/sbin", "/sbin") if os.access(p := f"{d}/{name}", os.X_OK)), None
        )
    return found


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    parents = {int(p): _parent_of(int(p)) for p in os.listdir("/proc") if p.isdigit()}
    tree, frontier = [pid], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        tree += children
        frontier = children
    return tree


def pin(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` and of its descendants onto ``cpu`` (threads and processes
    they start later inherit it)."""
    for process in process_tree(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{process}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task), {cpu})


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def find_server_pid(port: int, role: str = "edge") -> int:
    """The ``perso <role>`` child of this process serving ``port`` (``edge`` or ``origin``)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or _parent_of(int(entry)) != me:
            continue
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if role.encode() in argv and str(port).encode() in argv:
                return int(entry)
    raise RuntimeError(f"no {role} process of ours serves port {port}")


def find_edge_pid(port: int) -> int:
    """The ``perso edge`` child of this process serving ``port``."""
    return find_server_pid(port, "edge")
