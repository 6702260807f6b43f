"""Take the README's screenshots of the web chat: a real ``agentkit serve --demo`` session.

    python docs/screenshots.py            # writes docs/web-chat-wide.png and web-chat-narrow.png

Starts ``agentkit serve --demo`` (a scripted model; everything else real) on a free
loopback port, drives it with Playwright and the system's Chromium (/usr/bin/chromium)
at 1280 x 800 and 390 x 844, and stops the server. Needs the web and web-test extras.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
WORK = "Review this project in the background: collect the TODO notes and measure the code size"
MORE = "Also check the tests in the background"


def start_server(workspace: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "AGENTKIT_DEMO_LATENCY": "0.6", "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentkit", "serve", "--demo", "--port", "0", "-w", str(workspace)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r"open (http://\S+)", line)
        if found:
            return proc, found.group(1)
    raise RuntimeError("agentkit serve did not start")


def session(page: object, url: str, width: int) -> None:
    page.goto(url)  # type: ignore[attr-defined]
    composer = page.get_by_test_id("composer")  # type: ignore[attr-defined]
    composer.fill("Hello! What can you do?")
    composer.press("Enter")
    answers = page.locator("[data-testid=message][data-role=assistant]")  # type: ignore[attr-defined]
    expect(answers).to_have_count(1)
    composer.fill(WORK)
    composer.press("Enter")
    expect(page.locator("[data-testid=message][data-role=notification]")).to_have_count(1)  # type: ignore[attr-defined]
    expect(answers).to_have_count(3)
    expect(page.get_by_test_id("state")).to_have_text("idle")  # type: ignore[attr-defined]
    composer.fill(MORE)
    composer.press("Enter")
    row = page.locator('[data-testid=subagent][data-agent-id="2"]')  # type: ignore[attr-defined]
    expect(answers).to_have_count(4)
    expect(page.get_by_test_id("state")).to_have_text("waiting for 1 sub-agent")  # type: ignore[attr-defined]
    if width >= 1100:
        expect(row.locator(".last")).not_to_have_text("starting…")
        expect(page.get_by_test_id("conversation").locator(".meta")).to_contain_text("waiting")  # type: ignore[attr-defined]


def main() -> int:
    from agentkit.cli.demo import prepare_workspace

    shots = {"wide": (1280, 800), "narrow": (390, 844)}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        for name, (width, height) in shots.items():
            workspace = prepare_workspace(None)
            proc, url = start_server(workspace)
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                expect.set_options(timeout=60_000)
                session(page, url, width)
                out = HERE / f"web-chat-{name}.png"
                page.screenshot(path=str(out))
                print(f"wrote {out}")
                page.close()
            finally:
                proc.send_signal(signal.SIGINT)
                proc.wait(30)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
