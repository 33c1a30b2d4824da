#!/usr/bin/env bash
# Run the whole test suite against the embedded store and a real Neo4j (started here, stopped after).
# Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${VENV:-.venv}/bin/python"
export PYTHON="$python"

.ci/neo4j.sh start || { echo "test: Neo4j did not start"; exit 1; }
trap '.ci/neo4j.sh stop' EXIT
# shellcheck disable=SC1091
. .neo4j/env
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

"$python" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: pytest collected no tests (exit 5); treated as success"
  rc=0
fi
exit "$rc"
