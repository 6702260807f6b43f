"""The page's header says what a person must hear at the start (issue 31, item 12):
without bubblewrap the command sandbox is off, with the install command; a cost cap
on a model with no known price can never trip. A real browser (headless Chromium via
Playwright) against the real server; bubblewrap's absence is forced by the setting
``command_bwrap_path``. Skipped without Playwright or /usr/bin/chromium."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import scripted_settings

from agentkit.testing import FakeOpenAIServer
from agentkit.webchat import create_app
from agentkit.webchat.serve import BackgroundServer

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium"),
]
pw = pytest.importorskip("playwright.sync_api")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def _shown(workspace: Path, width: int, **overrides: Any) -> tuple[bool, str, int]:
    """Open the page; return whether the notices box is visible, its text, and how many
    pixels the page scrolls sideways."""
    with FakeOpenAIServer(lambda request: "unused") as model:
        settings = scripted_settings(model, "en").model_copy(update=overrides)
        with BackgroundServer(create_app(workspace, settings)) as server, pw.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": width, "height": 800})
                page.set_default_timeout(30_000)
                page.goto(server.url)
                pw.expect(page.get_by_test_id("endpoint")).not_to_have_text(
                    "checking the model endpoint…", timeout=30_000
                )
                box = page.get_by_test_id("start-notices")
                if box.is_visible():
                    box.click()  # a phone folds them to one line until tapped
                wide = page.evaluate(
                    "() => Math.max(document.documentElement.scrollWidth,"
                    " document.body.scrollWidth) - window.innerWidth"
                )
                return box.is_visible(), box.inner_text(), int(wide)
            finally:
                browser.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_header_says_the_sandbox_is_off_and_the_cap_cannot_trip(
    workspace: Path, width: int
) -> None:
    visible, text, wide = _shown(
        workspace,
        width,
        command_bwrap_path="/nonexistent/agentkit-test/bwrap",
        session_max_cost_usd=1.0,
    )
    assert visible
    assert "The command sandbox is off" in text and "sudo apt-get install bubblewrap" in text
    assert "can never be reached" in text
    assert wide <= 0  # long notices wrap, the page does not scroll sideways


def test_no_notice_box_when_all_is_well(workspace: Path) -> None:
    visible, _text, _wide = _shown(workspace, 1280, command_sandbox="none")
    assert not visible
