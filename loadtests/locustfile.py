"""Locust: simulated browsers across every region's edge at once.

Each Locust user is one simulated browser of the traffic model (``loadtests.traffic``): it
belongs to a region, asks that region's edge for a feed, and sometimes acts on an item.
Requests are named by region, so Locust's table shows each region apart. The edges come
from the stack file ``perso up`` writes (``--perso-stack``, default ``.perso/stack.json``).

    .venv/bin/perso up &
    .venv/bin/locust -f loadtests/locustfile.py --headless -u 20 -r 10 --run-time 30s

Traffic stays on the stack's own addresses; ``--run-time`` bounds it.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from locust import FastHttpUser, between, events, task

from loadtests.traffic import SimUser, Traffic, make_population

_state: dict[str, Any] = {}
_user_numbers = itertools.count()


def _arguments(parser: Any) -> None:
    parser.add_argument("--perso-stack", default=".perso/stack.json", help="perso stack file")
    parser.add_argument("--perso-users", type=int, default=3000, help="simulated population")
    parser.add_argument("--perso-seed", type=int, default=1, help="traffic seed")


def _load(environment: Any, **_: Any) -> None:
    options = environment.parsed_options
    stack_file = Path(options.perso_stack)
    if not stack_file.exists():
        raise SystemExit(f"{stack_file} not found: start the stack with `perso up` first")
    stack = json.loads(stack_file.read_text())
    edges: dict[str, str] = stack["edges"]
    population = make_population(options.perso_users, list(edges), options.perso_seed)
    _state.update(
        edges=edges,
        traffic=Traffic(population),
        seed=options.perso_seed,
        origin_url=stack["origin_url"],
        api_key=stack["api_key"],
    )
    if not environment.host:
        environment.host = next(iter(edges.values()))


# Locust's EventHook.add_listener carries no annotations.
events.init_command_line_parser.add_listener(_arguments)  # type: ignore[no-untyped-call]
events.init.add_listener(_load)  # type: ignore[no-untyped-call]


class Browser(FastHttpUser):
    wait_time = between(0.05, 0.5)

    def on_start(self) -> None:
        traffic: Traffic = _state["traffic"]
        self.rng = random.Random(_state["seed"] * 1_000_003 + next(_user_numbers))
        self.sim: SimUser = traffic.next_user(self.rng)
        self.base = _state["edges"][self.sim.region]
        # What the shop's backend does at sign-in: a user token from the origin.
        response = self.client.post(
            f"{_state['origin_url']}/v1/auth/token",
            json={"user_id": self.sim.user_id},
            headers={"x-api-key": _state["api_key"]},
            name="auth token",
        )
        self.auth = {"authorization": f"Bearer {response.json()['token']}"}

    @task
    def browse(self) -> None:
        region = self.sim.region
        body = Traffic.personalize_body(self.sim, self.rng)
        with self.client.post(
            f"{self.base}/v1/personalize",
            json=body,
            headers=self.auth,
            name=f"{region} personalize",
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}: {response.text[:200]}")
                return
            answer = response.json()
        feedback = Traffic.feedback_body(self.sim, answer["items"], self.rng, answer["request_id"])
        if feedback is not None:
            self.client.post(
                f"{self.base}/v1/feedback",
                json=feedback,
                headers=self.auth,
                name=f"{region} feedback",
            )
