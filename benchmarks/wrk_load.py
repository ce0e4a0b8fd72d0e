"""A load of personalize requests by wrk (``benchmarks.edge_hit``,
``benchmarks.cluster_throughput``): bench users with their tokens, a Lua script sending
each request as the next user's, the run with wrk's figures and the server's CPU time, and a
plain HTTP request for checks between runs."""

from __future__ import annotations

import http.client
import json
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_processes import cpu_seconds
from protocol.identity import Claims, issue
from protocol.segments import Segment
from protocol.tiers import Tier

PATH = "/v1/personalize"
TIER = Tier.PREMIUM


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


def request(port: int, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return Reply(response.status, response.getheaders(), response.read())
    finally:
        connection.close()


@dataclass(frozen=True)
class User:
    user_id: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"content-type": "application/json", "authorization": f"Bearer {self.token}"}

    @property
    def body(self) -> bytes:
        context = {"page_type": "home", "device": "mobile"}
        return json.dumps({"user_id": self.user_id, "context": context}).encode()


def mint_users(key: str, n: int, segment: Segment = Segment.CASUAL) -> list[User]:
    now = int(time.time())
    users = []
    for i in range(n):
        user_id = f"bench-{segment.value}-{i:04d}"
        claims = Claims(user_id, segment, TIER.value, "bench", now, now + 3600)
        users.append(User(user_id, issue(claims, key.encode())))
    return users


_LUA_PLAIN = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.:,{}[]/+="
)


def lua_string(raw: bytes) -> str:
    return '"' + "".join(chr(b) if b in _LUA_PLAIN else f"\\{b:03d}" for b in raw) + '"'


def wrk_script(users: list[User]) -> str:
    """A Lua script for wrk: each request the next user's POST; ``done`` prints the figures
    on one line (times in microseconds)."""
    return requests_script([(u.token, u.body) for u in users])


def requests_script(requests: list[tuple[str, bytes]]) -> str:
    """A Lua script for wrk sending POST ``PATH`` with each (bearer token, body) of
    ``requests`` in turn, round and round; ``done`` prints the figures on one line (times
    in microseconds)."""
    entries = ",\n".join(
        f"  {{{lua_string(token.encode())}, {lua_string(body)}}}" for token, body in requests
    )
    return f"""
local users = {{
{entries}
}}
local prepared = {{}}
local n = 0

init = function(args)
  for i, user in ipairs(users) do
    prepared[i] = wrk.format("POST", "{PATH}", {{
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer " .. user[1],
    }}, user[2])
  end
end

request = function()
  n = n % #prepared + 1
  return prepared[n]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("edge_hit_wrk %d %d %d %d %d %d\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass(frozen=True)
class Load:
    """One wrk run against one server."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: int
    wall_s: float
    server_cpu_s: float  # CPU time of the server's processes during the run
    wrk_cpu_s: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def server_share(self) -> float:
        """Share of one core the server used: near 1, its core was the limit."""
        return self.server_cpu_s / self.wall_s

    @property
    def cpu_us_per_request(self) -> float:
        return self.server_cpu_s / max(1, self.requests) * 1e6


def run_wrk(
    wrk: str, script: Path, port: int, *, seconds: int, connections: int, server: list[int]
) -> Load:
    argv = [wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s"]
    argv += ["-s", str(script), f"http://127.0.0.1:{port}{PATH}"]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = cpu_seconds(server)
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=False)
    wall = time.monotonic() - started
    server_cpu = cpu_seconds(server) - server_cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk_cpu = after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime
    line = next((x for x in done.stdout.splitlines() if x.startswith("edge_hit_wrk ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    n, duration_us, p50, p99, non_2xx, errors = (int(v) for v in line.split()[1:])
    return Load(
        n, duration_us / 1e6, p50 / 1000, p99 / 1000, non_2xx, errors, wall, server_cpu, wrk_cpu
    )
