"""Server processes the tests start (medkg serve, Neo4j, Orthanc): wait until one answers, stop one cleanly."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_for_http(
    process: subprocess.Popen, url: str, name: str, log: Path, timeout_s: float, every_s: float = 0.5,
    client: httpx.Client | None = None,
) -> None:  # fmt: skip
    """Until ``url`` answers 200; an ``AssertionError`` with the end of ``log`` if ``process`` exits first, or
    if it does not answer within ``timeout_s``. ``client``: one with the server's credentials."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{name} exited {process.returncode}: {log.read_text(errors='replace')[-3000:]}")
        try:
            if (client.get(url) if client else httpx.get(url, timeout=5)).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} did not answer {url} within {timeout_s:.0f} s; see {log}")
        time.sleep(every_s)


def stop(process: subprocess.Popen | None, timeout_s: float = 30) -> None:
    """SIGTERM (the server's clean shutdown), then SIGKILL if it has not ended within ``timeout_s``."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
