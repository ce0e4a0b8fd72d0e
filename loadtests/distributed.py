"""``make load``: Locust distributed over the regions, headless and bounded.

One Locust master and one worker per region, all on loopback (the master binds
127.0.0.1 on a free port), each worker's users browsing only its own region's edges
(``--perso-region``). The master stops the run after ``--seconds``; this runner waits for
it within a hard bound (the run time, the workers' start-up, the reports' writing), stops
every process it started, and then reads the per-region rows of Locust's CSV stats
(``loadtests.report``) for a summary. Reports go to ``--report-dir`` (default
``<PERSO_DATA_DIR>/load``): Locust's HTML report, its CSV files, each process's log and a
``summary.json``.

Targets: the stack file of a running ``perso up`` (``--stack``), or a remote deployment's
``--edges REGION=URL[,URL...]`` (one per region), ``--origin URL`` and ``--api-key KEY``
(the origin issues user tokens for that key). Addresses off loopback need ``--remote``.
Exit status: 0 when every region got traffic and nothing failed, 1 when the run failed,
2 when it could not start as asked (missing or invalid targets or options).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from config.environment import load_settings
from config.settings import ConfigError
from loadtests import report
from loadtests.exceptions import LoadTestError, TargetsError
from loadtests.targets import Targets, make_targets, parse_edges, read_stack

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
HOST = "127.0.0.1"  # where the master listens for its workers
STARTUP_S = 30  # how long the master waits for every worker to connect
REPORTS_S = 30  # beyond the run: stopping users, the last stats, writing the reports
STOP_S = 10.0  # a process asked to stop gets this long before it is killed
CSV_PREFIX = "locust"
OUTPUTS = ("report.html", "summary.json", "targets.json")


@dataclass(frozen=True, slots=True)
class Plan:
    """One run: what to load, how hard, how long, where the reports go."""

    targets: Targets
    users: int
    spawn_rate: float
    seconds: int
    report_dir: Path
    population: int = 3000
    seed: int = 1
    casual_rps: float = 0.5
    master_port: int = 0

    @property
    def targets_file(self) -> Path:
        return self.report_dir / "targets.json"

    @property
    def html_file(self) -> Path:
        return self.report_dir / "report.html"

    @property
    def stats_csv(self) -> Path:
        return self.report_dir / f"{CSV_PREFIX}_stats.csv"

    def log(self, process: str) -> Path:
        return self.report_dir / f"{process}.log"


def hard_bound_s(seconds: int) -> float:
    """How long the master may take in all before it is stopped."""
    return float(seconds + STARTUP_S + REPORTS_S)


def _traffic_options(plan: Plan) -> list[str]:
    return [
        "--perso-stack", str(plan.targets_file),
        "--perso-users", str(plan.population),
        "--perso-seed", str(plan.seed),
        "--perso-casual-rps", str(plan.casual_rps),
    ]  # fmt: skip


def master_argv(plan: Plan) -> list[str]:
    return [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE),
        "--master", "--master-bind-host", HOST, "--master-bind-port", str(plan.master_port),
        "--expect-workers", str(len(plan.targets.regions)),
        "--expect-workers-max-wait", str(STARTUP_S),
        "--headless", "--users", str(plan.users), "--spawn-rate", str(plan.spawn_rate),
        "--run-time", f"{plan.seconds}s",
        "--html", str(plan.html_file), "--csv", str(plan.report_dir / CSV_PREFIX),
        "--only-summary",
        *_traffic_options(plan),
    ]  # fmt: skip


def worker_argv(plan: Plan, region: str) -> list[str]:
    return [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE),
        "--worker", "--master-host", HOST, "--master-port", str(plan.master_port),
        "--perso-region", region,
        *_traffic_options(plan),
    ]  # fmt: skip


def problems(
    master_code: int | None,
    worker_codes: Mapping[str, int | None],
    figures: Sequence[report.Figures] | None,
    bound_s: float,
    exceptions: int = 0,
) -> list[str]:
    """Why the run failed; empty when it did not. ``None`` codes: stopped by us;
    ``exceptions``: raised in Locust users' code (their requests go uncounted)."""
    found = []
    if master_code is None:
        found.append(f"the run took longer than {bound_s:.0f} s and was stopped")
    elif master_code != 0:
        found.append(f"the Locust master exited {master_code} (master.log says why)")
    for region, code in worker_codes.items():
        if code is None:
            found.append(f"the worker of {region} did not stop with the master")
        elif code != 0:
            found.append(f"the worker of {region} exited {code} (worker-{region}.log)")
    if exceptions:
        found.append(
            f"{exceptions:,} exceptions in the simulated browsers ({CSV_PREFIX}_exceptions.csv)"
        )
    if figures is None:
        found.append("Locust wrote no CSV stats")
        return found
    for f in figures:
        if f.requests == 0:
            found.append(f"{f.name}: no request reached its edges")
        elif f.failures:
            found.append(f"{f.name}: {f.failures:,} of {f.requests:,} requests failed")
    return found


