#!/usr/bin/env bash
# Fetch, start, wait for and stop the embedded Neo4j 5.26 used by medkg's tests and benchmarks.
#   .ci/neo4j.sh fetch          download the jars from Maven Central and compile the launcher
#   .ci/neo4j.sh start          start on 127.0.0.1 and a free port; writes .neo4j/env (MEDKG_NEO4J_*)
#   .ci/neo4j.sh stop           stop it and wait until it is gone
#   .ci/neo4j.sh status         exit 0 if it is running
# Source .neo4j/env afterwards to point medkg (and its tests) at it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
state="${MEDKG_NEO4J_STATE_DIR:-$root/.neo4j}"
launcher="$here/neo4j"
password="${MEDKG_NEO4J_TEST_PASSWORD:-medkg-test-password}"
python="${PYTHON:-python3}"

fetch() {
  if [ ! -f "$launcher/target/classes/medkg/Neo4jLauncher.class" ] || [ ! -d "$launcher/target/lib" ]; then
    echo "neo4j: fetching Neo4j jars from Maven Central and compiling the launcher"
    mvn -B -q -f "$launcher/pom.xml" package -DskipTests
  fi
}

running() { [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }

start() {
  if running; then echo "neo4j: already running ($(cat "$state/env" | head -1))"; return 0; fi
  fetch
  mkdir -p "$state"
  rm -f "$state/ready"
  port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  nohup java -Xms256m -Xmx1g -cp "$launcher/target/classes:$launcher/target/lib/*" medkg.Neo4jLauncher \
    "$state/home" "$port" "$password" "$state/ready" >"$state/neo4j.log" 2>&1 &
  echo $! >"$state/pid"
  for _ in $(seq 1 240); do
    if [ -f "$state/ready" ]; then
      cat >"$state/env" <<ENV
export MEDKG_NEO4J_URI=bolt://127.0.0.1:$port
export MEDKG_NEO4J_USER=neo4j
export MEDKG_NEO4J_PASSWORD=$password
export MEDKG_NEO4J_DATABASE=neo4j
ENV
      echo "neo4j: ready on bolt://127.0.0.1:$port (log $state/neo4j.log)"
      return 0
    fi
    if ! running; then echo "neo4j: launcher exited; last log lines:"; tail -30 "$state/neo4j.log"; return 1; fi
    sleep 0.5
  done
  echo "neo4j: not ready after 120 s; last log lines:"; tail -30 "$state/neo4j.log"; stop; return 1
}

stop() {
  if running; then
    pid=$(cat "$state/pid"); kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
    echo "neo4j: stopped"
  fi
  rm -f "$state/pid" "$state/ready" "$state/env"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status) running ;;
  *) echo "usage: $0 fetch|start|stop|status" >&2; exit 2 ;;
esac
