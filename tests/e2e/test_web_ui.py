"""The web chat as people use it (issue 26), in a real browser at 1280 px and 390 px:
the keyless demo, no sideways scrolling, a reachable agents panel, states and failures
in words, the first message kept, a reload that looks like the live page, shortcuts.

Headless Chromium (the distribution's, /usr/bin/chromium) driven by Playwright for
Python, against the real server and FakeOpenAIServer (the demo's scripted model, or a
script per test). Skipped without Playwright or /usr/bin/chromium.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Gate, Router, call, calls, finish, scripted_settings
from web_helpers import running_web

from agentkit import Settings
from agentkit.cli.demo import DEMO_MODEL
from agentkit.cli.demo_chat import ChatDemoModel
from agentkit.testing import FakeOpenAIServer
from agentkit.webchat import create_app
from agentkit.webchat.serve import BackgroundServer

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="no /usr/bin/chromium"),
]
pw = pytest.importorskip("playwright.sync_api")
pw.expect.set_options(timeout=30_000)  # a loaded 2-core machine; nothing here is timed
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
WIDTHS = [pytest.param(1280, id="wide"), pytest.param(390, id="narrow")]
DEAD = "http://127.0.0.1:9/v1"  # nothing listens on port 9 (discard) on loopback


def expect(locator: Any) -> Any:
    return pw.expect(locator)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with pw.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@contextmanager
def tab(browser: Any, width: int) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()


@contextmanager
def web_app(workspace: Path, settings: Settings, demo: bool = False) -> Iterator[str]:
    app = create_app(workspace, settings, demo=demo)
    with BackgroundServer(app) as server:
        yield server.url


@contextmanager
def demo_web(workspace: Path) -> Iterator[str]:
    """The web chat on the keyless demo's scripted model (as ``serve --demo``)."""
    (workspace / "app.py").write_text("# TODO: handle errors\nprint('hello')\n")
    # No latency: serve --demo slows each reply so it can be watched; nothing here is.
    with FakeOpenAIServer(ChatDemoModel(latency=0), models=[DEMO_MODEL]) as model:
        settings = scripted_settings(model, "en", model=DEMO_MODEL)
        with web_app(workspace, settings, demo=True) as url:
            yield url


def send(page: Any, text: str) -> None:
    page.get_by_test_id("composer").fill(text)
    page.get_by_test_id("composer").press("Enter")


def messages(page: Any, role: str) -> Any:
    return page.locator(f"#messages [data-testid=message][data-role={role}]")


def open_agents(page: Any) -> None:
    """Show the agents panel (a drawer below desktop width)."""
    toggle = page.get_by_test_id("subagents-toggle")
    if toggle.is_visible() and toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    expect(page.get_by_test_id("subagents")).to_be_in_viewport()


def hold_first_switch(page: Any) -> list[Any]:
    """Hold the page's first ``POST /api/switch`` (its first conversation) until the
    test calls ``continue_()`` on the returned list's route; later ones go through."""
    held: list[Any] = []
    page.route("**/api/switch", lambda route: route.continue_() if held else held.append(route))
    return held


def overflow(page: Any) -> int:
    """How many pixels the page scrolls sideways (0: none)."""
    return int(
        page.evaluate(
            "() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
            " - window.innerWidth"
        )
    )


