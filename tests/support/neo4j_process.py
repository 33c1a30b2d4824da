"""A Neo4j server of a test's own (the launcher `.ci/neo4j.sh` builds), for the tests that stop and restart
it: the same port and the same store after a restart, so a client that reconnects finds what it left."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.support.live_server import free_port
from tests.support.processes import stop

LAUNCHER = Path(__file__).resolve().parents[2] / ".ci" / "neo4j" / "target"
PASSWORD = "medkg-fault-test"


class Neo4jProcess:
    """``start()`` / ``stop()`` a Neo4j on ``home`` (its store), always on the port chosen at creation."""

    def __init__(self, home: Path) -> None:
        if not (LAUNCHER / "classes" / "medkg" / "Neo4jLauncher.class").exists():
            message = "the Neo4j launcher is not built: run `.ci/neo4j.sh fetch`"
            if IN_CI:
                pytest.fail(message)
            pytest.skip(message)
        self.home, self.port = home, free_port()
        self.uri = f"bolt://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def settings(self) -> dict[str, str]:
        return {"uri": self.uri, "user": "neo4j", "password": PASSWORD, "database": "neo4j"}

    def start(self, timeout_s: float = 180) -> None:
        ready = self.home.parent / f"{self.home.name}.ready"
        ready.unlink(missing_ok=True)
        log = (self.home.parent / f"{self.home.name}.log").open("ab")
        self.process = subprocess.Popen(
            ["java", "-Xms256m", "-Xmx768m", "-cp", f"{LAUNCHER / 'classes'}:{LAUNCHER / 'lib'}/*",
             "medkg.Neo4jLauncher", str(self.home), str(self.port), PASSWORD, str(ready)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if self.process.poll() is not None:
                raise AssertionError(f"Neo4j exited {self.process.returncode}; see {log.name}")
            assert time.monotonic() < deadline, f"Neo4j not ready within {timeout_s:.0f} s; see {log.name}"
            time.sleep(0.3)

    def admin(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        """``neo4j-admin ARGS`` on this server's home (the admin tool of the launcher's own jars); the
        server must be stopped for the commands that write a database."""
        conf = self.home / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "neo4j.conf").touch()
        return subprocess.run(
            ["java", "-Xmx768m", "-cp", f"{LAUNCHER / 'lib'}/*", "org.neo4j.cli.AdminTool", *args],
            env={**os.environ, "NEO4J_HOME": str(self.home), "NEO4J_CONF": str(conf)},
            capture_output=True, text=True, timeout=timeout_s, cwd=self.home,  # its import.report goes there
        )  # fmt: skip

    def stop(self) -> None:
        """A clean stop (SIGTERM: Neo4j shuts down and flushes its store)."""
        stop(self.process, timeout_s=60)
        self.process = None
