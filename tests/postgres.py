"""The PostgreSQL the suite tests the PostgreSQL lock backend against.

``TEST_POSTGRES_DSN`` names a database to use instead (``off`` skips those tests). Unset, the
suite starts a server of its own, as it starts its Redis: Debian's PostgreSQL (``make
postgres``, part of ``make test``, installs the package when run as root, as ``make
browser`` does chromium), a cluster made by ``initdb`` in a temporary directory, listening
on loopback on a free port with trust authentication, its database ``test`` created, and
stopped and removed when the session ends. PostgreSQL refuses to run as root: as root, the
server runs as the package's ``postgres`` user. Without the binaries (not Debian, not root)
those tests are skipped with the reason. Nothing else in the suite needs PostgreSQL. (Not
``PERSO_*``: the suite clears those from the environment.)
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perso.process import free_port

# Debian's packages put each major version's binaries here (postgresql-<major>).
DEBIAN_BINARIES = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"  # what Debian's package creates; the server's user when we are root
DATABASE = "test"
START_TIMEOUT_S = 60


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here; the message says why."""


def binaries() -> Path:
    """The directory of ``initdb``, ``pg_ctl`` and ``createdb``: Debian's newest major
    version, else the ones on ``PATH``."""
    debian = sorted(
        (p for p in DEBIAN_BINARIES.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1,
    )
    if debian:
        return debian[-1]
    found = shutil.which("initdb")
    if found is None:
        raise PostgresUnavailable(
            "no PostgreSQL binaries (make postgres installs Debian's package, as root)"
        )
    return Path(found).parent


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server of the suite's own (module docstring)."""

    bin: Path
    root: Path  # the cluster, its log and its socket
    port: int
    run_as: str | None  # the user the server runs as when we are root

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    @classmethod
    def start(cls) -> EmbeddedPostgres:
        bin_dir = binaries()
        run_as = None
        root = Path(tempfile.mkdtemp(prefix="perso-test-pg-"))
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam(SERVER_USER)
            except KeyError as exc:
                shutil.rmtree(root, ignore_errors=True)
                raise PostgresUnavailable(
                    f"running as root and no {SERVER_USER!r} user to run PostgreSQL as"
                ) from exc
            os.chown(root, user.pw_uid, user.pw_gid)
            run_as = SERVER_USER
        server = cls(bin_dir, root, free_port(), run_as)
        try:
            server._run("initdb", "-D", str(root / "data"), "-U", "postgres", "-A", "trust",
                        "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
            options = (
                f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off"
            )
            server._run("pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"),
                        "-o", options, "-t", str(START_TIMEOUT_S), "-w", "start")  # fmt: skip
            server._run("createdb", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
                        DATABASE)  # fmt: skip
        except BaseException:
            server.stop()
            raise
        return server

    def stop(self) -> None:
        """Stop the server (fast: connections are ended) and remove its directory."""
        if (self.root / "data" / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop",
                      check=False)  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        command = [str(self.bin / program), *args]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root, check=False)
        if check and done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise PostgresUnavailable(
                f"{program} failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n{tail}"
            )
