"""Make docs/tracing-phoenix.png: a real trace of a run with sub-agents in Phoenix's UI.

Starts Phoenix (tests/phoenix_server.py), runs the main agent with a blocking and a
background sub-agent against FakeOpenAIServer with tracing on, opens the trace in
headless Chromium (Playwright with /usr/bin/chromium) and saves the screenshot.

Run: AGENTKIT_TEST_PHOENIX=<phoenix venv> python tests/phoenix_screenshot.py [out.png]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from phoenix_server import Phoenix, as_tree_spans  # noqa: E402
from subagent_helpers import Gate, Router, call, calls, finish, scripted_settings  # noqa: E402
from tracing_helpers import root_of  # noqa: E402

PROJECT = "agentkit-demo"


def script() -> tuple[list, dict]:
    """A small, realistic run: a blocking researcher and a background tester."""
    gate = Gate()
    main = [
        calls(
            call(
                "create_sub_agent",
                agent_id=2,
                summary="Run the test suite",
                task="Run the tests and report failures.",
                run_in_background=True,
            ),
            call(
                "create_sub_agent",
                agent_id=1,
                summary="Summarise the inventory module",
                task="Read inventory.py and summarise what it does.",
            ),
        ),
        gate.release("The inventory module tracks stock levels; tests are still running."),
        "All tests passed; nothing else to do.",
    ]
    subs = {
        1: [
            calls(call("read_file", path="inventory.py")),
            calls(call("search_workspace", pattern="def ")),
            finish("inventory.py keeps stock per item and warns below the reorder level."),
        ],
        2: [
            gate.hold(calls(call("run_command", command="echo '3 passed'"))),
            finish("3 tests passed."),
        ],
    }
    return main, subs


def main() -> None:
    out = Path(
        sys.argv[1]
        if len(sys.argv) > 1
        else Path(__file__).parents[1] / "docs" / "tracing-phoenix.png"
    )
    folder = Path(tempfile.mkdtemp(prefix="phoenix-shot-"))
    phoenix = Phoenix().start(folder)
    try:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = phoenix.endpoint
        os.environ["OTEL_EXPORTER_OTLP_HEADERS"] = f"x-project-name={PROJECT}"
        os.environ["OTEL_SERVICE_NAME"] = "agentkit-demo"
        from agentkit import Agent, tracing
        from agentkit.testing import FakeOpenAIServer

        tracing.configure()
        from agentkit.subagent.launchers.local import prewarm

        prewarm()  # the worker server is warm, as in a long-running application
        workspace = folder / "ws"
        workspace.mkdir()
        (workspace / "inventory.py").write_text(
            "def reorder(stock, level):\n    return [k for k, v in stock.items() if v < level]\n"
        )
        main_script, subs = script()
        with FakeOpenAIServer(Router(main_script, subs)) as server:
            settings = scripted_settings(server, "en", model="gpt-4o-mini")
            with Agent(workspace=workspace, settings=settings) as agent:
                agent.run("Summarise the inventory module and run the tests.")
                conversation_id = agent.conversation.id
        tracing.shutdown()
        root = None
        for _ in range(100):
            root = root_of(as_tree_spans(phoenix.spans(PROJECT)), conversation_id)
            if root is not None:
                break
            time.sleep(0.3)
        assert root is not None, "no trace in Phoenix"
        time.sleep(3)  # the workers' spans
        with urllib.request.urlopen(f"{phoenix.endpoint}/v1/projects") as answer:
            projects = json.load(answer)["data"]
        project_id = next(p["id"] for p in projects if p["name"] == PROJECT)
        url = f"{phoenix.endpoint}/projects/{project_id}/traces/{root['trace_id']}"
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport={"width": 1500, "height": 900})
            page.goto(url)
            page.wait_for_timeout(4000)
            page.get_by_text("chat gpt-4o-mini").nth(2).click()  # a request of sub-agent 2
            page.get_by_role("tab", name="Attributes").click()  # the span's gen_ai.* attributes
            page.get_by_text("gen_ai.usage.input_tokens").first.wait_for(timeout=30_000)
            page.wait_for_timeout(1000)
            page.screenshot(path=str(out))
            browser.close()
        print(f"wrote {out} from {url}")
    finally:
        phoenix.stop()


if __name__ == "__main__":
    main()
