#!/usr/bin/env bash
# The whole suite as CI runs it (tests/README.md): integration and e2e under
# pytest-xdist, a test file per worker (its module fixtures start once); then the tests
# marked serial, alone; then the Ray tests in a private network namespace, with the
# unit tier beside them. Every step runs even when one before it failed; the exit
# status is the first failure's. Extra arguments go to every run (e.g. --durations=30).
# AGENTKIT_TEST_RAY=0 leaves the Ray step out (it also skips where no namespace can be made).
set -uo pipefail
cd "$(dirname "$0")/.."

# Every test starts Python processes (the CLI, workers, servers). Some machines set
# PYTHONDONTWRITEBYTECODE, and each process then compiles agentkit again (0.2 s of
# CPU apiece); pytest's rewritten test modules are not kept either. Compile once here.
unset PYTHONDONTWRITEBYTECODE
python -m compileall -q -j 0 agentkit tests >/dev/null

STATUS=0
step() {  # run one step; remember the first failure and go on; say how long it took
  local started=$SECONDS
  "$@"
  local code=$?
  echo "--- ${SECONDS}s into the run: a step of $((SECONDS - started)) s ended (exit status $code)"
  if [ "$code" != 0 ] && [ "$STATUS" = 0 ]; then STATUS=$code; fi
}

# Four workers on two cores: these tests mostly wait on processes, servers and pipes.
WORKERS=${AGENTKIT_TEST_WORKERS:-4}
step python -m pytest tests/integration tests/e2e -q -n "$WORKERS" --dist loadfile \
  -m "not serial and not ray" "$@"

step python -m pytest tests/integration tests/e2e -q -m "serial and not ray" "$@"

# The unit tier is one process on one core, and the Ray tests mostly wait on their
# cluster: side by side they take the time of the Ray step. AGENTKIT_TEST_BESIDE_RAY,
# a command (CI's lint, types and wheel checks: .ci/checks), runs after the unit tier
# in the same place. Their output follows Ray's.
BESIDE_LOG=$(mktemp)
(
  python -m pytest tests/unit -q "$@" || exit
  if [ -n "${AGENTKIT_TEST_BESIDE_RAY:-}" ]; then
    echo "--- $AGENTKIT_TEST_BESIDE_RAY"
    bash -c "$AGENTKIT_TEST_BESIDE_RAY"
  fi
) >"$BESIDE_LOG" 2>&1 &
BESIDE=$!
trap 'kill "$BESIDE" 2>/dev/null || true' EXIT

# The Ray tests need a private network namespace (Ray binds the machine's address
# outside one) and one process (the session's cluster starts once). Beside the
# parallel tier the cluster's processes starved (8 minutes instead of 2, and a test
# that needs four sub-agents running at once timed out), so they come after it.
RAY_TESTS=(tests/integration/test_subagents.py tests/e2e/test_ray_launcher_cluster.py
  tests/e2e/test_tracing_ray.py tests/e2e/test_ray_isolation.py)
if [ "$(id -u)" = 0 ]; then NETNS=(unshare -n); else NETNS=(unshare -r -n); fi
if [ "${AGENTKIT_TEST_RAY:-1}" != 0 ] && python -c "import ray" 2>/dev/null \
  && "${NETNS[@]}" true 2>/dev/null; then
  step "${NETNS[@]}" bash -c 'ip link set lo up && exec "$@"' ray-step \
    python -m pytest -q -p no:cacheprovider -m ray "${RAY_TESTS[@]}" "$@"
else
  echo "Ray tests skipped: Ray is missing, AGENTKIT_TEST_RAY=0, or no network namespace can be made"
fi

echo "--- the unit tier (tests/unit), run beside the Ray step"
step wait "$BESIDE"
cat "$BESIDE_LOG"
rm -f "$BESIDE_LOG"
exit "$STATUS"
