"""The first run as a user meets it: ``medkg demo`` on a fresh data dir, timed from its start to the
pages serving, to the first answer of the ask page's API (``POST /v1/qa``), and to the build behind the
server being done; peak RSS of the process. ``--stop-after S`` stops it (Ctrl-C) S seconds in and runs
it again on the same data dir, to time the finishing run and check it ends where an uninterrupted run
does (entities, relations, vectors, passages). Prints the figures; the last line is one JSON object.

    python -m benchmarks.first_run [--stop-after 200] [--shared-data ../shared/data] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import write_results
from kg.embedding_paths import cpu_features
from tests.support.live_server import MEDKG, free_port

QUESTION = "What drugs treat epilepsy?"


def _rss_kb(pid: int) -> int:
    """Resident memory of the process and its children, in kB."""
    out = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid), "-p", str(pid)], capture_output=True, text=True)
    return sum(int(x) for x in out.stdout.split())


def run_demo(data: Path, shared: Path | None, stop_after: float | None = None) -> dict[str, Any]:
    """One ``medkg demo`` on ``data``; the seconds at which it served, answered and finished its build."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    env |= {"MEDKG_DATA_DIR": str(data), "MEDKG_API_HOST": "127.0.0.1", "MEDKG_API_PORT": str(port)}
    env |= {"HF_HUB_OFFLINE": "1", "MEDKG_VECTOR_MEMO_MB": "0"}  # a first run: no vectors of an earlier one
    args = [MEDKG, "demo", "--no-progress"] + (["--shared-data", str(shared)] if shared else [])
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    log = data.with_suffix(".log")
    with log.open("w") as sink:
        demo = subprocess.Popen(args, env=env, stdout=sink, stderr=subprocess.STDOUT)
    peak = [0]

    def watch_memory() -> None:
        while demo.poll() is None:
            peak[0] = max(peak[0], _rss_kb(demo.pid))
            time.sleep(1)

    threading.Thread(target=watch_memory, daemon=True).start()
    marks: dict[str, Any] = {}
    shown = None
    while demo.poll() is None:
        now = time.monotonic() - started
        try:
            report = httpx.get(f"{url}/readyz", timeout=10).json()
        except httpx.HTTPError:
            report = None
        if report is not None:
            marks.setdefault("serving_s", round(now, 1))
            build = report.get("build", {})
            if report["status"] in ("building", "ready") and "first_answer_s" not in marks:
                answer = httpx.post(f"{url}/v1/qa", json={"question": QUESTION}, timeout=300).json()
                marks["first_answer_s"] = round(time.monotonic() - started, 1)
                marks["first_answer_cites"] = len(answer["citations"])
            running = next((p for p in build.get("parts", []) if p["state"] == "running"), None)
            line = (running or {}).get("title")
            if line != shown:
                print(f"{now:7.1f} s  {report['status']}: {line or build.get('state')}", flush=True)
                shown = line
            if build.get("state") == "done":
                marks["build_done_s"] = round(now, 1)
                demo.send_signal(signal.SIGINT)
                break
            if stop_after is not None and now >= stop_after:
                marks["stopped_at_s"] = round(now, 1)
                marks["stopped_in"] = line
                demo.send_signal(signal.SIGINT)
                break
        time.sleep(1)
    code = demo.wait(timeout=600)
    marks["exit_s"] = round(time.monotonic() - started, 1)
    marks["exit_code"] = code
    marks["peak_rss_gb"] = round(peak[0] / 1e6, 2)
    return marks


def contents(data: Path) -> dict[str, int]:
    """What a data dir holds: graph counts, entity vectors, passages (read by a fresh process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")} | {"MEDKG_DATA_DIR": str(data)}
    code = (
        "import json; from kg.settings import load_settings; from service.container import Container\n"
        "with Container(load_settings()) as c:\n"
        "    s = c.graph.stats()\n"
        "    print(json.dumps({'entities': s.entities, 'relations': s.relations,"
        " 'entity_vectors': len(c.entity_index.index), 'passages': len(c.text_index)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--stop-after", type=float, default=None, help="Stop the first run after S seconds.")
    parser.add_argument("--work", type=Path, default=None, help="Where the data dirs go (default: a temp dir).")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    shared = args.shared_data if (args.shared_data / "pharmacotherapydb").is_dir() else None
    work = args.work or Path(tempfile.mkdtemp(prefix="medkg-first-run-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"cpu": cpu_features(), "shared_data": bool(shared)}
    try:
        data = work / "data"
        print(f"medkg demo on a fresh data dir ({data})")
        results["run"] = run_demo(data, shared, args.stop_after)
        if args.stop_after is not None:
            print("run again on the same data dir")
            results["rerun"] = run_demo(data, shared)
        results["contents"] = contents(data)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    write_results(args.json, results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
