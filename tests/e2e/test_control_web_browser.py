"""The control plane in ``agentkit serve``: the API (answer, message, continue, usage)
over HTTP, and in a real browser the question shown in the sub-agent's row with its
answer box, the answer reaching the sub-agent, and the costs shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from control_web_helpers import asking_router, tool_json
from subagent_helpers import who
from web_helpers import running_web

pytestmark = pytest.mark.slow


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium")
def test_the_question_shows_in_its_row_and_the_answer_box_answers_it(
    workspace: Path, tmp_path: Path
) -> None:
    api = pytest.importorskip("playwright.sync_api")
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    with (
        running_web(workspace, asking_router(), subagent_control=True) as web,
        api.sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(20_000)
            page.goto(web.url)
            api.expect(page.get_by_test_id("conversation")).to_have_count(1)
            page.get_by_test_id("composer").fill("paint it")
            page.get_by_test_id("send").click()
            row = page.locator('[data-testid=subagent][data-agent-id="1"]')
            question = row.get_by_test_id("subagent-question")
            api.expect(question).to_be_visible()
            api.expect(question).to_contain_text("Which colour?")
            api.expect(row.get_by_test_id("subagent-cost")).to_contain_text("tokens")
            # The fake model has no known price: said as the CLI says it, never "$0".
            api.expect(row.get_by_test_id("subagent-cost")).to_contain_text("cost unknown")
            page.screenshot(path=str(tmp_path / "question.png"))
            row.get_by_test_id("subagent-answer").fill("Blue")
            row.get_by_test_id("subagent-answer-send").click()
            api.expect(question).to_be_hidden()
            api.expect(row).to_have_attribute("data-status", "completed")
            api.expect(page.get_by_test_id("conversation-cost")).to_contain_text("tokens")
            api.expect(page.get_by_test_id("conversation-cost")).to_contain_text("cost unknown")
            assert "$0" not in page.locator("body").inner_text()
            api.expect(page.get_by_test_id("state")).to_have_text("idle")
        finally:
            browser.close()
        subs = [r for r in web.model.requests if who(r) == 1]
    assert tool_json(subs[1], "ask_parent") == [{"success": True, "answer": "Blue"}]