# --------------------------------------------------------------- the demo
@pytest.mark.parametrize("width", WIDTHS)
def test_keyless_demo_answers_and_starts_a_background_subagent(
    browser: Any, workspace: Path, width: int
) -> None:
    with demo_web(workspace) as url, tab(browser, width) as page:
        page.goto(url)
        expect(page.get_by_test_id("demo-badge")).to_be_visible()
        expect(page.get_by_test_id("endpoint")).to_have_attribute("data-status", "ok")
        expect(page.get_by_test_id("endpoint")).to_contain_text("scripted demo model")
        empty = page.get_by_test_id("empty-state")
        expect(empty).to_contain_text(workspace.name)
        expect(empty).to_contain_text(DEMO_MODEL)
        expect(empty).to_contain_text("sub-agents")
        send(page, "hello")
        expect(messages(page, "assistant").first).to_contain_text("scripted demo")
        expect(page.get_by_test_id("title")).to_have_text("hello")
        send(page, "review this project in the background")
        open_agents(page)
        row = page.locator('[data-testid=subagent][data-agent-id="1"]')
        expect(row).to_be_in_viewport()
        expect(row).to_have_attribute("data-status", "completed")
        expect(row.locator(".usage")).to_contain_text("tokens")
        expect(messages(page, "notification")).to_have_count(1)
        expect(messages(page, "assistant").last).to_contain_text("Sub-agent 1 finished")
        expect(messages(page, "assistant").last).to_contain_text("TODO: handle errors")
        expect(page.get_by_test_id("state")).to_have_text("idle")
        expect(page.get_by_test_id("work")).to_have_text("all done")
        # Its deliverables and transcript are one click away; Markdown renders.
        row.get_by_test_id("subagent-open").click()
        page.get_by_test_id("deliverable").filter(has_text="findings.md").click()
        view = page.get_by_test_id("file-view")
        expect(view.get_by_role("heading", name="Findings (scripted demo)")).to_be_visible()
        page.get_by_test_id("tab-transcript").click()
        calls_shown = page.get_by_test_id("transcript").locator("[data-testid=tool-call]")
        expect(calls_shown).to_have_count(4)  # search, command, write, finish_task
        # Each call named once, in words, its tool's name after them (issue 35: the
        # tab said "write_file write_file").
        names = calls_shown.locator("code.name").all_inner_texts()
        whats = calls_shown.locator(".what").all_inner_texts()
        assert all(w and w not in names for w in whats), (whats, names)
        assert any(w.startswith("Writing") for w in whats), whats
        assert overflow(page) == 0 and page.errors == []


# -------------------------------------------------------------- the layout
LONG = "\n\n".join(
    [
        "a" * 400,
        "https://example.com/" + "b" * 300,
        "| "
        + " | ".join(f"column {i}" for i in range(12))
        + " |\n|"
        + "---|" * 12
        + "\n| "
        + " | ".join("x" * 20 for _ in range(12))
        + " |",
        "```\n" + "c" * 500 + "\n```",
    ]
)


@pytest.mark.parametrize("width", [360, 390, 1280])
def test_no_horizontal_scroll_with_long_content(browser: Any, workspace: Path, width: int) -> None:
    long_path = "d" * 200 + ".txt"
    (workspace / long_path).write_text("e" * 2000)
    router = Router(main=[calls(call("read_file", path=long_path)), LONG])
    with running_web(workspace, router) as web, tab(browser, width) as page:
        page.goto(web.url)
        send(page, "f" * 300)
        expect(messages(page, "assistant")).to_have_count(1)
        page.locator("[data-testid=tool-call] summary").first.click()
        assert overflow(page) == 0
        for toggle in ("sidebar-toggle", "subagents-toggle"):
            if page.get_by_test_id(toggle).is_visible():
                page.get_by_test_id(toggle).click()
                assert overflow(page) == 0, toggle
                page.keyboard.press("Escape")


def test_touch_targets_are_40_px_on_a_narrow_screen(browser: Any, workspace: Path) -> None:
    router = Router(main=[calls(call("read_file", path="a.txt")), "done"])
    (workspace / "a.txt").write_text("alpha\n")
    small = """() => [...document.querySelectorAll('button, summary, textarea, input')]
        .filter((n) => n.checkVisibility() && n.getBoundingClientRect().width > 0)
        .map((n) => [n.textContent.trim().slice(0, 20) || n.getAttribute('aria-label'),
                     n.getBoundingClientRect().width, n.getBoundingClientRect().height])
        .filter(([, w, h]) => w < 40 || h < 40)"""
    with running_web(workspace, router) as web, tab(browser, 390) as page:
        page.goto(web.url)
        send(page, "read it")
        expect(messages(page, "assistant")).to_have_text("done")
        assert page.evaluate(small) == []
        for toggle in ("sidebar-toggle", "subagents-toggle"):
            page.get_by_test_id(toggle).click()
            page.wait_for_timeout(300)  # the drawer's slide (no assertion on its timing)
            assert page.evaluate(small) == [], toggle
            page.keyboard.press("Escape")


