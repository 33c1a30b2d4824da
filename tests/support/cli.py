"""Run the ``medkg`` console script as a user runs it: a subprocess with its own environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.live_server import MEDKG


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    return subprocess.run([MEDKG, *args], env={**base, **env}, cwd=cwd, capture_output=True, text=True, timeout=timeout)
