#!/usr/bin/env bash
# The whole suite as CI runs it (tests/README.md): the unit tier; then integration and
# e2e under pytest-xdist, a test file per worker (its module fixtures start once); then
# the tests marked serial, alone. The Ray tests skip here: they need a private network
# namespace (.ci/run's last step). Extra arguments go to every run (e.g. --durations=30).
set -euo pipefail
cd "$(dirname "$0")/.."
# Four workers on two cores: these tests mostly wait on processes, servers and pipes.
WORKERS=${AGENTKIT_TEST_WORKERS:-4}
python -m pytest tests/unit -q "$@"
python -m pytest tests/integration tests/e2e -q -n "$WORKERS" --dist loadfile \
  -m "not serial and not ray" "$@"
python -m pytest tests/integration tests/e2e -q -m "serial and not ray" "$@"
