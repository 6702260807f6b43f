"""A fixed run (main agent, a blocking and a background sub-agent, a notification round)
whose every request body is recorded, for the test that the control plane, when off,
changes no request (tests/integration/test_control_plane_servers.py).

``python tests/control_off_scenario.py > tests/data/control_off_requests.json`` writes
the recording; it was made with the code from before the control plane
(``PYTHONPATH=<that checkout>``), and may be remade only for an intended change of what
agentkit sends with the control plane off. Volatile parts (the workspace path, the time,
the machine, ids, runtimes) are replaced by placeholders.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from subagent_helpers import Router, call, calls, finish, scripted_settings, who  # noqa: E402

from agentkit import Agent  # noqa: E402
from agentkit.prompts import describe_system  # noqa: E402
from agentkit.testing import FakeOpenAIServer, Reply  # noqa: E402

USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}


def _script() -> Router:
    def main_reply(reply: Any) -> Any:
        return Reply(**reply, usage=USAGE) if isinstance(reply, dict) else Reply(reply, usage=USAGE)

    blocking = call("create_sub_agent", agent_id=1, summary="读取文件并报告", task="读 a.txt")
    background = call(
        "create_sub_agent", agent_id=2, summary="后台写报告", task="写", run_in_background=True
    )
    return Router(
        main=[
            main_reply(calls(blocking)),
            main_reply(calls(background)),
            main_reply({"content": "已在后台启动。"}),
            main_reply({"content": "全部完成。"}),
        ],
        subs={
            1: [calls(call("read_file", path="a.txt")), finish("读了 a.txt：内容是 hello。")],
            2: [finish("报告已写好。")],
        },
    )


def normalise(text: str, workspace: Path) -> str:
    """The recording's text with its volatile parts replaced."""
    text = text.replace(str(workspace), "<workspace>").replace(describe_system(), "<system>")
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}", "<time>", text)
    text = re.sub(r"call_[0-9a-f]{6,}", "call_<id>", text)
    text = re.sub(r"conv_[0-9a-f]{12}", "conv_<id>", text)
    text = re.sub(r'(\\?"runtime_seconds\\?": )\d+', r"\g<1><n>", text)
    return re.sub(r"(运行时间：)\d+(秒)", r"\g<1><n>\g<2>", text)


def record_requests(**overrides: Any) -> list[dict[str, Any]]:
    """Run the scenario in a fresh workspace; return its requests (main agent and
    sub-agents, ordered by who asked then arrival), normalised."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp).resolve()
        (workspace / "a.txt").write_text("hello\n", encoding="utf-8")
        with FakeOpenAIServer(_script()) as server:
            settings = scripted_settings(server, "zh", **overrides)
            with Agent(workspace=workspace, settings=settings) as agent:
                result = agent.run("读一下 a.txt，再在后台写一份报告")
            assert result.status == "done", result
            requests = list(server.requests)
        ordered = sorted(requests, key=lambda r: who(r) or 0)  # stable: arrival order kept
        return [
            json.loads(normalise(json.dumps(r, ensure_ascii=False), workspace)) for r in ordered
        ]


if __name__ == "__main__":
    print(json.dumps(record_requests(), ensure_ascii=False, indent=1))
