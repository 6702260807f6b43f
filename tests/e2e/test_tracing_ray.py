"""OpenTelemetry traces across Ray nodes: sub-agents launched on a Ray cluster still make
one trace with the main agent's round, exported over OTLP to a real receiver on 127.0.0.1.
The same tree with local worker processes is tests/integration/test_tracing_servers.py;
through Arize Phoenix, tests/e2e/test_tracing_phoenix.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import CaptureReceiver
from subagent_helpers import Router, wait_until
from tracing_capture import (
    receiver_fixture,  # noqa: F401  (the receiver fixture)
    run_agent,
    spans_of_run,
    traced_fixture,  # noqa: F401  (the traced fixture)
)
from tracing_helpers import (
    HAVE_SDK,
    NO_SDK,
    check_tree,
    expected_spans,
    root_of,
    two_sub_agents_script,
)

needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason=NO_SDK)


# ------------------------------------------------------------------- Ray
@needs_sdk
@pytest.mark.ray
@pytest.mark.slow
def test_one_trace_across_ray_nodes(
    traced: CaptureReceiver, workspace: Path, ray_cluster: Any
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    main, subs = two_sub_agents_script()
    result, conversation_id, _ = run_agent(
        workspace,
        Router(main, subs),
        subagent_launcher="ray",
        ray_address=ray_cluster.address,
        ray_num_cpus=0.25,
    )
    assert result.status == "done", result
    trace = spans_of_run(traced, conversation_id, expected_spans)
    root = root_of(trace, conversation_id)
    assert root is not None
    runs = check_tree(trace, root)
    pids = {run["resource"]["process.pid"] for run in runs.values()}
    assert root["resource"]["process.pid"] not in pids and len(pids) == 2
    assert wait_until(lambda: ray_cluster.wait_no_hosts() == [], 30)
