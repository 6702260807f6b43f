#!/usr/bin/env bash
# The whole suite as CI runs it (tests/README.md): the unit tier; then integration and
# e2e under pytest-xdist, a test file per worker (its module fixtures start once); then
# the tests marked serial, alone; then the Ray tests in a private network namespace.
# Extra arguments go to every run (e.g. --durations=30).
# AGENTKIT_TEST_RAY=0 leaves the Ray step out (it also skips where no namespace can be made).
set -euo pipefail
cd "$(dirname "$0")/.."

# Every test starts Python processes (the CLI, workers, servers). Some machines set
# PYTHONDONTWRITEBYTECODE, and each process then compiles agentkit again (0.2 s of
# CPU apiece); pytest's rewritten test modules are not kept either. Compile once here.
unset PYTHONDONTWRITEBYTECODE
python -m compileall -q -j 0 agentkit tests >/dev/null

# Four workers on two cores: these tests mostly wait on processes, servers and pipes.
WORKERS=${AGENTKIT_TEST_WORKERS:-4}
python -m pytest tests/unit -q "$@"

python -m pytest tests/integration tests/e2e -q -n "$WORKERS" --dist loadfile \
  -m "not serial and not ray" "$@"

python -m pytest tests/integration tests/e2e -q -m "serial and not ray" "$@"

# The Ray tests need a private network namespace (Ray binds the machine's address
# outside one) and one process (the session's cluster starts once). They run last and
# alone: beside the parallel tier, the cluster's processes starved (8 minutes instead
# of 2, and a test that needs four sub-agents running at once timed out).
RAY_TESTS=(tests/integration/test_subagents.py tests/e2e/test_ray_launcher_cluster.py
  tests/e2e/test_tracing_ray.py tests/e2e/test_ray_isolation.py)
if [ "$(id -u)" = 0 ]; then NETNS=(unshare -n); else NETNS=(unshare -r -n); fi
if [ "${AGENTKIT_TEST_RAY:-1}" != 0 ] && python -c "import ray" 2>/dev/null \
  && "${NETNS[@]}" true 2>/dev/null; then
  "${NETNS[@]}" bash -c 'ip link set lo up && exec "$@"' ray-step \
    python -m pytest -q -p no:cacheprovider -m ray "${RAY_TESTS[@]}" "$@"
else
  echo "Ray tests skipped: Ray is missing, AGENTKIT_TEST_RAY=0, or no network namespace can be made"
fi
