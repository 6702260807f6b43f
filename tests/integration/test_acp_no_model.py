"""``agentkit acp`` started with no model never dies silently (issue 35): the real
command, driven by the ``acp`` library's client side (tests/acp_helpers.py), answers
``initialize`` and refuses ``session/new`` and ``session/load`` with a message the
editor shows, naming ``--model`` and ``--demo``; it stays up until the editor leaves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("acp")

from acp import RequestError
from acp_helpers import connect, run


def test_acp_with_no_model_answers_initialize_and_refuses_sessions(workspace: Path) -> None:
    async def scenario() -> None:
        # No endpoint at all in the environment (connect's own initialize must succeed).
        async with connect(None, workspace, AGENTKIT_MODEL="") as (conn, proc, _rec):  # type: ignore[arg-type]
            with pytest.raises(RequestError) as refused:
                await conn.new_session(cwd=str(workspace), mcp_servers=[])
            message = str(refused.value)
            assert refused.value.code == -32603
            assert "no model" in message and "--model" in message and "--demo" in message
            with pytest.raises(RequestError) as again:
                await conn.load_session(
                    cwd=str(workspace), session_id="conv_000000000000", mcp_servers=[]
                )
            assert "--demo" in str(again.value)
            assert proc.returncode is None  # still serving: the editor decides when it ends
        assert not (workspace / ".agentkit").exists()  # nothing was opened

    run(scenario())


def test_acp_with_no_key_for_the_default_endpoint_says_so(workspace: Path) -> None:
    async def scenario() -> None:
        async with connect(None, workspace, AGENTKIT_MODEL="gpt-4o") as (conn, _proc, _rec):  # type: ignore[arg-type]
            with pytest.raises(RequestError) as refused:
                await conn.new_session(cwd=str(workspace), mcp_servers=[])
            assert "--api-key" in str(refused.value) and "--demo" in str(refused.value)

    run(scenario())


def test_acp_ends_when_the_editor_leaves_even_while_its_warm_up_import_hangs(
    workspace: Path, tmp_path: Path
) -> None:
    """The warm-up thread (agentkit.acp.server) imports openai while the editor sets up;
    an editor that leaves at once (its session refused) must not wait for that import.
    Here the import never ends (an ``openai`` package that sleeps first on the path), so
    before the fix (a non-daemon thread) the process never ended."""
    import json
    import subprocess

    from cli_helpers import cli_env, start_agentkit

    hanging = tmp_path / "hanging"
    (hanging / "openai").mkdir(parents=True)
    (hanging / "openai" / "__init__.py").write_text("import time\ntime.sleep(3600)\n")
    env = cli_env(None, AGENTKIT_MODEL="")
    env["PYTHONPATH"] = os.pathsep.join([str(hanging), env["PYTHONPATH"]])
    proc = start_agentkit("acp", env=env, stdin=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 1 and "result" in answer  # served while the import hangs
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