@pytest.mark.parametrize("width", WIDTHS)
def test_agents_panel_reachable_and_states_in_words(
    browser: Any, workspace: Path, width: int
) -> None:
    main_gate, sub_gate = Gate(), Gate()
    router = Router(
        main=[
            main_gate.hold(calls(call("create_sub_agent", agent_id=1, summary="Slow job",
                                      task="wait", run_in_background=True))),
            "started it",
            "read its result",
        ],
        subs={1: [sub_gate.hold(finish("slow job done"))]},
    )  # fmt: skip
    with running_web(workspace, router) as web, tab(browser, width) as page:
        page.goto(web.url)
        expect(page.get_by_test_id("subagents-empty")).to_contain_text("Sub-agents are helpers")
        send(page, "go")
        state = page.get_by_test_id("state")
        expect(state).to_have_text("working")
        expect(page.get_by_test_id("stop-round")).to_be_visible()
        main_gate.event.set()
        expect(state).to_have_text("waiting for 1 sub-agent")
        expect(state).to_have_attribute("data-state", "waiting_for_subagents")
        expect(page.get_by_test_id("work")).to_have_text("background work still running")
        panel = page.get_by_test_id("subagents")
        if width < 1100:
            expect(panel).not_to_be_in_viewport()
            page.get_by_test_id("subagents-toggle").click()
            expect(page.get_by_test_id("subagents-toggle")).to_have_attribute(
                "aria-expanded", "true"
            )
        row = page.locator('[data-testid=subagent][data-agent-id="1"]')
        expect(row).to_be_in_viewport()
        expect(row.get_by_test_id("subagent-stop")).to_be_visible()
        expect(row.locator(".status")).to_have_text("running")
        if width < 1100:
            page.keyboard.press("Escape")
            expect(panel).not_to_be_in_viewport()
        sub_gate.event.set()
        expect(state).to_have_text("idle")
        expect(page.get_by_test_id("work")).to_have_text("all done")
        expect(row.locator(".status")).to_have_text("done")
        assert "waiting_for_subagents" not in page.locator("body").inner_text()


def test_stop_round_leaves_a_readable_line_that_survives_a_reload(
    browser: Any, workspace: Path
) -> None:
    gate = Gate()
    with running_web(workspace, [gate.hold("too late")]) as web, tab(browser, 1280) as page:
        page.goto(web.url)
        send(page, "take your time")
        page.get_by_test_id("stop-round").click()
        notice = messages(page, "notice")
        expect(notice).to_have_text("Round stopped. Send a message to go on.")
        expect(page.get_by_test_id("work")).to_have_text("round stopped")
        body = page.locator("body").inner_text()
        assert "cancelled" not in body
        page.reload()
        expect(messages(page, "notice")).to_have_text("Round stopped. Send a message to go on.")
        expect(page.get_by_test_id("work")).to_have_text("round stopped")
        gate.event.set()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_dead_endpoint_is_named_in_the_header_and_in_the_failed_round(
    browser: Any, workspace: Path, width: int
) -> None:
    settings = Settings(model="m", api_key="k", base_url=DEAD, language="en", max_retries=0)
    with web_app(workspace, settings) as url, tab(browser, width) as page:
        page.goto(url)
        endpoint = page.get_by_test_id("endpoint")
        expect(endpoint).to_have_attribute("data-status", "failed")
        expect(endpoint).to_contain_text(f"cannot reach the model endpoint {DEAD}")
        send(page, "hello")
        error = messages(page, "error")
        expect(error).to_contain_text(f"cannot reach the model server at {DEAD}")
        expect(error).to_contain_text("Check that it is running and that the base URL is right")
        expect(page.get_by_test_id("work")).to_have_text("the last round failed (see above)")
        expect(page.get_by_test_id("state")).to_have_text("idle")
        shown = error.inner_text()
        page.reload()
        expect(messages(page, "error")).to_have_text(shown)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_message_sent_before_the_page_is_ready_is_sent_once_it_is(
    browser: Any, workspace: Path, width: int
) -> None:
    with running_web(workspace, ["answered"]) as web, tab(browser, width) as page:
        held = hold_first_switch(page)
        with page.expect_request("**/api/switch"):
            page.goto(web.url, wait_until="domcontentloaded")
        send(page, "typed at once")  # the page has no conversation yet: its switch is held
        expect(messages(page, "user")).to_have_text("typed at once")
        assert web.client.get("/api/conversations").json()["conversations"] == []
        held[0].continue_()
        expect(messages(page, "assistant")).to_have_text("answered")
        assert page.evaluate("document.querySelectorAll('.message.pending').length") == 0