def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


async def _stop(process: asyncio.subprocess.Process) -> int | None:
    """Stops ``process`` if it still runs: SIGTERM (Locust then writes its reports), then
    SIGKILL. Returns its exit code, or None when it had to be stopped."""
    if process.returncode is not None:
        return process.returncode
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), STOP_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    return None


async def _spawn(argv: Sequence[str], log: IO[bytes]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT
    )


def _prepare(plan: Plan) -> None:
    """An empty report folder for this run (an old run's files must not pass for its
    results) and the targets for the Locust processes, readable by the owner only: it
    holds the API key."""
    plan.report_dir.mkdir(parents=True, exist_ok=True)
    for path in plan.report_dir.glob(f"{CSV_PREFIX}_*.csv"):
        path.unlink()
    for path in [*map(plan.report_dir.joinpath, OUTPUTS), *plan.report_dir.glob("*.log")]:
        path.unlink(missing_ok=True)
    descriptor = os.open(plan.targets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(plan.targets.to_json(), file)


async def run(plan: Plan, say: Callable[[str], None] = print) -> int:
    """Runs the plan; returns the exit status (0 passed, 1 failed)."""
    _prepare(plan)
    regions = plan.targets.regions
    bound = hard_bound_s(plan.seconds)
    say(
        f"load: {plan.users} users over {len(regions)} regions ({', '.join(regions)}), "
        f"{plan.seconds} s, one Locust worker per region; reports in {plan.report_dir}/"
    )
    logs: list[IO[bytes]] = []
    started: list[asyncio.subprocess.Process] = []
    master_code: int | None = None
    worker_codes: dict[str, int | None] = {}
    try:
        logs.append(plan.log("master").open("wb"))
        master = await _spawn(master_argv(plan), logs[-1])
        started.append(master)
        workers = {}
        for region in regions:
            logs.append(plan.log(f"worker-{region}").open("wb"))
            workers[region] = await _spawn(worker_argv(plan, region), logs[-1])
            started.append(workers[region])
        try:
            master_code = await asyncio.wait_for(master.wait(), bound)
        except TimeoutError:
            await _stop(master)
        # The master tells its workers to quit as it ends; they get a moment to do so.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(w.wait() for w in workers.values())), STOP_S)
        worker_codes = {region: await _stop(w) for region, w in workers.items()}
    finally:
        for process in started:
            await _stop(process)
        for log in logs:
            log.close()
    figures, total, exceptions = _results(plan)
    found = problems(master_code, worker_codes, figures, bound, exceptions)
    _summarise(plan, figures, total, found, say)
    return 1 if found else 0


def _results(plan: Plan) -> tuple[list[report.Figures] | None, report.Figures | None, int]:
    """The regions' figures and Locust's total (None: no stats CSV was written), and how
    many exceptions the simulated browsers raised."""
    exceptions_csv = plan.report_dir / f"{CSV_PREFIX}_exceptions.csv"
    exceptions = (
        report.exception_count(report.read_rows(exceptions_csv)) if exceptions_csv.exists() else 0
    )
    if not plan.stats_csv.exists():
        return None, None, exceptions
    rows = report.read_rows(plan.stats_csv)
    return report.region_figures(rows, plan.targets.regions), report.aggregated(rows), exceptions


def _summarise(
    plan: Plan,
    figures: Sequence[report.Figures] | None,
    total: report.Figures | None,
    found: Sequence[str],
    say: Callable[[str], None],
) -> None:
    rows = list(figures or [])
    if rows:
        say("")
        say(report.table([*rows, *([total] if total else [])]))
        say("(regions: their edges' requests; all requests: with the user tokens' from the origin)")
    summary = {
        "passed": not found,
        "problems": list(found),
        "users": plan.users,
        "seconds": plan.seconds,
        "regions": [f.to_json() for f in rows],
        "all": total.to_json() if total else None,
        "html": str(plan.html_file),
        "csv": str(plan.stats_csv),
    }
    (plan.report_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    say(f"\nreport: {plan.html_file}  CSV: {plan.report_dir / CSV_PREFIX}_*.csv")
    for problem in found:
        say(f"FAILED: {problem}")
    if not found:
        say("passed: every region got traffic, no request failed")


def parser(data_dir: Path) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m loadtests.distributed",
        description="Locust across regions: a master and one worker per region, bounded.",
    )
    p.add_argument("--users", type=int, default=36, help="Locust users in all (default 36)")
    p.add_argument("--spawn-rate", type=float, default=10.0, help="users started a second")
    p.add_argument("--seconds", type=int, default=60, help="run time (default 60)")
    p.add_argument("--report-dir", type=Path, default=data_dir / "load")
    p.add_argument("--population", type=int, default=3000, help="simulated users to draw from")
    p.add_argument("--seed", type=int, default=1, help="traffic seed")
    p.add_argument("--casual-rps", type=float, default=0.5, help="a casual browser's pace")
    p.add_argument("--stack", type=Path, help=f"stack file (default {data_dir}/stack.json)")
    remote = p.add_argument_group("a deployment without a stack file")
    remote.add_argument(
        "--edges", action="append", default=[], metavar="REGION=URL[,URL...]",
        help="every edge URL of one region; once per region",
    )  # fmt: skip
    remote.add_argument("--origin", help="origin URL (issues the user tokens)")
    remote.add_argument("--api-key", help="API key for POST /v1/auth/token")
    remote.add_argument(
        "--remote", action="store_true", help="allow addresses off the loopback interface"
    )
    return p


def resolve_targets(args: argparse.Namespace, default_stack: Path) -> Targets:
    """The targets the options name: the remote options when any is given, else the stack
    file. Raises ``TargetsError`` saying what is missing."""
    given = {"--edges": args.edges, "--origin": args.origin, "--api-key": args.api_key}
    if any(given.values()):
        if args.stack is not None:
            raise TargetsError("give either --stack or --edges/--origin/--api-key, not both")
        missing = [name for name, value in given.items() if not value]
        if missing:
            raise TargetsError(f"a deployment without a stack file also needs {', '.join(missing)}")
        targets = make_targets(parse_edges(args.edges), args.origin, args.api_key, source="options")
    else:
        stack = args.stack or default_stack
        if not stack.exists():
            raise TargetsError(
                f"no stack file at {stack} and no --edges/--origin/--api-key: start the stack "
                "(`make up` in another shell) or name a deployment's edges, origin and API key"
            )
        targets = read_stack(stack)
    far = targets.not_loopback()
    if far and not args.remote:
        raise TargetsError(f"{', '.join(far)}: not loopback; pass --remote to load a deployment")
    return targets


def plan_of(args: argparse.Namespace, targets: Targets) -> Plan:
    """The run the options ask for; ``LoadTestError`` names an option out of range."""
    regions = len(targets.regions)
    if args.users < regions:
        raise LoadTestError(f"--users {args.users}: at least one per region ({regions})")
    for name, value in (("--seconds", args.seconds), ("--spawn-rate", args.spawn_rate),
                        ("--casual-rps", args.casual_rps)):  # fmt: skip
        if value <= 0:
            raise LoadTestError(f"{name} must be > 0, got {value}")
    if args.population < regions:
        raise LoadTestError(f"--population {args.population}: at least one per region")
    return Plan(
        targets=targets,
        users=args.users,
        spawn_rate=args.spawn_rate,
        seconds=args.seconds,
        report_dir=args.report_dir,
        population=args.population,
        seed=args.seed,
        casual_rps=args.casual_rps,
        master_port=free_port(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        data_dir = load_settings().data_dir
    except ConfigError as exc:
        print(f"load: {exc}", file=sys.stderr)
        return 2
    args = parser(data_dir).parse_args(argv)
    try:
        plan = plan_of(args, resolve_targets(args, data_dir / "stack.json"))
    except LoadTestError as exc:
        print(f"load: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(plan))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
