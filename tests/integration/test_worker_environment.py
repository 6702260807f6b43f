"""Workers start from an environment without the endpoint's key; the key reaches them
over the pipe (hardening: secrets must not be readable from /proc/<pid>/environ)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parents[1]
KEY = "sk-" + "worker" * 6  # built at run time: no key-shaped text in the repo

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import psutil
    sys.path.insert(0, sys.argv[3])
    from subagent_helpers import Router, call, calls, finish
    from agentkit import Agent, Settings
    from agentkit.testing import FakeOpenAIServer

    key = os.environ["OPENAI_API_KEY"]
    seen = {}

    def look(request):
        # Runs in this (main) process while the worker waits for its first reply:
        # every descendant (forkserver, worker) is alive now.
        for proc in psutil.Process().children(recursive=True):
            try:
                with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                    seen[proc.pid] = key.encode() in fh.read()
            except OSError:
                pass
        return finish("Looked at the environment of every process.")

    create = call("create_sub_agent", agent_id=1, summary="环境检查任务一个",
                  task="检查", run_in_background=False, timeout_seconds=60)
    router = Router(main=[calls(create), "done"], subs={1: [look]})
    with FakeOpenAIServer(router) as server:
        settings = Settings(model="m", base_url=server.base_url, language="zh",
                            subagent_timeout_min=1, max_retries=0)
        assert settings.api_key == key  # from the user's environment
        with Agent(workspace=Path(sys.argv[1]), settings=settings) as agent:
            result = agent.run("go")
        auth = [r.headers.get("authorization") for r in server.records]
    Path(sys.argv[2]).write_text(json.dumps({
        "status": result.status, "seen": seen, "auth": auth,
        "os_environ_kept": os.environ.get("OPENAI_API_KEY") == key,
    }))
    """
)


def test_workers_never_carry_the_key_in_their_environment(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    out = tmp_path / "out.json"
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OPENAI_API_KEY": KEY, "ALIAS_OF_KEY": KEY}
    env.pop("AGENTKIT_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(workspace), str(out), str(HERE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["status"] == "done"
    # The forkserver and the worker were both inspected, and neither carries the key.
    assert len(data["seen"]) >= 2, data
    assert not any(data["seen"].values()), data
    # The worker still authenticated with it (handed over in its spec), and the
    # main process's own environment is as the user left it.
    assert len(data["auth"]) >= 3
    assert all(a == f"Bearer {KEY}" for a in data["auth"]), data["auth"]
    assert data["os_environ_kept"]
