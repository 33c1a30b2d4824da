"""A real ``medkg serve`` process on a free loopback port, for the tests that need the deployed server
(its command line, uvicorn's own settings) rather than the app in process."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import stop, wait_for_http

MEDKG = shutil.which("medkg", path=str(Path(sys.executable).parent)) or "medkg"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Served:
    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def medkg_server(
    env: dict[str, str], log_path: Path, cwd: Path | None = None, probe: str = "/readyz", timeout_s: float = 300
) -> Iterator[Served]:
    """Start ``medkg serve`` with ``env`` (its output to ``log_path``), wait until ``probe`` answers 200
    and yield its URL and process (a fault test kills it); stop it on exit. Fails with the end of the log if
    it exits or is not up in time."""
    port = free_port()
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [MEDKG, "serve", "--host", "127.0.0.1", "--port", str(port)], env=env, cwd=cwd,
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_http(server, f"{url}{probe}", "medkg serve", log_path, timeout_s)
            yield Served(url, server)
        finally:
            stop(server)


@contextmanager
def medkg_serve(
    env: dict[str, str], log_path: Path, cwd: Path | None = None, probe: str = "/readyz", timeout_s: float = 300
) -> Iterator[str]:
    """``medkg_server``'s URL."""
    with medkg_server(env, log_path, cwd, probe, timeout_s) as served:
        yield served.url
