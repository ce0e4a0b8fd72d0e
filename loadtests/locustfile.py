"""Locust: simulated browsers of the traffic model against every region's edges.

Each Locust user is one simulated browser (``loadtests.traffic``) of an activity class:
``Casual``, ``Active`` and ``Power`` are Locust user classes weighted by their share of
the population (30/50/20) and paced by their request rate (1:3:8 times
``--perso-casual-rps``); Locust's log and HTML report give each class's users. A browser
asks its region's edge for a feed and sometimes acts on an item. Requests are named by
region (``us-east personalize``), and each region has its own row of type ``region`` over
all of its requests (``loadtests.report``).

The targets come from a stack file (``--perso-stack``, default ``.perso/stack.json``, as
``perso up`` writes it: every edge process of a region when it lists ``edge_urls``). With
``--perso-region R`` this process's users all browse region R, spread over its edges: one
Locust worker per region is how ``loadtests.distributed`` (``make load``) runs it. Without
it, one process drives every region:

    .venv/bin/perso up &
    .venv/bin/locust -f loadtests/locustfile.py --headless -u 20 -r 10 --run-time 30s

Traffic stays on the stack file's addresses; ``--run-time`` bounds it.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

from locust import FastHttpUser, events, task
from locust.env import Environment

from loadtests.exceptions import TargetsError
from loadtests.report import REGION_ROW, region_of, request_name
from loadtests.targets import Targets, read_stack, route
from loadtests.traffic import (
    ACTIVITY,
    SimUser,
    Traffic,
    activity_pools,
    make_population,
    mean_wait_s,
)

_state: dict[str, Any] = {}
_user_numbers = itertools.count()


def _arguments(parser: Any) -> None:
    parser.add_argument("--perso-stack", default=".perso/stack.json", help="perso stack file")
    parser.add_argument("--perso-users", type=int, default=3000, help="simulated population")
    parser.add_argument("--perso-seed", type=int, default=1, help="traffic seed")
    parser.add_argument(
        "--perso-region", default="", help="browse only this region (one worker per region)"
    )
    parser.add_argument(
        "--perso-casual-rps",
        type=float,
        default=0.5,
        help="page views a second of a casual browser (active 3x, power 8x)",
    )


def _load(environment: Environment, **_: Any) -> None:
    options = environment.parsed_options
    if options is None:  # Locust parses its command line before init; a library use may not
        raise SystemExit("the perso Locust file needs Locust's command-line options")
    try:
        targets: Targets = read_stack(Path(options.perso_stack))
    except TargetsError as exc:
        raise SystemExit(str(exc)) from exc
    # Read once here: a master sends its own options to its workers with every spawn
    # message, which would overwrite each worker's --perso-region with the master's none.
    region = options.perso_region or None
    if region is not None and region not in targets.edges:
        raise SystemExit(f"--perso-region {region}: not a region of {options.perso_stack}")
    if options.perso_casual_rps <= 0:
        raise SystemExit(f"--perso-casual-rps must be > 0, got {options.perso_casual_rps}")
    population = make_population(options.perso_users, targets.regions, options.perso_seed)
    _state.update(
        environment=environment,
        targets=targets,
        only_region=region,
        pools=activity_pools(population),
        seed=options.perso_seed,
        casual_rps=options.perso_casual_rps,
    )
    if not environment.host:
        environment.host = targets.edges[targets.regions[0]][0]


def _count_region(
    request_type: str,
    name: str,
    response_time: float | None,
    response_length: int,
    exception: BaseException | None = None,
    **_: Any,
) -> None:
    """Counts a region's request once more in that region's row. Through the entry itself,
    not ``stats.log_request``: Locust's total must not count it twice."""
    region = region_of(name, _state["targets"].regions)
    if region is None:
        return
    entry = _state["environment"].stats.get(region, REGION_ROW)
    entry.log(response_time, response_length)
    if exception is not None:
        entry.log_error(exception)


# Locust's EventHook.add_listener carries no annotations.
events.init_command_line_parser.add_listener(_arguments)  # type: ignore[no-untyped-call]
events.init.add_listener(_load)  # type: ignore[no-untyped-call]
events.request.add_listener(_count_region)  # type: ignore[no-untyped-call]


class Browser(FastHttpUser):
    abstract = True
    activity = "casual"

    def wait_time(self) -> float:
        # Uniform around the class's mean: the same rate, without browsers in lockstep.
        mean = mean_wait_s(self.activity, _state["casual_rps"])
        return self.rng.uniform(0.5 * mean, 1.5 * mean)

    def on_start(self) -> None:
        number = next(_user_numbers)
        region, self.base = route(_state["targets"], _state["only_region"], number)
        self.rng = random.Random(f"{_state['seed']}:{region}:{self.activity}:{number}")
        pools: dict[tuple[str, str], list[SimUser]] = _state["pools"]
        pool = pools.get((region, self.activity)) or [
            user for (r, _), users in pools.items() if r == region for user in users
        ]
        self.sim: SimUser = self.rng.choice(pool)
        self.auth: dict[str, str] | None = None
        self._sign_in()

    def _sign_in(self) -> None:
        """What the shop's backend does at sign-in: a user token from the origin. A failed
        attempt is a failed request in the report; the next page view tries again."""
        targets: Targets = _state["targets"]
        with self.client.post(
            f"{targets.origin_url}/v1/auth/token",
            json={"user_id": self.sim.user_id},
            headers={"x-api-key": targets.api_key},
            name="auth token",
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(_fault(response))
                return
            self.auth = {"authorization": f"Bearer {response.json()['token']}"}

    @task
    def browse(self) -> None:
        if self.auth is None:
            self._sign_in()
            if self.auth is None:
                return
        region = self.sim.region
        body = Traffic.personalize_body(self.sim, self.rng)
        with self.client.post(
            f"{self.base}/v1/personalize",
            json=body,
            headers=self.auth,
            name=request_name(region, "personalize"),
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(_fault(response))
                return
            answer = response.json()
        feedback = Traffic.feedback_body(self.sim, answer["items"], self.rng, answer["request_id"])
        if feedback is not None:
            self.client.post(
                f"{self.base}/v1/feedback",
                json=feedback,
                headers=self.auth,
                name=request_name(region, "feedback"),
            )


def _fault(response: Any) -> str:
    # A refused or reset connection has no status (0) and no body, only its error.
    if response.error is not None and not response.status_code:
        return f"no answer: {response.error}"
    return f"status {response.status_code}: {(response.text or '')[:200]}"


def _weight(activity: str) -> int:
    return round(ACTIVITY[activity][0] * 100)


class Casual(Browser):
    activity = "casual"
    weight = _weight("casual")


class Active(Browser):
    activity = "active"
    weight = _weight("active")


class Power(Browser):
    activity = "power"
    weight = _weight("power")