def test_a_drawer_opened_during_a_slow_first_load_stays_open(browser: Any, workspace: Path) -> None:
    with running_web(workspace, ["answered"]) as web, tab(browser, 390) as page:
        held = hold_first_switch(page)
        with page.expect_request("**/api/switch"):
            page.goto(web.url, wait_until="domcontentloaded")
        page.get_by_test_id("sidebar-toggle").click()
        expect(page.get_by_test_id("sidebar-toggle")).to_have_attribute("aria-expanded", "true")
        held[0].continue_()  # the first conversation arrives after the drawer is opened
        expect(page.get_by_test_id("conversation")).to_have_count(1)  # the switch is done
        expect(page.get_by_test_id("sidebar-toggle")).to_have_attribute("aria-expanded", "true")
        expect(page.locator("#sidebar")).to_be_in_viewport()
        page.get_by_test_id("conversation").locator("button.name").click()  # chosen in it
        expect(page.get_by_test_id("sidebar-toggle")).to_have_attribute("aria-expanded", "false")


SNAPSHOT = """() => [...document.querySelectorAll('#messages > *')].filter((n) => !n.hidden).map((n) =>
    n.matches('details') ? ['tool', n.querySelector('summary').textContent]
                         : [n.dataset.role, n.innerText])"""


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reloaded_conversation_looks_as_it_did_live(
    browser: Any, workspace: Path, width: int
) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    gate = Gate()
    report = "# Report\n\n- **one**\n- two\n"
    router = Router(
        main=[
            calls(call("read_file", path="notes.txt"),
                  call("create_sub_agent", agent_id=1, summary="Write the report",
                       task="write report.md", run_in_background=True)),
            "Started **one** sub-agent.",
            "The report is ready.",
            gate.hold("too late"),
        ],
        subs={1: [calls(call("write_file", path="sub_agent_results/agent_1/report.md",
                             content=report)), finish("Wrote report.md.")]},
    )  # fmt: skip
    with running_web(workspace, router) as web, tab(browser, width) as page:
        page.goto(web.url)
        send(page, "write a report in the background")
        expect(messages(page, "notification")).to_have_count(1)
        expect(messages(page, "assistant")).to_have_count(2)
        expect(page.get_by_test_id("state")).to_have_text("idle")
        send(page, "one more thing")
        page.get_by_test_id("stop-round").click()
        expect(messages(page, "notice")).to_have_count(1)
        expect(page.get_by_test_id("work")).to_have_text("round stopped")
        live = page.evaluate(SNAPSHOT)
        head = [page.get_by_test_id(t).inner_text() for t in ("title", "state", "work", "usage")]
        page.reload()
        expect(messages(page, "notice")).to_have_count(1)
        assert page.evaluate(SNAPSHOT) == live
        assert [
            page.get_by_test_id(t).inner_text() for t in ("title", "state", "work", "usage")
        ] == head
        assert ["tool", "Reading notes.txtread_file✓"] in live
        # The notification opens its sub-agent; its Markdown deliverable renders.
        page.get_by_test_id("open-subagent").click()
        expect(page.get_by_test_id("subagent-detail")).to_be_in_viewport()
        page.get_by_test_id("deliverable").filter(has_text="report.md").click()
        expect(
            page.get_by_test_id("file-view").get_by_role("heading", name="Report")
        ).to_be_visible()
        expect(page.locator("[data-testid=file-view] strong")).to_have_text("one")
        gate.event.set()


