"""The schema says what the API does: schemathesis's own command line, every check (status codes,
headers, content types, response schemas, positive and negative data, unsupported methods, ...) and
every phase (examples, coverage, fuzzing, stateful through the schema's links), against a real `medkg
serve` on the QA test store, once with its default limits (the rate limiter answers much of the fuzz, as
it would answer a client) and once without a rate limit (every request reaches its route): 0 failures.

Uploads are declared ``application/dicom``; tests/support/schemathesis_hooks.py tells schemathesis what that is
(real DICOM samples), so positive data is accepted there too. Bounded for CI by ``MEDKG_FUZZ_EXAMPLES``
(default 15 random examples per operation) and a fixed seed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kg.settings import load_settings
from service.container import Container
from tests.support.live_server import medkg_serve
from tests.support.qa_store import build_qa_store

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("MEDKG_FUZZ_EXAMPLES", "15"))
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"


@pytest.mark.parametrize("rate_limit", ["120", "0"])
def test_schemathesis_every_check_every_phase_finds_nothing(tmp_path: Path, rate_limit: str) -> None:
    data = tmp_path / "data"
    with Container(load_settings(data_dir=data, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2)) as c:
        build_qa_store(c)
    env = {**os.environ, "MEDKG_DATA_DIR": str(data), "MEDKG_LLM_BASE_URL": "", "HF_HUB_OFFLINE": "1",
           "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", "MEDKG_LADYBUG_MAX_DB_SIZE_GB": "2",
           "MEDKG_RATE_LIMIT_PER_MINUTE": rate_limit}  # fmt: skip
    hooks = {"SCHEMATHESIS_HOOKS": "tests.support.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    with medkg_serve(env, tmp_path / "serve.log") as url:
        run = subprocess.run(
            [
                SCHEMATHESIS, "run", f"{url}/openapi.json", "--checks", "all", "--max-examples", str(EXAMPLES),
                "--phases", "examples,coverage,fuzzing,stateful", "--seed", "20261205", "--request-timeout", "60",
                "--continue-on-failure", "--generation-deterministic",
            ],
            capture_output=True, text=True, timeout=1200, cwd=tmp_path, env={**env, **hooks},
        )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    selected, total = map(int, re.search(r"Selected: (\d+)/(\d+)", out).groups())  # every operation tested
    assert selected == total >= 21 and f"Tested: {total}" in out and "Stateful" in out, out[-3000:]
