#!/usr/bin/env bash
# Run the whole test suite against the embedded store and real Neo4j servers (started here, stopped
# after). With MEDKG_TEST_WORKERS > 1 (default 2, the cores of a CI machine) pytest-xdist runs test
# files in that many processes, each with a Neo4j of its own (Neo4j Community holds one user database,
# and the Neo4j tests clear it). Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${VENV:-.venv}/bin/python"
export PYTHON="$python"
workers="${MEDKG_TEST_WORKERS:-2}"

states=(.neo4j)
for ((i = 1; i < workers; i++)); do states+=(".neo4j-gw$i"); done
stop_all() { for s in "${states[@]}"; do MEDKG_NEO4J_STATE_DIR="$PWD/$s" .ci/neo4j.sh stop; done; }
trap stop_all EXIT
.ci/neo4j.sh fetch >/dev/null || { echo "test: the Neo4j launcher could not be built"; exit 1; }
pids=()
for s in "${states[@]}"; do MEDKG_NEO4J_STATE_DIR="$PWD/$s" .ci/neo4j.sh start & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || { echo "test: Neo4j did not start"; exit 1; }; done
# shellcheck disable=SC1091
. .neo4j/env  # the first worker's (and a serial run's); tests/conftest.py points worker gwN at .neo4j-gwN
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

parallel=()
# whole files to a worker, in collection order (tests/conftest.py puts the longest first): without
# --no-loadscope-reorder pytest-xdist hands out the files with the most tests first instead
[ "$workers" -gt 1 ] && parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
# the workers (and the servers and CLIs they start) share the machine's cores: each runs OpenMP (torch,
# FAISS, compiled kernels) on one thread, as threads beyond the cores spin against each other (with two
# per worker on 2 cores the suite took 33 min instead of 24)
[ "$workers" -gt 1 ] && export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
"$python" -m pytest "${parallel[@]}" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: pytest collected no tests (exit 5); treated as success"
  rc=0
fi
exit "$rc"