def test_keyboard_shortcuts(browser: Any, workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web, tab(browser, 390) as page:
        page.goto(web.url)
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        page.locator("body").click()
        page.keyboard.press("?")
        expect(page.get_by_test_id("shortcuts")).to_be_visible()
        expect(page.get_by_test_id("shortcuts")).to_contain_text("stop the current round")
        page.keyboard.press("Escape")
        expect(page.get_by_test_id("shortcuts")).to_be_hidden()
        page.keyboard.press("a")
        expect(page.get_by_test_id("subagents")).to_be_in_viewport()
        page.keyboard.press("Escape")
        page.keyboard.press("c")
        expect(page.get_by_test_id("sidebar")).to_be_in_viewport()
        page.keyboard.press("Escape")
        page.keyboard.press("n")  # from an untouched conversation: that one again
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        send(page, "hello")
        expect(page.locator("[data-testid=message][data-role=assistant]")).to_have_text("ok")
        page.locator("body").click()
        page.keyboard.press("n")
        expect(page.get_by_test_id("conversation")).to_have_count(2)
        expect(page.get_by_test_id("message")).to_have_count(0)
        page.keyboard.press("/")
        expect(page.get_by_test_id("composer")).to_be_focused()


def test_on_a_phone_the_header_is_compact(browser: Any, workspace: Path) -> None:
    """Regression (issue 35): at 390 px the header took a quarter of the screen (a
    new user's machine: no bubblewrap, so a start notice, and a long endpoint line)."""
    (workspace / "app.py").write_text("print('hello')\n")
    overrides = {
        "model": DEMO_MODEL,
        "command_bwrap_path": "/nonexistent/agentkit-test/bwrap",  # the sandbox-off notice
        "session_max_cost_usd": 1.0,  # and the cap that cannot trip
    }
    with (
        FakeOpenAIServer(ChatDemoModel(latency=0), models=[DEMO_MODEL]) as model,
        web_app(workspace, scripted_settings(model, "en", **overrides), demo=True) as url,
        browser.new_context(
            viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
        ) as context,
    ):
        page = context.new_page()
        page.goto(url)
        send(page, "hello")
        expect(messages(page, "assistant").first).to_contain_text("scripted demo")
        expect(page.get_by_test_id("state")).to_have_text("idle")
        notices = page.get_by_test_id("start-notices")
        expect(notices).to_contain_text("The command sandbox is off")
        height = page.locator("#chat-head").bounding_box()["height"]
        assert height < 0.15 * 844, height
        # compact, not hidden: the state, the title and the notices are there, and a
        # tap on the notices shows them whole
        expect(page.get_by_test_id("state")).to_be_visible()
        expect(page.get_by_test_id("title")).to_be_visible()
        notices.click()
        assert page.locator("#chat-head").bounding_box()["height"] > height
        assert overflow(page) == 0


def test_close_and_delete_are_told_apart(browser: Any, workspace: Path) -> None:
    """Regression (issue 35): the drawer's close "×" and a conversation's delete "✕"
    sat side by side. Delete is a labelled button that asks first, styled destructive."""
    with demo_web(workspace) as url, tab(browser, 390) as page:
        page.goto(url)
        send(page, "hello")
        expect(messages(page, "assistant").first).to_contain_text("scripted demo")
        page.get_by_test_id("sidebar-toggle").click()
        close = page.get_by_role("button", name="Close the conversations")
        expect(close).to_be_visible()
        row = page.get_by_test_id("conversation").first
        delete = row.get_by_role("button", name="Delete conversation hello")
        expect(delete).to_have_text("Delete")
        assert delete.get_attribute("aria-label") != close.get_attribute("aria-label")
        delete.click()  # armed: it asks, in red; nothing is deleted yet
        expect(delete).to_have_text("delete?")
        colour = delete.evaluate("el => getComputedStyle(el).backgroundColor")
        assert colour == "rgb(179, 38, 30)", colour
        expect(page.get_by_test_id("conversation")).to_have_count(1)
        expect(row).to_contain_text("hello")
        delete.click()
        expect(page.get_by_test_id("conversation").filter(has_text="hello")).to_have_count(0)
        assert page.errors == []
